-- The statements of the model_history projection (openmaic/projections/history.py).
-- Table names are templates ({model_history} is the physical name of the logical table model_history, filled in
-- per build with str.format_map), so a literal brace in a statement must be doubled.

-- name: create_model_history
CREATE TABLE {model_history} (
    session_id text NOT NULL,
    idx        integer NOT NULL,
    role       text NOT NULL,
    message    json NOT NULL,
    seq        bigint NOT NULL,
    PRIMARY KEY (session_id, idx)
);

-- name: create_model_history_pending
-- Posted user messages, staged until a model turn delivers them.
CREATE TABLE {model_history_pending} (
    session_id text NOT NULL,
    seq        bigint NOT NULL,
    text       text NOT NULL,
    PRIMARY KEY (session_id, seq)
);

-- name: load
-- For every session a batch touches: its last transcript index, and its pending messages (seqs and texts).
SELECT s.id,
       (SELECT max(h.idx) FROM {model_history} h WHERE h.session_id = s.id) AS last_idx,
       (SELECT array_agg(p.seq ORDER BY p.seq) FROM {model_history_pending} p WHERE p.session_id = s.id) AS seqs,
       (SELECT array_agg(p.text ORDER BY p.seq) FROM {model_history_pending} p WHERE p.session_id = s.id) AS texts
  FROM unnest($1::text[]) AS s(id);

-- name: insert_messages
INSERT INTO {model_history} (session_id, idx, role, message, seq)
SELECT * FROM unnest($1::text[], $2::int[], $3::text[], $4::json[], $5::bigint[]);

-- name: delete_pending
-- The stored pending messages a batch delivered ($1: session ids, $2: their seqs).
DELETE FROM {model_history_pending} p USING unnest($1::text[], $2::bigint[]) AS u(s, q)
WHERE p.session_id = u.s AND p.seq = u.q;

-- name: insert_pending
INSERT INTO {model_history_pending} (session_id, seq, text)
SELECT * FROM unnest($1::text[], $2::bigint[], $3::text[]);
