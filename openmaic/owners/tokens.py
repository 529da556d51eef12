"""Bearer tokens: who holds which owner's key, stored as hashes only.

A token looks like ``tok_<12 hex>.<secret>``: the part before the dot is its id, safe to show in listings and to
revoke by; the whole token is shown once, when it is made (``openmaic tokens create``), and only its sha256 is
stored, so a copy of the database holds no usable credential. The API (:mod:`openmaic.api.identity`) asks
:func:`token_owner` who a presented token belongs to; the CLI makes and revokes tokens. Neither writes the SQL.
"""

from __future__ import annotations

import hashlib
import secrets

from openmaic.store.database import Database
from openmaic.store.queries import Q

__all__ = ["TOKEN_PREFIX", "create_token", "looks_like_token", "revoke_token", "token_id", "token_owner"]

TOKEN_PREFIX = "tok_"


def _hash(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()


def token_id(token: str) -> str:
    """The id part of a token (what listings show and ``revoke_token`` accepts)."""
    return token.split(".", 1)[0]


def looks_like_token(text: str) -> bool:
    """Whether ``text`` has this server's token form (cheap: it says nothing about whether the token is valid)."""
    return text.startswith(TOKEN_PREFIX)


async def create_token(db: Database, owner: str) -> str:
    """Create a bearer token for ``owner`` and return it. Only its hash is stored: show it once."""
    if not owner.strip():
        raise ValueError("the owner must not be empty")
    if owner[:5].lower() == "anon:":
        raise ValueError("the owner must not start with 'anon:', which names anonymous owners")
    ident = TOKEN_PREFIX + secrets.token_hex(6)
    token = f"{ident}.{secrets.token_urlsafe(32)}"
    await db.execute(Q.token_insert, ident, owner, _hash(token))
    return token


async def revoke_token(db: Database, token_or_id: str) -> bool:
    """Revoke a token given in full or by id. False when no active token matched (unknown or revoked already)."""
    ident = token_id(token_or_id)
    # A full token must match its hash, not only its id: knowing an id is no proof of holding the token.
    hashed = _hash(token_or_id) if "." in token_or_id else None
    revoked = await db.fetchval(Q.token_revoke, ident, hashed)
    return revoked is not None


async def token_owner(db: Database, token: str) -> str | None:
    """The owner of an active token, or None for an unknown or revoked one (the two are not told apart)."""
    return await db.fetchval(Q.token_owner, _hash(token))
