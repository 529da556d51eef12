"""Who is asking: the owner of each request, resolved per ``identity.mode``.

* ``single_user`` — every request belongs to ``identity.single_user_owner``.
* ``token`` — ``Authorization: Bearer <token>``. Tokens are made by ``openmaic tokens create`` and stored as
  sha256 hashes only; a missing, unknown or revoked token is a 401. A browser cannot set headers on a WebSocket,
  so a handshake may instead offer the subprotocols ``openmaic`` and ``bearer.<token>``; the server answers with
  ``openmaic`` (never echoing the token).
* ``trusted_header`` — the reverse proxy's ``identity.user_header``, believed only when the TCP peer is inside
  ``identity.trusted_proxies``; from anywhere else the header is ignored and the request is a 401. A header sent
  twice, or holding a comma list, is a 401 too: it is what a proxy that appends instead of replacing forwards.
* ``shared`` — OpenMAIC's shared team owner (``PERSISTENCE_SHARED_OWNER_ID``, which requires ``ACCESS_CODE``):
  every request belongs to the team.
* ``anonymous`` — OpenMAIC's anonymous fallback: the ``anonymous_id`` cookie holds a random UUID v4 (unsigned, as
  OpenMAIC's). Unlike OpenMAIC's, the cookie is a secret that is never the owner id: the owner is derived from it
  with the instance secret (:mod:`openmaic.owners.anonymous`, which also moves a legacy owner ``anon:<cookie>``'s
  work to the derived owner the first time its cookie comes back). It is set on the first visit and renewed on every HTTP answer
  (400 days, ``Path=/; HttpOnly; SameSite=Lax``, ``Secure`` over https, or when a trusted proxy says
  ``X-Forwarded-Proto: https``). A missing or malformed cookie is
  re-minted, never refused; a WebSocket cannot set cookies, so there it is a 401. An anonymous owner that was
  claimed into an account is retired: a request presenting it is a 403 ``OWNER_RETIRED`` whose answer drops the
  cookie (the next request gets a fresh one).

In every other mode a request that also carries a well-formed ``anonymous_id`` cookie presents a *pending claim*
(:meth:`IdentityResolver.pending_claim`): ``POST /api/identity/claim`` moves that anonymous owner's work to the
signed-in one (:mod:`openmaic.owners.claims`) and drops the cookie; with ``identity.claim_trigger: auto``
(``OWNER_CLAIM_TRIGGER=auto``) the first such request claims it by itself.

The environment chooses ``single_user`` or ``shared`` as OpenMAIC's does (:mod:`openmaic.owner_env`), unless
``identity.mode`` names a host method (``token``, ``trusted_header``).

With ``ACCESS_CODE`` set, :func:`admit` keeps OpenMAIC's access-code gate in front of every ``/api/*`` route but
health (:mod:`openmaic.api.access_code`); a valid bearer token passes it too.

Tokens and their storage are :mod:`openmaic.owners.tokens`'s; this module only asks it whose a token is.
"""

from __future__ import annotations

import collections
import ipaddress
import uuid
from typing import Any

import quart

from openmaic.api.errors import Unauthorized
from openmaic.api.access_code import (
    ACCESS_COOKIE, ACCESS_COOKIE_MAX_AGE_S, AccessCodeRequired, AccessGate, AttemptLimiter, RateLimited,
    is_open_path,
)  # fmt: skip
from openmaic.config import IdentityConfig
from openmaic.events.log import EventLog
from openmaic.owners.anonymous import COOKIE_VALUE, AnonymousOwners
from openmaic.owners.claims import (
    ClaimQuotas, ClaimRefused, OwnerRetired, claim_owner, claimed_into, in_anonymous_namespace, is_anonymous,
)  # fmt: skip
from openmaic.owners.tokens import looks_like_token, token_owner
from openmaic.secret import Secret
from openmaic.store.database import Database
from openmaic.store.queries import Q

__all__ = ["COOKIE_MAX_AGE_S", "WS_PROTOCOL", "IdentityResolver", "accept_websocket"]

COOKIE_MAX_AGE_S = 400 * 24 * 3600
"""Browsers cap cookie lifetimes at 400 days; asking for more would be silently cut."""

WS_PROTOCOL = "openmaic"
"""The WebSocket subprotocol the server selects when a client offers it (see :func:`accept_websocket`)."""
_WS_BEARER = "bearer."
"""Prefix of the subprotocol that carries a bearer token on a WebSocket handshake."""

_ANONYMOUS = "openmaic_anonymous_id"  # the name under quart.g of this request's anonymous id, for its cookie
_DROP = "openmaic_drop_anonymous_id"  # set under quart.g when this answer drops the anonymous cookie
_CLAIMED = "openmaic_claim_tried"  # set under quart.g once this request tried its automatic claim
_PRESENTED = "openmaic_anonymous_presented"  # set under quart.g when the anonymous owner came from the request
_REMEMBERED_SHARES = 100_000
"""Anonymous owners whose recorded address a process remembers (about 20 MB at most)."""
AUTO_CLAIM_BUSY_S = 1.0
"""How long an automatic claim retries lost lock races within the request before leaving it to the next one."""


class TooManyNewOwners(RateLimited):
    """Too many new anonymous visitors from your address; send back the anonymous_id cookie you were given."""

    code = "anonymous_minting_limited"

    def __init__(self, retry_after: int, limit: int) -> None:
        super().__init__(retry_after)
        self.message = (f"too many new anonymous visitors from your address (limits.anonymous_owners_per_minute is "
                        f"{limit}); send back the anonymous_id cookie you were given, or wait {retry_after} s")
        self.details = {"key": "limits.anonymous_owners_per_minute", "limit": limit}
        self.args = (self.message,)


async def accept_websocket(ws: Any) -> None:
    """Accept a WebSocket, selecting :data:`WS_PROTOCOL` when the client offered it: a browser that sent its token
    as a subprotocol drops a connection whose answer names none of the protocols it offered."""
    await ws.accept(subprotocol=WS_PROTOCOL if WS_PROTOCOL in ws.requested_subprotocols else None)


class IdentityResolver:
    """Resolves the owner of a request (or WebSocket handshake) according to the configured mode."""

    def __init__(self, config: IdentityConfig, log: EventLog, anonymous: AnonymousOwners, *,
                 access_code: Secret | None = None, mints_per_minute: int = 60,
                 claim_quotas: ClaimQuotas = ClaimQuotas()) -> None:
        self.config = config
        self.db = log.db
        self.log = log
        """Where claims (automatic ones, ``claim_trigger: auto``) and legacy owners' moves are written."""
        self.anonymous = anonymous
        self.claim_quotas = claim_quotas
        """The account's limits an automatic claim keeps to (``limits.claims_over_quota``)."""
        self._shares: collections.OrderedDict[str, str] = collections.OrderedDict()
        """The share each anonymous owner was last recorded under (see :meth:`_seen_from`)."""
        self._networks = config.proxy_networks()
        self.gate = AccessGate(access_code) if access_code is not None else None
        self.attempts = AttemptLimiter()
        # Anonymous mode gives every cookieless request a new owner: per-owner quotas bind only if owners cannot
        # be had at will, so each client address gets at most this many new ones a minute (memory bounded by
        # the limiter's own cap on addresses).
        self.mints = AttemptLimiter(mints_per_minute, 60.0)

    async def admit(self, request: Any) -> None:
        """The access-code gate: returns when ``request`` may go on, else :class:`AccessCodeRequired`."""
        if not is_open_path(request.path):
            await self.check_access(request)

    async def check_access(self, request: Any) -> None:
        """Whether ``request`` has given the access code (or a token), whatever its path: returns, or raises
        :class:`AccessCodeRequired`. (A page outside the gate asks this before it says what exists.)"""
        if self.gate is None:
            return
        if self.gate.admits(request.cookies.get(ACCESS_COOKIE)):
            return
        scheme, _, token = (request.headers.get("Authorization") or "").strip().partition(" ")
        if scheme.lower() == "bearer" and looks_like_token(token.strip()):
            # A script holding a token of this server passes: it authenticated with something stronger.
            if await token_owner(self.db, token.strip()) is not None:
                return
        raise AccessCodeRequired()

    async def resolve(self, request: Any) -> str:
        """The owner of ``request`` (a quart Request or Websocket), or :class:`Unauthorized`. With
        ``claim_trigger: auto``, a signed-in owner's request that presents an anonymous cookie claims it first."""
        owner = await self._resolve(request)
        if self.config.claim_trigger == "auto" and request.scope.get("type") == "http":
            await self._claim_pending(request, owner)
        return owner

    async def _claim_pending(self, request: Any, owner: str) -> None:
        if is_anonymous(owner) or getattr(quart.g, _CLAIMED, False) or self._cookie(request) is None:
            return
        setattr(quart.g, _CLAIMED, True)  # once per request, however many times it resolves its owner
        try:
            pending = await self.pending_claim(request)
            assert pending is not None
            await claim_owner(self.log, pending, owner, quotas=self.claim_quotas, busy_for_s=AUTO_CLAIM_BUSY_S)
        except ClaimRefused as refused:
            if refused.error_code in ("OWNER_BUSY", "CLAIM_OVER_QUOTA"):
                # Nothing changed: the next request presenting the cookie tries again (over quota: once the
                # account has made room; dropping the cookie would put the anonymous work out of reach).
                return
            # Any other refusal is final for this pair (claimed elsewhere, chained): stop presenting it.
        self.drop_anonymous_cookie()

    async def _resolve(self, request: Any) -> str:
        mode = self.config.mode
        if mode in ("single_user", "shared"):
            return self.config.single_user_owner
        if mode == "token":
            return await self._from_token(request)
        if mode == "trusted_header":
            return self._from_proxy(request)
        owner = await self._from_cookie(request)
        # Only a presented cookie can name a retired owner (a freshly minted one is new).
        if getattr(quart.g, _PRESENTED, False) and await claimed_into(self.db, owner) is not None:
            # Claimed into an account: this identity must no longer write (or read) anything. The answer drops
            # the cookie, so the browser's next request starts a fresh anonymous owner instead of a loop of 403s.
            self.drop_anonymous_cookie()
            raise OwnerRetired()
        return owner

    async def pending_claim(self, request: Any) -> str | None:
        """The anonymous owner a request of a signed-in owner presents beside its credential (the owner of its
        well-formed ``anonymous_id`` cookie, a legacy owner's work moved to it first), or ``None``: what
        ``POST /api/identity/claim`` would claim. Never in ``anonymous`` mode, where that cookie is the request's
        own identity."""
        cookie = None if self.config.mode == "anonymous" else self._cookie(request)
        if cookie is None:
            return None
        spent = await self.anonymous.migrate_legacy(self.log, cookie)
        # A legacy owner claimed before owner ids were derived is claimed as itself: the answer says where it went.
        return f"anon:{cookie}" if spent is not None else self.anonymous.owner_of(cookie)

    def _cookie(self, request: Any) -> str | None:
        """The request's well-formed ``anonymous_id`` cookie (a secret: never an owner id, never shown)."""
        value = (request.cookies.get(self.config.cookie_name) or "").strip().lower()
        return value if COOKIE_VALUE.match(value) else None

    def drop_anonymous_cookie(self) -> None:
        """Make this request's answer remove the anonymous cookie (the identity it held is spent)."""
        setattr(quart.g, _DROP, True)

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
        owner = await token_owner(self.db, token)
        if owner is None:
            # One message for unknown and revoked: the answer must not tell which tokens exist.
            raise Unauthorized("the bearer token is unknown or has been revoked", challenge='Bearer error="invalid_token"')
        if in_anonymous_namespace(owner):
            raise Unauthorized("this token's owner lies in the anonymous owners' namespace ('anon:'); an operator "
                               "creates a token for another owner name", challenge='Bearer error="invalid_token"')
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
        values = request.headers.getlist(header)
        if len(values) > 1:
            # Which one would the proxy have meant? Believing the first lets a client's own header win over the
            # proxy's appended one: refuse, so the proxy is configured to replace it.
            raise Unauthorized(f"the request carries {header} {len(values)} times; the trusted proxy must send it "
                               "exactly once, replacing any the client sent")
        user = (values[0] if values else "").strip()
        if not user:
            raise Unauthorized(f"the trusted proxy did not send {header}")
        if "," in user:
            # A list ("mallory, alice") is what a proxy that appends instead of replacing forwards.
            raise Unauthorized(f"{header} holds a list, not one user: the trusted proxy must replace the client's "
                               "header, not append to it")
        if in_anonymous_namespace(user):
            # Anonymous owners are 'anon:<uuid>': a user of that name would be claimable by whoever sends the
            # matching cookie.
            raise Unauthorized(f"{header} names a user in the anonymous owners' namespace ('anon:'), which no "
                               "signed-in user may use")
        return user

    def secure(self, request: Any) -> bool:
        """Whether the client reached us over https: directly, or through a trusted proxy saying so in
        ``X-Forwarded-Proto`` (its first entry: the scheme the client used with the outermost proxy). From any
        other peer the header is ignored."""
        if request.scheme in ("https", "wss"):
            return True
        forwarded = request.headers.get("X-Forwarded-Proto")
        if not forwarded or not self._networks:
            return False
        client = request.scope.get("client")
        return self._trusted(client[0] if client else None) and forwarded.split(",")[0].strip().lower() == "https"

    def client_address(self, request: Any) -> str:
        """The address of the client: the TCP peer, or behind trusted proxies the nearest address in
        ``X-Forwarded-For`` that is not one of them (read from the right: entries further left were written by
        the client itself and prove nothing). From any other peer the header is ignored."""
        client = request.scope.get("client")
        peer = str(client[0]) if client else "?"
        if not self._trusted(peer):
            return peer
        hops = [h.strip() for value in request.headers.getlist("X-Forwarded-For") for h in value.split(",")]
        for hop in reversed(hops):
            if hop and not self._trusted(hop):
                return hop
        return peer

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

    async def _from_cookie(self, request: Any) -> str:
        cookie = self._cookie(request)
        if cookie is None:
            if request.scope.get("type") == "websocket":
                raise Unauthorized("a WebSocket cannot set the anonymous_id cookie: visit any HTTP route first")
            try:
                self.mints.attempt(self.client_address(request))
            except RateLimited as exc:
                raise TooManyNewOwners(int(exc.headers["Retry-After"]), self.mints.limit) from None
            cookie = str(uuid.uuid4())  # a missing or malformed cookie is re-minted, never refused
        else:
            if await self.anonymous.migrate_legacy(self.log, cookie) is not None:
                # Its legacy owner was claimed into an account before owner ids were derived: spent, as below.
                self.drop_anonymous_cookie()
                raise OwnerRetired()
            setattr(quart.g, _PRESENTED, True)
        # Renewed on this answer (errors included) by the app's after-request hook.
        setattr(quart.g, _ANONYMOUS, cookie)
        owner = self.anonymous.owner_of(cookie)
        await self._seen_from(owner, self.client_address(request))
        return owner

    async def _seen_from(self, owner: str, address: str) -> None:
        """Record the address an anonymous owner's request came from, when it changed: the owner's streams count
        against that address's share of the workers' slots (``openmaic_claim``), since cookies are had at will
        and addresses are not. Remembered per process, so an owner costs one write per address it comes from."""
        share = f"anon:client:{address}"  # in the anonymous namespace: no signed-in owner's id can equal it
        if self._shares.get(owner) == share:
            self._shares.move_to_end(owner)
            return
        await self.db.execute(Q.anonymous_client_seen, owner, share)
        self._shares[owner] = share
        if len(self._shares) > _REMEMBERED_SHARES:
            self._shares.popitem(last=False)

    def set_cookie(self, response: Any, request: Any) -> None:
        """After a request: send (or renew) the anonymous owner's cookie, or remove it when it is spent."""
        if getattr(quart.g, _DROP, False):
            response.delete_cookie(self.config.cookie_name, path="/", httponly=True, samesite="Lax",
                                   secure=self.secure(request))
            return
        value = getattr(quart.g, _ANONYMOUS, None)
        if value is None:
            return
        response.set_cookie(
            self.config.cookie_name, value, max_age=COOKIE_MAX_AGE_S, path="/", httponly=True, samesite="Lax",
            secure=self.secure(request),
        )  # fmt: skip

    def access_cookie(self, response: Any, request: Any) -> None:
        """Set the cookie a correct access code earns."""
        assert self.gate is not None
        response.set_cookie(ACCESS_COOKIE, self.gate.cookie_value(), max_age=ACCESS_COOKIE_MAX_AGE_S, path="/",
                            httponly=True, samesite="Lax", secure=self.secure(request))
