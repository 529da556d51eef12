-- OpenMAIC's asset contract (/api/persistence/assets): a registry of ids, each its owner's, naming bytes.
--
-- An entry's id is `ast_` + 26 lowercase base-32 characters (128 random bits): every upload is a new entry, even
-- of bytes already stored. The bytes themselves are a row of `assets` (kind 'upload'), content-addressed per
-- owner, so the same bytes uploaded twice by one owner are stored once; the hash never leaves the database.
-- `meta` is the metadata object the client sent (kept verbatim, never answered); `revision` starts at 1 and every
-- PUT of new content adds one. A deleted entry is gone; its bytes stay for an offline collector.
ALTER TABLE assets DROP CONSTRAINT assets_kind_check;
ALTER TABLE assets ADD CONSTRAINT assets_kind_check
    CHECK (kind IN ('material', 'image', 'video', 'poster', 'narration', 'upload'));

CREATE TABLE storage_assets (
    id          text PRIMARY KEY,
    owner_id    text NOT NULL,
    bytes_id    text NOT NULL,
    media_type  text NOT NULL,
    size        bigint NOT NULL,
    meta        json NOT NULL,
    revision    integer NOT NULL DEFAULT 1,
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX storage_assets_owner ON storage_assets (owner_id);

CREATE TRIGGER openmaic_owner_fence BEFORE INSERT ON storage_assets
    FOR EACH ROW EXECUTE FUNCTION openmaic_owner_fence();

-- What an owner's saved documents take (limits.document_bytes_per_owner), each as its JSON.
ALTER TABLE browser_documents ADD COLUMN bytes bigint NOT NULL DEFAULT 0;
