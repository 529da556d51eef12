-- Projections: their checkpoints, the fence every batch passes, and the live read-model tables.
-- The read-model DDL is the projections' templates (openmaic/projections/*.py) rendered with the live names; a
-- test checks that the two agree, and a rebuild creates its fresh copy from the same templates.

CREATE TABLE projection_checkpoints (
    name           text PRIMARY KEY,
    -- the last global-log cursor (tx, position) applied; (0, 0) is before the first event
    tx             xid8 NOT NULL DEFAULT '0',
    position       bigint NOT NULL DEFAULT 0,
    updated_at     timestamptz NOT NULL DEFAULT now(),
    events_applied bigint NOT NULL DEFAULT 0
);

-- Events delivered ahead of their place in the global order (pulled forward so that a stream's events arrive
-- in seq order; see openmaic/projections/ordering.py). The tail skips them when it reaches them.
CREATE TABLE projection_early (
    name      text NOT NULL,
    stream_id text NOT NULL,
    seq       bigint NOT NULL,
    PRIMARY KEY (name, stream_id, seq)
);

-- The first statement of every projection batch's transaction.
--
-- Pause: p_pause_key non-null takes that advisory lock *shared* for the transaction, without waiting; a rebuild
-- holds it exclusively while it catches up and swaps, so a live batch fails fast (OM020) and is retried.
-- Fence: the checkpoint moves only from the value the batch was read from. The UPDATE takes the row lock, so a
-- concurrent writer of the same checkpoint waits for our commit and then matches nothing (OM021): a batch is
-- applied once or not at all, even if two projectors ever believed they held the projection.
CREATE FUNCTION openmaic_projection_advance(
    p_name         text,
    p_from_tx      xid8,
    p_from_position bigint,
    p_to_tx        xid8,
    p_to_position  bigint,
    p_events       bigint,
    p_pause_key    bigint
) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF p_pause_key IS NOT NULL AND NOT pg_try_advisory_xact_lock_shared(p_pause_key) THEN
        RAISE EXCEPTION 'projection % is paused by a rebuild', p_name USING ERRCODE = 'OM020';
    END IF;
    UPDATE projection_checkpoints
       SET tx = p_to_tx, position = p_to_position, events_applied = events_applied + p_events, updated_at = now()
     WHERE name = p_name AND tx = p_from_tx AND position = p_from_position;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'the checkpoint of projection % moved', p_name USING ERRCODE = 'OM021';
    END IF;
END;
$$;

INSERT INTO projection_checkpoints (name)
VALUES ('library_cards'), ('course_documents'), ('model_history'), ('session_list');

-- library_cards

CREATE TABLE library_cards (
    course_id        text PRIMARY KEY,
    owner_id         text NOT NULL,
    title            text NOT NULL DEFAULT '',
    run_id           text,
    run_state        text,
    label            text NOT NULL,
    scenes_total     integer NOT NULL DEFAULT 0,
    scenes_completed integer NOT NULL DEFAULT 0,
    updated_at       timestamptz NOT NULL,
    scenes           json NOT NULL DEFAULT '{}'
);

CREATE INDEX library_cards_owner ON library_cards (owner_id, updated_at DESC);

CREATE TABLE library_runs (run_id text PRIMARY KEY, course_id text NOT NULL);

CREATE TABLE library_deleted (course_id text PRIMARY KEY);

-- course_documents

CREATE TABLE course_documents (
    course_id  text PRIMARY KEY,
    owner_id   text NOT NULL,
    document   json NOT NULL,
    seq        bigint NOT NULL,
    deleted    boolean NOT NULL DEFAULT false,
    updated_at timestamptz NOT NULL
);

CREATE INDEX course_documents_owner ON course_documents (owner_id);

-- model_history

CREATE TABLE model_history (
    session_id text NOT NULL,
    idx        integer NOT NULL,
    role       text NOT NULL,
    message    json NOT NULL,
    seq        bigint NOT NULL,
    PRIMARY KEY (session_id, idx)
);

CREATE TABLE model_history_pending (
    session_id text NOT NULL,
    seq        bigint NOT NULL,
    text       text NOT NULL,
    PRIMARY KEY (session_id, seq)
);

-- session_list

CREATE TABLE session_list (
    session_id text PRIMARY KEY,
    owner_id   text NOT NULL,
    kind       text NOT NULL,
    course_id  text,
    status     text NOT NULL,
    title      text NOT NULL DEFAULT '',
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    seq        bigint NOT NULL
);

CREATE INDEX session_list_owner ON session_list (owner_id, updated_at DESC);
