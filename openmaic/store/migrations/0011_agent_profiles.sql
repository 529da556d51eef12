-- Agents take OpenMAIC's shape. Their ids are chosen by their owner (OpenMAIC's registry ids), so an id is unique
-- per owner, not across owners: one owner's "tutor" must neither block another's nor reveal that it exists. The
-- fields OpenMAIC keeps beside name, role and persona (avatar, color, allowedActions, priority, voice) live in
-- profile; OpenMAIC calls the classmate role "student".

ALTER TABLE agents DROP CONSTRAINT agents_pkey;
ALTER TABLE agents ADD PRIMARY KEY (owner_id, id);
ALTER TABLE agents DROP CONSTRAINT agents_role_check;
ALTER TABLE agents ADD CONSTRAINT agents_role_check CHECK (role IN ('teacher', 'assistant', 'classmate', 'student'));
ALTER TABLE agents ADD COLUMN profile jsonb NOT NULL DEFAULT '{}';
ALTER TABLE agents ADD COLUMN updated_at timestamptz NOT NULL DEFAULT now();
