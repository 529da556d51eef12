-- Appends, leaner and grouped.
--
-- 1. openmaic_event_hash is declared STABLE, which it is (convert_to depends on the encoding conversions in
--    effect): declared IMMUTABLE over a STABLE body, PostgreSQL never inlined it and paid a SQL-function call
--    per event. The hash itself is unchanged (docs/audit.md).
-- 2. openmaic_append (0001) keeps its signature and contract, with less work per call: no sort for the usual
--    single stream, only the three stream columns it needs under the lock, and per event only the hash and
--    the event's stream are computed in the loop (seq, attempt and command id are derived in the INSERT).
--    A p_counts that does not add up to the events given is refused instead of half-applied.
-- 3. openmaic_append_group runs many independent requests in one statement (group commit, below).

-- 1.
CREATE OR REPLACE FUNCTION openmaic_event_hash(prev bytea, seq bigint, type text, data text)
RETURNS bytea LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT sha256(prev || int8send(seq) || int4send(octet_length(convert_to(type, 'UTF8')))
                  || convert_to(type, 'UTF8') || convert_to(data, 'UTF8'))
$$;

-- 2. See openmaic_append in 0001 for the contract (fences, replays, creation, scheduling columns).
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
            SELECT e.seq, e.type, e.tx INTO orig FROM events e
             WHERE e.stream_id = p_stream_ids[i] AND e.command_id = p_command[i];
            IF FOUND THEN
                IF orig.type <> p_types[offsets[i]] THEN
                    RAISE EXCEPTION 'command % was used for %', p_command[i], orig.type
                        USING ERRCODE = 'OM003', DETAIL = orig.type;
                END IF;
                is_replay := true;
                stream_id := p_stream_ids[i];
                first_seq := orig.seq;
                SELECT max(e.seq) INTO last_seq FROM events e
                 WHERE e.stream_id = p_stream_ids[i] AND e.tx = orig.tx;
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

    INSERT INTO events (stream_id, seq, type, v, data, attempt, command_id, hash)
    SELECT p_stream_ids[o], heads[o] + x - offsets[o] + 1, p_types[x], p_vs[x], p_data[x]::json, p_attempt[o],
           CASE WHEN x = offsets[o] THEN p_command[o] END, hashes[x]
      FROM unnest(owners) WITH ORDINALITY AS u(o, x);
END;
$$;

-- 3. Group commit: many independent append requests in one statement, one round trip and one transaction.
--
-- A process combines the appends that its callers make while a call is in flight (openmaic/events/log.py) and
-- sends them here together. Each request keeps its own all-or-nothing outcome, as if it had been sent alone.
--
-- Request r owns the next p_req_streams[r] entries of the per-stream arrays and the next p_req_events[r]
-- entries of the per-event arrays; the arrays are those of openmaic_append (0001), concatenated. Requests are
-- applied in array order, so two requests to one stream get seqs in that order.
--
-- One row per stream of each request: status 'ok' or 'replayed' (a repeated command; seqs are the original
-- ones), or one row with status = the SQLSTATE the request raised (OM001 stale attempt, OM002 wrong expected
-- seq, OM003 command conflict, OM004 no stream, OM005 stream exists, or any other), its message and detail.
-- A failed request wrote nothing; the others are committed by the caller's transaction all the same.
CREATE FUNCTION openmaic_append_group(
    p_req_streams  integer[],
    p_req_events   integer[],
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
) RETURNS TABLE (req integer, status text, stream_id text, first_seq bigint, last_seq bigint, message text,
                 detail text)
LANGUAGE plpgsql AS $$
DECLARE
    n_req    integer := coalesce(array_length(p_req_streams, 1), 0);
    r        integer;
    s0       integer;
    s1       integer;
    e0       integer;
    e1       integer;
    kept     integer;
    a        record;
    -- results are collected here and returned at the end: a row returned with RETURN NEXT stays returned
    -- even when the subtransaction that produced it rolls back
    n        integer := 0;
    o_req    integer[] := '{}';
    o_status text[] := '{}';
    o_sid    text[] := '{}';
    o_first  bigint[] := '{}';
    o_last   bigint[] := '{}';
    o_msg    text[] := '{}';
    o_detail text[] := '{}';
    e_state  text;
    e_msg    text;
    e_detail text;
BEGIN
    -- Fast path, the common case: no request fails, so every request runs in ONE subtransaction (a
    -- subtransaction per request costs about as much again as a one-event append).
    BEGIN
        -- The group's transaction keeps every row lock it takes until it commits. Taking them request by
        -- request could deadlock against another process's group that names the same streams in another
        -- order; taking them all first, in id order (as openmaic_append does within a request), cannot.
        PERFORM 1 FROM streams s WHERE s.id = ANY (p_stream_ids) ORDER BY s.id FOR UPDATE;
        s0 := 1;
        e0 := 1;
        FOR r IN 1..n_req LOOP
            s1 := s0 + p_req_streams[r] - 1;
            e1 := e0 + p_req_events[r] - 1;
            FOR a IN SELECT * FROM openmaic_append(
                    p_stream_ids[s0:s1], p_create_kind[s0:s1], p_create_owner[s0:s1], p_attempt[s0:s1],
                    p_expected[s0:s1], p_command[s0:s1], p_status[s0:s1], p_set_wake[s0:s1], p_wake_at[s0:s1],
                    p_release[s0:s1], p_progress[s0:s1], p_counts[s0:s1], p_types[e0:e1], p_vs[e0:e1],
                    p_data[e0:e1]) LOOP
                n := n + 1;
                o_req[n] := r;
                o_status[n] := CASE WHEN a.replayed THEN 'replayed' ELSE 'ok' END;
                o_sid[n] := a.stream_id;
                o_first[n] := a.first_seq;
                o_last[n] := a.last_seq;
                o_msg[n] := NULL;
                o_detail[n] := NULL;
            END LOOP;
            s0 := s1 + 1;
            e0 := e1 + 1;
        END LOOP;
        RETURN QUERY SELECT * FROM unnest(o_req[1:n], o_status[1:n], o_sid[1:n], o_first[1:n], o_last[1:n],
                                          o_msg[1:n], o_detail[1:n]);
        RETURN;
    EXCEPTION WHEN OTHERS THEN
        -- Some request failed: all of the above is undone. Run them again, each in its own subtransaction,
        -- so that the failure stays with the request that raised it.
        n := 0;
    END;

    PERFORM 1 FROM streams s WHERE s.id = ANY (p_stream_ids) ORDER BY s.id FOR UPDATE;
    s0 := 1;
    e0 := 1;
    FOR r IN 1..n_req LOOP
        s1 := s0 + p_req_streams[r] - 1;
        e1 := e0 + p_req_events[r] - 1;
        kept := n;
        BEGIN
            FOR a IN SELECT * FROM openmaic_append(
                    p_stream_ids[s0:s1], p_create_kind[s0:s1], p_create_owner[s0:s1], p_attempt[s0:s1],
                    p_expected[s0:s1], p_command[s0:s1], p_status[s0:s1], p_set_wake[s0:s1], p_wake_at[s0:s1],
                    p_release[s0:s1], p_progress[s0:s1], p_counts[s0:s1], p_types[e0:e1], p_vs[e0:e1],
                    p_data[e0:e1]) LOOP
                n := n + 1;
                o_req[n] := r;
                o_status[n] := CASE WHEN a.replayed THEN 'replayed' ELSE 'ok' END;
                o_sid[n] := a.stream_id;
                o_first[n] := a.first_seq;
                o_last[n] := a.last_seq;
                o_msg[n] := NULL;
                o_detail[n] := NULL;
            END LOOP;
        EXCEPTION WHEN OTHERS THEN
            -- this request only: its subtransaction is rolled back, the group goes on
            n := kept + 1;
            o_req[n] := r;
            o_sid[n] := NULL;
            o_first[n] := NULL;
            o_last[n] := NULL;
            GET STACKED DIAGNOSTICS e_state = RETURNED_SQLSTATE, e_msg = MESSAGE_TEXT,
                                    e_detail = PG_EXCEPTION_DETAIL;
            o_status[n] := e_state;
            o_msg[n] := e_msg;
            o_detail[n] := e_detail;
        END;
        s0 := s1 + 1;
        e0 := e1 + 1;
    END LOOP;
    RETURN QUERY SELECT * FROM unnest(o_req[1:n], o_status[1:n], o_sid[1:n], o_first[1:n], o_last[1:n],
                                      o_msg[1:n], o_detail[1:n]);
END;
$$;
