"""The operators' HTTP API on the admin listener (real sockets): list, show, cancel with replayed command ids,
retry's refusal; an admin token when one is configured, loopback clients only when none is; and never on the
public API's port."""

from __future__ import annotations

import contextlib
from types import SimpleNamespace

import httpx
import pytest
import trio

from openmaic.actors.commands import Commands as SessionCommands
from openmaic.admin import serve_admin
from openmaic.api.operators import Forbidden, _require_operator
from openmaic.api.resources import resource_blueprints
from openmaic.config import parse_config
from openmaic.events.log import EventLog
from openmaic.events.wakeups import Wakeups
from openmaic.models.provider import open_model_router
from openmaic.runs.events import RunInput
from openmaic.runs.service import RunService
from openmaic.services import Services
from openmaic.workbench.service import WorkbenchSessions
from tests.integration.api_harness import running_api

TOKEN = "op-token-0123456789abcdef"


@contextlib.asynccontextmanager
async def admin_listener(db, yml: str = "", env: dict[str, str] | None = None):
    config = parse_config(yml, source="<test>", env=env or {})
    wakeups = Wakeups()
    async with open_model_router(config) as models, trio.open_nursery() as nursery:
        await nursery.start(wakeups.run, db)
        services = Services(config=config, db=db, log=EventLog(db, wakeups), wakeups=wakeups, models=models)
        listening = await nursery.start(serve_admin, services, "127.0.0.1", 0)
        async with httpx.AsyncClient(base_url=listening.url, trust_env=False, timeout=10) as client:
            yield client, services
        nursery.cancel_scope.cancel()


async def test_operators_list_show_and_cancel_over_http(db):
    async with admin_listener(db) as (client, services):
        log = services.log
        run = await RunService(log, services.config).create_run("alice", "c-run", RunInput(requirement="Tides"))
        session = (await WorkbenchSessions(log, SessionCommands(log)).create_session("bob", "c-w", message="hi")).id

        r = await client.get("/api/admin/sessions")
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["success"] is True
        assert {s["id"]: (s["kind"], s["owner"]) for s in body["sessions"]} == {
            run.id: ("generation", "alice"), session: ("workbench", "bob")}
        assert {"leaseWorker", "leaseLeftS", "idleS", "stuck"} <= set(body["sessions"][0])
        r = await client.get("/api/admin/sessions", params={"owner": "bob", "kind": "workbench"})
        assert [s["id"] for s in r.json()["sessions"]] == [session]
        r = await client.get("/api/admin/sessions", params={"kind": "course"})
        assert r.status_code == 400 and r.json()["details"]["path"] == "kind"
        r = await client.get("/api/admin/sessions", params={"limit": "0"})
        assert r.status_code == 400

        r = await client.get(f"/api/admin/sessions/{run.id}")
        assert r.status_code == 200, r.text
        detail = r.json()
        assert detail["session"]["id"] == run.id and detail["leases"] == [] and detail["truncated"] is False
        assert [e["type"] for e in detail["events"]][:2] == ["session.created", "run.created"]
        assert detail["events"][0]["data"]["owner_id"] == "alice"  # the stored data, as it is
        r = await client.get("/api/admin/sessions/nope")
        assert r.status_code == 404 and "no session or run" in r.json()["error"]

        r = await client.post(f"/api/admin/sessions/{session}/cancel", json={"commandId": "op-1"})
        assert r.status_code == 200, r.text
        first = r.json()
        assert first["replayed"] is False and first["commandId"] == "op-1"
        again = (await client.post(f"/api/admin/sessions/{session}/cancel", json={"commandId": "op-1"})).json()
        assert again["replayed"] is True and again["seq"] == first["seq"]
        cancels = [e for e in await log.read_stream(session) if e.type == "session.cancel_requested"]
        assert [e.command_id for e in cancels] == ["op-1"]
        r = await client.post(f"/api/admin/sessions/{session}/cancel", json={})
        assert r.status_code == 400 and r.json()["errorCode"] == "MISSING_REQUIRED_FIELD"

        r = await client.post(f"/api/admin/runs/{run.id}/retry", json={"commandId": "op-2"})
        assert r.status_code == 409 and "only a paused run can be retried" in r.json()["error"]
        r = await client.post(f"/api/admin/runs/{session}/retry", json={"commandId": "op-3"})
        assert r.status_code == 409 and "workbench" in r.json()["error"]
        assert not [e for e in await log.read_stream(run.id) if e.command_id in ("op-2", "op-3")]


async def test_with_an_admin_token_only_its_bearer_is_served(db):
    # ACCESS_CODE gates the public API for its users; the operators' routes have their own guard, not that one.
    env = {"ACCESS_CODE": "the-teachers-code"}
    async with admin_listener(db, f"server: {{admin_token: {TOKEN}}}", env) as (client, _):
        assert (await client.get("/api/admin/sessions")).status_code == 403
        wrong = await client.get("/api/admin/sessions", headers={"Authorization": "Bearer nope"})
        assert wrong.status_code == 403 and wrong.json()["errorCode"] == "FORBIDDEN"
        right = await client.get("/api/admin/sessions", headers={"Authorization": f"Bearer {TOKEN}"})
        assert right.status_code == 200 and right.json()["sessions"] == []
        assert (await client.get("/healthz")).status_code == 200  # probes need no token
        assert (await client.get("/api/openapi.json")).status_code == 200


@pytest.mark.parametrize(("peer", "served"), [("127.0.0.1", True), ("::1", True), ("10.1.2.3", False),
                                              ("192.168.0.9", False), ("", False)])  # fmt: skip
def test_without_a_token_only_loopback_clients_are_served(peer, served):
    call = SimpleNamespace(services=SimpleNamespace(config=parse_config("", source="<test>", env={})),
                           request=SimpleNamespace(headers={}, remote_addr=peer))  # fmt: skip
    if served:
        _require_operator(call)  # type: ignore[arg-type]
    else:
        with pytest.raises(Forbidden, match="only this host's clients"):
            _require_operator(call)  # type: ignore[arg-type]


async def test_the_public_api_never_serves_the_operators_routes(db):
    async with running_api(db, blueprints=resource_blueprints()) as api, api.client() as client:
        assert (await client.get("/api/admin/sessions")).status_code == 404
        assert not [p for p in (await client.get("/api/openapi.json")).json()["paths"] if p.startswith("/api/admin")]


async def test_the_operators_list_comes_in_pages_each_session_once(db):
    async with admin_listener(db) as (client, services):
        made = [(await WorkbenchSessions(services.log, SessionCommands(services.log))
                 .create_session("bob", f"c-{i}", message="hi")).id for i in range(5)]  # fmt: skip
        whole = (await client.get("/api/admin/sessions")).json()
        assert sorted(s["id"] for s in whole["sessions"]) == sorted(made) and whole["nextCursor"] is None
        seen, params = [], {"limit": 2}
        while True:
            r = await client.get("/api/admin/sessions", params=params)
            assert r.status_code == 200 and len(r.json()["sessions"]) <= 2, r.text
            seen += [s["id"] for s in r.json()["sessions"]]
            if r.json()["nextCursor"] is None:
                break
            params = {"limit": 2, "cursor": r.json()["nextCursor"]}
        assert seen == [s["id"] for s in whole["sessions"]] and len(set(seen)) == 5, seen
        for bad in ("W10", "WyJub3QtYS10aW1lIiwieCJd", "nope!"):
            r = await client.get("/api/admin/sessions", params={"cursor": bad})
            assert r.status_code == 400 and r.json()["details"]["path"] == "cursor", (bad, r.text)
