-- The statements of the library_cards projection (openmaic/projections/library.py).
-- Table names are templates ({library_cards} is the physical name of the logical table library_cards, filled in
-- per build with str.format_map), so a literal brace in a statement must be doubled.

-- name: create_library_cards
-- The course cards the API reads. scenes (scene id -> status, in course order) is fold state.
CREATE TABLE {library_cards} (
    course_id        text PRIMARY KEY,
    owner_id         text NOT NULL,
    title            text NOT NULL DEFAULT '',
    run_id           text,
    run_state        text,
    label            text NOT NULL,
    scenes_total     integer NOT NULL DEFAULT 0,
    scenes_completed integer NOT NULL DEFAULT 0,
    updated_at       timestamptz NOT NULL,
    scenes           json NOT NULL DEFAULT '{{}}'
);

-- name: create_library_cards_owner_index
CREATE INDEX {library_cards}_owner ON {library_cards} (owner_id, updated_at DESC);

-- name: create_library_runs
-- Links a run to its course (run events carry only the run's id).
CREATE TABLE {library_runs} (run_id text PRIMARY KEY, course_id text NOT NULL);

-- name: create_library_deleted
-- Deleted courses, so that later run events cannot bring their card back.
CREATE TABLE {library_deleted} (course_id text PRIMARY KEY);

-- name: load
-- The current card of every course a batch touches ($1: course ids, $2: run ids, whose courses are added).
WITH r AS (SELECT run_id, course_id FROM {library_runs} WHERE run_id = ANY($2::text[])),
     c AS (SELECT unnest($1::text[]) AS id UNION SELECT course_id FROM r)
SELECT c.id, s.owner_id AS stream_owner, (d.course_id IS NOT NULL) AS deleted, k.owner_id, k.title, k.run_id,
       k.run_state, k.scenes::text AS scenes, k.updated_at, (k.course_id IS NOT NULL) AS stored,
       (SELECT array_agg(r.run_id) FROM r WHERE r.course_id = c.id) AS runs
  FROM c
  LEFT JOIN {library_cards} k ON k.course_id = c.id
  LEFT JOIN {library_deleted} d ON d.course_id = c.id
  LEFT JOIN streams s ON s.id = c.id;

-- name: upsert
INSERT INTO {library_cards} AS k (course_id, owner_id, title, run_id, run_state, label, scenes_total,
                                  scenes_completed, updated_at, scenes)
SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::int[], $8::int[],
                     $9::timestamptz[], $10::json[])
ON CONFLICT (course_id) DO UPDATE SET
    owner_id = EXCLUDED.owner_id, title = EXCLUDED.title, run_id = EXCLUDED.run_id,
    run_state = EXCLUDED.run_state, label = EXCLUDED.label, scenes_total = EXCLUDED.scenes_total,
    scenes_completed = EXCLUDED.scenes_completed, updated_at = EXCLUDED.updated_at, scenes = EXCLUDED.scenes;

-- name: delete_cards
DELETE FROM {library_cards} WHERE course_id = ANY($1::text[]);

-- name: mark_deleted
INSERT INTO {library_deleted} (course_id) SELECT unnest($1::text[]) ON CONFLICT DO NOTHING;

-- name: upsert_runs
INSERT INTO {library_runs} (run_id, course_id) SELECT * FROM unnest($1::text[], $2::text[])
ON CONFLICT (run_id) DO UPDATE SET course_id = EXCLUDED.course_id;

-- name: hint_owners
-- The wake-up hints of the owners whose cards this batch changes: NOTIFY is sent when the transaction commits.
SELECT pg_notify($1, h) FROM unnest($2::text[]) AS h;
