-- An owner's model settings (the Models page): the same shape as openmaic.yml's providers and slots, with every
-- provider's key sealed separately (AES-256-GCM under the instance secret) in `secrets`, never in `config`.
-- One row per owner; every write is a compare-and-swap on `revision`.
CREATE TABLE model_settings (
    owner_id    text PRIMARY KEY,
    config      jsonb NOT NULL,
    secrets     jsonb NOT NULL DEFAULT '{}'::jsonb,
    revision    integer NOT NULL CHECK (revision > 0),
    updated_at  timestamptz NOT NULL DEFAULT now()
);
