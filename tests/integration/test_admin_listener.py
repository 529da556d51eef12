"""Every role is observable: worker and projector processes serve /healthz, /readyz and /metrics on their admin
listener, and a worker's counters move when it runs a course (real processes, real sockets, the demo provider)."""

from __future__ import annotations

import argparse
import socket

import httpx
import pytest
import trio

from openmaic import admin, serve
from openmaic.api.errors import AddressInUse
from openmaic.cli import _project_error
from openmaic.config import default_config
from openmaic.events.log import EventLog
from openmaic.events.wakeups import Wakeups
from openmaic.models.provider import open_model_router
from openmaic.services import Services
from openmaic.store.postgres import free_port
from tests.integration.test_api_ops import REQUIRED_METRICS, parse_exposition
from tests.serving import serve_processes, stderr_of, wait_ready


def _sum(samples: dict[tuple[str, str], float], name: str, *parts: str) -> float:
    return sum(v for (n, labels), v in samples.items() if n == name and all(p in labels for p in parts))


async def test_worker_and_projector_processes_serve_probes_and_metrics_that_move(db_url, tmp_path):
    api, worker, projector = free_port(), free_port(), free_port()
    roles = [("api", api), ("worker", None, ["--admin-port", str(worker)]),
             ("projector", None, ["--admin-port", str(projector)])]  # fmt: skip
    with serve_processes(db_url, tmp_path, roles) as procs:
        clients = {name: httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", trust_env=False, timeout=10)
                   for name, port in (("api", api), ("worker", worker), ("projector", projector))}  # fmt: skip
        try:
            for client in clients.values():
                await wait_ready(client, procs, tmp_path)
            for name in ("worker", "projector"):
                c = clients[name]
                assert (await c.get("/healthz")).json() == {"status": "ok"}, name
                ready = (await c.get("/readyz")).json()
                assert ready["status"] == "ready" and set(ready["checks"]) == {"database", "migrations", "connections",
                                                                             "listener", "horizon"}, name  # fmt: skip
                types, _ = parse_exposition((await c.get("/metrics")).text)
                assert {n: types.get(n) for n in REQUIRED_METRICS} == REQUIRED_METRICS, name
                # Only the operational routes: the admin port serves no API.
                assert (await c.get("/api/generation-runs")).status_code == 404, name

            r = await clients["api"].post("/api/generation-runs", json={"requirement": "Tides", "outlineReview": "auto"})
            assert r.status_code == 202, r.text
            run_id = r.json()["run"]["id"]
            with trio.fail_after(60):
                while (await clients["api"].get(f"/api/generation-runs/{run_id}")).json()["run"]["state"] != "completed":
                    assert all(p.poll() is None for p in procs), stderr_of(tmp_path)
                    await trio.sleep(0.2)

            _, w = parse_exposition((await clients["worker"].get("/metrics")).text)
            assert _sum(w, "openmaic_claims_total", 'kind="generation"') >= 1
            assert _sum(w, "openmaic_takeovers_total") == 0 and _sum(w, "openmaic_lease_losses_total") == 0
            assert _sum(w, "openmaic_appends_total") >= 10  # a claim, the outline, the scenes, the end …
            assert _sum(w, "openmaic_active_actors") == 0  # the run is over: no actor holds it
            for step in ("outline", "agents", "scene:content", "scene:actions"):
                assert _sum(w, "openmaic_step_duration_seconds_count", 'kind="generation"', f'step="{step}"',
                            'outcome="completed"') >= 1, step  # fmt: skip
            assert _sum(w, "openmaic_provider_call_duration_seconds_count", 'provider="demo"', 'outcome="ok"') >= 3
            assert _sum(w, "process_cpu_seconds_total") > 0
            _, a = parse_exposition((await clients["api"].get("/metrics")).text)
            assert _sum(a, "openmaic_appends_total") >= 2  # the run and its course, created by the API
            assert _sum(a, "openmaic_claims_total") == 0  # counters are per process: the API claims nothing
        finally:
            for client in clients.values():
                await client.aclose()


async def test_a_taken_default_admin_port_turns_the_listener_off_and_an_asked_for_one_stops_the_process(
        db, monkeypatch, caplog):  # fmt: skip
    """A second worker on a host finds the default port taken: it serves without probes (and says so); a port the
    operator asked for and cannot have stops the process, as the API's port does."""
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    port = taken.getsockname()[1]
    monkeypatch.setattr(admin, "DEFAULT_ADMIN_PORT", port)
    config = default_config()
    try:
        async with open_model_router(config) as models, trio.open_nursery() as nursery:
            wakeups = Wakeups()
            await nursery.start(wakeups.run, db)
            services = Services(config=config, db=db, log=EventLog(db, wakeups), wakeups=wakeups, models=models)
            args = argparse.Namespace(roles=["projector"], host="127.0.0.1", admin_port=None)
            nursery.start_soon(serve.serve_roles, services, args)
            with trio.fail_after(10):
                while "admin listener (/healthz, /readyz, /metrics) is off" not in caplog.text:
                    await trio.sleep(0.05)
            services.stopping.set()  # the projector role winds down; serve_roles returns
            explicit = argparse.Namespace(roles=["projector"], host="127.0.0.1", admin_port=port)
            with pytest.raises((AddressInUse, BaseExceptionGroup)) as refused:
                with trio.fail_after(10):
                    await serve.serve_roles(Services(config=config, db=db, log=services.log, wakeups=wakeups,
                                                     models=models), explicit)  # fmt: skip
            assert isinstance(_project_error(refused.value), AddressInUse)  # what the command line reports
            nursery.cancel_scope.cancel()
    finally:
        taken.close()
