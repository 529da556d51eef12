-- A global order that survives a logical restore: (epoch, tx, position).
--
-- The log was ordered by (tx, position) and read below the snapshot's xmin (docs/architecture.md §3). Transaction
-- ids belong to one cluster: pg_dump/pg_restore into another cluster, a dump-based major upgrade or logical
-- replication copy tx values verbatim into a cluster whose own counter may be far behind them. The restored events
-- then sit above the new cluster's horizon (read_all never returns them), and new events sort before the restored
-- checkpoints (the projectors skip them for good).
--
-- An epoch is a span of the log written in one transaction-id space. Events carry it, the order is
-- (epoch, tx, position), and the horizon is (the epoch this cluster writes into, xmin): every event of an earlier
-- epoch is finished (it was copied in), and within this cluster's epoch xmin keeps its meaning.
--
-- Which epoch a cluster writes into is decided from the log alone, with no manual step and no cluster identity: the
-- latest epoch is this cluster's own if every transaction id in it is below the snapshot's xmax (the first id not
-- yet handed out), which always holds for ids this cluster assigned, and for ids copied from a cluster that was
-- behind this one: whatever this cluster writes from now on sorts after them, and those above xmin are merely read
-- once xmin passes them. Otherwise (a copy from a cluster that was ahead) the ids cannot be compared, and this
-- cluster writes into a new epoch, latest + 1, which sorts after all of them.
--
-- The decision is made once per session (then kept in the session setting openmaic.epoch), and every session of
-- a cluster takes the same one. "Compatible" can only become true as xmax grows, never false; a session that finds
-- the latest epoch incompatible records at once, in the sequence openmaic_epoch_floor (sequences are not
-- transactional: the record stands even if the transaction that made it rolls back), that this cluster writes into
-- the next epoch, and every later look starts from that floor. Looks are serialized by a session advisory lock held
-- only while one looks (a few index reads, waiting on nothing), never until a commit, so no transaction can wait on
-- it while it waits on that transaction's locks. The floor is copied by pg_dump like any sequence, but it only ever
-- names an epoch to look at, never a verdict: whoever restores it checks that epoch's ids against its own counter.
-- The append path pays one session-setting lookup per call: no round trip, no shared lock.

CREATE SEQUENCE openmaic_epoch_floor MINVALUE 1 START 1;

-- The epoch this cluster writes into, decided (and cached for the session) on first use.
CREATE FUNCTION openmaic_epoch() RETURNS integer LANGUAGE plpgsql AS $$
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
    PERFORM pg_advisory_lock(7526676516455678021);  -- the epoch lock (an arbitrary constant), released below
    BEGIN
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
    EXCEPTION WHEN OTHERS OR query_canceled THEN
        PERFORM pg_advisory_unlock(7526676516455678021);
        RAISE;
    END;
    PERFORM pg_advisory_unlock(7526676516455678021);
    -- A session setting: rolled back with this transaction (or subtransaction) if it does not commit; the next look
    -- then finds the same epoch again (from the floor).
    PERFORM set_config('openmaic.epoch', candidate::text, false);
    RETURN candidate;
END;
$$;

-- The tailing horizon for a snapshot whose xmin is p_xmin: every event sorting before (epoch, tx) has finished.
CREATE FUNCTION openmaic_horizon(p_xmin xid8, OUT epoch integer, OUT tx xid8) LANGUAGE sql VOLATILE AS $$
    SELECT openmaic_epoch(), p_xmin
$$;

-- Existing events are the first epoch (a constant default adds the column without rewriting the table); new ones
-- get the session's epoch from openmaic_append, or from this default when written by other means.
ALTER TABLE events ADD COLUMN epoch integer NOT NULL DEFAULT 1;
ALTER TABLE events ALTER COLUMN epoch SET DEFAULT openmaic_epoch();
COMMENT ON COLUMN events.epoch IS
    'The span of the log written in one transaction-id space: the global order is (epoch, tx, position).';
DROP INDEX events_global_order;
CREATE INDEX events_global_order ON events (epoch, tx, position);

-- Checkpoints are (epoch, tx, position). Existing ones lie in the first epoch; a new one starts before everything.
ALTER TABLE projection_checkpoints ADD COLUMN epoch integer NOT NULL DEFAULT 1;
ALTER TABLE projection_checkpoints ALTER COLUMN epoch SET DEFAULT 0;

DROP FUNCTION openmaic_projection_advance(text, xid8, bigint, xid8, bigint, bigint, bigint);
-- As in 0004, with (epoch, tx, position) cursors.
CREATE FUNCTION openmaic_projection_advance(
    p_name          text,
    p_from_epoch    integer,
    p_from_tx       xid8,
    p_from_position bigint,
    p_to_epoch      integer,
    p_to_tx         xid8,
    p_to_position   bigint,
    p_events        bigint,
    p_pause_key     bigint
) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF p_pause_key IS NOT NULL AND NOT pg_try_advisory_xact_lock_shared(p_pause_key) THEN
        RAISE EXCEPTION 'projection % is paused by a rebuild', p_name USING ERRCODE = 'OM020';
    END IF;
    UPDATE projection_checkpoints
       SET epoch = p_to_epoch, tx = p_to_tx, position = p_to_position, events_applied = events_applied + p_events,
           updated_at = now()
     WHERE name = p_name AND epoch = p_from_epoch AND tx = p_from_tx AND position = p_from_position;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'the checkpoint of projection % moved', p_name USING ERRCODE = 'OM021';
    END IF;
END;
$$;

-- openmaic_append: the contract of 0001/0006/0008, writing the session's epoch.
CREATE OR REPLACE FUNCTION openmaic_append(
    p_stream_ids   text[],
    p_create_kind  text[],
    p_create_owner text[],
    p_attempt      bigint[],
    p_expected     bigint[],
    p_command      text[],
    p_status       text[],
    p_set_wake     boolean[],
    p_wake_at      timestamptz[],
    p_release      boolean[],
    p_progress     boolean[],
    p_counts       integer[],
    p_types        text[],
    p_vs           integer[],
    p_data         text[]
) RETURNS TABLE (stream_id text, first_seq bigint, last_seq bigint, replayed boolean)
LANGUAGE plpgsql AS $$
DECLARE
    n_streams    integer := coalesce(array_length(p_stream_ids, 1), 0);
    n_events     integer := coalesce(array_length(p_types, 1), 0);
    i            integer;
    j            integer;
    k            integer;
    offsets      integer[];
    order_idx    integer[];
    cur          record;
    heads        bigint[] := '{}';
    head_hashes  bytea[] := '{}';
    cur_attempts bigint[] := '{}';
    orig         record;
    is_replay    boolean := false;
    h            bytea;
    hashes       bytea[] := '{}';
    owners       integer[] := '{}';
    v_epoch      integer;
BEGIN
    -- where each stream's events start in the flattened arrays, and the order to lock the streams in
    IF n_streams = 1 THEN
        offsets := ARRAY[1];
        order_idx := ARRAY[1];
        k := 1 + p_counts[1];
    ELSE
        offsets := '{}';
        k := 1;
        FOR i IN 1..n_streams LOOP
            offsets[i] := k;
            k := k + p_counts[i];
        END LOOP;
        SELECT array_agg(o ORDER BY p_stream_ids[o]) INTO order_idx FROM generate_series(1, n_streams) AS o;
    END IF;
    IF k - 1 <> n_events THEN
        RAISE EXCEPTION 'p_counts adds up to % events, p_types holds %', k - 1, n_events
            USING ERRCODE = 'invalid_parameter_value';
    END IF;

    FOR i IN 1..n_streams LOOP
        IF p_create_kind[i] IS NOT NULL THEN
            INSERT INTO streams AS s (id, kind, owner_id, status)
            VALUES (p_stream_ids[i], p_create_kind[i], p_create_owner[i], coalesce(p_status[i], 'waiting'))
            ON CONFLICT (id) DO NOTHING;
        END IF;
    END LOOP;

    -- lock in id order (deadlock-free), remember heads
    FOREACH i IN ARRAY coalesce(order_idx, '{}') LOOP
        SELECT s.head_seq, s.head_hash, s.attempt INTO cur FROM streams s WHERE s.id = p_stream_ids[i] FOR UPDATE;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'no stream %', p_stream_ids[i] USING ERRCODE = 'OM004', DETAIL = p_stream_ids[i];
        END IF;
        heads[i] := cur.head_seq;
        head_hashes[i] := cur.head_hash;
        cur_attempts[i] := cur.attempt;
    END LOOP;

    -- replay check first: a repeated command returns its original result even if the stream moved on
    FOR i IN 1..n_streams LOOP
        IF p_command[i] IS NOT NULL THEN
            SELECT e.seq, e.type, e.tx, e.command_last_seq INTO orig FROM events e
             WHERE e.stream_id = p_stream_ids[i] AND e.command_id = p_command[i];
            IF FOUND THEN
                IF orig.type <> p_types[offsets[i]] THEN
                    RAISE EXCEPTION 'command % was used for %', p_command[i], orig.type
                        USING ERRCODE = 'OM003', DETAIL = orig.type;
                END IF;
                is_replay := true;
                stream_id := p_stream_ids[i];
                first_seq := orig.seq;
                last_seq := orig.command_last_seq;
                IF last_seq IS NULL THEN
                    -- written before 0008: the command's events are the stream's events of its transaction
                    SELECT max(e.seq) INTO last_seq FROM events e
                     WHERE e.stream_id = p_stream_ids[i] AND e.tx = orig.tx;
                END IF;
                replayed := true;
                RETURN NEXT;
            END IF;
        END IF;
    END LOOP;
    IF is_replay THEN
        RETURN;
    END IF;

    FOR i IN 1..n_streams LOOP
        IF p_create_kind[i] IS NOT NULL AND heads[i] <> 0 THEN
            RAISE EXCEPTION 'stream % already exists', p_stream_ids[i] USING ERRCODE = 'OM005',
                DETAIL = p_stream_ids[i];
        END IF;
        IF p_attempt[i] IS NOT NULL AND cur_attempts[i] <> p_attempt[i] THEN
            RAISE EXCEPTION 'attempt % of stream % is stale (now %)', p_attempt[i], p_stream_ids[i],
                cur_attempts[i] USING ERRCODE = 'OM001', DETAIL = p_stream_ids[i];
        END IF;
        IF p_expected[i] IS NOT NULL AND heads[i] <> p_expected[i] THEN
            RAISE EXCEPTION 'stream % is at seq %, expected %', p_stream_ids[i], heads[i], p_expected[i]
                USING ERRCODE = 'OM002', DETAIL = p_stream_ids[i];
        END IF;
    END LOOP;

    -- the hash chain is sequential, so it is computed here; everything else about an event is derived from
    -- its stream (owners[k]) in the single INSERT below
    FOR i IN 1..n_streams LOOP
        h := head_hashes[i];
        k := offsets[i];
        FOR j IN 1..p_counts[i] LOOP
            h := openmaic_event_hash(h, heads[i] + j, p_types[k], p_data[k]);
            hashes[k] := h;
            owners[k] := i;
            k := k + 1;
        END LOOP;
        UPDATE streams s SET
            head_seq = heads[i] + p_counts[i],
            head_hash = h,
            status = coalesce(p_status[i], s.status),
            wake_at = CASE WHEN p_set_wake[i] THEN p_wake_at[i] ELSE s.wake_at END,
            lease_worker = CASE WHEN p_release[i] THEN NULL ELSE s.lease_worker END,
            lease_expires_at = CASE WHEN p_release[i] THEN NULL ELSE s.lease_expires_at END,
            unattended_attempts = CASE WHEN p_progress[i] THEN 0 ELSE s.unattended_attempts END,
            updated_at = now()
        WHERE s.id = p_stream_ids[i];
        stream_id := p_stream_ids[i];
        first_seq := heads[i] + 1;
        last_seq := heads[i] + p_counts[i];
        replayed := false;
        RETURN NEXT;
    END LOOP;

    IF n_events > 0 THEN
        -- Looked up once per session (then a session setting): see openmaic_epoch.
        v_epoch := openmaic_epoch();
    END IF;
    INSERT INTO events (stream_id, seq, type, v, data, attempt, command_id, command_last_seq, hash, epoch)
    SELECT p_stream_ids[o], heads[o] + x - offsets[o] + 1, p_types[x], p_vs[x], p_data[x]::json, p_attempt[o],
           CASE WHEN x = offsets[o] THEN p_command[o] END,
           CASE WHEN x = offsets[o] AND p_command[o] IS NOT NULL THEN heads[o] + p_counts[o] END, hashes[x], v_epoch
      FROM unnest(owners) WITH ORDINALITY AS u(o, x);
END;
$$;
