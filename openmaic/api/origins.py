"""Where a request comes from: cross-origin WebSockets and cross-site writes are refused, for every route.

A browser attaches the owner's cookie to requests that another page makes, and lets a page open a WebSocket to
any origin. Two rules, applied by :mod:`openmaic.api.routing` before the owner is resolved:

* **Every WebSocket handshake** that carries an ``Origin`` must come from this server's own origin (the
  ``Host`` the client addressed) or one listed in ``server.allowed_origins``; otherwise 403
  ``CROSS_ORIGIN_REFUSED``. Browsers always send ``Origin`` on a WebSocket; a client without one is not a browser
  and carries no one's cookie.
* **State-changing requests** (POST, PUT, PATCH, DELETE):

  - a route with a JSON body requires ``Content-Type: application/json`` (or ``application/*+json``) when a body
    is sent, else 415. A page may send ``text/plain`` to any origin without asking (a "simple" request, no
    preflight); ``application/json`` from another origin needs a CORS preflight, which this server never grants.
    Raw-body uploads declare their own types and are checked by their route.
  - in every mode but ``token`` (where a page of another origin cannot hold the credential), and above all where
    the browser itself proves who you are (``anonymous``: the owner cookie; ``trusted_header``: the proxy's SSO
    session), an ``Origin`` that is not this server's (or allowed) is a 403, and so is a ``Sec-Fetch-Site`` other
    than ``same-origin`` or ``none`` (another port of the same host is ``same-site``, and SameSite=Lax cookies
    still go there). In ``single_user`` mode whoever reaches the server is its user, so a page of another origin
    (another local app, a site the user visits) must not write as them either. A request with neither header is
    not a browser's.

The routes that act on the browser's cookies themselves (a claim, a legacy-import binding) are stricter, in every
mode (OpenMAIC's ``isSameOriginJsonRequest``, :func:`require_same_origin_json`): ``Content-Type:
application/json`` even without a body (an HTML form cannot send it), an ``Origin`` of this server's when one is
sent, and ``Sec-Fetch-Site: same-origin`` when that is sent; else 403 ``CROSS_ORIGIN_REFUSED``.

Origins compare scheme, host and port; a Host header without a port means the scheme's default one. A TLS proxy
in front (``https://`` origin, plain ``http`` to us) is the same origin when host and port agree.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from openmaic.errors import OpenMaicError
from openmaic.api.errors import UnsupportedMediaType

__all__ = ["CrossOriginRefused", "check_request", "check_websocket", "normalize_origin", "require_same_origin_json"]

_WRITES = frozenset({"POST", "PUT", "PATCH", "DELETE"})
_BEARER_MODES = frozenset({"token"})
_DEFAULT_PORTS = {"http": 80, "https": 443, "ws": 80, "wss": 443}


class CrossOriginRefused(OpenMaicError):
    """This request comes from a page of another origin; it is refused."""

    code = "cross_origin_refused"
    status = 403
    error_code = "CROSS_ORIGIN_REFUSED"


def normalize_origin(origin: str) -> tuple[str, int] | None:
    """``(host, port)`` of an origin such as ``https://app.example.org`` (None if it is not one: ``null``, a path)."""
    try:
        parts = urlsplit(origin.strip())
        host, port = parts.hostname, parts.port
    except ValueError:
        return None
    if parts.scheme not in _DEFAULT_PORTS or not host or parts.path not in ("", "/") or parts.query:
        return None
    return host.lower(), port or _DEFAULT_PORTS[parts.scheme]


def _own(request: Any) -> tuple[str, int] | None:
    host = request.headers.get("Host", "")
    scheme = "https" if request.scheme in ("https", "wss") else "http"
    return normalize_origin(f"{scheme}://{host}") if host else None


def _allowed(origin: str, request: Any, allowed: frozenset[tuple[str, int]]) -> bool:
    found = normalize_origin(origin)
    if found is None:
        return False
    own = _own(request)
    if own is not None and found[0] == own[0]:
        # Same host: the port must agree, allowing for a TLS proxy (https origin on 443, Host without a port).
        if found[1] == own[1] or (own[1] == 80 and found[1] == 443 and ":" not in request.headers.get("Host", "")):
            return True
    return found in allowed


def check_websocket(ws: Any, allowed: frozenset[tuple[str, int]]) -> None:
    """Refuse a WebSocket handshake from another origin (:class:`CrossOriginRefused`)."""
    origin = ws.headers.get("Origin")
    if origin is not None and not _allowed(origin, ws, allowed):
        raise CrossOriginRefused(
            f"WebSocket connections from {origin} are refused; a page may only connect to its own server (or one "
            "listed in server.allowed_origins)", origin=origin,
        )  # fmt: skip


def check_request(request: Any, *, json_body: bool, mode: str, allowed: frozenset[tuple[str, int]]) -> None:
    """Refuse a cross-site write (:class:`CrossOriginRefused`) or a JSON route's body of another type (415)."""
    if request.method not in _WRITES:
        return
    if json_body and _has_body(request) and not _is_json(request.headers.get("Content-Type", "")):
        shown = request.headers.get("Content-Type") or "none"
        raise UnsupportedMediaType(f"this route takes a JSON body: send Content-Type: application/json (got {shown})",
                                   content_type=shown)
    if mode in _BEARER_MODES:
        return
    origin = request.headers.get("Origin")
    if origin is not None:
        if not _allowed(origin, request, allowed):
            raise CrossOriginRefused(f"requests from pages of {origin} are refused", origin=origin)
        return
    site = request.headers.get("Sec-Fetch-Site")
    if site is not None and site not in ("same-origin", "none"):
        raise CrossOriginRefused(f"requests from {site} pages are refused", sec_fetch_site=site)


def require_same_origin_json(request: Any, what: str, allowed: frozenset[tuple[str, int]]) -> None:
    """Refuse (:class:`CrossOriginRefused`) unless ``request`` can only have come from this server's own pages."""
    if (request.headers.get("Content-Type") or "").split(";", 1)[0].strip().lower() != "application/json":
        raise CrossOriginRefused(f"{what} must be same-origin JSON requests (Content-Type: application/json)")
    origin = request.headers.get("Origin")
    if origin is not None and not _allowed(origin, request, allowed):
        raise CrossOriginRefused(f"{what} must be same-origin JSON requests", origin=origin)
    site = request.headers.get("Sec-Fetch-Site")
    if site is not None and site.strip().lower() != "same-origin":
        raise CrossOriginRefused(f"{what} must be same-origin JSON requests", sec_fetch_site=site)


def _has_body(request: Any) -> bool:
    length = request.content_length
    return bool(length) or (length is None and "chunked" in request.headers.get("Transfer-Encoding", "").lower())


def _is_json(content_type: str) -> bool:
    mime = content_type.split(";", 1)[0].strip().lower()
    return mime == "application/json" or (mime.startswith("application/") and mime.endswith("+json"))
