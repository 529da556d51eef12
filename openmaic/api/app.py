"""``create_app``: the quart-trio application, with the generic behaviour every route shares.

The app only serves. It starts no background work of its own (no quart background tasks): durable work belongs
to workers and projectors, which run in the server's root nursery beside hypercorn.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from typing import Any

import msgspec
import quart
from quart import Blueprint, Response
from quart_trio import QuartTrio
from werkzeug.exceptions import HTTPException

from openmaic import metrics
from openmaic.api import health, stream_socket
from openmaic.api.errors import describe, render
from openmaic.api.access_code import AccessCodeRequired
from openmaic.api.hosts import HostNotAllowed, HostPolicy
from openmaic.api.identity import IdentityResolver
from openmaic.modelconfig.secret_box import process_instance_key
from openmaic.owners.anonymous import AnonymousOwners
from openmaic.owners.claims import ClaimQuotas
from openmaic.api.origins import normalize_origin
from openmaic.api.routing import STATE_KEY, ApiRequest, ApiState, app_state, routes_of
from openmaic.api.services import ApiServices
from openmaic.media.storage_assets import AssetNotFound

__all__ = ["CORE_BLUEPRINTS", "create_app"]

CORE_BLUEPRINTS: tuple[Blueprint, ...] = (health.bp, stream_socket.bp)
"""Always served: health, readiness, metrics, the OpenAPI document, and stream reading (page, SSE, WebSocket)."""

_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


def create_app(
    services: ApiServices, *, blueprints: Iterable[Blueprint] = (), core: Iterable[Blueprint] = CORE_BLUEPRINTS,
    access_gate: bool = True, listen_host: str | None = None,
) -> QuartTrio:
    """The API application for ``services``, serving the ``core`` routes plus ``blueprints``; ``access_gate``
    puts them behind ``ACCESS_CODE`` when one is configured (the admin listener guards its routes itself).
    Every request must name one of the server's hosts first (:mod:`openmaic.api.hosts`): loopback, addresses,
    ``server.allowed_hosts``, ``server.host`` and ``listen_host`` (the ``--host`` it listens on).

    Every route must be declared with :func:`openmaic.api.routing.api_route`: a URL rule added any other way
    is refused here (it would be missing from the OpenAPI document and skip the generic checks).
    """
    app = QuartTrio("openmaic.api", static_folder=None)
    app.request_class = ApiRequest
    limits = services.config.limits
    # The request object exists before routing picks a route's limit, so it starts at the largest; each
    # route's wrapper then lowers it (see routing._LimitedBody).
    app.config["MAX_CONTENT_LENGTH"] = max(limits.json_body_bytes, limits.upload_bytes)
    config = services.config
    key = functools.partial(process_instance_key, config.secret_key, config.server.data_dir)
    identity = IdentityResolver(services.config.identity, services.log, AnonymousOwners(key),
                                access_code=services.config.access_code,
                                mints_per_minute=limits.anonymous_owners_per_minute,
                                claim_quotas=ClaimQuotas.of(limits))
    allowed = frozenset(o for o in map(normalize_origin, services.config.server.allowed_origins) if o is not None)
    server = services.config.server
    hosts = HostPolicy([*server.allowed_hosts, *([listen_host] if listen_host else [])], listen_host=server.host)
    state = ApiState(services, identity, allowed_origins=allowed, hosts=hosts)
    app.extensions[STATE_KEY] = state

    for bp in (*core, *blueprints):
        app.register_blueprint(bp)
        state.routes |= {f"{bp.name}.{spec.endpoint}": spec for spec in routes_of(bp)}
    undeclared = sorted(r.rule for r in app.url_map.iter_rules() if r.endpoint not in state.routes)
    if undeclared:
        raise RuntimeError(f"routes not declared with api_route: {', '.join(undeclared)}")

    app.register_error_handler(Exception, _error_response)
    # First of all, before the access gate and any route: a request naming a host that is not this server's is a
    # DNS-rebinding page's, whatever else it carries.
    app.before_request(_check_host)
    app.before_websocket(_check_host)
    if access_gate:
        # The access-code gate stands before routing, as OpenMAIC's middleware: unknown /api paths are gated too.
        app.before_request(_admit)
        app.before_websocket(_admit)
    app.after_request(_after_request)
    return app


STORAGE_PREFIX = "/api/persistence/"


def _current() -> Any:
    return quart.request if quart.has_request_context() else quart.websocket


async def _error_response(exc: Exception) -> Any:
    """Every error of every route (and of requests no route matched), in the form the route declared."""
    if isinstance(exc, HTTPException) and exc.code is not None and 300 <= exc.code < 400:
        return exc.get_response()  # a routing redirect (e.g. a missing trailing slash) is not an error
    req = _current()
    problem = describe(exc, method=req.method if quart.has_request_context() else "WS", path=req.path)
    rule = req.url_rule
    spec = app_state().routes.get(rule.endpoint) if rule is not None else None
    if spec is None and req.path.startswith(STORAGE_PREFIX):
        # OpenMAIC's storage handler answers every path under its mount itself, in its own error form.
        if req.path.startswith(STORAGE_PREFIX + "assets"):
            return _unaddressable_asset(req) or render(problem, "asset")
        return render(problem, "storage")
    if spec is None:
        # No route matched: a bare 404 reveals nothing, like OpenMAIC's; other statuses (405) are JSON.
        return render(problem, plain_not_found=True)
    if spec.error_style == "asset" and spec.method == "DELETE" and problem.status == 404:
        return Response(b"", 204)  # deleting any id is a success, an id no row can hold included
    code = spec.error_codes.get(problem.status)
    if code is not None:
        problem = msgspec.structs.replace(problem, code=code)
    return render(problem, spec.error_style, plain_not_found=spec.plain_not_found)


_ASSET_ID_PATH = re.compile(rb"/api/persistence/assets/[^/?]+(/content)?")


def _unaddressable_asset(req: Any) -> Response | None:
    """An asset id holding an encoded ``/`` routes nowhere once decoded; the contract answers it as any other id:
    a miss (204 for a DELETE)."""
    m = _ASSET_ID_PATH.fullmatch(req.scope.get("raw_path") or b"")
    if m is None:
        return None
    if m.group(1) is None:
        return Response(b"", 204) if req.method == "DELETE" else None
    if req.method not in ("GET", "HEAD", "PUT"):
        return None
    return render(describe(AssetNotFound(), method=req.method, path=req.path), "asset")


async def _check_host() -> Response | None:
    try:
        app_state().hosts.check(_current())
    except HostNotAllowed as exc:
        # Answered without reading the body: if it has not come in whole, the response says Connection: close
        # (openmaic.api.server), since the connection cannot be reused.
        return render(describe(exc))
    return None


async def _admit() -> Response | None:
    try:
        await app_state().identity.admit(_current())
    except AccessCodeRequired as exc:
        # OpenMAIC's middleware answers in its apiError envelope whatever route was asked for, without reading
        # the body (see _check_host on the connection).
        return render(describe(exc))
    return None


async def _after_request(response: Response) -> Response:
    request = quart.request
    app_state().identity.set_cookie(response, request)
    method = request.method if request.method in _METHODS else "OTHER"  # bounded label values
    metrics.HTTP_REQUESTS.labels(method=method, status=str(response.status_code)).inc()
    return response
