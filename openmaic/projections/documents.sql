-- The statements of the course_documents projection (openmaic/projections/documents.py).
-- Table names are templates ({course_documents} is the physical name of the logical table course_documents,
-- filled in per build with str.format_map), so a literal brace in a statement must be doubled.

-- name: create_course_documents
CREATE TABLE {course_documents} (
    course_id  text PRIMARY KEY,
    owner_id   text NOT NULL,
    document   json NOT NULL,
    seq        bigint NOT NULL,
    deleted    boolean NOT NULL DEFAULT false,
    updated_at timestamptz NOT NULL
);

-- name: create_course_documents_owner_index
CREATE INDEX {course_documents}_owner ON {course_documents} (owner_id);

-- name: load
-- The current document of every course a batch touches, and its owner (from the stream before the first write).
SELECT c.id, coalesce(d.owner_id, s.owner_id) AS owner_id, d.document::text AS document, d.updated_at
  FROM unnest($1::text[]) AS c(id)
  LEFT JOIN {course_documents} d ON d.course_id = c.id
  LEFT JOIN streams s ON s.id = c.id;

-- name: upsert
INSERT INTO {course_documents} (course_id, owner_id, document, seq, deleted, updated_at)
SELECT * FROM unnest($1::text[], $2::text[], $3::json[], $4::bigint[], $5::boolean[], $6::timestamptz[])
ON CONFLICT (course_id) DO UPDATE SET
    owner_id = EXCLUDED.owner_id, document = EXCLUDED.document, seq = EXCLUDED.seq,
    deleted = EXCLUDED.deleted, updated_at = EXCLUDED.updated_at;
