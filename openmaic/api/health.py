"""Operational routes: OpenMAIC's ``/api/health``, liveness, readiness, metrics and the OpenAPI document.
All are public (no owner)."""

from __future__ import annotations

import logging
from typing import Any

import msgspec
import quart
import trio
from quart import Blueprint, Response

from openmaic import metrics
from openmaic.api.errors import NotReady
from openmaic.api.openapi import build_openapi
from openmaic.api.routing import Call, api_route, app_state, routes_of
from openmaic.api.wire import Success, Wire, encode
from openmaic.capabilities import media_capabilities, server_version
from openmaic.errors import OpenMaicError
from openmaic.store.migrations import pending
from openmaic.store.queries import Q

__all__ = ["bp"]

log = logging.getLogger("openmaic.api")

bp = Blueprint("ops", __name__)

CHECK_TIMEOUT_S = 2.0
"""Each readiness check gets this long: a probe that hangs is a failed probe."""

_OPENAPI_KEY = "openmaic.openapi"


class Health(msgspec.Struct, frozen=True):
    status: str


class Ready(msgspec.Struct, frozen=True):
    status: str
    checks: dict[str, str]
    """Each check's result: ``ok``, or why it failed."""


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

    503 (code not_ready) names the failed checks in details.checks.
    """
    db = call.services.db
    checks: dict[str, str] = {}
    try:
        with trio.fail_after(CHECK_TIMEOUT_S):
            await db.fetchval(Q.ping)
        checks["database"] = "ok"
    except (OpenMaicError, trio.TooSlowError) as exc:
        log.warning("readiness: database check failed: %s", exc)
        checks["database"] = "failed: unreachable"
    if checks["database"] == "ok":
        try:
            with trio.fail_after(CHECK_TIMEOUT_S):
                missing = await pending(db)
            checks["migrations"] = (
                "ok" if not missing else "failed: pending " + ", ".join(f"{m.version:04d}_{m.name}" for m in missing)
            )
        except (OpenMaicError, trio.TooSlowError) as exc:
            log.warning("readiness: migration check failed: %s", exc)
            checks["migrations"] = "failed: could not read the applied migrations"
    else:
        checks["migrations"] = "failed: database unreachable"
    checks["listener"] = "ok" if db.listener_connected else "failed: the LISTEN connection is down"
    failed = [name for name, result in checks.items() if result != "ok"]
    if failed:
        raise NotReady(f"not ready: {', '.join(failed)}", checks=checks)
    return Ready("ready", checks)


@api_route(bp, "GET", "/metrics", auth=False, media_type="text/plain")
async def metrics_text(call: Call) -> Response:
    """Prometheus metrics (text exposition format 0.0.4)."""
    for sample in call.services.metric_samplers:
        # A sampler that fails or hangs (the database is down) leaves its gauges as they were: the rest of the
        # metrics, which say what this process is doing, are served regardless.
        with trio.move_on_after(CHECK_TIMEOUT_S) as scope:
            try:
                await sample()
            except OpenMaicError as exc:
                log.warning("metrics: %s", exc)
        if scope.cancelled_caught:
            log.warning("metrics: a sampler took longer than %.0f s; its gauges are stale", CHECK_TIMEOUT_S)
    return Response(metrics.render(), 200, content_type="text/plain; version=0.0.4; charset=utf-8")


@api_route(bp, "GET", "/api/openapi.json", auth=False)
async def openapi(call: Call) -> Response:
    """This API's OpenAPI 3.1 document."""
    app = quart.current_app
    body = app.extensions.get(_OPENAPI_KEY)
    if body is None:  # the routes are fixed once the app is built: build the document once
        routes = [spec for blueprint in app.blueprints.values() for spec in routes_of(blueprint)]
        body = encode(build_openapi(routes, app_state().services.config.identity))
        app.extensions[_OPENAPI_KEY] = body
    return Response(body, 200, content_type="application/json")
