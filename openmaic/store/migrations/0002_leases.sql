-- Claiming runnable streams: one statement that takes the streams, fences them with a new attempt, sets the
-- lease from the database clock, and appends lease.claimed to each, all in one transaction.

CREATE FUNCTION openmaic_claim(p_worker text, p_kinds text[], p_limits integer[], p_ttl_ms integer)
RETURNS TABLE (stream_id text, kind text, attempt bigint, reason text, unattended integer, claimed_seq bigint)
LANGUAGE plpgsql AS $$
DECLARE
    i   integer;
    rec record;
    res record;
BEGIN
    FOR i IN 1..coalesce(array_length(p_kinds, 1), 0) LOOP
        CONTINUE WHEN p_limits[i] <= 0;
        FOR rec IN
            -- SKIP LOCKED: concurrent claimers take disjoint streams instead of queueing on each other's
            -- row locks; a stream being appended to right now is simply left for the next round.
            WITH c AS (
                SELECT s.id, s.status AS old_status
                  FROM streams s
                 WHERE s.kind = p_kinds[i]
                   AND ((s.status = 'queued' AND (s.wake_at IS NULL OR s.wake_at <= now()))
                        OR (s.status = 'running' AND s.lease_expires_at < now()))
                 ORDER BY coalesce(s.wake_at, s.updated_at)
                 LIMIT p_limits[i]
                 FOR UPDATE SKIP LOCKED
            )
            UPDATE streams s SET
                attempt = s.attempt + 1,
                status = 'running',
                lease_worker = p_worker,
                lease_expires_at = now() + p_ttl_ms * interval '1 millisecond',
                wake_at = NULL,
                -- only an orphan takeover (the previous holder vanished) is charged; a clean release is not
                unattended_attempts = s.unattended_attempts + CASE WHEN c.old_status = 'running' THEN 1 ELSE 0 END,
                updated_at = now()
              FROM c
             WHERE s.id = c.id
            RETURNING s.id, s.kind, s.attempt,
                      CASE WHEN c.old_status = 'running' THEN 'orphaned' ELSE 'queued' END AS reason,
                      s.unattended_attempts
        LOOP
            SELECT * INTO res FROM openmaic_append(
                ARRAY[rec.id], ARRAY[NULL]::text[], ARRAY[NULL]::text[], ARRAY[rec.attempt], ARRAY[NULL]::bigint[],
                ARRAY[NULL]::text[], ARRAY[NULL]::text[], ARRAY[false], ARRAY[NULL]::timestamptz[], ARRAY[false],
                ARRAY[false], ARRAY[1], ARRAY['lease.claimed'], ARRAY[1],
                ARRAY[format('{"attempt":%s,"worker":%s,"reason":"%s"}', rec.attempt, to_json(p_worker)::text,
                             rec.reason)]);
            stream_id := rec.id;
            kind := rec.kind;
            attempt := rec.attempt;
            reason := rec.reason;
            unattended := rec.unattended_attempts;
            claimed_seq := res.last_seq;
            RETURN NEXT;
        END LOOP;
    END LOOP;
END;
$$;
