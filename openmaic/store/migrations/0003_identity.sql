-- Bearer tokens for identity.mode = token. Only the sha256 of a token is stored; the token itself is shown once.
CREATE TABLE api_tokens (
    id          text PRIMARY KEY,
    owner_id    text NOT NULL,
    token_hash  bytea NOT NULL UNIQUE,
    created_at  timestamptz NOT NULL DEFAULT now(),
    revoked_at  timestamptz
);

CREATE INDEX api_tokens_owner ON api_tokens (owner_id);
