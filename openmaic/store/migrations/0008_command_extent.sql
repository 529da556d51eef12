-- A replayed command returns the seqs its own events took, and no others.
--
-- A command's events were found by their transaction: the first carries the command id, and the replay answered
-- with the last seq the stream got in that transaction. Since group commit (0006) several requests share one
-- transaction, so another request's events to the same stream counted as the command's own. The event that carries
-- a command id now also records the last seq its command wrote on that stream; rows written before keep the old
-- answer (they predate group commit, or share its flaw).

ALTER TABLE events ADD COLUMN command_last_seq bigint;
COMMENT ON COLUMN events.command_last_seq IS
    'On the event carrying command_id: the last seq that command wrote on this stream (what a replay returns).';

-- openmaic_append: the contract of 0001/0006, storing command_last_seq and answering replays from it.
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

    INSERT INTO events (stream_id, seq, type, v, data, attempt, command_id, command_last_seq, hash)
    SELECT p_stream_ids[o], heads[o] + x - offsets[o] + 1, p_types[x], p_vs[x], p_data[x]::json, p_attempt[o],
           CASE WHEN x = offsets[o] THEN p_command[o] END,
           CASE WHEN x = offsets[o] AND p_command[o] IS NOT NULL THEN heads[o] + p_counts[o] END, hashes[x]
      FROM unnest(owners) WITH ORDINALITY AS u(o, x);
END;
$$;
