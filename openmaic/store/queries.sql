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
 ORDER BY events.seq
 LIMIT $3;

-- name: read_all
-- The global log in commit-safe order. Only transactions below the snapshot's xmin are read: every one of them
-- has finished, so no event can later appear *before* what we return (a bare position or BIGSERIAL cursor
-- would skip rows whose transaction commits after a higher number became visible).
SELECT position, tx::text AS tx, stream_id, seq, type, v, data::text AS data, attempt, command_id, recorded_at,
       hash
  FROM events
 WHERE (events.tx, events.position) > ($1::text::xid8, $2::bigint)
   AND events.tx < pg_snapshot_xmin(pg_current_snapshot())
 -- qualified: the bare name would sort by the text alias in the select list (and '1000' < '999')
 ORDER BY events.tx, events.position
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

-- name: claim
-- Take up to $3[i] runnable streams of kind $2[i] for worker $1 with a lease of $4 ms (openmaic_claim in 0002).
SELECT stream_id, kind, attempt, reason, unattended, claimed_seq FROM openmaic_claim($1, $2::text[], $3::int[], $4);

-- name: heartbeat
-- One statement per worker per interval. Fenced by (stream, attempt, worker): a row that no longer matches
-- was taken over, and its absence from the result tells the worker that lease is lost.
UPDATE streams s SET lease_expires_at = now() + $3 * interval '1 millisecond'
  FROM unnest($1::text[], $2::bigint[]) AS h(id, attempt)
 WHERE s.id = h.id AND s.attempt = h.attempt AND s.lease_worker = $4 AND s.status = 'running'
RETURNING s.id;

-- name: cancel_requested_after
SELECT EXISTS (SELECT 1 FROM events WHERE stream_id = $1 AND seq > $2 AND type = 'session.cancel_requested');
