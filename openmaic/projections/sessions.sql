-- The statements of the session_list projection (openmaic/projections/sessions.py).
-- Table names are templates ({session_list} is the physical name of the logical table session_list, filled in
-- per build with str.format_map), so a literal brace in a statement must be doubled.

-- name: create_session_list
CREATE TABLE {session_list} (
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

-- name: create_session_list_owner_index
CREATE INDEX {session_list}_owner ON {session_list} (owner_id, updated_at DESC);

-- name: load
SELECT session_id, owner_id, kind, course_id, status, title, created_at, updated_at, seq
  FROM {session_list} WHERE session_id = ANY($1::text[]);

-- name: upsert
-- created_at is written once, by the insert.
INSERT INTO {session_list} (session_id, owner_id, kind, course_id, status, title, created_at, updated_at, seq)
SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::timestamptz[],
                     $8::timestamptz[], $9::bigint[])
ON CONFLICT (session_id) DO UPDATE SET
    owner_id = EXCLUDED.owner_id, kind = EXCLUDED.kind, course_id = EXCLUDED.course_id,
    status = EXCLUDED.status, title = EXCLUDED.title, updated_at = EXCLUDED.updated_at, seq = EXCLUDED.seq;
