-- Claims: an anonymous owner's work moves to the account that claims it, in one transaction that also records
-- the move as events (docs/architecture.md, "Owners and claims").
--
-- 1. owner_claims: who was claimed into whom. An anonymous owner is claimed at most once, never chains (the target
--    is never anonymous, so never claimable), and is retired from then on.
-- 2. openmaic_owner(id): the owner an id stands for now (itself, or the account it was claimed into). Background
--    work that folded its owner before a claim reads through it, so it keeps finding the work where it went.
-- 3. The owner fence: every table holding an owner's rows carries the trigger openmaic_owner_fence, which takes
--    the owner's identity lock (shared) and writes the row under openmaic_owner(owner). A claim takes the same
--    lock exclusively, so a row is either written before the claim (and moved by it) or after (and written under
--    the account): no write of a step in flight is left behind with the retired owner. The claim moves the rows of
--    every table that carries the trigger; a test keeps every table with an owner_id column on the list.
-- 4. openmaic_claim_owner: the claim itself.

-- 1.
CREATE TABLE owner_claims (
    from_owner_id text PRIMARY KEY,
    to_owner_id   text NOT NULL,
    claimed_at    timestamptz NOT NULL DEFAULT now(),
    -- what moved, by kind (the same counts as the claim's owner.claimed event)
    moved         jsonb NOT NULL DEFAULT '{}',
    CONSTRAINT owner_claims_distinct CHECK (from_owner_id <> to_owner_id)
);

CREATE INDEX owner_claims_to ON owner_claims (to_owner_id);

-- 2.
CREATE FUNCTION openmaic_owner(p_owner text) RETURNS text LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT coalesce((SELECT c.to_owner_id FROM owner_claims c WHERE c.from_owner_id = p_owner), p_owner)
$$;

-- The key of an owner's identity lock: a hash of a namespaced id (a lock key, never an owner id).
CREATE FUNCTION openmaic_owner_lock_key(p_owner text) RETURNS bigint LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT hashtextextended('openmaic.owner-identity:' || p_owner, 0)
$$;

-- 3. Only anonymous owners (anon:<uuid>) can ever be claimed, so only their rows pay for the lock and the lookup.
-- The lookup is a statement of its own, after the lock: under READ COMMITTED it takes a fresh snapshot, so it
-- sees a claim that committed while this insert waited for the lock.
CREATE FUNCTION openmaic_owner_fence() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    claimed_into text;
BEGIN
    IF NEW.owner_id LIKE 'anon:%' THEN
        PERFORM pg_advisory_xact_lock_shared(openmaic_owner_lock_key(NEW.owner_id));
        SELECT c.to_owner_id INTO claimed_into FROM owner_claims c WHERE c.from_owner_id = NEW.owner_id;
        IF claimed_into IS NOT NULL THEN
            NEW.owner_id := claimed_into;
        END IF;
    END IF;
    RETURN NEW;
END;
$$;

CREATE TRIGGER openmaic_owner_fence BEFORE INSERT ON streams
    FOR EACH ROW EXECUTE FUNCTION openmaic_owner_fence();
CREATE TRIGGER openmaic_owner_fence BEFORE INSERT ON assets
    FOR EACH ROW EXECUTE FUNCTION openmaic_owner_fence();
CREATE TRIGGER openmaic_owner_fence BEFORE INSERT ON materials
    FOR EACH ROW EXECUTE FUNCTION openmaic_owner_fence();
CREATE TRIGGER openmaic_owner_fence BEFORE INSERT ON agents
    FOR EACH ROW EXECUTE FUNCTION openmaic_owner_fence();
CREATE TRIGGER openmaic_owner_fence BEFORE INSERT ON model_settings
    FOR EACH ROW EXECUTE FUNCTION openmaic_owner_fence();

-- 4. Claim p_from (anonymous) into p_to, in one transaction. Answers one row:
--
--   outcome 'claimed' with moved (counts by kind) and stream_ids (the streams that moved, and the claim's own);
--   'already-claimed' (p_from was claimed into p_to before: nothing changes);
--   or a refusal: 'ALREADY_CLAIMED_ELSEWHERE', 'TARGET_RETIRED', 'SOURCE_HAS_CLAIMS'.
--
-- Locks. First both owners' identity locks, exclusively, in key order (every claim takes them in that order, so
-- two claims naming an owner in common cannot deadlock), waiting at most p_lock_wait_ms: while the claim holds
-- them, inserts of the source's rows wait (they take the lock shared), and inserts already holding it finish
-- first. Then the rows, with every wait bounded by p_row_wait_ms: streams first, in id order (the order every
-- appender locks them in). The bound matters: an insert of the source that holds a stream row lock and waits for
-- the identity lock would deadlock with a claim waiting for that row, and a short lock_timeout (well under
-- PostgreSQL's deadlock_timeout) makes the claim the one that gives up, so the writer is never aborted. A lost
-- lock race raises lock_not_available (55P03); nothing was changed and the caller tries again.
--
-- Events. Every moved stream gets p_changed (stream.owner_changed) in this transaction, so its own history says
-- who owned it from which seq on, and every fold that knows its owner (the actor's, the run's, the read models)
-- follows. The claim is recorded on its own stream p_claim_stream (kind owner_claim, the target's, terminal):
-- owner.claimed {from_owner_id, to_owner_id, moved}.
--
-- Rows of other tables. Every table with the owner fence moves by owner_id, except: model_settings (one row per
-- owner: the source's providers and slot assignments are added to the target's, where the target's win, with
-- their sealed keys) and agents (ids are chosen by their owner: an agent whose id the target already uses keeps
-- its content under a derived id, <id>.<8 hex>). Quotas are not enforced on the target: nothing is dropped.
CREATE FUNCTION openmaic_claim_owner(
    p_from          text,
    p_to            text,
    p_lock_wait_ms  integer,
    p_row_wait_ms   integer,
    p_claim_stream  text,
    p_changed_type  text,
    p_changed_v     integer,
    p_changed_data  text,
    p_claimed_type  text,
    p_claimed_v     integer,
    OUT outcome     text,
    OUT moved       jsonb,
    OUT stream_ids  text[]
) LANGUAGE plpgsql AS $$
DECLARE
    k           bigint;
    merged_into text;
    ids         text[];
    n           integer;
    renamed     integer;
    counts      jsonb := '{}';
    t           record;
    src         record;
    dst         record;
    providers   jsonb;
    slots       jsonb;
BEGIN
    PERFORM set_config('lock_timeout', p_lock_wait_ms || 'ms', true);
    FOR k IN SELECT DISTINCT openmaic_owner_lock_key(o) FROM unnest(ARRAY[p_from, p_to]) AS o ORDER BY 1 LOOP
        PERFORM pg_advisory_xact_lock(k);
    END LOOP;
    PERFORM set_config('lock_timeout', p_row_wait_ms || 'ms', true);

    -- The rules, read after the locks (statements of their own: fresh snapshots).
    SELECT c.to_owner_id INTO merged_into FROM owner_claims c WHERE c.from_owner_id = p_from;
    IF merged_into IS NOT NULL THEN
        outcome := CASE WHEN merged_into = p_to THEN 'already-claimed' ELSE 'ALREADY_CLAIMED_ELSEWHERE' END;
        RETURN;
    END IF;
    IF EXISTS (SELECT 1 FROM owner_claims c WHERE c.from_owner_id = p_to) THEN
        outcome := 'TARGET_RETIRED';
        RETURN;
    END IF;
    IF EXISTS (SELECT 1 FROM owner_claims c WHERE c.to_owner_id = p_from) THEN
        outcome := 'SOURCE_HAS_CLAIMS';
        RETURN;
    END IF;

    -- Streams: locked in id order, moved, counted by kind.
    SELECT coalesce(array_agg(s.id ORDER BY s.id), '{}') INTO ids
      FROM (SELECT id FROM streams WHERE owner_id = p_from ORDER BY id FOR UPDATE) AS s;
    UPDATE streams SET owner_id = p_to, updated_at = now() WHERE owner_id = p_from;
    SELECT coalesce(jsonb_object_agg(what, c), '{}') INTO counts
      FROM (SELECT CASE kind WHEN 'generation' THEN 'runs' WHEN 'workbench' THEN 'sessions'
                             WHEN 'course' THEN 'courses' ELSE kind END AS what, count(*) AS c
              FROM streams WHERE id = ANY(ids) GROUP BY 1) AS byk;

    -- Model settings: the target's win, item by item; the source's row goes.
    SELECT * INTO src FROM model_settings WHERE owner_id = p_from FOR UPDATE;
    IF FOUND THEN
        SELECT * INTO dst FROM model_settings WHERE owner_id = p_to FOR UPDATE;
        IF NOT FOUND THEN
            UPDATE model_settings SET owner_id = p_to, updated_at = now() WHERE owner_id = p_from;
        ELSE
            providers := coalesce(src.config -> 'providers', '{}') || coalesce(dst.config -> 'providers', '{}');
            slots := coalesce(src.config -> 'slots', '{}') || coalesce(dst.config -> 'slots', '{}');
            UPDATE model_settings SET
                config = dst.config || jsonb_build_object('providers', providers, 'slots', slots),
                -- a provider the target declares keeps the target's key (or none), never the source's
                secrets = (src.secrets - ARRAY(SELECT jsonb_object_keys(coalesce(dst.config -> 'providers', '{}'))))
                          || dst.secrets,
                revision = revision + 1,
                updated_at = now()
            WHERE owner_id = p_to;
            DELETE FROM model_settings WHERE owner_id = p_from;
        END IF;
        counts := counts || jsonb_build_object('settings', 1);
    END IF;

    -- Agents: those whose id the target already has move under a derived id.
    UPDATE agents a SET owner_id = p_to
     WHERE a.owner_id = p_from AND NOT EXISTS (SELECT 1 FROM agents b WHERE b.owner_id = p_to AND b.id = a.id);
    GET DIAGNOSTICS n = ROW_COUNT;
    UPDATE agents SET owner_id = p_to, id = left(id, 119) || '.' || left(md5(p_from || ':' || id), 8)
     WHERE owner_id = p_from;
    GET DIAGNOSTICS renamed = ROW_COUNT;
    IF n + renamed > 0 THEN
        counts := counts || jsonb_build_object('agents', n + renamed);
    END IF;
    IF renamed > 0 THEN
        counts := counts || jsonb_build_object('agentsRenamed', renamed);
    END IF;

    -- Every other fenced table, by owner_id.
    FOR t IN SELECT c.relname FROM pg_trigger tg JOIN pg_class c ON c.oid = tg.tgrelid
              WHERE tg.tgname = 'openmaic_owner_fence' AND NOT tg.tgisinternal
                AND c.relname NOT IN ('streams', 'model_settings', 'agents')
              ORDER BY c.relname LOOP
        EXECUTE format('UPDATE %I SET owner_id = $2 WHERE owner_id = $1', t.relname) USING p_from, p_to;
        GET DIAGNOSTICS n = ROW_COUNT;
        IF n > 0 THEN
            counts := counts || jsonb_build_object(t.relname, n);
        END IF;
    END LOOP;

    INSERT INTO owner_claims (from_owner_id, to_owner_id, moved) VALUES (p_from, p_to, counts);

    -- The events: one stream.owner_changed per moved stream, and the claim's record on a stream of its own.
    PERFORM * FROM openmaic_append(
        ids || p_claim_stream,
        array_fill(NULL::text, ARRAY[cardinality(ids)]) || 'owner_claim'::text,
        array_fill(NULL::text, ARRAY[cardinality(ids)]) || p_to,
        array_fill(NULL::bigint, ARRAY[cardinality(ids) + 1]),
        array_fill(NULL::bigint, ARRAY[cardinality(ids) + 1]),
        array_fill(NULL::text, ARRAY[cardinality(ids)]) || 'claim'::text,
        array_fill(NULL::text, ARRAY[cardinality(ids)]) || 'terminal'::text,
        array_fill(false, ARRAY[cardinality(ids) + 1]),
        array_fill(NULL::timestamptz, ARRAY[cardinality(ids) + 1]),
        array_fill(false, ARRAY[cardinality(ids) + 1]),
        array_fill(false, ARRAY[cardinality(ids) + 1]),
        array_fill(1, ARRAY[cardinality(ids) + 1]),
        array_fill(p_changed_type, ARRAY[cardinality(ids)]) || p_claimed_type,
        array_fill(p_changed_v, ARRAY[cardinality(ids)]) || p_claimed_v,
        array_fill(p_changed_data, ARRAY[cardinality(ids)])
            || jsonb_build_object('from_owner_id', p_from, 'to_owner_id', p_to, 'moved', counts)::text
    );

    outcome := 'claimed';
    moved := counts;
    stream_ids := ids || p_claim_stream;
END;
$$;
