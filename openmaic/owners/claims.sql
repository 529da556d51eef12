-- The statements of claims (openmaic/owners/claims.py); the function and tables are migration 0010's.

-- name: claim_owner
-- $11..$14: the target's limits (agents, materials, material bytes, asset bytes); NULL: not enforced (0018).
SELECT outcome, moved::text AS moved, stream_ids
  FROM openmaic_claim_owner($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14);

-- name: claimed_into
-- The account an owner was claimed into, or nothing.
SELECT to_owner_id FROM owner_claims WHERE from_owner_id = $1;

-- name: claims_into
-- The owners claimed into $1 (one hop: claims never chain).
SELECT from_owner_id FROM owner_claims WHERE to_owner_id = $1;

-- name: owner_has_rows
-- Whether an owner holds a row in any table a claim moves (migration 0016).
SELECT openmaic_owner_has_rows($1);
