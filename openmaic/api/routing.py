"""The one way routes are declared: :func:`api_route`.

A route declared here is registered on its blueprint *and* recorded with its types, so that the OpenAPI document
(``GET /api/openapi.json``) describes every route, including those added later by other modules. The wrapper it
installs does the generic work in a fixed order, identical for every route:

1. refuse a body larger than the route accepts (by ``Content-Length`` at once, and while a chunked body is read);
2. refuse a WebSocket handshake from another origin, a JSON route's body of another type (415), and in the
   cookie and proxy modes a write from another origin (:mod:`openmaic.api.origins`);
3. resolve the owner (unless the route is public);
4. decode the query parameters and the JSON body into their Structs (400 for malformed JSON and for a field of
   the wrong type, naming it; 400 ``MISSING_REQUIRED_FIELD`` for a missing one);
5. call the handler with a :class:`Call` and the path parameters;
6. encode what it returns (a Struct or other JSON value; a ``Response`` passes through; ``(value, status)``
   overrides the status; ``None`` is a 204).

Errors: a handler raises an :class:`~openmaic.errors.OpenMaicError` subclass (its ``status`` and ``error_code``
decide the answer), and the app renders it in the route's declared form (:mod:`openmaic.api.errors`):
OpenMAIC's ``apiError`` envelope by default, ``error_style="json"`` for its ``jsonErr`` routes,
``plain_not_found=True`` where every 404 must be the bare ``Not found`` (owner-scoped resources), and
``error_codes={409: "RUN_STATE_CONFLICT"}`` to give every error of a status the route's own code. An SSE route
(``sse=True``) that meets the database's outage answers ``200 text/event-stream`` all the same, with a ``retry:``
hint, and waits for the database (:mod:`openmaic.api.outage`): a browser's EventSource gives up after a non-200.

``create_app`` refuses to start when a URL rule was added any other way, so the document cannot drift.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import quart
from quart import Blueprint, Response
from quart_trio.wrappers.request import TrioBody, TrioRequest
from werkzeug.exceptions import RequestEntityTooLarge

from openmaic.api import fair_share
from openmaic.api.errors import ErrorStyle, PayloadTooLarge
from openmaic.api.hosts import HostPolicy
from openmaic.api.origins import check_request, check_websocket
from openmaic.api.outage import database_outage, outage_response
from openmaic.api.services import ApiServices
from openmaic.api.wire import check_path, decode_json, decode_query, encode

if TYPE_CHECKING:
    from openmaic.api.identity import IdentityResolver

__all__ = ["ApiRequest", "ApiState", "Call", "RouteSpec", "api_route", "app_state", "origin", "routes_of", "too_large"]

Handler = Callable[..., Awaitable[Any]]
BodyLimit = Literal["json", "upload"] | int
STATE_KEY = "openmaic"

_PARAM = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


@dataclass(frozen=True)
class RouteSpec:
    """A declared route: what the wrapper enforces and what the OpenAPI document says."""

    method: str
    """An HTTP method, or ``"WS"`` for a WebSocket route."""
    path: str
    """OpenAPI style: ``/api/generation-runs/{id}/events``."""
    endpoint: str
    blueprint: str
    handler: Handler
    body: Any = None
    query: Any = None
    response: Any = None
    status: int = 200
    auth: bool = True
    body_limit: BodyLimit = "json"
    sse: bool = False
    """The route answers ``Accept: text/event-stream`` with a server-sent-event stream (only that, without a
    ``response`` type)."""
    sse_data: Any = None
    """SSE routes: the type of each frame's ``data`` (documentation)."""
    upload: Literal["multipart", "raw", "raw_or_multipart"] | None = None
    """The request body is an upload: a multipart form with the file in ``upload_field``, or the raw bytes (the
    ``Content-Type`` header says what they are)."""
    upload_field: str = "file"
    upload_headers: tuple[str, ...] = ()
    """Request headers an upload may carry (documentation: optional header parameters)."""
    idempotent: bool = False
    """The route takes an ``Idempotency-Key`` header (documentation; the handler reads it)."""
    ws_receives: Any = None
    """WebSocket routes: the type of the messages a client may send."""
    ws_sends: Any = None
    """WebSocket routes: the type of the frames the server sends."""
    errors: tuple[int, ...] = ()
    """Error statuses this route answers besides the generic ones (documentation)."""
    media_type: str = "application/json"
    """The media type of a successful response (documentation)."""
    error_style: ErrorStyle = "api"
    """How errors are written: OpenMAIC's ``apiError`` envelope, or its ``jsonErr`` (``"json"``)."""
    plain_not_found: bool = False
    """Every 404 of this route is the plain text ``Not found`` (it must not reveal what exists)."""
    error_codes: dict[int, str] = field(default_factory=dict)
    """``{status: errorCode}``: every error of that status answers with the route's own code."""
    summary: str = ""
    description: str = ""
    path_params: tuple[str, ...] = field(default=())

    @property
    def websocket(self) -> bool:
        return self.method == "WS"


@dataclass(frozen=True)
class Call:
    """What a handler gets: the services, the resolved owner, the decoded body and query, the request itself."""

    services: ApiServices
    owner: str | None
    """The owner every read and write is made for (``None`` only on public routes)."""
    body: Any
    query: Any
    request: Any
    """The ``quart.Request`` (HTTP routes) or ``quart.Websocket`` (WebSocket routes)."""

    @property
    def user(self) -> str:
        """The owner, for routes that require one."""
        assert self.owner is not None, "public routes have no owner"
        return self.owner


@dataclass
class ApiState:
    """Per-app state, stored in ``app.extensions``."""

    services: ApiServices
    identity: IdentityResolver
    routes: dict[str, RouteSpec] = field(default_factory=dict)
    """Every declared route by its endpoint (``blueprint.endpoint``): how its errors are written."""
    allowed_origins: frozenset[tuple[str, int]] = frozenset()
    """``server.allowed_origins`` as ``(host, port)`` pairs (see :mod:`openmaic.api.origins`)."""
    hosts: HostPolicy = field(default_factory=lambda: HostPolicy(()))
    """The hosts a request may name (see :mod:`openmaic.api.hosts`)."""


def app_state() -> ApiState:
    return quart.current_app.extensions[STATE_KEY]


def routes_of(bp: Blueprint) -> list[RouteSpec]:
    """The routes declared on ``bp`` with :func:`api_route`, in declaration order."""
    routes: list[RouteSpec] = bp.__dict__.setdefault("_openmaic_routes", [])
    return routes


def api_route(
    bp: Blueprint,
    method: str,
    path: str,
    *,
    body: Any = None,
    query: Any = None,
    response: Any = None,
    status: int = 200,
    auth: bool = True,
    body_limit: BodyLimit = "json",
    sse: bool = False,
    sse_data: Any = None,
    upload: Literal["multipart", "raw", "raw_or_multipart"] | None = None,
    upload_field: str = "file",
    upload_headers: tuple[str, ...] = (),
    idempotent: bool = False,
    ws_receives: Any = None,
    ws_sends: Any = None,
    errors: tuple[int, ...] = (),
    media_type: str = "application/json",
    error_style: ErrorStyle = "api",
    plain_not_found: bool = False,
    error_codes: dict[int, str] | None = None,
) -> Callable[[Handler], Handler]:
    """Declare a route on ``bp``: ``@api_route(bp, "POST", "/api/generation-runs", body=StartRun,
    response=RunAnswer, status=202)``.

    The handler is ``async def handler(call: Call, **path_params)``. ``body`` and ``query`` are Struct types
    (bodies should forbid unknown fields); ``response`` documents what the handler returns. ``method="WS"``
    declares a WebSocket route: the handler runs with ``call.request`` being the websocket; raising before it
    accepts refuses the handshake with the usual JSON error. ``body_limit="upload"`` lets the route read up to
    ``limits.upload_bytes`` instead of ``limits.json_body_bytes`` (an int: that many bytes); ``upload`` says how
    the upload is sent (documentation). ``sse=True``: the route streams server-sent events (``sse_data``: each
    frame's data type). ``error_style``, ``plain_not_found`` and ``error_codes`` choose how its errors are written
    (see the module docstring). The handler's docstring becomes the OpenAPI summary (first line) and description.
    """
    method = method.upper()

    def decorator(fn: Handler) -> Handler:
        doc = (fn.__doc__ or "").strip()
        summary, _, description = doc.partition("\n")
        spec = RouteSpec(
            method=method, path=path, endpoint=fn.__name__, blueprint=bp.name, handler=fn, body=body, query=query,
            response=response, status=status, auth=auth, body_limit=body_limit, sse=sse, sse_data=sse_data,
            upload=upload, upload_field=upload_field, upload_headers=upload_headers, idempotent=idempotent,
            ws_receives=ws_receives, ws_sends=ws_sends, errors=errors, media_type=media_type, error_style=error_style,
            plain_not_found=plain_not_found, error_codes=dict(error_codes or {}), summary=summary.strip(),
            description=" ".join(description.split()), path_params=tuple(_PARAM.findall(path)),
        )  # fmt: skip
        if any(s.endpoint == spec.endpoint for s in routes_of(bp)):
            raise ValueError(f"{bp.name}: two routes with the endpoint name {spec.endpoint!r}")
        rule = _PARAM.sub(r"<\1>", path)
        if spec.websocket:
            bp.add_websocket(rule, spec.endpoint, _websocket_view(spec))
        else:
            bp.add_url_rule(rule, spec.endpoint, _http_view(spec), methods=[method])
        routes_of(bp).append(spec)
        return fn

    return decorator


def _limit(spec: RouteSpec, state: ApiState) -> int:
    limits = state.services.config.limits
    if isinstance(spec.body_limit, int):
        return spec.body_limit
    return limits.upload_bytes if spec.body_limit == "upload" else limits.json_body_bytes


def origin(request: Any) -> str:
    """``scheme://host[:port]`` of the request, for the absolute URLs an answer carries (``pollUrl``)."""
    return f"{request.scheme}://{request.host}"


def too_large(limit: int) -> PayloadTooLarge:
    """The refusal of a body (or a WebSocket command) over ``limit`` bytes."""
    return PayloadTooLarge(f"the request body is larger than this route accepts ({limit} bytes)", limit=limit)


def _http_view(spec: RouteSpec) -> Handler:
    async def view(**params: str) -> Any:
        state = app_state()
        request: ApiRequest = quart.request._get_current_object()  # type: ignore[attr-defined]
        limit = _limit(spec, state)
        if request.content_length is not None and request.content_length > limit:
            raise too_large(limit)
        request.body.set_limit(limit)
        check_request(request, json_body=spec.body is not None, mode=state.services.config.identity.mode,
                      allowed=state.allowed_origins)
        if spec.sse:
            try:
                return await _http_call(spec, state, request, params, limit)
            except Exception as exc:
                if not database_outage(exc):
                    raise
                # Never a non-200 to an event stream because of the database: an EventSource would not reconnect.
                return outage_response(state.services)
        return await _http_call(spec, state, request, params, limit)

    view.__name__ = spec.endpoint
    view.__doc__ = spec.handler.__doc__
    return view


async def _http_call(spec: RouteSpec, state: ApiState, request: ApiRequest, params: dict[str, str], limit: int) -> Any:
    """Steps 3 to 6 of the module doc: the owner, the query and body, the handler, its answer."""
    owner = await state.identity.resolve(request) if spec.auth else None
    if owner is not None:
        fair_share.seen(owner)  # a writing owner gives way while others are served
    check_path(params)
    query = decode_query(request.args, spec.query) if spec.query is not None else None
    body = None
    if spec.body is not None:
        try:
            data = await request.get_data(cache=False)
        except RequestEntityTooLarge:
            raise too_large(limit) from None
        body = decode_json(data, spec.body)
    result = await spec.handler(Call(state.services, owner, body, query, request), **params)
    return _response(result, spec.status)


def _websocket_view(spec: RouteSpec) -> Handler:
    async def view(**params: str) -> Any:
        state = app_state()
        ws = quart.websocket._get_current_object()  # type: ignore[attr-defined]
        check_websocket(ws, state.allowed_origins)
        owner = await state.identity.resolve(ws) if spec.auth else None
        check_path(params)
        query = decode_query(ws.args, spec.query) if spec.query is not None else None
        await spec.handler(Call(state.services, owner, None, query, ws), **params)

    view.__name__ = spec.endpoint
    view.__doc__ = spec.handler.__doc__
    return view


def _response(result: Any, status: int) -> Any:
    if isinstance(result, Response):
        return result
    if isinstance(result, tuple) and len(result) == 2 and isinstance(result[1], int):
        result, status = result
    if result is None:
        return Response(b"", 204)
    return Response(encode(result), status, content_type="application/json")


class _LimitedBody(TrioBody):
    """A request body with a limit a route can lower after the request started arriving.

    The request object exists before routing decides which limit applies, so it starts at the largest limit
    of any route and the route's wrapper sets its own. Past the limit nothing more is kept: the memory a
    request can hold is bounded whether the body is declared (``Content-Length``) or chunked.
    """

    def __init__(self, expected_content_length: int | None, max_content_length: int | None) -> None:
        super().__init__(expected_content_length, max_content_length)
        self._received = 0

    def append(self, data: bytes) -> None:
        self._received += len(data)
        if self._over():
            return
        super().append(data)

    def set_limit(self, limit: int) -> None:
        """Lower (or raise) the limit; a body already past it fails at the next read."""
        self._max_content_length = limit
        self._over()

    def _over(self) -> bool:
        if self._must_raise is not None:
            return True
        if self._max_content_length is not None and self._received > self._max_content_length:
            self._must_raise = RequestEntityTooLarge()
            self._data.clear()  # drop what was buffered: it will never be read
            self.set_complete()
            return True
        return False


class ApiRequest(TrioRequest):
    """The app's request class: its body is a :class:`_LimitedBody`."""

    body_class = _LimitedBody
    body: _LimitedBody
