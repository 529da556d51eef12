-- The epoch lookup's lock can no longer outlive the lookup.
--
-- 0009's openmaic_epoch took a session advisory lock before the block that releases it on error, and released it
-- after that block: a cancel (or a statement timeout) meeting the lookup just after the lock was granted, or just
-- after the block ended, escaped the handler and left the lock held by the session. Session advisory locks outlive
-- transactions and are re-entrant, so that session went on working while every other session's first lookup (its
-- first append, claim or global read) waited on it until its statement timeout. Moving the grant and the release
-- into one exception-handled block is not enough either: a second interrupt meeting the handler itself (a cancel
-- and then a statement timeout) escapes it the same way.
--
-- So the lock is now a transaction-level one, taken inside the function: PostgreSQL releases it when the lookup's
-- transaction ends, however it ends, and no error between the grant and the end can keep it. The price: a session's
-- first lookup (only the first: the result is kept in the session setting) holds it until its transaction ends,
-- not only while it looks. Most first lookups are a statement of their own (an append, a claim, a read); one inside
-- a longer transaction that then waits on a row another session's first lookup holds while it waits for this lock
-- deadlocks with it, and PostgreSQL detects that and refuses one of the two statements (deadlock_detected). Both
-- must be sessions' first lookups, at the same moment. Everything else is as in 0009.

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
    -- The epoch lock (an arbitrary constant): serializes lookups, released with this transaction.
    PERFORM pg_advisory_xact_lock(7526676516455678021);
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
    -- A session setting: rolled back with this transaction (or subtransaction) if it does not commit; the next look
    -- then finds the same epoch again (from the floor).
    PERFORM set_config('openmaic.epoch', candidate::text, false);
    RETURN candidate;
END;
$$;
