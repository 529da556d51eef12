-- Every SQL statement of openmaic, by name. Loaded once by openmaic/store/queries.py.
-- The heavy lifting of the append lives in the openmaic_append() function (migrations), so that the fence,
-- the seq allocation, the hash chain and the insert take a single round trip.

-- name: append
-- One statement, one round trip, atomic across every stream named (see openmaic_append in 0001).
SELECT stream_id, first_seq, last_seq, replayed
  FROM openmaic_append($1::text[], $2::text[], $3::text[], $4::bigint[], $5::bigint[], $6::text[], $7::text[],
                       $8::boolean[], $9::timestamptz[], $10::boolean[], $11::boolean[], $12::int[],
                       $13::text[], $14::int[], $15::text[]);

-- name: read_stream
SELECT position, tx::text AS tx, stream_id, seq, type, v, data::text AS data, attempt, command_id, recorded_at,
       hash
  FROM events
 WHERE stream_id = $1 AND seq > $2 AND ($4::bigint IS NULL OR seq <= $4)
 ORDER BY seq
 LIMIT $3;

-- name: read_all
-- The global log in commit-safe order. Only transactions below the snapshot's xmin are read: every one of them
-- has finished, so no event can later appear *before* what we return (a bare position or BIGSERIAL cursor
-- would skip rows whose transaction commits after a higher number became visible).
SELECT position, tx::text AS tx, stream_id, seq, type, v, data::text AS data, attempt, command_id, recorded_at,
       hash
  FROM events
 WHERE (tx, position) > ($1::text::xid8, $2::bigint)
   AND tx < pg_snapshot_xmin(pg_current_snapshot())
 ORDER BY tx, position
 LIMIT $3;

-- name: stream
SELECT id, kind, owner_id, head_seq, head_hash, status, wake_at, attempt, lease_worker, lease_expires_at,
       unattended_attempts, created_at, updated_at, deleted_at
  FROM streams WHERE id = $1;

-- name: horizon
-- How far the global log can be read, and how old the oldest transaction holding it back is.
SELECT pg_snapshot_xmin(pg_current_snapshot())::text AS xmin,
       (SELECT extract(epoch FROM now() - min(xact_start)) FROM pg_stat_activity
         WHERE backend_xid IS NOT NULL) AS oldest_xact_age_s;
