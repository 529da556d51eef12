-- Fair sharing of a worker's actor slots (docs/architecture.md, "Fencing"; openmaic/actors/worker.py).
--
-- A stream's actor holds a worker's slot for as long as its step runs, and a step calling an endpoint that never
-- answers holds it for minutes. So a worker holds at most p_share_cap streams of one kind per *share* at once,
-- and takes every share's first waiting stream before any share's second.
--
-- 1. anonymous_clients: the client address an anonymous owner was last seen from ('client:<address>'). A stream
--    of an anonymous owner counts against that address's share, any other stream against its owner's: cookies
--    are had at will, addresses are not. Written by the API (openmaic/api/identity.py) when an anonymous owner's
--    request comes from an address it has not recorded. Not fenced and never moved by a claim: it describes the
--    anonymous identity, which a claim retires (the moved streams then count against the account).
-- 2. openmaic_claim, replaced (a fifth argument, p_share_cap). Per kind: the worker's live leases are counted by
--    share; each runnable stream's turn is that count plus its place among its share's runnable streams (oldest
--    due first); turns past the cap are not taken; the rest are taken in turn order, then due order. The rows are
--    locked FOR UPDATE SKIP LOCKED with the runnable condition repeated on the locked row, so a stream another
--    worker claimed between the ranking and the lock is re-checked (and skipped) under READ COMMITTED, as before.
--    The counts are this worker's own: the cap is per worker, like max_actors.

-- 1.
CREATE TABLE anonymous_clients (
    owner_id   text PRIMARY KEY,
    share_key  text NOT NULL,
    seen_at    timestamptz NOT NULL DEFAULT now()
);

-- 2.
DROP FUNCTION openmaic_claim(text, text[], integer[], integer);

CREATE FUNCTION openmaic_claim(p_worker text, p_kinds text[], p_limits integer[], p_ttl_ms integer,
                               p_share_cap integer)
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
            WITH held AS (
                SELECT coalesce(a.share_key, h.owner_id) AS share, count(*) AS n
                  FROM streams h LEFT JOIN anonymous_clients a ON a.owner_id = h.owner_id
                 WHERE h.kind = p_kinds[i] AND h.status = 'running' AND h.lease_worker = p_worker
                   AND h.lease_expires_at >= now()
                 GROUP BY 1
            ), runnable AS (
                SELECT s.id, coalesce(s.wake_at, s.updated_at) AS due,
                       coalesce(held.n, 0) + row_number() OVER (
                           PARTITION BY coalesce(a.share_key, s.owner_id)
                           ORDER BY coalesce(s.wake_at, s.updated_at), s.id) AS turn
                  FROM streams s
                  LEFT JOIN anonymous_clients a ON a.owner_id = s.owner_id
                  LEFT JOIN held ON held.share = coalesce(a.share_key, s.owner_id)
                 WHERE s.kind = p_kinds[i]
                   AND ((s.status = 'queued' AND (s.wake_at IS NULL OR s.wake_at <= now()))
                        OR (s.status = 'running' AND s.lease_expires_at < now()))
            ), c AS (
                -- SKIP LOCKED: concurrent claimers take disjoint streams instead of queueing on each other's
                -- row locks; a stream being appended to right now is simply left for the next round.
                SELECT s.id, s.status AS old_status
                  FROM runnable r JOIN streams s ON s.id = r.id
                 WHERE r.turn <= p_share_cap
                   AND s.kind = p_kinds[i]
                   AND ((s.status = 'queued' AND (s.wake_at IS NULL OR s.wake_at <= now()))
                        OR (s.status = 'running' AND s.lease_expires_at < now()))
                 ORDER BY r.turn, r.due, r.id
                 LIMIT p_limits[i]
                 FOR UPDATE OF s SKIP LOCKED
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
