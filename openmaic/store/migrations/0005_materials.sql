-- Uploaded materials (text extracted on upload), the assets that hold binary uploads (images), and the owners'
-- custom classroom agents. All rows are owner-scoped: every read filters by owner_id, so another owner's row
-- looks exactly like a missing one.

CREATE TABLE assets (
    id          text PRIMARY KEY,
    owner_id    text NOT NULL,
    media_type  text NOT NULL,
    size        integer NOT NULL CHECK (size >= 0),
    sha256      bytea NOT NULL,
    data        bytea NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX assets_owner ON assets (owner_id, created_at);

CREATE TABLE materials (
    id          text PRIMARY KEY,
    owner_id    text NOT NULL,
    filename    text NOT NULL,
    media_type  text NOT NULL,
    size        integer NOT NULL CHECK (size >= 0),
    -- the extracted text ('' for images, whose bytes live in assets)
    text        text NOT NULL DEFAULT '',
    asset_id    text REFERENCES assets (id),
    created_at  timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX materials_owner ON materials (owner_id, created_at);

CREATE TABLE agents (
    id          text PRIMARY KEY,
    owner_id    text NOT NULL,
    name        text NOT NULL,
    role        text NOT NULL CHECK (role IN ('teacher', 'assistant', 'classmate')),
    persona     text NOT NULL DEFAULT '',
    created_at  timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX agents_owner ON agents (owner_id, created_at);
