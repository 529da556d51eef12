-- The epoch lookup takes and releases its lock inside one exception-handled block.
--
-- 0009's openmaic_epoch took its session advisory lock before the block that releases it on error, and released it
-- after that block: a cancel (or a statement timeout) meeting the lookup just after the lock was granted, or just
-- after the block ended, escaped the handler and left the lock held by the session. Session advisory locks outlive
-- transactions and are re-entrant, so that session went on working while every other session's first lookup (its
-- first append, claim or global read) waited on it until its statement timeout.
--
-- Here the grant and the release both lie inside the block, so an error raised anywhere between them reaches the
-- handler, and the handler releases the lock only if this session holds it (an error raised while waiting for it,
-- or after the release, leaves nothing to release; pg_advisory_unlock of a lock not held would warn). Still a
-- session lock, held only while one looks, never until a commit: no transaction can wait on it while it waits on
-- that transaction's locks (a transaction-level lock held by a first lookup inside a larger transaction could).
-- Everything else is as in 0009.

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
        -- A bigint key is stored as (classid, objid) = (high, low 32 bits), objsubid 1.
        PERFORM pg_advisory_unlock(7526676516455678021)
           FROM pg_locks l
          WHERE l.locktype = 'advisory' AND l.pid = pg_backend_pid() AND l.granted AND l.objsubid = 1
            AND l.classid = (7526676516455678021 >> 32)::oid AND l.objid = (7526676516455678021 & 4294967295)::oid;
        RAISE;
    END;
    -- A session setting: rolled back with this transaction (or subtransaction) if it does not commit; the next look
    -- then finds the same epoch again (from the floor).
    PERFORM set_config('openmaic.epoch', candidate::text, false);
    RETURN candidate;
END;
$$;
