-- OpenMAIC's browser persistence routes (/api/persistence/*, /api/stages, /api/folders): the indexes that find a
-- client's own ids. What a client wrote lives in the event log (the course's, a runtime session's and a folder's
-- streams); these rows only map a client's id to its stream, and are written in the same transaction as the
-- events that create the stream.
--
-- A client's ids are scoped by owner: one owner's document "stage-1" neither blocks another's nor reveals that it
-- exists. So no row here is unique by a client id across owners, and not even within one: a claim merges an
-- anonymous owner's rows into an account that may hold the same ids, and a unique key would make that claim fail.
-- Lookups take the oldest row (the one written first keeps the id).

-- A course written as an OpenMAIC document: its document id, its title and its folder (null: not filed).
CREATE TABLE browser_documents (
    course_id   text PRIMARY KEY,
    owner_id    text NOT NULL,
    document_id text NOT NULL,
    title       text NOT NULL DEFAULT '',
    folder_id   text,
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX browser_documents_owner ON browser_documents (owner_id, document_id, created_at);

-- A learner runtime session (chat, quiz attempt, whiteboard, project): its stream holds the records.
CREATE TABLE runtime_sessions (
    stream_id   text PRIMARY KEY,
    owner_id    text NOT NULL,
    session_id  text NOT NULL,
    stage_id    text NOT NULL,
    learner_key text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX runtime_sessions_owner ON runtime_sessions (owner_id, session_id, created_at);
CREATE INDEX runtime_sessions_stage ON runtime_sessions (owner_id, stage_id, learner_key);

-- A library folder (its stream records its creation).
CREATE TABLE library_folders (
    id         text PRIMARY KEY,
    owner_id   text NOT NULL,
    name       text NOT NULL,
    position   integer NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX library_folders_owner ON library_folders (owner_id, position);

CREATE TRIGGER openmaic_owner_fence BEFORE INSERT ON browser_documents
    FOR EACH ROW EXECUTE FUNCTION openmaic_owner_fence();
CREATE TRIGGER openmaic_owner_fence BEFORE INSERT ON runtime_sessions
    FOR EACH ROW EXECUTE FUNCTION openmaic_owner_fence();
CREATE TRIGGER openmaic_owner_fence BEFORE INSERT ON library_folders
    FOR EACH ROW EXECUTE FUNCTION openmaic_owner_fence();
