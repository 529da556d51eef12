"""The whole server as a user meets it: `openmaic serve` (all roles) on a real socket, the demo provider."""

from __future__ import annotations

import json

import pytest
import trio
import trio_websocket

from tests.serving import running_server

@pytest.fixture
async def server(db_url, tmp_path):
    async with running_server(db_url, tmp_path) as (client, port):
        yield client, port


async def test_a_run_with_outline_review_completes_and_lands_in_the_library(server):
    client, port = server
    r = await client.post("/api/runs", json={"command_id": "c1", "requirement": "Photosynthesis for 12-year-olds",
                                             "outline_review": "wait"})
    assert r.status_code == 202, r.text
    run = r.json()
    again = await client.post("/api/runs", json={"command_id": "c1", "requirement": "Photosynthesis for 12-year-olds",
                                                 "outline_review": "wait"})
    assert again.json()["id"] == run["id"]
    events: list[dict] = []
    url = f"ws://127.0.0.1:{port}/api/streams/{run['id']}/ws?after=0"
    async with trio_websocket.open_websocket_url(url) as ws:
        with trio.fail_after(60):
            confirmed = False
            while True:
                frame = json.loads(await ws.get_message())
                if frame["type"] != "event":
                    continue
                events.append(frame["event"])
                if frame["event"]["type"] == "run.state_changed" and \
                        frame["event"]["data"]["state"] == "awaiting_outline_confirmation" and not confirmed:
                    snap = (await client.get(f"/api/runs/{run['id']}")).json()
                    await ws.send_message(json.dumps({"type": "confirm_outline", "command_id": "ok1",
                                                      "outline_revision": snap["outline_revision"]}))
                    confirmed = True
                if frame["event"]["type"] == "session.ended":
                    break
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert events[-1]["data"]["status"] == "completed"
    assert sum(e["type"] == "run.outline_item" for e in events) >= 4
    snap = (await client.get(f"/api/runs/{run['id']}")).json()
    assert snap["state"] == "completed" and snap["scenes_completed"] == snap["scenes_total"] >= 4
    course = (await client.get(f"/api/courses/{snap['course_id']}")).json()
    assert all(s["status"] == "ready" and s["content"] for s in course["document"]["scenes"])
    with trio.fail_after(20):
        while True:
            cards = (await client.get("/api/library")).json()["cards"]
            if cards and cards[0]["label"] == "ready":
                break
            await trio.sleep(0.2)
    assert cards[0]["course_id"] == snap["course_id"]


async def test_a_workbench_session_edits_its_course_and_goes_idle(server):
    client, _ = server
    r = await client.post("/api/sessions", json={"command_id": "s1", "message": "add a scene about fractions"})
    assert r.status_code == 201, r.text
    sid = r.json()["id"]
    with trio.fail_after(30):
        while (snap := (await client.get(f"/api/sessions/{sid}")).json())["status"] != "idle" or not snap["turns"]:
            await trio.sleep(0.2)
    course = (await client.get(f"/api/courses/{snap['course_id']}")).json()
    assert any("fraction" in s["title"].lower() for s in course["document"]["scenes"])
    page = (await client.get(f"/api/streams/{sid}/events?after=0")).json()
    types = [e["type"] for e in page["events"]]
    assert "tool.called" in types and "tool.result" in types and "model.turn_completed" in types


async def test_bad_requests_get_clear_errors(server):
    client, _ = server
    r = await client.post("/api/runs", content=b"{not json", headers={"content-type": "application/json"})
    assert r.status_code == 400 and r.json()["errorCode"] == "INVALID_REQUEST"
    r = await client.post("/api/runs", json={"command_id": "x", "requirement": 5})
    assert r.status_code == 400 and r.json()["details"]["path"] == "requirement"
    r = await client.post("/api/runs", json={"command_id": "x", "requirement": "a", "api_key": "sk-nope"})
    assert r.status_code == 400
    r = await client.get("/api/runs/nope")
    assert r.status_code == 404
    r = await client.post("/api/sessions/nope/messages", json={"command_id": "m", "text": "hi"})
    assert r.status_code == 404


async def test_custom_agents_are_created_once_listed_and_cast_in_a_run(server):
    client, _ = server
    body = {"command_id": "agent-1", "name": "Professor  Oak", "role": "teacher", "persona": "Loves plants."}
    r = await client.post("/api/agents", json=body)
    assert r.status_code == 201, r.text
    oak = r.json()
    assert oak["id"].startswith("agent_") and oak["name"] == "Professor Oak"
    again = await client.post("/api/agents", json=body)  # the same command: the same agent, nothing written
    assert (again.status_code, again.json()) == (201, oak)
    r = await client.post("/api/agents", json={**body, "name": "Professor Elm"})
    assert r.status_code == 409 and r.json()["errorCode"] == "CONFLICT"
    for bad, path in (({"role": "wizard"}, "role"), ({"name": "   "}, "name"), ({"name": "x" * 81}, "name"),
                      ({"persona": "p" * 2001}, "persona"), ({"mood": "happy"}, "mood")):  # fmt: skip
        r = await client.post("/api/agents", json={**body, "command_id": f"bad-{path}", **bad})
        assert r.status_code == 400 and path in json.dumps(r.json()), (bad, r.text)
    listed = [a["id"] for a in (await client.get("/api/agents")).json()["agents"]]
    assert listed[:4] == ["teacher", "assistant", "classmate_1", "classmate_2"] and listed[4:] == [oak["id"]]

    r = await client.post("/api/runs", json={"command_id": "oak-run", "requirement": "Seeds", "outline_review": "auto",
                                             "agents": [oak["id"], "assistant"]})  # fmt: skip
    assert r.status_code == 202, r.text
    run_id = r.json()["id"]
    with trio.fail_after(60):
        while (snap := (await client.get(f"/api/runs/{run_id}")).json())["state"] != "completed":
            assert snap["state"] != "paused", snap
            await trio.sleep(0.2)
    events = (await client.get(f"/api/streams/{run_id}/events")).json()["events"]
    (cast,) = [e["data"]["agents"] for e in events if e["type"] == "run.agents_selected"]
    assert [a["name"] for a in cast] == ["Professor Oak", "Sam"]
    r = await client.post("/api/runs", json={"command_id": "ghost-run", "requirement": "Seeds",
                                             "agents": ["agent_0000000000000000"]})  # fmt: skip
    assert r.status_code == 400 and "agent_0000000000000000" in r.text
