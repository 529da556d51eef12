-- The event log: streams (one row per durable stream) and events (append-only).
-- See docs/architecture.md for why each piece is shaped the way it is.

CREATE TABLE streams (
    id                  text PRIMARY KEY,
    kind                text NOT NULL,
    owner_id            text NOT NULL,
    head_seq            bigint NOT NULL DEFAULT 0,
    head_hash           bytea NOT NULL DEFAULT '\x0000000000000000000000000000000000000000000000000000000000000000',
    -- scheduling, derived from the events and written in the same transaction as them
    status              text NOT NULL DEFAULT 'waiting'
                        CHECK (status IN ('queued', 'running', 'waiting', 'terminal')),
    wake_at             timestamptz,
    -- the lease; attempt is the fencing token
    attempt             bigint NOT NULL DEFAULT 0,
    lease_worker        text,
    lease_expires_at    timestamptz,
    unattended_attempts integer NOT NULL DEFAULT 0,
    created_at          timestamptz NOT NULL DEFAULT now(),
    updated_at          timestamptz NOT NULL DEFAULT now(),
    deleted_at          timestamptz
);

-- The claim loop looks for queued streams that are due and running streams whose lease has expired.
CREATE INDEX streams_runnable ON streams (kind, status, wake_at) WHERE status IN ('queued', 'running');
CREATE INDEX streams_owner ON streams (owner_id, kind, created_at);

CREATE TABLE events (
    position    bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    stream_id   text NOT NULL REFERENCES streams (id),
    seq         bigint NOT NULL CHECK (seq > 0),
    type        text NOT NULL,
    v           integer NOT NULL DEFAULT 1,
    -- json (not jsonb) keeps the exact bytes that were hashed, so an export can be verified byte for byte.
    data        json NOT NULL,
    attempt     bigint,
    command_id  text,
    -- The writing transaction: tailing the global log orders by (tx, position) below the snapshot's xmin.
    tx          xid8 NOT NULL DEFAULT pg_current_xact_id(),
    recorded_at timestamptz NOT NULL DEFAULT now(),
    hash        bytea NOT NULL,
    UNIQUE (stream_id, seq),
    UNIQUE (stream_id, command_id)
);

CREATE INDEX events_global_order ON events (tx, position);

-- Append-only, enforced by the database rather than by convention.
CREATE FUNCTION openmaic_events_are_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'the event log is append-only: % on events is refused', TG_OP
        USING ERRCODE = 'OM010';
END;
$$;

CREATE TRIGGER events_append_only_rows BEFORE UPDATE OR DELETE ON events
    FOR EACH ROW EXECUTE FUNCTION openmaic_events_are_append_only();
CREATE TRIGGER events_append_only_truncate BEFORE TRUNCATE ON events
    FOR EACH STATEMENT EXECUTE FUNCTION openmaic_events_are_append_only();

-- The event hash: sha256(prev_hash || int8(seq) || int4(len(type)) || type || data), all big-endian,
-- text as UTF-8. docs/audit.md documents it for offline verification.
CREATE FUNCTION openmaic_event_hash(prev bytea, seq bigint, type text, data text)
RETURNS bytea LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT sha256(prev || int8send(seq) || int4send(octet_length(convert_to(type, 'UTF8')))
                  || convert_to(type, 'UTF8') || convert_to(data, 'UTF8'))
$$;

-- Append events to one or more streams in one statement (one round trip).
--
-- Per stream i: p_counts[i] events taken in order from the flattened p_types/p_vs/p_data arrays.
-- Fences (checked under the stream's row lock, so they cannot race another appender):
--   p_attempt[i]   non-null: the stream's attempt must equal it (worker writes; a stale attempt loses);
--   p_expected[i]  non-null: head_seq must equal it (optimistic concurrency for control-plane commands).
-- p_create_kind[i] non-null creates the stream (owner p_create_owner[i]); it must not exist yet.
-- p_command[i]   non-null: the first event of the stream's batch carries this command id. If the stream
--   already has it, the whole call is a replay: nothing is written and the original seqs are returned
--   (a different first event type under that id raises OM003).
-- Scheduling columns change with the events: p_status, p_wake_at (when p_set_wake), p_release (drop the
-- lease), p_progress (a checkpoint: reset the unattended-attempt counter).
--
-- Rows are locked in id order, so two multi-stream appends cannot deadlock.
CREATE FUNCTION openmaic_append(
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
    n_streams  integer := coalesce(array_length(p_stream_ids, 1), 0);
    i          integer;
    j          integer;
    k          integer;
    offsets    integer[] := '{}';
    cur        streams%ROWTYPE;
    heads      bigint[] := '{}';
    head_hashes bytea[] := '{}';
    cur_attempts bigint[] := '{}';
    order_idx  integer[];
    orig       record;
    is_replay  boolean := false;
    h          bytea;
    seqs       bigint[];
    hashes     bytea[];
    attempts   bigint[];
    commands   text[];
    sids       text[];
BEGIN
    -- where each stream's events start in the flattened arrays
    k := 1;
    FOR i IN 1..n_streams LOOP
        offsets[i] := k;
        k := k + p_counts[i];
    END LOOP;

    FOR i IN 1..n_streams LOOP
        IF p_create_kind[i] IS NOT NULL THEN
            INSERT INTO streams AS s (id, kind, owner_id, status)
            VALUES (p_stream_ids[i], p_create_kind[i], p_create_owner[i], coalesce(p_status[i], 'waiting'))
            ON CONFLICT (id) DO NOTHING;
        END IF;
    END LOOP;

    -- lock in id order (deadlock-free), remember heads
    SELECT array_agg(o ORDER BY p_stream_ids[o]) INTO order_idx FROM generate_series(1, n_streams) AS o;
    FOREACH i IN ARRAY coalesce(order_idx, '{}') LOOP
        SELECT * INTO cur FROM streams s WHERE s.id = p_stream_ids[i] FOR UPDATE;
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

    seqs := '{}'; hashes := '{}'; attempts := '{}'; commands := '{}'; sids := '{}';
    FOR i IN 1..n_streams LOOP
        h := head_hashes[i];
        FOR j IN 0..p_counts[i] - 1 LOOP
            k := offsets[i] + j;
            h := openmaic_event_hash(h, heads[i] + j + 1, p_types[k], p_data[k]);
            sids[k] := p_stream_ids[i];
            seqs[k] := heads[i] + j + 1;
            hashes[k] := h;
            attempts[k] := p_attempt[i];
            commands[k] := CASE WHEN j = 0 THEN p_command[i] END;
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
    SELECT sids[x], seqs[x], p_types[x], p_vs[x], p_data[x]::json, attempts[x], commands[x], hashes[x]
      FROM generate_series(1, coalesce(array_length(p_types, 1), 0)) AS x;
END;
$$;
