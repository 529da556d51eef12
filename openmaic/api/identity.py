"""Who is asking: the owner of each request, resolved per ``identity.mode``.

* ``single_user`` — every request belongs to ``identity.single_user_owner``.
* ``token`` — ``Authorization: Bearer <token>``. Tokens are made by ``openmaic tokens create`` and stored as
  sha256 hashes only; a missing, unknown or revoked token is a 401. A browser cannot set headers on a WebSocket,
  so a handshake may instead offer the subprotocols ``openmaic`` and ``bearer.<token>``; the server answers with
  ``openmaic`` (never echoing the token).
* ``trusted_header`` — the reverse proxy's ``identity.user_header``, believed only when the TCP peer is inside
  ``identity.trusted_proxies``; from anywhere else the header is ignored and the request is a 401.
* ``anonymous`` — a signed cookie: ``<owner id>.<HMAC-SHA256(key, owner id)>``, set on the first visit
  (400 days, HttpOnly, SameSite=Lax). A missing or forged cookie gets a fresh owner on HTTP; a WebSocket
  cannot set cookies, so there it is a 401. The key is ``identity.secret_key`` when set, else one derived from
  the instance secret (:func:`cookie_key`).

Tokens look like ``tok_<12 hex>.<secret>``: the part before the dot is the token's id, safe to show and to
revoke by.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import ipaddress
import secrets
from typing import Any

import quart

from openmaic.api.errors import Unauthorized
from openmaic.config import Config, IdentityConfig
from openmaic.modelconfig.secret_box import instance_key
from openmaic.store.database import Database
from openmaic.store.queries import Q

__all__ = [
    "COOKIE_MAX_AGE_S", "WS_PROTOCOL", "IdentityResolver", "accept_websocket", "create_token", "revoke_token",
    "token_id",
]  # fmt: skip

COOKIE_MAX_AGE_S = 400 * 24 * 3600
"""Browsers cap cookie lifetimes at 400 days; asking for more would be silently cut."""

WS_PROTOCOL = "openmaic"
"""The WebSocket subprotocol the server selects when a client offers it (see :func:`accept_websocket`)."""
_WS_BEARER = "bearer."
"""Prefix of the subprotocol that carries a bearer token on a WebSocket handshake."""

_TOKEN_PREFIX = "tok_"
_NEW_COOKIE = "openmaic_new_owner_cookie"  # the name under quart.g where a new anonymous cookie waits


async def accept_websocket(ws: Any) -> None:
    """Accept a WebSocket, selecting :data:`WS_PROTOCOL` when the client offered it: a browser that sent its token
    as a subprotocol drops a connection whose answer names none of the protocols it offered."""
    await ws.accept(subprotocol=WS_PROTOCOL if WS_PROTOCOL in ws.requested_subprotocols else None)


def _hash(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()


def token_id(token: str) -> str:
    """The id part of a token (what listings show and ``revoke_token`` accepts)."""
    return token.split(".", 1)[0]


async def create_token(db: Database, owner: str) -> str:
    """Create a bearer token for ``owner`` and return it. Only its hash is stored: show it once."""
    if not owner.strip():
        raise ValueError("the owner must not be empty")
    ident = _TOKEN_PREFIX + secrets.token_hex(6)
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


def cookie_key(config: Config) -> bytes | None:
    """The key that signs anonymous owners' cookies: ``identity.secret_key``, else (in anonymous mode) one derived
    from the instance secret, under a label of its own so it can never open a sealed key."""
    if config.identity.secret_key is not None:
        return config.identity.secret_key.reveal().encode()
    if config.identity.mode != "anonymous":
        return None
    return hashlib.sha256(b"openmaic.owner-cookie:" + instance_key(config.secret_key, config.server.data_dir).key).digest()


class IdentityResolver:
    """Resolves the owner of a request (or WebSocket handshake) according to the configured mode."""

    def __init__(self, config: IdentityConfig, db: Database, *, cookie_key: bytes | None = None) -> None:
        self.config = config
        self.db = db
        self._networks = config.proxy_networks()
        self._key = cookie_key or (config.secret_key.reveal().encode() if config.secret_key is not None else None)

    async def resolve(self, request: Any) -> str:
        """The owner of ``request`` (a quart Request or Websocket), or :class:`Unauthorized`."""
        mode = self.config.mode
        if mode == "single_user":
            return self.config.single_user_owner
        if mode == "token":
            return await self._from_token(request)
        if mode == "trusted_header":
            return self._from_proxy(request)
        return self._from_cookie(request)

    async def _from_token(self, request: Any) -> str:
        scheme, _, token = (request.headers.get("Authorization") or "").strip().partition(" ")
        token = token.strip()
        if not scheme and request.scope.get("type") == "websocket":
            # A browser's WebSocket cannot send headers: it offers the token as a subprotocol instead.
            offered = [p for p in request.requested_subprotocols if p.startswith(_WS_BEARER)]
            if offered:
                scheme, token = "bearer", offered[0][len(_WS_BEARER):]
        if scheme.lower() != "bearer" or not token:
            raise Unauthorized(
                "this server needs a bearer token: send 'Authorization: Bearer <token>' (on a WebSocket, or "
                "offer the subprotocols 'openmaic' and 'bearer.<token>'); an operator creates one with "
                "`openmaic tokens create --owner NAME`",
                challenge="Bearer",
            )
        owner = await self.db.fetchval(Q.token_owner, _hash(token))
        if owner is None:
            # One message for unknown and revoked: the answer must not tell which tokens exist.
            raise Unauthorized("the bearer token is unknown or has been revoked", challenge='Bearer error="invalid_token"')
        return owner

    def _from_proxy(self, request: Any) -> str:
        header = self.config.user_header
        client = request.scope.get("client")
        peer = client[0] if client else None
        if not self._trusted(peer):
            raise Unauthorized(
                f"identities are taken from {header} set by a trusted proxy, and this request did not come "
                "through one",
            )
        user = (request.headers.get(header) or "").strip()
        if not user:
            raise Unauthorized(f"the trusted proxy did not send {header}")
        return user

    def _trusted(self, peer: str | None) -> bool:
        if not peer:
            return False
        try:
            address = ipaddress.ip_address(peer.split("%", 1)[0])
        except ValueError:  # a Unix socket path, or nothing usable
            return False
        if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
            address = address.ipv4_mapped
        return any(address in net for net in self._networks)

    def _from_cookie(self, request: Any) -> str:
        owner = self.verify_cookie(request.cookies.get(self.config.cookie_name))
        if owner is not None:
            return owner
        if request.scope.get("type") == "websocket":
            raise Unauthorized("a WebSocket cannot set the owner cookie: visit any HTTP route first")
        owner = "anon_" + secrets.token_hex(16)
        # Set by the app's after-request hook, so that error responses carry it too.
        setattr(quart.g, _NEW_COOKIE, self.sign(owner))
        return owner

    def sign(self, owner: str) -> str:
        """The cookie value for ``owner``."""
        assert self._key is not None, "anonymous mode needs a cookie key (see cookie_key)"
        mac = hmac.new(self._key, owner.encode(), hashlib.sha256).digest()
        return f"{owner}.{base64.urlsafe_b64encode(mac).rstrip(b'=').decode()}"

    def verify_cookie(self, value: str | None) -> str | None:
        """The owner in a cookie value whose signature is valid, else None."""
        if not value or self._key is None:
            return None
        owner, _, _sig = value.rpartition(".")
        if not owner:
            return None
        return owner if hmac.compare_digest(self.sign(owner), value) else None

    def set_cookie(self, response: Any, request: Any) -> None:
        """After a request: send the cookie of an owner created during it, if any."""
        value = getattr(quart.g, _NEW_COOKIE, None)
        if value is None:
            return
        response.set_cookie(
            self.config.cookie_name, value, max_age=COOKIE_MAX_AGE_S, path="/", httponly=True, samesite="Lax",
            secure=request.scheme == "https",
        )  # fmt: skip
