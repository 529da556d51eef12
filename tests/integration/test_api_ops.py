"""Operational routes and serving: health, readiness, metrics, the OpenAPI document, start-up failures."""

from __future__ import annotations

import functools
import math
import re

import pytest
import trio
from quart import Blueprint

from openmaic import errors, probes
from openmaic.api import create_app, serve_api
from openmaic.api.errors import AddressInUse
from openmaic.projections import default_projections, record_projection_lag, run_projectors
from openmaic.store.database import open_database
from openmaic.store.migrations import load_migrations
from openmaic.store.ports import free_port
from tests.integration.api_harness import make_config, running_api, testing_bp
from tests.runtime import wait_for

REQUIRED_METRICS = {
    "openmaic_appends_total": "counter",
    "openmaic_append_duration_seconds": "histogram",
    "openmaic_claims_total": "counter",
    "openmaic_claim_duration_seconds": "histogram",
    "openmaic_takeovers_total": "counter",
    "openmaic_active_actors": "gauge",
    "openmaic_lease_losses_total": "counter",
    "openmaic_step_duration_seconds": "histogram",
    "openmaic_provider_call_duration_seconds": "histogram",
    "openmaic_websocket_clients": "gauge",
    "openmaic_sse_clients": "gauge",
    "openmaic_live_feeds": "gauge",
    "openmaic_live_feed_delivery_seconds": "histogram",
    "openmaic_slow_consumers_total": "counter",
    "openmaic_projection_lag_events": "gauge",
    "openmaic_projection_lag_seconds": "gauge",
    "openmaic_horizon_age_seconds": "gauge",
    "openmaic_sessions_stuck": "gauge",
    "openmaic_http_requests_total": "counter",
    "process_cpu_seconds_total": "counter",
    "process_resident_memory_bytes": "gauge",
    "python_info": "gauge",
}


async def test_healthz_and_readyz(db):
    async with running_api(db) as api, api.client() as client:
        r = await client.get("/healthz")
        assert (r.status_code, r.json()) == (200, {"status": "ok"})
        r = await client.get("/readyz")
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["checks"] == {"database": "ok", "migrations": "ok", "connections": "ok", "listener": "ok",
                                  "horizon": "ok"}
        assert body["status"] == "ready" and body["horizon"]["threshold_s"] == 60


async def test_readyz_fails_while_the_listener_is_down_and_recovers(db, monkeypatch):
    async with running_api(db) as api, api.client() as client:
        assert (await client.get("/readyz")).status_code == 200
        # Terminate the LISTEN connection's backend, and refuse its reconnection until told otherwise.
        reconnect = db._connect_listener
        refusing = True

        async def connect_listener():
            if refusing:
                raise errors.DatabaseUnavailable("refused while the test holds the listener down")
            return await reconnect()

        monkeypatch.setattr(db, "_connect_listener", connect_listener)
        await db.execute("SELECT pg_terminate_backend($1)", db.listener_backend_pid())
        with trio.fail_after(5):
            while (r := await client.get("/readyz")).status_code == 200:
                await trio.sleep(0.02)
        assert r.status_code == 503
        err = r.json()
        assert err["errorCode"] == "SERVICE_UNAVAILABLE" and "listener" in err["error"]
        assert err["details"]["checks"]["database"] == "ok"
        assert err["details"]["checks"]["listener"].startswith("failed")
        assert (await client.get("/healthz")).status_code == 200  # alive, just not ready

        refusing = False
        with trio.fail_after(10):
            while (r := await client.get("/readyz")).status_code != 200:
                await trio.sleep(0.05)
        assert r.json()["checks"]["listener"] == "ok"


async def test_readyz_names_pending_migrations(db):
    async with running_api(db) as api, api.client() as client:
        last = load_migrations()[-1]
        await db.execute("DELETE FROM openmaic_migrations WHERE version = $1", last.version)
        r = await client.get("/readyz")
        assert r.status_code == 503
        assert r.json()["details"]["checks"]["migrations"] == f"failed: pending {last.version:04d}_{last.name}"


_SAMPLE = re.compile(
    r'^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(?P<labels>[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\]|\\.)*"'
    r'(?:,[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\]|\\.)*")*)?\})? (?P<value>\S+)$'
)


def _family(name: str, types: dict[str, str]) -> str | None:
    """The metric a sample belongs to: itself, or a histogram whose _bucket/_sum/_count it is."""
    if name in types:
        return name
    base, _, suffix = name.rpartition("_")
    return base if suffix in ("bucket", "sum", "count") and types.get(base) == "histogram" else None


def parse_exposition(text: str) -> tuple[dict[str, str], dict[tuple[str, str], float]]:
    """A strict reader of the Prometheus text format: TYPE per metric, samples as (name, labels) -> value.
    Counters must be named ..._total; a histogram's buckets must be cumulative and end at +Inf = _count."""
    assert text.endswith("\n")
    types: dict[str, str] = {}
    samples: dict[tuple[str, str], float] = {}
    for line in text.splitlines():
        if line.startswith("# HELP "):
            assert len(line.split(" ", 3)) == 4, line
        elif line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ")
            assert kind in ("counter", "gauge", "histogram") and name not in types, line
            assert (kind == "counter") == name.endswith("_total"), f"counters, and only they, end in _total: {line}"
            types[name] = kind
        else:
            m = _SAMPLE.match(line)
            assert m is not None, f"not a sample line: {line!r}"
            assert _family(m["name"], types), f"sample before its TYPE: {line!r}"
            value = float(m["value"])
            assert not math.isnan(value)
            samples[(m["name"], m["labels"] or "")] = value
    buckets: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for (name, labels), value in samples.items():
        if name.endswith("_bucket") and _family(name, types) != name:
            pairs = _LABEL.findall(labels)
            le = float(dict(pairs)["le"])
            rest = ",".join(f'{k}="{v}"' for k, v in pairs if k != "le")
            buckets.setdefault((name[: -len("_bucket")], rest), []).append((le, value))
    for (base, labels), counts in buckets.items():
        counts.sort()
        assert [c for _, c in counts] == sorted(c for _, c in counts), f"{base}{{{labels}}}: buckets not cumulative"
        assert counts[-1] == (math.inf, samples[(base + "_count", labels)]), (base, labels)
    return types, samples


_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


async def test_metrics_exposition_parses_and_counts_requests(db):
    async with running_api(db) as api, api.client() as client:
        await client.get("/healthz")
        await client.get("/no/such/route")
        r = await client.get("/metrics")
        assert r.status_code == 200
        assert r.headers["content-type"] == "text/plain; version=0.0.4; charset=utf-8"
        types, samples = parse_exposition(r.text)
        for name, kind in REQUIRED_METRICS.items():
            assert types.get(name) == kind, name
        assert samples[("openmaic_http_requests_total", 'method="GET",status="200"')] >= 1
        assert samples[("openmaic_http_requests_total", 'method="GET",status="404"')] >= 1
        assert ("openmaic_websocket_clients", "") in samples


async def test_projection_lag_is_read_from_the_database_at_each_scrape(db):
    projections = default_projections()
    async with running_api(db) as api, api.client() as client:
        api.services.metric_samplers.append(functools.partial(record_projection_lag, db, projections))
        await api.create_stream("s", events=4)  # 5 events, and no projector has applied any of them
        _, samples = parse_exposition((await client.get("/metrics")).text)
        for p in projections:
            assert samples[("openmaic_projection_lag_events", f'projection="{p.name}"')] == 5, p.name
            assert samples[("openmaic_projection_lag_seconds", f'projection="{p.name}"')] > 0
        async with trio.open_nursery() as nursery:
            await nursery.start(functools.partial(run_projectors, db, api.log, api.services.wakeups, projections,
                                                  poll_s=0.1, lock_retry_s=0.1))  # fmt: skip

            async def caught_up() -> bool:
                _, samples = parse_exposition((await client.get("/metrics")).text)
                return all(samples[("openmaic_projection_lag_events", f'projection="{p.name}"')] == 0
                           and samples[("openmaic_projection_lag_seconds", f'projection="{p.name}"')] == 0
                           for p in projections)  # fmt: skip

            await wait_for(caught_up, timeout=20)
            nursery.cancel_scope.cancel()


async def test_a_failing_metrics_sampler_leaves_the_rest_of_the_metrics_served(db, caplog):
    async def broken() -> None:
        raise errors.DatabaseUnavailable("PostgreSQL connection lost: test")

    async def hanging() -> None:
        await trio.sleep_forever()

    async with running_api(db) as api, api.client() as client:
        api.services.metric_samplers += [broken, hanging]
        r = await client.get("/metrics")
        assert r.status_code == 200
        types, _ = parse_exposition(r.text)
        assert types["openmaic_appends_total"] == "counter"
        assert "PostgreSQL connection lost" in caplog.text and "stale" in caplog.text


async def test_openapi_describes_every_route_including_added_blueprints(db):
    async with running_api(db, blueprints=[testing_bp]) as api, api.client() as client:
        r = await client.get("/api/openapi.json")
        assert r.status_code == 200
        doc = r.json()
        assert doc["openapi"] == "3.1.0"
        paths = doc["paths"]
        for path in ("/healthz", "/readyz", "/metrics", "/api/openapi.json", "/api/agent/sessions/{id}/events",
                     "/api/streams/{id}/ws", "/api/test/streams/{id}/messages", "/api/test/boom"):  # fmt: skip
            assert path in paths, path
        events = paths["/api/agent/sessions/{id}/events"]["get"]
        assert {p["name"] for p in events["parameters"]} == {"id", "lastEventId", "Last-Event-ID"}
        assert "text/event-stream" in events["responses"]["200"]["content"]
        assert events["responses"]["404"]["content"] == {"text/plain": {"schema": {"type": "string",
                                                                                   "const": "Not found"}}}
        assert {"404", "400", "500"} <= set(events["responses"])
        ws = paths["/api/streams/{id}/ws"]["get"]
        assert "101" in ws["responses"] and "x-websocket-receives" in ws and "x-websocket-sends" in ws
        post = paths["/api/test/streams/{id}/messages"]["post"]
        assert post["requestBody"]["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/PostBody"}
        assert {"202", "400", "413"} <= set(post["responses"])
        assert paths["/healthz"]["get"]["security"] == []
        schemas = doc["components"]["schemas"]
        assert {"SessionMeta", "ApiErrorBody", "PostBody", "TestAck"} <= set(schemas)

        def refs(node):
            if isinstance(node, dict):
                if "$ref" in node:
                    yield node["$ref"]
                for v in node.values():
                    yield from refs(v)
            elif isinstance(node, list):
                for v in node:
                    yield from refs(v)

        for ref in refs(doc):
            assert ref.startswith("#/components/schemas/") and ref.rsplit("/", 1)[1] in schemas, ref

    async with running_api(db, make_config("identity: {mode: token}")) as api, api.client() as client:
        doc = (await client.get("/api/openapi.json")).json()
        assert doc["components"]["securitySchemes"]["bearerAuth"]["scheme"] == "bearer"
        assert doc["paths"]["/api/agent/sessions/{id}/events"]["get"]["security"] == [{"bearerAuth": []}]


async def test_serve_api_fails_fast_when_the_port_is_in_use(db):
    async with running_api(db) as api:
        app = create_app(api.services)
        with trio.fail_after(5), pytest.raises(AddressInUse) as exc:
            await serve_api(app, "127.0.0.1", api.port)
        assert exc.value.code == "address_in_use" and str(api.port) in exc.value.message
    # A free port works and reports where it listens.
    free = free_port()
    async with running_api(db) as api, trio.open_nursery() as nursery:
        listening = await nursery.start(serve_api, create_app(api.services), "127.0.0.1", free)
        assert listening.port == free and listening.url == f"http://127.0.0.1:{free}"
        nursery.cancel_scope.cancel()


async def test_routes_must_be_declared_with_api_route(db):
    rogue = Blueprint("rogue", __name__)

    @rogue.route("/rogue")
    async def rogue_view():
        return "hi"

    async with running_api(db) as api:
        with pytest.raises(RuntimeError, match="/rogue"):
            create_app(api.services, blueprints=[rogue])


async def test_a_transaction_open_in_another_database_is_reported_as_the_horizon(db, pg):
    """A transaction holding an id in ANY database of the cluster holds back every projector of every database:
    /readyz names it (a warning, still 200) once it is older than the threshold, and the gauge carries its age."""
    config = make_config("runtime: {horizon_age_threshold_s: 0.5}")
    async with running_api(db, config) as api, api.client() as client, \
            open_database(pg.admin_url, min_size=1, max_size=1) as elsewhere, trio.open_nursery() as nursery:
        api.services.metric_samplers += probes.samplers(db)
        assert (await client.get("/readyz")).json()["checks"]["horizon"] == "ok"
        # One statement that takes a transaction id, then holds it (cancelling the task cancels the query).
        nursery.start_soon(elsewhere.execute, Q_HOLD_XID)

        async def lagging() -> bool:
            return (await client.get("/readyz")).json()["checks"]["horizon"].startswith("lagging")

        await wait_for(lagging, timeout=10)
        r = await client.get("/readyz")
        assert r.status_code == 200, "a lagging horizon warns; it does not take the process out of service"
        horizon = r.json()["horizon"]
        other = pg.admin_url.rsplit("/", 1)[1].split("?")[0]
        assert horizon["database"] == other and horizon["state"] == "active" and horizon["age_s"] >= 0.5
        assert f"database {other}" in r.json()["checks"]["horizon"]
        _, samples = parse_exposition((await client.get("/metrics")).text)
        assert samples[("openmaic_horizon_age_seconds", "")] >= 0.5
        nursery.cancel_scope.cancel()
    async with running_api(db, config) as api, api.client() as client:
        api.services.metric_samplers += probes.samplers(db)
        await wait_for(lambda: _horizon_clear(client), timeout=10)
        _, samples = parse_exposition((await client.get("/metrics")).text)
        assert samples[("openmaic_horizon_age_seconds", "")] < 0.5


async def _horizon_clear(client) -> bool:
    return (await client.get("/readyz")).json()["checks"]["horizon"] == "ok"


# The test holds a transaction id without a transaction block of its own: one statement that takes an id and sleeps.
Q_HOLD_XID = "DO $$ BEGIN PERFORM pg_current_xact_id(); PERFORM pg_sleep(60); END $$"
