-- Every SQL statement of openmaic, by name. Loaded once by openmaic/store/queries.py.
-- The heavy lifting of the append lives in the openmaic_append() function (migrations), so that the fence,
-- the seq allocation, the hash chain and the insert take a single round trip.

-- name: append
-- One statement, one round trip, atomic across every stream named (see openmaic_append in 0001).
SELECT stream_id, first_seq, last_seq, replayed
  FROM openmaic_append($1::text[], $2::text[], $3::text[], $4::bigint[], $5::bigint[], $6::text[], $7::text[],
                       $8::boolean[], $9::timestamptz[], $10::boolean[], $11::boolean[], $12::int[],
                       $13::text[], $14::int[], $15::text[]);

-- name: append_one
-- The common append in one statement: one existing stream, at least one event, no creation. The stream's row is
-- locked in `head` with the fences in its WHERE (re-checked on the newest row version if another appender got the
-- lock first), the seqs and the hash chain come from that locked row, and the events, the new head and the
-- scheduling columns are written by the same statement: the same effects as openmaic_append (0001/0009) for that
-- request, without a PL/pgSQL call. It returns no row when the stream is missing or a fence refuses ($2 attempt,
-- $3 expected head_seq), and a repeated command id ($4) fails on events' unique (stream_id, command_id): in both
-- cases nothing was written and the caller asks openmaic_append (`append`) for the exact outcome (the error, or
-- the replay's original seqs). $5 status, $6/$7 set wake_at, $8 release the lease, $9 progress; $10/$11/$12 the
-- events' types, versions and JSON.
WITH RECURSIVE
head AS (
    SELECT s.id, s.head_seq, s.head_hash
      FROM streams s
     WHERE s.id = $1 AND ($2::bigint IS NULL OR s.attempt = $2) AND ($3::bigint IS NULL OR s.head_seq = $3)
       FOR UPDATE),
chain (i, seq, hash) AS (
    SELECT 1, h.head_seq + 1, openmaic_event_hash(h.head_hash, h.head_seq + 1, ($10::text[])[1], ($12::text[])[1])
      FROM head h
    UNION ALL
    SELECT c.i + 1, c.seq + 1,
           openmaic_event_hash(c.hash, c.seq + 1, ($10::text[])[c.i + 1], ($12::text[])[c.i + 1])
      FROM chain c
     WHERE c.i < cardinality($10::text[])),
written AS (
    INSERT INTO events (stream_id, seq, type, v, data, attempt, command_id, command_last_seq, hash, epoch)
    SELECT $1, c.seq, ($10::text[])[c.i], ($11::int[])[c.i], (($12::text[])[c.i])::json, $2::bigint,
           CASE WHEN c.i = 1 THEN $4::text END,
           CASE WHEN c.i = 1 AND $4::text IS NOT NULL THEN c.seq + cardinality($10::text[]) - 1 END,
           c.hash, ep.epoch
      FROM chain c, (SELECT openmaic_epoch() AS epoch) ep),
moved AS (
    UPDATE streams s SET
           head_seq = h.head_seq + cardinality($10::text[]),
           head_hash = (SELECT c.hash FROM chain c WHERE c.i = cardinality($10::text[])),
           status = coalesce($5::text, s.status),
           wake_at = CASE WHEN $6::boolean THEN $7::timestamptz ELSE s.wake_at END,
           lease_worker = CASE WHEN $8::boolean THEN NULL ELSE s.lease_worker END,
           lease_expires_at = CASE WHEN $8::boolean THEN NULL ELSE s.lease_expires_at END,
           unattended_attempts = CASE WHEN $9::boolean THEN 0 ELSE s.unattended_attempts END,
           updated_at = now()
      FROM head h
     WHERE s.id = h.id
    RETURNING h.head_seq + 1 AS first_seq, s.head_seq AS last_seq)
SELECT first_seq, last_seq FROM moved;

-- name: append_many
-- Several requests in one plain statement, each one existing stream with at least one event and no command id,
-- no two to the same stream: append_one's shape over a set (group commit sends this instead of
-- openmaic_append_group when a group is of that kind). Request r is $1[r] stream, $2[r] attempt fence, $3[r]
-- expected head_seq, $4[r] status, $5[r]/$6[r] set wake_at, $7[r] release the lease, $8[r] progress, $9[r] its
-- event count; $10/$11/$12 the events' types, versions and JSON, request after request. The streams' rows are
-- locked in id order (the LockRows node runs over the sort: deadlock-free against every other appender, which
-- locks in the same order), each with its fences in the WHERE (re-checked on the newest row version if another
-- appender got the lock first); the seqs and hash chains come from the locked rows, and the events, the heads
-- and the scheduling columns are written by the same statement, in request and seq order. A request whose
-- stream is missing or whose fence refuses gets no row and nothing of it is written; the caller sends it alone
-- (openmaic_append decides its exact error).
WITH RECURSIVE
req AS (
    SELECT u.r, u.sid, u.att, u.exp, u.st, u.sw, u.wa, u.rel, u.prog, u.cnt,
           (sum(u.cnt) OVER (ORDER BY u.r) - u.cnt)::int AS off
      FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::text[], $5::boolean[], $6::timestamptz[],
                  $7::boolean[], $8::boolean[], $9::int[])
           WITH ORDINALITY AS u(sid, att, exp, st, sw, wa, rel, prog, cnt, r)),
head AS (
    SELECT q.r, s.id, s.head_seq, s.head_hash
      FROM streams s JOIN req q ON s.id = q.sid
     WHERE (q.att IS NULL OR s.attempt = q.att) AND (q.exp IS NULL OR s.head_seq = q.exp)
     ORDER BY s.id
       FOR UPDATE OF s),
chain (r, i, seq, hash) AS (
    SELECT h.r, 1, h.head_seq + 1,
           openmaic_event_hash(h.head_hash, h.head_seq + 1, ($10::text[])[q.off + 1], ($12::text[])[q.off + 1])
      FROM head h JOIN req q ON q.r = h.r
    UNION ALL
    SELECT c.r, c.i + 1, c.seq + 1,
           openmaic_event_hash(c.hash, c.seq + 1, ($10::text[])[q.off + c.i + 1], ($12::text[])[q.off + c.i + 1])
      FROM chain c JOIN req q ON q.r = c.r
     WHERE c.i < q.cnt),
written AS (
    INSERT INTO events (stream_id, seq, type, v, data, attempt, hash, epoch)
    SELECT q.sid, c.seq, ($10::text[])[q.off + c.i], ($11::int[])[q.off + c.i], (($12::text[])[q.off + c.i])::json,
           q.att, c.hash, ep.epoch
      FROM chain c JOIN req q ON q.r = c.r, (SELECT openmaic_epoch() AS epoch) ep
     ORDER BY c.r, c.i),
moved AS (
    UPDATE streams s SET
           head_seq = h.head_seq + q.cnt,
           head_hash = (SELECT c.hash FROM chain c WHERE c.r = q.r AND c.i = q.cnt),
           status = coalesce(q.st, s.status),
           wake_at = CASE WHEN q.sw THEN q.wa ELSE s.wake_at END,
           lease_worker = CASE WHEN q.rel THEN NULL ELSE s.lease_worker END,
           lease_expires_at = CASE WHEN q.rel THEN NULL ELSE s.lease_expires_at END,
           unattended_attempts = CASE WHEN q.prog THEN 0 ELSE s.unattended_attempts END,
           updated_at = now()
      FROM head h JOIN req q ON q.r = h.r
     WHERE s.id = h.id
    RETURNING q.r, h.head_seq + 1 AS first_seq, s.head_seq AS last_seq)
SELECT r, first_seq, last_seq FROM moved;

-- name: read_stream
-- At most $3 events, and with a budget $5 (NULL: none) only while the events before each hold less than $5
-- characters of data: a page always has one event, and at most $5 plus one event's worth. The running sum is
-- computed as rows are pulled, so the scan stops at the LIMIT; only the page's rows leave the server.
SELECT position, epoch, tx, stream_id, seq, type, v, data, attempt, command_id, recorded_at, hash
  FROM (SELECT position, epoch, tx::text AS tx, stream_id, seq, type, v, data::text AS data, attempt, command_id,
               recorded_at, hash, sum(length(data::text)) OVER (ORDER BY seq) AS upto
          FROM events
         WHERE stream_id = $1 AND seq > $2 AND ($4::bigint IS NULL OR seq <= $4)
         ORDER BY events.seq
         LIMIT $3) AS page
 WHERE $5::bigint IS NULL OR upto - length(data) < $5
 ORDER BY seq;

-- name: read_streams
-- read_stream for many streams in one round trip: for each (stream_id, after_seq) pair, up to $3 events after it,
-- and with a budget $4 (NULL: none) per stream as read_stream's $5: one event at least, $4 plus one at most.
SELECT e.position, e.epoch, e.tx, e.stream_id, e.seq, e.type, e.v, e.data, e.attempt, e.command_id, e.recorded_at,
       e.hash
  FROM unnest($1::text[], $2::bigint[]) WITH ORDINALITY AS c(stream_id, after_seq, ord)
 CROSS JOIN LATERAL (
       SELECT position, epoch, tx::text AS tx, stream_id, seq, type, v, data::text AS data, attempt, command_id,
              recorded_at, hash, sum(length(data::text)) OVER (ORDER BY seq) AS upto
         FROM events
        WHERE events.stream_id = c.stream_id AND events.seq > c.after_seq
        ORDER BY events.seq
        LIMIT $3) AS e
 WHERE $4::bigint IS NULL OR e.upto - length(e.data) < $4
 ORDER BY c.ord, e.seq;

-- name: read_all
-- The global log in commit-safe order, (epoch, tx, position), after the cursor ($1, $2, $3). Only events before
-- the horizon are read: an earlier epoch (written in another transaction-id space and copied in, so finished), or
-- this cluster's epoch below the snapshot's xmin (every transaction there has finished). So no event can later
-- appear *before* what we return (a bare position or BIGSERIAL cursor would skip rows whose transaction commits after
-- a higher number became visible). The horizon is computed once per statement (an InitPlan), from this statement's
-- own snapshot: an xmin from a later snapshot could pass a transaction that committed in between, unseen.
SELECT position, epoch, tx::text AS tx, stream_id, seq, type, v, data::text AS data, attempt, command_id,
       recorded_at, hash
  FROM events
 WHERE (events.epoch, events.tx, events.position) > ($1::integer, $2::text::xid8, $3::bigint)
   AND (events.epoch, events.tx) < (SELECT h.epoch, h.tx FROM openmaic_horizon(pg_snapshot_xmin(pg_current_snapshot())) h)
 -- qualified: the bare name would sort by the text alias in the select list (and '1000' < '999')
 ORDER BY events.epoch, events.tx, events.position
 LIMIT $4;

-- name: horizon
-- The global log's tailing horizon (read_all stops below the snapshot's xmin), how many ids were handed out since,
-- and the transaction holding it back: the open transaction with the oldest id in the whole cluster, in any
-- database, since transaction ids are shared by every database of a cluster; a prepared transaction counts too.
-- Transactions without an id (read-only ones, this one) hold nothing back. Other roles' sessions show their ids
-- only to a role with pg_read_all_stats (pg_monitor). Always one row; pid, database, state and age_s are NULL when
-- nothing holds the tail back (pid alone is NULL for a prepared transaction).
SELECT pg_snapshot_xmin(s)::text AS xmin,
       pg_snapshot_xmax(s)::text::numeric - pg_snapshot_xmin(s)::text::numeric AS behind,
       o.pid, o.database, o.state, o.age_s
  FROM pg_current_snapshot() AS s
  LEFT JOIN LATERAL (
      SELECT t.* FROM (
          SELECT a.pid, a.datname::text AS database, a.state,
                 extract(epoch FROM clock_timestamp() - a.xact_start)::float8 AS age_s, age(a.backend_xid) AS xid_age
            FROM pg_stat_activity a
           WHERE a.backend_xid IS NOT NULL AND a.xact_start IS NOT NULL AND a.pid <> pg_backend_pid()
          UNION ALL
          SELECT NULL, p.database::text, 'prepared', extract(epoch FROM clock_timestamp() - p.prepared)::float8,
                 age(p.transaction)
            FROM pg_prepared_xacts p) AS t
       ORDER BY t.xid_age DESC LIMIT 1) AS o ON true;

-- name: sessions_list
-- The operators' list (openmaic sessions list): each session and run of the kinds $1, newest activity first, with
-- its scheduling row and lease, its state from the session_list read model (the scheduling status until the
-- projector has seen it) and the age of its last event. Filters, each NULL for any: $2 owner, $3 kind, $4 state
-- (the read model's or the scheduling one), $8 one stream's id. $5: stuck ones only, where stuck means running with
-- an expired lease that no worker has claimed since, queued and due for longer than $6 seconds, or paused. $7 rows
-- at most. $9: a page after the row whose (last_at, id) is ($10, $11) (keyset; $10 NULL: a row without events).
-- The columns are SessionRow's (openmaic.probes); lease_left_s is NULL while no worker holds the lease.
SELECT *
  FROM (SELECT s.id, s.kind, s.owner_id AS owner, coalesce(l.status, s.status) AS state, s.status, s.attempt,
               s.lease_worker,
               CASE WHEN s.lease_worker IS NOT NULL
                    THEN extract(epoch FROM s.lease_expires_at - now())::float8 END AS lease_left_s,
               extract(epoch FROM now() - e.recorded_at)::float8 AS idle_s, coalesce(l.title, '') AS title,
               CASE WHEN s.status = 'running' AND s.lease_expires_at < now() THEN 'lease_expired'
                    WHEN s.status = 'queued' AND (s.wake_at IS NULL OR s.wake_at <= now())
                         AND e.recorded_at < now() - $6 * interval '1 second' THEN 'queued_too_long'
                    WHEN l.status = 'paused' THEN 'paused'
               END AS stuck,
               e.recorded_at AS last_at
          FROM streams s
          LEFT JOIN session_list l ON l.session_id = s.id
          LEFT JOIN events e ON e.stream_id = s.id AND e.seq = s.head_seq
         WHERE s.kind = ANY($1::text[])
           AND ($2::text IS NULL OR s.owner_id = $2) AND ($3::text IS NULL OR s.kind = $3)
           AND ($4::text IS NULL OR l.status = $4 OR s.status = $4) AND ($8::text IS NULL OR s.id = $8)) AS x
 WHERE (NOT $5 OR x.stuck IS NOT NULL)
   AND (NOT $9::boolean
        OR CASE WHEN $10::timestamptz IS NULL THEN x.last_at IS NULL AND x.id < $11::text
                ELSE x.last_at < $10 OR (x.last_at = $10 AND x.id < $11::text) OR x.last_at IS NULL END)
 ORDER BY x.last_at DESC NULLS LAST, x.id DESC
 LIMIT $7;

-- name: stream
SELECT id, kind, owner_id, head_seq, head_hash, status, wake_at, attempt, lease_worker, lease_expires_at,
       unattended_attempts, created_at, updated_at, deleted_at
  FROM streams WHERE id = $1;

-- name: claim
-- Take up to $3[i] runnable streams of kind $2[i] for worker $1 with a lease of $4 ms, at most $5 of each share
-- (an owner, or an anonymous owner's client address) held at once, every share's first before any share's second
-- (openmaic_claim in 0017).
SELECT stream_id, kind, attempt, reason, unattended, claimed_seq
  FROM openmaic_claim($1, $2::text[], $3::int[], $4, $5);

-- name: next_claim_due
-- Seconds from now until the soonest moment a stream of the kinds $1 becomes claimable without a hint saying so: a
-- queued stream's wake_at, or a running stream's lease expiry (a holder that stopped renewing, or gave the lease up
-- without handing the stream back, tells nobody). NULL when nothing is due later. The claim loop wakes then rather
-- than at its poll. Live leases count too, so while streams run the loop also wakes about once per lease TTL less a
-- heartbeat, for a claim that finds them renewed.
SELECT extract(epoch FROM min(due) - now())::float8
  FROM (SELECT CASE WHEN status = 'queued' THEN wake_at ELSE lease_expires_at END AS due
          FROM streams
         WHERE kind = ANY($1::text[]) AND status IN ('queued', 'running')) AS s
 WHERE due > now();

-- name: heartbeat
-- One statement per worker per interval. Fenced by (stream, attempt, worker): a row that no longer matches
-- was taken over, and its absence from the result tells the worker that lease is lost. Rows are locked in id
-- order, the order every multi-stream writer uses, so a heartbeat cannot deadlock with them.
UPDATE streams s SET lease_expires_at = now() + $3 * interval '1 millisecond'
 WHERE s.id IN (SELECT x.id FROM streams x
                  JOIN unnest($1::text[], $2::bigint[]) AS h(id, attempt) ON x.id = h.id AND x.attempt = h.attempt
                 WHERE x.lease_worker = $4 AND x.status = 'running'
                 ORDER BY x.id
                   FOR UPDATE OF x)
RETURNING s.id;

-- name: cancel_requested_after
-- A request that aborts the step in flight: a session's cancel, a run's stop (discarded, its course deleted).
SELECT EXISTS (SELECT 1 FROM events WHERE stream_id = $1 AND seq > $2
                                      AND type IN ('session.cancel_requested', 'run.stop_requested'));

-- name: token_insert
INSERT INTO api_tokens (id, owner_id, token_hash) VALUES ($1, $2, $3);

-- name: token_owner
-- The owner of an active token. Only hashes are stored, so the lookup is by hash.
SELECT owner_id FROM api_tokens WHERE token_hash = $1 AND revoked_at IS NULL;

-- name: token_revoke
-- By id, or (when $2 is given) by the full token's hash. A second revoke matches nothing.
UPDATE api_tokens SET revoked_at = now()
 WHERE revoked_at IS NULL AND id = $1 AND ($2::bytea IS NULL OR token_hash = $2)
RETURNING id;

-- name: ping
SELECT 1;

-- name: projection_predecessors
-- For each (stream $1[i], seq $2[i], cursor ($3[i], $4[i], $5[i])): the predecessors of that event whose own cursor
-- lies beyond it, walking back from seq - 1 while that holds (see openmaic/projections/ordering.py). Usually empty.
-- Read-only over committed rows, keyed by UNIQUE (stream_id, seq): safe under any concurrency.
WITH RECURSIVE back AS (
    SELECT e.stream_id, e.seq, p.ep0, p.tx0, p.pos0
      FROM unnest($1::text[], $2::bigint[], $3::integer[], $4::text[], $5::bigint[]) AS p(sid, q, ep0, tx0, pos0)
      JOIN events e ON e.stream_id = p.sid AND e.seq = p.q - 1
     WHERE (e.epoch, e.tx, e.position) > (p.ep0, p.tx0::xid8, p.pos0)
    UNION ALL
    SELECT e.stream_id, e.seq, b.ep0, b.tx0, b.pos0
      FROM back b
      JOIN events e ON e.stream_id = b.stream_id AND e.seq = b.seq - 1
     WHERE (e.epoch, e.tx, e.position) > (b.ep0, b.tx0::xid8, b.pos0)
)
SELECT e.position, e.epoch, e.tx::text AS tx, e.stream_id, e.seq, e.type, e.v, e.data::text AS data, e.attempt,
       e.command_id, e.recorded_at, e.hash
  FROM back b JOIN events e ON e.stream_id = b.stream_id AND e.seq = b.seq;

-- name: projection_gaps
-- Events by (stream, seq range): predecessors to pull forward. Every one is committed (a stream's seq order is
-- its commit order, and a later seq of the stream is visible), so a plain read finds them.
SELECT e.position, e.epoch, e.tx::text AS tx, e.stream_id, e.seq, e.type, e.v, e.data::text AS data, e.attempt,
       e.command_id, e.recorded_at, e.hash
  FROM unnest($1::text[], $2::bigint[], $3::bigint[]) AS g(sid, lo, hi)
  JOIN events e ON e.stream_id = g.sid AND e.seq BETWEEN g.lo AND g.hi;

-- name: projection_checkpoint_init
INSERT INTO projection_checkpoints (name) VALUES ($1) ON CONFLICT (name) DO NOTHING;

-- name: projection_checkpoint
SELECT generation, epoch, tx::text AS tx, position, events_applied FROM projection_checkpoints WHERE name = $1;

-- name: projection_early
SELECT stream_id, seq FROM projection_early WHERE name = $1;

-- name: projection_advance
-- First statement of every batch's transaction: the checkpoint fence (see openmaic_projection_advance in 0004, 0009,
-- 0014).
SELECT openmaic_projection_advance($1, $2, $3, $4::text::xid8, $5, $6, $7::text::xid8, $8, $9, $10);

-- name: projection_dead_letter
-- An event a projection cannot apply, recorded in the batch that moves its checkpoint past it (0013).
INSERT INTO projection_dead_letters (projection, stream_id, seq, epoch, tx, position, type, error, sqlstate)
VALUES ($1, $2, $3, $4, $5::text::xid8, $6, $7, $8, $9)
ON CONFLICT (projection, stream_id, seq)
    DO UPDATE SET error = EXCLUDED.error, sqlstate = EXCLUDED.sqlstate,
                  failures = projection_dead_letters.failures + 1, last_at = now();

-- name: projection_early_add
INSERT INTO projection_early (name, stream_id, seq) SELECT $1, s, q FROM unnest($2::text[], $3::bigint[]) AS u(s, q);

-- name: projection_early_remove
DELETE FROM projection_early p USING unnest($2::text[], $3::bigint[]) AS u(s, q)
 WHERE p.name = $1 AND p.stream_id = u.s AND p.seq = u.q;

-- name: projection_try_lock
-- Session-level and non-blocking: a held connection must never wait on a lock (its statements are shielded).
SELECT pg_try_advisory_lock($1);

-- name: projection_unlock
SELECT pg_advisory_unlock($1);

-- name: projection_status
-- Per projection: its checkpoint, how many events lie beyond it and how old the oldest of them is, and the
-- backend holding its advisory locks (bigint keys show in pg_locks as classid = high half, objid = low half).
SELECT n.name, c.epoch, c.tx::text AS tx, c.position, c.events_applied, c.updated_at,
       lag.events AS lag_events, extract(epoch FROM now() - lag.oldest) AS lag_s,
       (SELECT min(l.pid) FROM pg_locks l
         WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
           AND ((l.classid::bigint << 32) | l.objid::bigint) = n.own_key) AS holder_pid,
       (SELECT min(l.pid) FROM pg_locks l
         WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
           AND ((l.classid::bigint << 32) | l.objid::bigint) = n.rebuild_key) AS rebuild_pid
  FROM unnest($1::text[], $2::bigint[], $3::bigint[]) AS n(name, own_key, rebuild_key)
  LEFT JOIN projection_checkpoints c ON c.name = n.name
  LEFT JOIN LATERAL (
      SELECT count(*) AS events, min(e.recorded_at) AS oldest FROM events e
       WHERE (e.epoch, e.tx, e.position) > (coalesce(c.epoch, 0), coalesce(c.tx, '0'::xid8), coalesce(c.position, 0))
  ) lag ON true;

-- name: append_readback
-- After an append call lost its connection: the last $2[i] + $3 events of stream $1[i], with their attempt and
-- writing transaction, so that the group commit can tell whether the call's one transaction committed before the
-- loss (its events are there, all in one transaction) and answer each of its requests accordingly. A plain read of
-- committed rows: what it does not find either never committed or was pushed out of the window by later appends,
-- and the caller then gets the lost connection's error, as before.
SELECT r.i::int AS i, e.seq, e.type, e.data::text AS data, e.attempt, e.tx::text AS tx
  FROM unnest($1::text[], $2::int[]) WITH ORDINALITY AS r(stream_id, n, i)
 CROSS JOIN LATERAL (SELECT seq, type, data, attempt, tx FROM events
                      WHERE events.stream_id = r.stream_id
                      ORDER BY seq DESC LIMIT r.n + $3) e
 ORDER BY r.i, e.seq;

-- name: append_group
-- Several independent append requests in one statement, one transaction (openmaic_append_group in 0005):
-- $1[r] streams and $2[r] events of the column arrays belong to request r. One row per stream of each request
-- that committed (status 'ok' or 'replayed'), one row with the SQLSTATE, message and detail of each that failed.
SELECT req, status, stream_id, first_seq, last_seq, message, detail
  FROM openmaic_append_group($1::int[], $2::int[], $3::text[], $4::text[], $5::text[], $6::bigint[], $7::bigint[],
                             $8::text[], $9::text[], $10::boolean[], $11::timestamptz[], $12::boolean[],
                             $13::boolean[], $14::int[], $15::text[], $16::int[], $17::text[]);

-- name: audit_ranges
-- Each stream's seq range to export: all of it, or (with $2 / $3) from its first event recorded at or after $2
-- to its last recorded before $3. One statement, one snapshot: a stream's events up to the head_seq read here
-- are committed (they were written in the same transaction as that head), so later pages find every one.
SELECT s.id, s.head_seq,
       CASE WHEN $2::timestamptz IS NULL THEN 1
            ELSE (SELECT min(e.seq) FROM events e
                   WHERE e.stream_id = s.id AND e.seq <= s.head_seq AND e.recorded_at >= $2) END AS lo,
       CASE WHEN $3::timestamptz IS NULL THEN s.head_seq
            ELSE (SELECT max(e.seq) FROM events e
                   WHERE e.stream_id = s.id AND e.seq <= s.head_seq AND e.recorded_at < $3) END AS hi
  FROM streams s
 WHERE s.id = ANY($1::text[]);

-- name: audit_hashes
-- The hash of (stream $1[i], seq $2[i]): the prev_hash of an export that starts after seq 1.
SELECT e.stream_id, e.hash
  FROM unnest($1::text[], $2::bigint[]) AS u(s, q)
  JOIN events e ON e.stream_id = u.s AND e.seq = u.q;

-- name: audit_page
-- One page of an export: the seq ranges [$2[i], $3[i]] of streams $1[i], in that order, each in seq order.
-- Seqs are gap-free, so the page's size is known before it is read; each range is an index range scan.
SELECT r.ord, e.seq, e.type, e.v, e.recorded_at, e.attempt, e.command_id, e.data::text AS data, e.hash
  FROM unnest($1::text[], $2::bigint[], $3::bigint[]) WITH ORDINALITY AS r(sid, lo, hi, ord)
  JOIN events e ON e.stream_id = r.sid AND e.seq BETWEEN r.lo AND r.hi
 ORDER BY r.ord, e.seq;

-- name: command_previous
-- The event a command id already wrote on a stream (its seq and type), if any, and the last seq the command wrote
-- there (command_last_seq; written before 0008: the stream's last event of its transaction).
SELECT e.seq, e.type,
       coalesce(e.command_last_seq,
                (SELECT max(x.seq) FROM events x WHERE x.stream_id = e.stream_id AND x.tx = e.tx)) AS last_seq
  FROM events e WHERE e.stream_id = $1 AND e.command_id = $2 ORDER BY e.seq LIMIT 1;

-- name: events_count
SELECT count(*) FROM events;

-- name: owner_stream_ids
SELECT id FROM streams WHERE owner_id = $1 ORDER BY id;

-- name: database_now
-- The database's clock: deadlines it judges (wake_at against now()) are set from it.
SELECT clock_timestamp();

-- name: library_cards_of_owner
-- A page, newest first, after the card ($2, $3) when given (keyset); $4 NULL: every card.
SELECT course_id, title, run_id, run_state, label, scenes_total, scenes_completed, updated_at
  FROM library_cards
 WHERE owner_id = $1 AND ($2::timestamptz IS NULL OR (updated_at, course_id) < ($2::timestamptz, $3::text))
 ORDER BY updated_at DESC, course_id DESC
 LIMIT $4;

-- name: asset_insert
INSERT INTO assets (id, owner_id, media_type, size, sha256, data) VALUES ($1, $2, $3, $4, $5, $6);

-- name: material_insert
INSERT INTO materials (id, owner_id, filename, media_type, size, text, asset_id, characters, excerpt, pages)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
RETURNING id, filename, media_type, size, text, asset_id, created_at, characters, excerpt, pages;

-- name: material_get
SELECT id, filename, media_type, size, text, asset_id, created_at, characters, excerpt, pages
  FROM materials WHERE id = $1 AND owner_id = $2;

-- name: materials_of_owner
-- Not the text: a page of 200 materials of up to a million characters each would be read for their summaries.
SELECT id, filename, media_type, size, asset_id, created_at, characters, excerpt, pages FROM materials
 WHERE owner_id = $1 AND ($3::text IS NULL OR id < $3)
 ORDER BY id DESC
 LIMIT $2;

-- name: material_delete
-- The asset of an image stays: runs that read the material before it was deleted still show it to the model.
DELETE FROM materials WHERE id = $1 AND owner_id = $2 RETURNING id;

-- name: materials_usage
-- Run under the owner's materials lock, so no upload of this owner can commit between this and its insert.
SELECT count(*) AS count, coalesce(sum(size), 0) AS bytes FROM materials WHERE owner_id = $1;

-- name: material_sizes
SELECT id, size FROM materials WHERE owner_id = $1 AND id = ANY($2::text[]);

-- name: material_texts
-- Read by a run's steps, whose owner may have been claimed into an account since they folded it (openmaic_owner).
SELECT id, filename, media_type, text, asset_id FROM materials
 WHERE owner_id = openmaic_owner($1) AND id = ANY($2::text[]);

-- name: asset_get
SELECT media_type, data FROM assets WHERE id = $1 AND owner_id = $2;

-- name: assets_for_model
-- Image assets of an owner, in the order asked for, skipping any larger than $3 bytes (models refuse them).
-- Read by a run's steps (their owner through openmaic_owner: it may have been claimed since they folded it).
SELECT a.media_type, a.data
  FROM unnest($2::text[]) WITH ORDINALITY AS w(id, ord)
  JOIN assets a ON a.id = w.id AND a.owner_id = openmaic_owner($1) AND a.media_type LIKE 'image/%' AND a.size <= $3
 ORDER BY w.ord;

-- name: asset_owner_lock
-- Serializes one owner's asset writes for the rest of the transaction, so the quota below is judged on a
-- snapshot (taken by the next statement) that already holds every write committed before ours. The owner is
-- the one the id stands for now (openmaic_owner): a media step may have folded an owner since claimed into an
-- account, whose writes this one must queue behind.
SELECT pg_advisory_xact_lock(hashtextextended('openmaic.assets:' || openmaic_owner($1), 0));

-- name: asset_put_within_quota
-- A content-addressed asset: an existing row with this id is the answer (no bytes written, no quota used);
-- otherwise the insert happens only while the owner's assets stay within $9 bytes. Run after
-- asset_owner_lock in the same transaction. Existing rows and usage are the current owner's (openmaic_owner);
-- the insert names $2 and the owner fence writes it under the current owner too.
WITH existing AS (SELECT id FROM assets WHERE id = $1 AND owner_id = openmaic_owner($2)),
     used AS (SELECT coalesce(sum(size), 0)::bigint AS bytes FROM assets WHERE owner_id = openmaic_owner($2)),
     inserted AS (
       INSERT INTO assets (id, owner_id, media_type, size, sha256, data, kind, course_id)
       SELECT $1, $2, $3, $4::int, $5, $6, $7, $8 FROM used
        WHERE NOT EXISTS (SELECT 1 FROM existing) AND used.bytes + $4::int <= $9::bigint
       ON CONFLICT (id) DO NOTHING
       RETURNING id)
SELECT (SELECT id FROM existing) AS existing, (SELECT id FROM inserted) AS inserted,
       (SELECT bytes FROM used) AS used;

-- name: asset_head
SELECT id, media_type, size, sha256, kind, course_id, created_at FROM assets WHERE id = $1 AND owner_id = $2;

-- name: asset_range
-- Bytes [$3, $3 + $4) of an owner's asset (substring is 1-based).
SELECT substring(data FROM $3::int + 1 FOR $4::int) AS data FROM assets WHERE id = $1 AND owner_id = $2;

-- name: storage_asset_get
SELECT bytes_id, media_type, size, revision FROM storage_assets WHERE id = $1 AND owner_id = $2;

-- name: storage_asset_insert
-- A new registry entry, only while the owner's entries stay within $7 bytes. Run after asset_owner_lock in the
-- same transaction, so the usage counted includes every entry committed before.
WITH used AS (SELECT coalesce(sum(size), 0)::bigint AS bytes FROM storage_assets
               WHERE owner_id = openmaic_owner($2)),
     inserted AS (
       INSERT INTO storage_assets (id, owner_id, bytes_id, media_type, size, meta)
       SELECT $1, $2, $3, $4, $5, $6::json FROM used WHERE used.bytes + $5 <= $7::bigint
       RETURNING id)
SELECT (SELECT id FROM inserted) AS inserted, (SELECT bytes FROM used) AS used;

-- name: storage_asset_replace
-- New bytes for an entry (and new metadata when $6 is not NULL), its revision one more, only while the owner's
-- entries stay within $7 bytes with the new size in place of the old. After asset_owner_lock.
WITH current AS (SELECT size FROM storage_assets WHERE id = $1 AND owner_id = $2),
     used AS (SELECT coalesce(sum(size), 0)::bigint AS bytes FROM storage_assets
               WHERE owner_id = openmaic_owner($2)),
     updated AS (
       UPDATE storage_assets a
          SET bytes_id = $3, media_type = $4, size = $5, meta = coalesce($6::json, a.meta),
              revision = a.revision + 1, updated_at = now()
         FROM used, current
        WHERE a.id = $1 AND a.owner_id = $2 AND used.bytes - current.size + $5 <= $7::bigint
       RETURNING a.revision)
SELECT (SELECT revision FROM updated) AS revision, EXISTS (SELECT 1 FROM current) AS present,
       (SELECT bytes FROM used) AS used;

-- name: storage_asset_delete
DELETE FROM storage_assets WHERE id = $1 AND owner_id = $2;

-- name: assets_used
SELECT coalesce(sum(size), 0)::bigint AS bytes, count(*)::int AS count FROM assets WHERE owner_id = $1;

-- name: agent_insert
-- Nothing when the owner already has the id (AGENT_EXISTS).
INSERT INTO agents (id, owner_id, name, role, persona, profile) VALUES ($1, $2, $3, $4, $5, $6::jsonb)
ON CONFLICT (owner_id, id) DO NOTHING
RETURNING id;

-- name: agent_update
UPDATE agents SET name = $3, role = $4, persona = $5, profile = $6::jsonb, updated_at = now()
 WHERE id = $1 AND owner_id = $2
RETURNING id;

-- name: agent_delete
DELETE FROM agents WHERE id = $1 AND owner_id = $2 RETURNING id;

-- name: agents_count
-- Run under the owner's agents lock, so no other write of this owner's agents commits in between.
SELECT count(*) AS count FROM agents WHERE owner_id = $1;

-- name: agents_by_ids
-- Also read by a run's agents step, through openmaic_owner: its owner may have been claimed since it folded it.
SELECT id, name, role, persona, profile::text AS profile FROM agents
 WHERE owner_id = openmaic_owner($1) AND id = ANY($2::text[]);

-- name: agents_of_owner
-- A page in the order they were created, after the agent ($2, $3) when given (keyset).
SELECT id, name, role, persona, profile::text AS profile, created_at FROM agents
 WHERE owner_id = $1 AND ($2::timestamptz IS NULL OR (created_at, id) > ($2::timestamptz, $3::text))
 ORDER BY created_at, id
 LIMIT $4;

-- name: owner_try_lock
-- The lock in namespace $1, for this transaction, of the owner $2 stands for now (openmaic_owner: the counts made
-- under it read through it too; see openmaic_owner_try_lock in 0020); false when another transaction holds it, or a
-- claim of $2 is committing (poll again).
SELECT openmaic_owner_try_lock($1::int, $2);

-- name: runs_executing
-- Executing runs of an owner other than $2: running under a live lease, admitted in their current attempt. Run
-- under the owner lock, so no admission of this owner can commit between this count and our own append. An
-- orphan (lease expired) is not counted: its next attempt has to be admitted again anyway. The owner is read
-- through openmaic_owner: a run's fold may name an owner claimed into an account since.
SELECT count(*) AS active, clock_timestamp() AS now
  FROM streams s
 WHERE s.owner_id = openmaic_owner($1) AND s.kind = 'generation' AND s.status = 'running' AND s.id <> $2
   AND s.lease_expires_at > now()
   AND EXISTS (SELECT 1 FROM events e
                WHERE e.stream_id = s.id AND e.type = 'run.admitted' AND e.attempt = s.attempt);

-- name: workbench_sessions_of_owner
-- A page, newest first, after the session ($3, $4) when given (keyset).
SELECT id, head_seq, attempt, status, created_at, updated_at FROM streams
 WHERE owner_id = $1 AND kind = 'workbench' AND deleted_at IS NULL
   AND ($3::timestamptz IS NULL OR (created_at, id) < ($3::timestamptz, $4::text))
 ORDER BY created_at DESC, id DESC
 LIMIT $2;

-- name: workbench_sessions_usage
-- Run under the owner's sessions lock (openmaic.quotas), so no start of this owner commits in between.
SELECT count(*) AS count FROM streams WHERE owner_id = $1 AND kind = 'workbench' AND deleted_at IS NULL;

-- name: session_messages_usage
-- Run under the session's messages lock (openmaic.quotas), so no message to it commits in between.
SELECT count(*) AS count FROM events WHERE stream_id = $1 AND type = 'session.message_posted';

-- name: runs_in_progress
-- An owner's runs that have not ended, oldest first (a run's own events say whether it is ending).
-- A page after the run ($2, $3) when given (keyset); $4 NULL: every one.
SELECT id, head_seq, status, attempt, created_at, updated_at FROM streams
 WHERE owner_id = $1 AND kind = 'generation' AND status <> 'terminal' AND deleted_at IS NULL
   AND ($2::timestamptz IS NULL OR (created_at, id) > ($2::timestamptz, $3::text))
 ORDER BY created_at, id
 LIMIT $4;

-- name: runs_of_owner_by_status
-- An owner's runs other than $2 that count against its limits: active ones are queued or running (preparing,
-- outlining, generating), waiting ones hold no worker until a command (awaiting confirmation, paused). Run under
-- the owner's run lock, so no start or command of this owner can commit between this count and its append.
SELECT count(*) FILTER (WHERE status IN ('queued', 'running')) AS active,
       count(*) FILTER (WHERE status = 'waiting') AS waiting
  FROM streams
 WHERE owner_id = $1 AND kind = 'generation' AND id <> $2 AND status <> 'terminal' AND deleted_at IS NULL;

-- name: table_exists
SELECT to_regclass($1) IS NOT NULL;

-- name: advisory_unlock_all
SELECT pg_advisory_unlock_all();

-- name: ping
SELECT 1;

-- name: session_bounds
-- The bounds in effect on this session, in their base unit (milliseconds), checked at start: a pooler may have
-- dropped the startup parameters that set them (openmaic.store.pooler).
SELECT name, setting FROM pg_settings WHERE name = ANY($1::text[]);

-- name: rebuild_leftover_tables
-- Copies an unfinished rebuild left behind: "<table>__rb<suffix>" ($1 is the LIKE pattern, "_" escaped).
SELECT tablename FROM pg_tables WHERE schemaname = current_schema() AND tablename LIKE $1;

-- name: table_indexes
SELECT indexname FROM pg_indexes WHERE schemaname = current_schema() AND tablename = $1;

-- name: drop_table
-- This and the renames below take identifiers of a projection's tables and indexes, which the code builds
-- (never user input); they are filled in with str.format.
DROP TABLE IF EXISTS {table};

-- name: rename_table
ALTER TABLE {table} RENAME TO {new_name};

-- name: rename_index
ALTER INDEX {index} RENAME TO {new_name};

-- name: swap_lock_timeout
-- A swap waits this long for readers of the old tables, then fails cleanly instead of queueing every later
-- reader behind its exclusive lock.
SET LOCAL lock_timeout = '{timeout}';

-- name: projection_checkpoint_delete
DELETE FROM projection_checkpoints WHERE name = $1;

-- name: projection_checkpoint_rename
UPDATE projection_checkpoints SET name = $1, updated_at = now() WHERE name = $2;

-- name: projection_early_delete
DELETE FROM projection_early WHERE name = $1;

-- name: projection_early_rename
UPDATE projection_early SET name = $1 WHERE name = $2;

-- name: notify_many
-- One NOTIFY per payload on channel $1, in one statement (the hints of a flush), committed without waiting for
-- the WAL flush: NOTIFY gives its transaction an id, so a durable commit would cost an fsync per flush, queued
-- behind (and ahead of) the appends' own. Listeners are signalled at commit either way; what a crash can lose is
-- only the hint, which it loses anyway (notifications are never durable), and every waiter also polls.
SELECT pg_notify($1, p)
  FROM (SELECT set_config('synchronous_commit', 'off', true)) AS unflushed, unnest($2::text[]) AS p;

-- name: migrations_table
-- The record of applied migrations (made by the migrator itself, before any migration runs).
CREATE TABLE IF NOT EXISTS openmaic_migrations (
    version    integer PRIMARY KEY,
    name       text NOT NULL,
    checksum   text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
);

-- name: migrations_applied
SELECT version, checksum FROM openmaic_migrations ORDER BY version;

-- name: migrations_lock
-- Serializes migrators for the transaction; the re-check under it makes each file run exactly once.
SELECT pg_advisory_xact_lock($1);

-- name: migration_unbounded
-- A migration may rewrite or index the whole log: the statement bound of our sessions does not apply to it.
SET LOCAL statement_timeout = 0;

-- name: migration_applied
SELECT 1 FROM openmaic_migrations WHERE version = $1;

-- name: migration_record
INSERT INTO openmaic_migrations (version, name, checksum) VALUES ($1, $2, $3);

-- ---- OpenMAIC's browser persistence (openmaic/persistence/): client ids → streams (migration 0015) ----------------

-- name: browser_document_find
-- The course a client's document id names for this owner: the oldest row keeps the id (see migration 0015).
SELECT course_id, folder_id FROM browser_documents WHERE owner_id = $1 AND document_id = $2
 ORDER BY created_at, course_id LIMIT 1;

-- name: browser_document_insert
INSERT INTO browser_documents (course_id, owner_id, document_id, title) VALUES ($1, $2, $3, $4);

-- name: browser_document_bury
-- A deleted document's id is free again: its row is filed under the tombstone key $2 (which no client id can be:
-- it starts with U+001F), so the next save creates a new course while the importer still finds the deleted one.
UPDATE browser_documents SET document_id = $2, updated_at = now() WHERE course_id = $1;

-- name: browser_documents_bytes
-- What one document ($2) and all the owner's live documents take (limits.document_bytes_per_owner); own is NULL
-- for a course without a document row (a generated one).
SELECT (SELECT bytes FROM browser_documents WHERE course_id = $2) AS own,
       (SELECT coalesce(sum(bytes), 0) FROM browser_documents
         WHERE owner_id = $1 AND left(document_id, 1) <> E'\x1f') AS used;

-- name: browser_document_set_bytes
UPDATE browser_documents SET bytes = $2 WHERE course_id = $1;

-- name: browser_document_retitle
UPDATE browser_documents SET title = $2, updated_at = now() WHERE course_id = $1;

-- name: browser_document_file
UPDATE browser_documents SET folder_id = $2, updated_at = now() WHERE course_id = $1;

-- name: browser_documents_of_owner
-- The owner's document courses, but those deleted since (course_documents is the documents projection's live
-- table; a course it has not folded yet is not deleted, so a document just written is listed at once).
SELECT b.course_id, b.document_id, b.title, b.folder_id, b.updated_at
  FROM browser_documents b
 WHERE b.owner_id = $1 AND left(b.document_id, 1) <> E'\x1f'
   AND NOT EXISTS (SELECT 1 FROM course_documents d WHERE d.course_id = b.course_id AND d.deleted)
 ORDER BY b.updated_at DESC, b.course_id;

-- name: course_streams_of_owner
-- Every course of an owner's, deleted or not (streams_owner index), for the document listing.
SELECT id FROM streams WHERE owner_id = $1 AND kind = 'course' ORDER BY created_at, id;

-- name: runtime_session_find
SELECT stream_id FROM runtime_sessions WHERE owner_id = $1 AND session_id = $2
 ORDER BY created_at, stream_id LIMIT 1;

-- name: runtime_session_insert
INSERT INTO runtime_sessions (stream_id, owner_id, session_id, stage_id, learner_key, session, created_instant)
VALUES ($1, $2, $3, $4, $5, $6::json, $7);

-- name: runtime_session_head
-- A session's head (migration 0021); written under the owner's persistence lock, read with or without it.
SELECT stream_id, session::text AS session, last_seq, records, record_bytes, last_record::text AS last_record
  FROM runtime_sessions WHERE owner_id = $1 AND session_id = $2
 ORDER BY created_at, stream_id LIMIT 1;

-- name: runtime_session_tail
-- The last $3 events of type $2 of stream $1 (a session's last records), newest first: a backward scan of the
-- (stream_id, seq) key that stops at the LIMIT, however long the stream.
SELECT position, epoch, tx::text AS tx, stream_id, seq, type, v, data::text AS data, attempt, command_id,
       recorded_at, hash
  FROM events WHERE stream_id = $1 AND type = $2
 ORDER BY seq DESC LIMIT $3;

-- name: database_clock
-- The database's clock: the one clock every process agrees on (a lease written by one process is judged by another).
SELECT clock_timestamp();

-- name: runtime_session_set_head
UPDATE runtime_sessions
   SET session = $2::json, last_seq = $3, records = $4, record_bytes = $5, last_record = $6::json
 WHERE stream_id = $1;

-- name: runtime_session_fill_head
-- The head of a session written before heads were kept, folded from its stream: only while it is still empty, so
-- a reader's fold never overwrites what a writer (holding the owner's lock) wrote since.
UPDATE runtime_sessions
   SET session = $2::json, last_seq = $3, records = $4, record_bytes = $5, last_record = $6::json,
       created_instant = $7
 WHERE stream_id = $1 AND session IS NULL;

-- name: runtime_session_rekey
UPDATE runtime_sessions SET learner_key = $2 WHERE stream_id = $1;

-- name: runtime_session_delete
DELETE FROM runtime_sessions WHERE stream_id = $1;

-- name: runtime_sessions_count
SELECT count(*) FROM runtime_sessions WHERE owner_id = $1;

-- name: runtime_records_of_owner
-- What an owner's sessions hold (the runtime quotas): one row per session, read through runtime_sessions_owner.
SELECT coalesce(sum(records), 0) AS count, coalesce(sum(record_bytes), 0) AS bytes
  FROM runtime_sessions WHERE owner_id = $1;

-- name: runtime_session_streams_by_id
SELECT stream_id, session_id FROM runtime_sessions WHERE owner_id = $1 AND session_id = $2;

-- name: runtime_session_streams
-- An owner's sessions on stage $2 (NULL: every stage) under learner key $3 (NULL: every key) or any of the keys
-- $4 it stands for (as in runtime_sessions_of_stage).
SELECT stream_id, session_id FROM runtime_sessions
 WHERE owner_id = $1 AND ($2::text IS NULL OR stage_id = $2)
   AND ($3::text IS NULL OR learner_key = $3 OR learner_key = ANY($4::text[]))
 ORDER BY created_at, stream_id;

-- name: runtime_sessions_of_stage
-- A partition's sessions in the contract's order (the instant of createdAt, then the id; heads not filled in yet
-- come last): those filed under the learner key $3 or under any of the keys $7 stands for (an owner's own key also
-- names the keys its sessions were filed under before: the owner id itself, and the ids and keys of the anonymous
-- owners claimed into it, whose sessions moved with the claim and keep their key). A page after ($5, $6) when given.
SELECT session_id, session::text AS session, created_instant FROM runtime_sessions
 WHERE owner_id = $1 AND stage_id = $2
   AND (learner_key = $3 OR learner_key = ANY($7::text[]))
   AND ($5::timestamptz IS NULL OR (created_instant, session_id) > ($5::timestamptz, $6::text))
 ORDER BY created_instant NULLS LAST, session_id LIMIT $4;

-- name: library_folders_of_owner
SELECT id, name, position, created_at, updated_at FROM library_folders WHERE owner_id = $1 ORDER BY position, id;

-- name: library_folder_insert
INSERT INTO library_folders (id, owner_id, name, position) VALUES ($1, $2, $3, $4)
RETURNING id, name, position, created_at, updated_at;

-- name: anonymous_client_seen
-- The client address an anonymous owner was last seen from: its streams' share of the workers' slots
-- (openmaic_claim, 0017). Written only when it changed.
INSERT INTO anonymous_clients (owner_id, share_key) VALUES ($1, $2)
ON CONFLICT (owner_id) DO UPDATE SET share_key = EXCLUDED.share_key, seen_at = now()
 WHERE anonymous_clients.share_key IS DISTINCT FROM EXCLUDED.share_key;

-- name: replica_primary_lsn
-- On the primary: where its WAL is flushed up to now, past the commit record of every durably committed
-- transaction a reader can have seen (such a commit is flushed before it becomes visible). Not the insert
-- position: that also counts records not yet flushed (an asynchronous commit's, like the NOTIFY hints'), which a
-- walsender does not send before the WAL writer flushes them, up to 3 x wal_writer_delay later: a wait for it
-- would run out on a replica that holds everything the reader needs.
SELECT pg_current_wal_flush_lsn()::text;

-- name: replica_replayed
-- On the replica: whether it has replayed the WAL up to $1. A server that is not in recovery (a promoted standby,
-- or DATABASE_REPLICA_URL naming a primary) has everything it has: its own insert position. COALESCE evaluates
-- its second argument only when the first is NULL (pg_current_wal_insert_lsn raises during recovery).
SELECT coalesce(pg_last_wal_replay_lsn(), pg_current_wal_insert_lsn()) >= $1::text::pg_lsn;

-- name: replica_status
-- On the replica, for /readyz: whether it is a standby, how many WAL bytes it trails the primary's position $1
-- by, and whether its replay is paused (NULL on a primary, where the function raises).
SELECT pg_is_in_recovery() AS standby,
       pg_wal_lsn_diff($1::text::pg_lsn,
                       coalesce(pg_last_wal_replay_lsn(), pg_current_wal_insert_lsn()))::bigint AS behind,
       CASE WHEN pg_is_in_recovery() THEN pg_get_wal_replay_pause_state() END AS pause;
