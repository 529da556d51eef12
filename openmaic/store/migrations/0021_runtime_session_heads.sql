-- A learner runtime session's head, kept beside its stream and updated in the transaction of every write to it,
-- so that an append reads one row instead of folding the session's whole history: the session as it is now, the
-- tail its next record follows, and what it holds. Rows written before this migration have a NULL ``session``;
-- the first write or read that finds one folds its stream once and fills the head in (openmaic.browser_import
-- .runtime).
ALTER TABLE runtime_sessions
    ADD COLUMN session         json,
    ADD COLUMN created_instant timestamptz,
    ADD COLUMN last_seq        bigint,
    ADD COLUMN records         bigint NOT NULL DEFAULT 0,
    ADD COLUMN record_bytes    bigint NOT NULL DEFAULT 0,
    ADD COLUMN last_record     json;

-- A partition's sessions in the contract's order: the instant of createdAt, then the id.
CREATE INDEX runtime_sessions_partition
    ON runtime_sessions (owner_id, stage_id, learner_key, created_instant, session_id);
