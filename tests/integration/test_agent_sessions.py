"""OpenMAIC's Pro sessions over a real `openmaic serve`: start, follow-ups, cancel, titles, the session's SSE and
the owner's feed."""

from __future__ import annotations

import json

import httpx
import pytest
import trio
import trio_websocket

from openmaic.actors.commands import Commands
from openmaic.events.log import EventLog
from openmaic.runs.agents import Agent, create_agent
from openmaic.store.database import open_database
from openmaic.workbench.service import WorkbenchSessions
from tests.eventsource import EventSource, open_sse
from tests.integration.api_harness import raw_ws
from tests.serving import FAST_CONFIG, running_server

SLOW = FAST_CONFIG + ("providers: {demo: {preset: demo, options: {latencyMs: 30}}}\n"
                      "slots: {llm: demo:course, agent: demo:agent}\n")


@pytest.fixture
async def server(db_url, tmp_path):
    async with running_server(db_url, tmp_path, SLOW) as (client, port):
        yield client, f"http://127.0.0.1:{port}"


async def wait_status(client: httpx.AsyncClient, sid: str, *statuses: str, timeout: float = 60) -> dict:
    meta: dict = {}
    try:
        with trio.fail_after(timeout):
            while (meta := (await client.get(f"/api/agent/sessions/{sid}")).json())["status"] not in statuses:
                await trio.sleep(0.1)
    except trio.TooSlowError:
        raise AssertionError(f"session {sid} still {meta} after {timeout} s, not {statuses}") from None
    return meta


async def test_a_session_works_answers_a_follow_up_and_refuses_to_cancel_once_done(server):
    client, base = server
    r = await client.post("/api/agent/sessions", json={"prompt": "add a scene about fractions"})
    assert r.status_code == 202, r.text
    meta = r.json()
    assert meta["status"] in ("queued", "running") and meta["prompt"] == "add a scene about fractions"
    assert meta["existingCourse"] is False and meta["stageId"] and isinstance(meta["createdAt"], int)
    done = await wait_status(client, meta["id"], "succeeded")
    assert done["deliveredUserMessageSeq"] > 0
    classroom = (await client.get(f"/api/classrooms/{done['stageId']}")).json()["classroom"]
    assert any("fraction" in s["title"].lower() for s in classroom["scenes"])

    assert (await client.patch(f"/api/agent/sessions/{meta['id']}", json={"title": "  Fractions  "})).json() == \
        {"title": "Fractions"}
    listed = (await client.get("/api/agent/sessions")).json()
    assert [m["id"] for m in listed] == [meta["id"]] and listed[0]["title"] == "Fractions"
    assert (await client.get("/api/agent/sessions/status")).json() == {meta["id"]: "succeeded"}

    r = await client.post(f"/api/agent/sessions/{meta['id']}/cancel")
    assert (r.status_code, r.json()) == (409, {"code": "SESSION_ALREADY_TERMINAL", "status": "succeeded",
                                              "error": "the session has already ended (succeeded)"})
    # a new message revives it; the server decides how it is delivered
    r = await client.post(f"/api/agent/sessions/{meta['id']}/messages", json={"text": "add a quiz about them"})
    assert r.status_code == 202, r.text
    answer = r.json()
    assert (answer["id"], answer["message"]["delivery"], answer["message"]["text"]) == (meta["id"], "queued",
                                                                                         "add a quiz about them")
    assert (answer["elementRefsAccepted"], answer["courseRefsAccepted"]) == (0, 0)
    running = await wait_status(client, meta["id"], "running", "succeeded")
    if running["status"] == "running":
        r = await client.post(f"/api/agent/sessions/{meta['id']}/cancel")
        assert (r.status_code, r.json()) == (202, {"id": meta["id"], "cancelRequested": True})
        await wait_status(client, meta["id"], "cancelled")

    # the session's events, resumed at any id: OpenMAIC's lifecycle vocabulary at the log's seqs
    url = f"{base}/api/agent/sessions/{meta['id']}/events"
    source = EventSource(url)
    seen: list[tuple[int, str]] = []
    async with open_sse(url) as resp:
        assert (await anext(resp.lines)).startswith(": replaying from event 0")
    async with source.connect() as messages:
        async for m in messages:
            if m.type == "caught_up":
                caught = m.json()
                break
            body = m.json()
            assert set(body) == {"id", "ts", "attempt", "type", "data", "phase"} and body["phase"] == "backlog"
            seen.append((body["id"], m.type))
    kinds = [k for _, k in seen]
    assert kinds[0] == "session_start" and "user_message" in kinds and "tool_execution_start" in kinds
    assert "session_end" in kinds and "turn_end" in kinds
    assert caught == {"type": "caught_up", "replayed": caught["replayed"], "fromEventId": 0}
    middle = seen[len(seen) // 2][0]
    again = EventSource(url, last_event_id=str(middle))
    rest: list[tuple[int, str]] = []
    async with again.connect() as messages:
        async for m in messages:
            if m.type == "caught_up":
                break
            rest.append((m.json()["id"], m.type))
    assert rest == [x for x in seen if x[0] > middle]


async def test_bad_requests_and_other_owners_sessions(server):
    client, _ = server
    r = await client.post("/api/agent/sessions", json={})
    assert (r.status_code, r.json()["errorCode"]) == (400, "MISSING_REQUIRED_FIELD")
    r = await client.post("/api/agent/sessions", json={"prompt": "x", "skill": "research"})
    assert (r.status_code, r.json()["errorCode"]) == (400, "INVALID_REQUEST")
    r = await client.post("/api/agent/sessions", json={"prompt": "x", "materialIds": ["mat_00000000000000000000000000"]})
    assert r.status_code == 404
    r = await client.post("/api/agent/sessions", json={"prompt": "x", "stageId": "course-nope"})
    assert r.status_code == 404
    for method, path, body in [("GET", "", None), ("PATCH", "", {"title": "t"}), ("POST", "/cancel", None),
                               ("POST", "/messages", {"text": "hi"}), ("GET", "/events", None)]:
        r = await client.request(method, f"/api/agent/sessions/nope{path}", json=body)
        assert (r.status_code, r.text) == (404, "Not found"), (method, path)
    meta = (await client.post("/api/agent/sessions", json={"prompt": "add a scene about maps"})).json()
    r = await client.post(f"/api/agent/sessions/{meta['id']}/messages", json={"text": "   "})
    assert (r.status_code, r.json()["errorCode"]) == (400, "MISSING_REQUIRED_FIELD")
    assert (await client.get("/api/agent/runtime")).json() == {"enabled": True, "runtimeEnabled": True,
                                                               "persistence": "postgresql"}


async def test_the_owner_feed_reports_new_sessions_and_their_status(server):
    client, base = server
    async with open_sse(f"{base}/api/agent/owner-events") as r:
        events: list[tuple[str, dict]] = []

        async def next_event() -> tuple[str, dict]:
            kind = ""
            async for line in r.lines:
                if line.startswith("event: "):
                    kind = line[7:]
                elif line.startswith("data: "):
                    return kind, json.loads(line[6:])
            raise AssertionError("the feed ended")

        with trio.fail_after(60):
            assert (await next_event())[0] == "caught_up"
            meta = (await client.post("/api/agent/sessions", json={"prompt": "add a scene about rain"})).json()
            while True:
                kind, data = await next_event()
                events.append((kind, data))
                if kind == "session_status" and data["status"] == "succeeded":
                    break
    assert events[0][0] == "session_created" and events[0][1]["sessionId"] == meta["id"]
    assert all(d["sessionId"] == meta["id"] for _, d in events)


async def test_another_owners_session_and_agents_are_the_same_404_as_unknown_ones(server, db_url):
    """Their session is invisible on every route and on the stream socket, and their agent's id neither blocks
    mine nor can be changed or deleted by me; nothing of theirs is written by my requests."""
    client, base = server
    async with open_database(db_url, max_size=2) as db:
        log = EventLog(db)
        sessions = WorkbenchSessions(log, Commands(log, message_kinds=["workbench"]))
        row, _ = await sessions.start("someone-else", "their own course")
        await create_agent(db, "someone-else", Agent(id="oak", name="Their Oak", role="teacher"))
    theirs = row.id
    for sid in (theirs, "nope"):
        for method, path, body in [("GET", "", None), ("PATCH", "", {"title": "mine now"}), ("POST", "/cancel", None),
                                   ("POST", "/messages", {"text": "hi"}), ("GET", "/events", None)]:
            r = await client.request(method, f"/api/agent/sessions/{sid}{path}", json=body)
            assert (r.status_code, r.text) == (404, "Not found"), (sid, method, path)
        with pytest.raises(trio_websocket.ConnectionRejected) as refused:
            async with raw_ws(int(base.rsplit(":", 1)[1]), f"/api/streams/{sid}/ws"):
                pass
        assert refused.value.status_code == 404, sid
    assert (await client.get("/api/agent/sessions")).json() == []
    assert theirs not in (await client.get("/api/agent/sessions/status")).json()

    for method in ("PUT", "DELETE"):
        r = await client.request(method, "/api/agents/oak", json={"agent": {"id": "oak", "name": "Mine", "role": "teacher"}}
                                 if method == "PUT" else None)
        assert (r.status_code, r.json()["error"]["code"]) == (404, "AGENT_NOT_FOUND"), (method, r.text)
    assert "oak" not in [a["id"] for a in (await client.get("/api/agents")).json()["agents"]]
    r = await client.post("/api/agents", json={"agent": {"id": "oak", "name": "My Oak", "role": "teacher"}})
    assert r.status_code == 201, r.text  # their id does not block mine (nor says it exists)

    async with open_database(db_url, max_size=2) as db:
        events = await EventLog(db).read_stream(theirs, limit=10_000)
        written = {e.type for e in events}
        texts = [json.loads(bytes(e.data))["text"] for e in events if e.type == "session.message_posted"]
        names = {r["owner_id"]: r["name"] for r in await db.fetch("SELECT owner_id, name FROM agents WHERE id = 'oak'")}
    assert not written & {"session.title_set", "session.cancel_requested"} and "hi" not in texts
    assert names == {"someone-else": "Their Oak", "local": "My Oak"}
