-- The epoch lookup's lock no longer outlives a lookup that an error or a cancel cut short.
--
-- 0009's openmaic_epoch took its session advisory lock before the block that releases it on error, and released it
-- after that block: a cancel (or a statement timeout) meeting the lookup just after the lock was granted, or just
-- after the block ended, escaped the handler and left the lock held by the session. Session advisory locks outlive
-- transactions and are re-entrant, so that session went on working (its later lookups took and gave back one more
-- hold each) while every other session's first lookup (its first append, claim or global read) waited on it until
-- its statement timeout.
--
-- Here the grant and the release both lie inside one exception-handled block, so an error raised anywhere between
-- them reaches the handler, which gives back whatever this session holds of the lock. A second interrupt meeting
-- the handler itself (a cancel, then a statement timeout) could still escape it; then the error reaches the client
-- (PL/pgSQL's OTHERS never catches a cancel), whose connection is closed or reset (store/database.py), and the
-- session's next lookup, which has no cached epoch since this one failed, first gives back any hold left over.
--
-- Still a session lock, held only while one looks, never until a commit: a transaction-level lock would be held by
-- a first lookup inside a longer transaction to its end, blocking every other session's first lookup meanwhile and
-- deadlocking with one that holds a row this transaction then waits for. Everything else is as in 0009.

-- Give back every hold this session has of the epoch lock (none: nothing happens, and nothing is warned). Looked up
-- in pg_locks, which lists a session's lock once however many holds it has; a bigint key is stored there as
-- (classid, objid) = (its high, its low 32 bits), objsubid 1.
CREATE FUNCTION openmaic_epoch_unlock() RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    WHILE EXISTS (SELECT 1 FROM pg_locks l
                   WHERE l.locktype = 'advisory' AND l.pid = pg_backend_pid() AND l.granted AND l.objsubid = 1
                     AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
                     AND l.classid = (7526676516455678021 >> 32)::oid
                     AND l.objid = (7526676516455678021 & 4294967295)::oid) LOOP
        PERFORM pg_advisory_unlock(7526676516455678021);
    END LOOP;
END;
$$;

CREATE OR REPLACE FUNCTION openmaic_epoch() RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    cached text := current_setting('openmaic.epoch', true);
    candidate integer;
    top xid8;
    seq text;
    last_position bigint;
BEGIN
    IF cached <> '' THEN
        RETURN cached::integer;
    END IF;
    PERFORM openmaic_epoch_unlock();  -- a hold an earlier lookup of this session left (see above), if any
    BEGIN
        PERFORM pg_advisory_lock(7526676516455678021);  -- the epoch lock (an arbitrary constant), released below
        SELECT greatest(coalesce(max(e.epoch), 1), (SELECT last_value FROM openmaic_epoch_floor)::integer)
          INTO candidate FROM events e;
        SELECT max(e.tx) INTO top FROM events e WHERE e.epoch = candidate;
        IF top >= pg_snapshot_xmax(pg_current_snapshot()) THEN
            -- ids copied from a cluster that was ahead of this one: start a span of our own, for everyone
            candidate := candidate + 1;
            PERFORM setval('openmaic_epoch_floor', candidate);
        END IF;
        -- Logical replication copies rows but not sequences: make sure new positions lie beyond the copied ones (the
        -- value taken here is a gap, as a rolled-back insert leaves one).
        seq := pg_get_serial_sequence('events', 'position');
        SELECT max(e.position) INTO last_position FROM events e;
        IF last_position IS NOT NULL AND nextval(seq) <= last_position THEN
            PERFORM setval(seq, last_position);
        END IF;
        PERFORM pg_advisory_unlock(7526676516455678021);
    EXCEPTION WHEN OTHERS OR query_canceled THEN
        PERFORM openmaic_epoch_unlock();
        RAISE;
    END;
    -- A session setting: rolled back with this transaction (or subtransaction) if it does not commit; the next look
    -- then finds the same epoch again (from the floor).
    PERFORM set_config('openmaic.epoch', candidate::text, false);
    RETURN candidate;
END;
$$;
