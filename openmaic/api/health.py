"""Operational routes: OpenMAIC's ``/api/health``, liveness, readiness, metrics and the OpenAPI document.
All are public (no owner)."""

from __future__ import annotations

from typing import Any

import msgspec
import quart
from quart import Blueprint, Response

from openmaic import metrics, probes
from openmaic.api.errors import NotReady
from openmaic.api.openapi import build_openapi
from openmaic.api.routing import Call, api_route, app_state, routes_of
from openmaic.api.wire import Success, Wire, encode
from openmaic.capabilities import media_capabilities, server_version

__all__ = ["bp"]

bp = Blueprint("ops", __name__)

_OPENAPI_KEY = "openmaic.openapi"


class Health(msgspec.Struct, frozen=True):
    status: str


class Ready(msgspec.Struct, frozen=True):
    status: str
    checks: dict[str, str]
    """Each check's result: ``ok``, ``failed: why``, or ``lagging: why`` (a warning; see :mod:`openmaic.probes`)."""
    horizon: probes.Horizon | None = None
    """The transaction holding back the global log's tail, and how long it has."""


class MediaCapabilities(Wire):
    """Which media this server generates (a feature flag is only worth sending when its capability is true)."""

    web_search: bool
    image_generation: bool
    video_generation: bool
    tts: bool


class ApiHealth(Success):
    status: str
    version: str
    capabilities: MediaCapabilities


def media_view(services: Any) -> MediaCapabilities:
    m = media_capabilities(services.config, getattr(services, "media", None))
    return MediaCapabilities(web_search=m.web_search, image_generation=m.image_generation,
                             video_generation=m.video_generation, tts=m.tts)


@api_route(bp, "GET", "/api/health", response=ApiHealth, auth=False)
async def api_health(call: Call) -> ApiHealth:
    """The server is up: its version and which media it can generate (OpenMAIC's health check).

    Needs no owner; it does not touch the database (``/readyz`` does).
    """
    return ApiHealth(status="ok", version=server_version(), capabilities=media_view(call.services))


@api_route(bp, "GET", "/healthz", response=Health, auth=False)
async def healthz(call: Call) -> Health:
    """The process is alive and serving."""
    return Health("ok")


@api_route(bp, "GET", "/readyz", response=Ready, auth=False, errors=(503,))
async def readyz(call: Call) -> Ready:
    """Ready to serve: the database answers, its schema is current, and the NOTIFY listener is connected.

    503 (code not_ready) names the failed checks in details.checks. The horizon check only warns: the age of the
    oldest transaction holding back the log's tail is in horizon. So does the replica check (with
    DATABASE_REPLICA_URL): the primary answers every read the replica cannot.
    """
    threshold = call.services.config.runtime.horizon_age_threshold_s
    result = await probes.readiness(call.services.db, horizon_threshold_s=threshold, replica=call.services.log.replica)
    if not result.ready:
        raise NotReady(f"not ready: {', '.join(result.failed)}", checks=result.checks,
                       horizon=msgspec.to_builtins(result.horizon))  # fmt: skip
    return Ready("ready", result.checks, result.horizon)


@api_route(bp, "GET", "/metrics", auth=False, media_type="text/plain")
async def metrics_text(call: Call) -> Response:
    """Prometheus metrics (text exposition format 0.0.4)."""
    return Response(await probes.scrape(call.services.metric_samplers), 200, content_type=metrics.CONTENT_TYPE)


@api_route(bp, "GET", "/api/openapi.json", response=dict[str, Any], auth=False)
async def openapi(call: Call) -> Response:
    """This API's OpenAPI 3.1 document."""
    app = quart.current_app
    body = app.extensions.get(_OPENAPI_KEY)
    if body is None:  # the routes are fixed once the app is built: build the document once
        routes = [spec for blueprint in app.blueprints.values() for spec in routes_of(blueprint)]
        body = encode(build_openapi(routes, app_state().services.config.identity))
        app.extensions[_OPENAPI_KEY] = body
    return Response(body, 200, content_type="application/json")
