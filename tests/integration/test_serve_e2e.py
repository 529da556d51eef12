"""The whole server as a user meets it: `openmaic serve` (all roles) on a real socket, the demo provider."""

from __future__ import annotations

import json

import pytest
import trio
import trio_websocket

from tests.classrooms import assert_classroom_ready
from tests.serving import running_server

@pytest.fixture
async def server(db_url, tmp_path):
    async with running_server(db_url, tmp_path) as (client, port):
        yield client, port


async def test_a_run_reviewed_over_its_websocket_completes_and_lands_in_the_library(server):
    client, port = server
    r = await client.post("/api/generation-runs", json={"requirement": "Photosynthesis for 12-year-olds"})
    assert r.status_code == 202, r.text
    run = r.json()["run"]
    events: list[dict] = []
    url = f"ws://127.0.0.1:{port}/api/streams/{run['id']}/ws?after=0"
    async with trio_websocket.open_websocket_url(url) as ws:
        with trio.fail_after(60):
            confirmed = False
            while True:
                frame = json.loads(await ws.get_message())
                if frame["type"] == "ack":
                    assert frame["commandId"] == "ok1" and frame["result"]["state"] == "generating", frame
                    continue
                if frame["type"] != "event":
                    continue
                event = frame["event"]
                assert event["seq"] == frame["seq"] and event["runId"] == run["id"]
                events.append(event)
                if event["type"] == "outline_ready" and not confirmed:
                    # A command on the socket: the same body as POST …/confirm-outline, the same answer.
                    await ws.send_message(json.dumps({"type": "confirm_outline", "commandId": "ok1",
                                                      "outlineRevision": event["data"]["revision"]}))
                    confirmed = True
                if event["type"] == "completed":
                    break
    seqs = [e["seq"] for e in events]
    assert seqs == sorted(set(seqs))
    assert sum(e["type"] == "outline_item" for e in events) >= 4
    assert not any("." in e["type"] for e in events)  # the log's internal events stay out
    done = (await client.get(f"/api/generation-runs/{run['id']}")).json()["run"]
    assert done["state"] == "completed" and done["progress"]["scenesCompleted"] == done["progress"]["scenesTotal"] >= 4
    classroom = (await client.get(f"/api/classrooms/{done['stageId']}")).json()["classroom"]
    assert len(classroom["scenes"]) == done["progress"]["scenesTotal"]
    assert_classroom_ready(classroom)
    with trio.fail_after(20):
        while True:
            cards = (await client.get("/api/classrooms")).json()["classrooms"]
            if cards and cards[0]["label"] == "ready":
                break
            await trio.sleep(0.2)
    assert cards[0]["id"] == done["stageId"] and cards[0]["runId"] == run["id"]


async def test_a_workbench_session_edits_its_course_and_goes_idle(server):
    client, _ = server
    r = await client.post("/api/agent/sessions", json={"prompt": "add a scene about fractions"})
    assert r.status_code == 202, r.text
    sid = r.json()["id"]
    with trio.fail_after(30):
        while (meta := (await client.get(f"/api/agent/sessions/{sid}")).json())["status"] != "succeeded":
            await trio.sleep(0.2)
    classroom = (await client.get(f"/api/classrooms/{meta['stageId']}")).json()["classroom"]
    assert any("fraction" in s["title"].lower() for s in classroom["scenes"])


async def test_bad_requests_get_clear_errors(server):
    client, _ = server
    r = await client.post("/api/generation-runs", content=b"{not json", headers={"content-type": "application/json"})
    assert r.status_code == 400 and r.json()["errorCode"] == "INVALID_REQUEST"
    r = await client.post("/api/generation-runs", json={"requirement": 5})
    assert r.status_code == 400 and r.json()["details"]["path"] == "requirement"
    r = await client.post("/api/generation-runs", json={"requirement": "a", "outlineReview": "later"})
    assert r.status_code == 400 and r.json()["details"]["path"] == "outlineReview"
    r = await client.get("/api/generation-runs/nope")
    assert (r.status_code, r.text) == (404, "Not found")
    r = await client.post("/api/agent/sessions/nope/messages", json={"text": "hi"})
    assert (r.status_code, r.text) == (404, "Not found")


async def test_custom_agents_are_created_listed_changed_and_cast_in_a_run(server):
    client, _ = server
    body = {"agent": {"id": "oak", "name": "Professor  Oak", "role": "teacher", "persona": "Loves plants.",
                      "avatar": "🌳", "color": "#228b22", "allowedActions": ["spotlight"], "priority": 9}}
    r = await client.post("/api/agents", json=body)
    assert r.status_code == 201, r.text
    oak = r.json()["agent"]
    assert (oak["id"], oak["name"], oak["avatar"], oak["allowedActions"]) == ("oak", "Professor Oak", "🌳",
                                                                             ["spotlight"])
    r = await client.post("/api/agents", json=body)
    assert (r.status_code, r.json()["error"]["code"]) == (409, "AGENT_EXISTS")
    r = await client.post("/api/agents", json={"agent": {**body["agent"], "id": "default-1"}})
    assert (r.status_code, r.json()["error"]["code"]) == (403, "BUILT_IN_AGENT_READ_ONLY")
    for bad, path in (({"role": "wizard"}, "agent.role"), ({"name": "   "}, "agent.name"),
                      ({"priority": 11}, "agent.priority"), ({"persona": "p" * 8001}, "agent.persona"),
                      ({"id": "has space"}, "agent.id")):  # fmt: skip
        r = await client.post("/api/agents", json={"agent": {**body["agent"], "id": "x", **bad}})
        assert r.status_code == 400 and r.json()["error"]["code"] == "INVALID_AGENT", (bad, r.text)
        assert r.json()["error"]["details"]["path"] == path
    r = await client.post("/api/agents", json={"agent": {"id": "x", "name": 5, "role": "teacher"}})
    assert (r.status_code, r.json()["error"]["code"]) == (400, "INVALID_AGENT")
    listed = (await client.get("/api/agents")).json()["agents"]
    assert [a["id"] for a in listed] == [f"default-{i}" for i in range(1, 7)] + ["oak"]
    assert all(a["readOnly"] for a in listed[:6]) and "readOnly" not in listed[6]
    r = await client.put("/api/agents/oak", json={"agent": {**body["agent"], "name": "Professor Elm"}})
    assert r.status_code == 200 and r.json()["agent"]["name"] == "Professor Elm"
    r = await client.put("/api/agents/nobody", json=body)
    assert (r.status_code, r.json()["error"]["code"]) == (404, "AGENT_NOT_FOUND")

    r = await client.post("/api/generation-runs", json={"requirement": "Seeds", "outlineReview": "auto",
                                                         "agents": {"mode": "preset", "agentIds": ["oak", "default-2"]}})
    assert r.status_code == 202, r.text
    run_id = r.json()["run"]["id"]
    with trio.fail_after(60):
        while (run := (await client.get(f"/api/generation-runs/{run_id}")).json()["run"])["state"] != "completed":
            assert run["state"] != "paused", run
            await trio.sleep(0.2)
    assert [a["name"] for a in run["agents"]["agents"]] == ["Professor Elm", "AI assistant"]
    r = await client.post("/api/generation-runs", json={"requirement": "Seeds",
                                                         "agents": {"mode": "preset", "agentIds": ["ghost"]}})
    assert r.status_code == 400 and "ghost" in r.text
    assert (await client.delete("/api/agents/oak")).status_code == 204
    r = await client.delete("/api/agents/oak")
    assert (r.status_code, r.json()["error"]["code"]) == (404, "AGENT_NOT_FOUND")
    r = await client.post("/api/agents/import", json={"agents": [body["agent"], {**body["agent"], "id": "default-3"},
                                                               {**body["agent"], "id": "elm"}]})
    assert r.json() == {"imported": 2, "skipped": [{"id": "default-3", "reason": "built-in"}]}
