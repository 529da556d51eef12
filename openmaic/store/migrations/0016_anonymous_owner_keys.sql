-- Anonymous owner ids derived from their cookies (openmaic/owners/anonymous.py).
--
-- 1. openmaic_owner_has_rows(id): whether an owner holds a row in any table a claim moves (every table carrying the
--    owner fence). A request presenting a legacy cookie asks it of the legacy owner anon:<cookie>, once per process.
-- 2. openmaic_claim_owner, replaced: a legacy owner is moved to its derived owner by a claim whose target is
--    anonymous, and that derived owner may later be claimed into an account. Claims stay one hop: instead of
--    refusing a source that absorbed others (SOURCE_HAS_CLAIMS), the claim hands what it absorbed on to the target
--    (owner_claims rows re-pointed), and takes the absorbed owners' identity locks too, since the owner fence
--    writes their late rows under the source it empties. Everything else is 0010's.

-- 1.
CREATE FUNCTION openmaic_owner_has_rows(p_owner text) RETURNS boolean LANGUAGE plpgsql STABLE AS $$
DECLARE
    t     record;
    found boolean;
BEGIN
    FOR t IN SELECT c.relname FROM pg_trigger tg JOIN pg_class c ON c.oid = tg.tgrelid
              WHERE tg.tgname = 'openmaic_owner_fence' AND NOT tg.tgisinternal ORDER BY c.relname LOOP
        EXECUTE format('SELECT EXISTS (SELECT 1 FROM %I WHERE owner_id = $1)', t.relname) INTO found USING p_owner;
        IF found THEN
            RETURN true;
        END IF;
    END LOOP;
    RETURN false;
END;
$$;

-- 2.
CREATE OR REPLACE FUNCTION openmaic_claim_owner(
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
    -- The owners claimed into p_from too: their late writes are fenced into p_from, which this claim empties.
    FOR k IN SELECT DISTINCT openmaic_owner_lock_key(o)
               FROM (SELECT unnest(ARRAY[p_from, p_to]) AS o
                     UNION SELECT c.from_owner_id FROM owner_claims c WHERE c.to_owner_id = p_from) AS owners
              ORDER BY 1 LOOP
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

    -- Claims stay one hop: what p_from absorbed (its legacy self) is p_to's from now on.
    UPDATE owner_claims SET to_owner_id = p_to WHERE to_owner_id = p_from;
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
