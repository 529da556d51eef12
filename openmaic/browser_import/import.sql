-- The statements of the browser import (openmaic/browser_import/service.py).

-- name: asset_import
-- Ids are derived from the browser's own record ids: an asset stored by an earlier import is kept as it is.
INSERT INTO assets (id, owner_id, media_type, size, sha256, data) VALUES ($1, $2, $3, $4, $5, $6)
ON CONFLICT (id) DO NOTHING;
