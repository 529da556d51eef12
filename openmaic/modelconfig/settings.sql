-- The model settings of owners (table model_settings, migration 0007).

-- name: read
-- Through openmaic_owner: a run's steps read their owner's settings at every call, and that owner may have been
-- claimed into an account since the run folded it (the claim moved the settings there).
SELECT config::text AS config, secrets::text AS secrets, revision FROM model_settings
 WHERE owner_id = openmaic_owner($1);

-- name: insert
-- A first save: nothing when another first save won the race (the caller reports a conflict).
INSERT INTO model_settings (owner_id, config, secrets, revision) VALUES ($1, $2::jsonb, $3::jsonb, 1)
ON CONFLICT (owner_id) DO NOTHING
RETURNING revision;

-- name: update
-- A compare-and-swap on the revision the caller read: nothing when it moved on since.
UPDATE model_settings SET config = $2::jsonb, secrets = $3::jsonb, revision = revision + 1, updated_at = now()
WHERE owner_id = $1 AND revision = $4
RETURNING revision;
