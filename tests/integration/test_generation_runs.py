"""OpenMAIC's generation runs over a real `openmaic serve`: routes, commands, the run's SSE read by an
EventSource that keeps disconnecting, and the owner's feed."""

from __future__ import annotations

import json
import random

import httpx
import pytest

from openmaic.courses import format as fmt
import trio
import trio_websocket

from openmaic.config import default_config
from openmaic.events.log import EventLog
from openmaic.runs.client_events import CLIENT_EVENT_TYPES
from openmaic.runs.events import RunInput
from openmaic.runs.service import RunService
from openmaic.store.database import open_database
from tests.eventsource import EventSource, open_sse
from tests.serving import FAST_CONFIG, running_server

SLOW_DEMO = FAST_CONFIG + ("providers: {demo: {preset: demo, options: {latencyMs: 6}}}\n"
                           "slots: {llm: demo:course, agent: demo:agent, image: demo, video: demo}\n"
                           "limits: {active_runs_per_owner: 4}\n")


@pytest.fixture
async def server(db_url, tmp_path):
    async with running_server(db_url, tmp_path, SLOW_DEMO) as (client, port):
        yield client, f"http://127.0.0.1:{port}"


def api_error(r: httpx.Response, status: int, code: str) -> dict:
    assert r.status_code == status, r.text
    body = r.json()
    assert (body["success"], body["errorCode"]) == (False, code), body
    return body


async def wait_run(client: httpx.AsyncClient, run_id: str, *states: str, timeout: float = 60) -> dict:
    with trio.fail_after(timeout):
        while True:
            run = (await client.get(f"/api/generation-runs/{run_id}")).json()["run"]
            if run["state"] in states:
                return run
            assert run["state"] not in ("paused", "ended"), run
            await trio.sleep(0.1)


async def test_a_run_started_reviewed_edited_and_completed_through_the_routes(server, db_url):
    client, _ = server
    r = await client.post("/api/generation-runs", json={
        "requirement": "Fractions for 10-year-olds", "learnerProfile": {"nickname": "Ada", "bio": "likes pizza"},
        "agents": {"mode": "preset", "agentIds": ["teacher", "classmate_1"]}, "commandId": "ignored"})
    assert r.status_code == 202, r.text
    body = r.json()
    run = body["run"]
    assert body["success"] is True and run["id"].startswith("run-") and run["state"] == "preparing"
    assert run["input"] == {"requirement": "Fractions for 10-year-olds", "agents": {
        "mode": "preset", "agentIds": ["teacher", "classmate_1"]}, "learnerProfile": {"nickname": "Ada",
        "bio": "likes pizza"}, "outlineReview": "wait", "language": "en"}  # fmt: skip
    assert (run["outline"], run["agents"], run["stageId"], run["error"]) == (None, None, None, None)
    assert run["progress"] == {"scenesTotal": 0, "scenesCompleted": 0}
    again = (await client.post("/api/generation-runs", json={"requirement": "Fractions for 10-year-olds"})).json()
    assert again["run"]["id"] != run["id"]  # starting is not idempotent

    active = (await client.get("/api/generation-runs?active=1")).json()
    assert active["success"] and [x["id"] for x in active["runs"]] == [run["id"], again["run"]["id"]]
    api_error(await client.get("/api/generation-runs"), 400, "INVALID_REQUEST")

    awaiting = await wait_run(client, run["id"], "awaiting_outline_confirmation")
    outline = awaiting["outline"]
    assert outline["revision"] == 1 and outline["courseTitle"] and len(outline["outlines"]) >= 4
    first = outline["outlines"][0]
    assert set(first) - {"mediaGenerations"} == {"id", "type", "title", "description", "keyPoints", "order"}
    assert first["order"] == 1
    detail = (await client.get(f"/api/generation-runs/{run['id']}")).json()["run"]
    assert detail["media"] == {}

    url = f"/api/generation-runs/{run['id']}"
    body = api_error(await client.post(f"{url}/confirm-outline", json={"commandId": "c1", "outlineRevision": 7}),
                     409, "RUN_STATE_CONFLICT")
    assert "stale" in body["error"]
    api_error(await client.post(f"{url}/confirm-outline", json={"commandId": "c1", "outlineRevision": 0}),
              400, "INVALID_REQUEST")
    api_error(await client.post(f"{url}/confirm-outline", json={"commandId": "bad id", "outlineRevision": 1}),
              400, "INVALID_REQUEST")
    pbl = [{**first, "type": "pbl"}]
    assert api_error(await client.post(f"{url}/confirm-outline", json={"commandId": "c1", "outlineRevision": 1,
                                                                       "outlines": pbl}),
                     400, "INVALID_REQUEST")["details"]["path"] == "outlines[0].type"
    edited = [{**first, "title": "What a fraction is"}, *outline["outlines"][1:3]]
    confirm = {"commandId": "c1", "outlineRevision": 1, "outlines": edited}
    r = await client.post(f"{url}/confirm-outline", json=confirm)
    assert r.status_code == 200, r.text
    ok = r.json()
    assert (ok["success"], ok["state"], ok["outlineRevision"]) == (True, "generating", 2)
    assert (await client.post(f"{url}/confirm-outline", json=confirm)).json()["seq"] == ok["seq"]  # replayed
    api_error(await client.post(f"{url}/retry", json={"commandId": "c1"}), 409, "RUN_STATE_CONFLICT")
    api_error(await client.post(f"{url}/retry", json={"commandId": "r1", "media": {"elementId": "img_1"}}), 409,
              "RUN_STATE_CONFLICT")

    done = await wait_run(client, run["id"], "completed")
    assert done["stageId"] and done["outline"]["revision"] == 2
    assert done["outline"]["outlines"][0]["title"] == "What a fraction is"
    assert [a["id"] for a in done["agents"]["agents"]] == ["teacher", "classmate_1"]
    assert done["progress"] == {"scenesTotal": 3, "scenesCompleted": 3}
    classroom = (await client.get(f"/api/classrooms/{done['stageId']}")).json()["classroom"]
    assert classroom["generatingRunId"] is None and classroom["scenes"][0]["title"] == "What a fraction is"
    assert not classroom["pendingScenes"] and all(sc["content"]["type"] == sc["type"] and sc["actions"]
                                                  for sc in classroom["scenes"])
    assert fmt.validate_document({"stage": classroom["stage"], "scenes": classroom["scenes"]}) == []
    assert [a["id"] for a in classroom["stage"]["generatedAgentConfigs"]] == ["teacher", "classmate_1"]
    assert [sc["id"] for sc in classroom["scenes"]] == [o["id"] for o in done["outline"]["outlines"]]
    api_error(await client.delete(url), 409, "RUN_STATE_CONFLICT")
    assert run["id"] not in [x["id"] for x in (await client.get("/api/generation-runs?active=1")).json()["runs"]]

    # discarding a run that has no course yet; again is harmless
    other = again["run"]["id"]
    first_discard = (await client.delete(f"/api/generation-runs/{other}")).json()
    assert (first_discard["success"], first_discard["state"]) == (True, "ended")
    assert (await client.delete(f"/api/generation-runs/{other}")).json()["state"] == "ended"
    await wait_run(client, other, "ended")

    # another owner's run, an unknown one and a malformed id: the same plain 404 on every route
    async with open_database(db_url, max_size=2) as db:
        row, _ = await RunService(EventLog(db), default_config()).start("someone-else", RunInput(requirement="x"))
    theirs = await client.get(f"/api/classrooms/{_course_of(row)}")
    assert (theirs.status_code, theirs.text) == (404, "Not found")
    for rid in (row.id, "run-AAAAAAAAAAAAAAAA", "not%20a%20run"):
        for method, path, body in [("GET", "", None), ("DELETE", "", None), ("GET", "/events", None),
                                   ("POST", "/confirm-outline", {"commandId": "x", "outlineRevision": 1}),
                                   ("POST", "/retry", {"commandId": "x"}), ("POST", "/hold-outline", {"commandId": "x"})]:
            r = await client.request(method, f"/api/generation-runs/{rid}{path}", json=body)
            assert (r.status_code, r.text) == (404, "Not found"), (rid, method, path, r.text)


def _course_of(row) -> str:
    return "course-" + row.id.removeprefix("run-")


async def test_hold_outline_stops_the_countdown(server):
    client, _ = server
    run = (await client.post("/api/generation-runs", json={"requirement": "Tides", "outlineReview": "countdown"})
           ).json()["run"]
    url = f"/api/generation-runs/{run['id']}"
    with trio.fail_after(60):
        while True:
            awaiting = (await client.get(url)).json()["run"]
            if awaiting["state"] == "awaiting_outline_confirmation" and awaiting["outlineAutoConfirmAt"]:
                break
            assert awaiting["state"] in ("preparing", "outlining"), awaiting
            await trio.sleep(0.02)
    r = await client.post(f"{url}/hold-outline", json={"commandId": "h1"})
    if r.status_code == 409:
        pytest.skip("the countdown ran out before the hold reached the server (a very slow machine)")
    assert r.status_code == 200 and r.json()["state"] == "awaiting_outline_confirmation", r.text
    api_error(await client.post(f"{url}/hold-outline", json={"commandId": "h2"}), 409, "RUN_STATE_CONFLICT")
    await trio.sleep(3.5)  # past the 2.5 s countdown: it no longer confirms by itself
    held = (await client.get(url)).json()["run"]
    assert held["state"] == "awaiting_outline_confirmation" and held["outlineAutoConfirmAt"] is None
    r = await client.post(f"{url}/confirm-outline", json={"commandId": "c", "outlineRevision": 1})
    assert r.json()["state"] == "generating"
    await wait_run(client, run["id"], "completed")


async def test_run_commands_are_refused_alike_over_http_and_the_websocket(server, db_url):
    """One road: each bad command, sent to its route and on the run's WebSocket, gets the same code, message and
    details (a 409 is RUN_STATE_CONFLICT on both, even when the service raises a plain conflict), and writes
    nothing; the socket stays open."""
    client, base = server
    run = (await client.post("/api/generation-runs", json={"requirement": "Tides"})).json()["run"]
    url = f"/api/generation-runs/{run['id']}"
    awaiting = await wait_run(client, run["id"], "awaiting_outline_confirmation")
    rev = awaiting["outline"]["revision"]
    r = await client.post(f"{url}/confirm-outline", json={"commandId": "used", "outlineRevision": rev})
    assert r.status_code == 200, r.text
    confirmed = await wait_run(client, run["id"], "generating", "completed")
    ws_url = base.replace("http", "ws") + f"/api/streams/{run['id']}/ws?after={confirmed['seq']}"
    cases = [
        ("confirm-outline", "confirm_outline", {"commandId": "a1", "outlineRevision": rev + 5}),  # not awaiting
        ("confirm-outline", "confirm_outline", {"commandId": "a2", "outlineRevision": 0}),
        ("confirm-outline", "confirm_outline", {"commandId": "a3"}),
        ("confirm-outline", "confirm_outline", {"commandId": "a4", "outlineRevision": rev, "outlines": "x"}),
        ("confirm-outline", "confirm_outline", {"commandId": "a5", "outlineRevision": rev,
                                                "outlines": [{"title": 5}]}),
        ("confirm-outline", "confirm_outline", {"commandId": "has space", "outlineRevision": rev}),
        ("retry", "retry", {"commandId": "r1"}),  # not paused
        ("retry", "retry", {"commandId": "used"}),  # the id of the confirmation: a conflict of ids
        ("retry", "retry", {}),
        ("hold-outline", "hold_outline", {"commandId": "h1"}),  # no countdown
    ]
    async with trio_websocket.open_websocket_url(ws_url) as ws:
        with trio.fail_after(60):
            while json.loads(await ws.get_message())["type"] != "caught_up":
                pass

            async def refusal() -> dict:
                while (frame := json.loads(await ws.get_message()))["type"] == "event":
                    pass  # the run goes on writing its scenes meanwhile
                return frame

            for route, command, body in cases:
                r = await client.post(f"{url}/{route}", json=body)
                assert r.status_code in (400, 409), (body, r.text)
                await ws.send_message(json.dumps({"type": command, **body}))
                frame = await refusal()
                http = r.json()
                assert frame["type"] == "error", (body, frame)
                assert (frame["errorCode"], frame["error"], frame.get("details")) == (
                    http["errorCode"], http["error"], http.get("details")), (body, frame, http)
                if r.status_code == 409:
                    assert http["errorCode"] == "RUN_STATE_CONFLICT", http
            for raw in ("", "   ", "{not json", "[]", json.dumps({"type": "confirm_outline", "outlineRevision": "1"})):
                await ws.send_message(raw)
                frame = await refusal()
                assert frame["type"] == "error" and frame["errorCode"] in ("INVALID_REQUEST",
                                                                           "MISSING_REQUIRED_FIELD"), (raw, frame)
    async with open_database(db_url, max_size=2) as db:
        written = [e.type for e in await EventLog(db).read_stream(run["id"], limit=10_000)]
    # Only the one good command was written: one confirmation, and no retry, hold or second confirmation.
    assert written.count("run.outline_confirmed") == 1
    assert "run.retry_requested" not in written and "run.outline_held" not in written


async def test_an_event_source_that_keeps_disconnecting_gets_every_client_event_once_in_order(server):
    client, base = server
    run = (await client.post("/api/generation-runs", json={"requirement": "Volcanoes", "outlineReview": "auto"})
           ).json()["run"]
    url = f"{base}/api/generation-runs/{run['id']}/events"
    source = EventSource(url)
    got: list[tuple[int, str]] = []
    caught_up: list[dict] = []
    for kind in CLIENT_EVENT_TYPES:
        source.add_event_listener(kind, lambda m: got.append((m.json()["seq"], m.type)))
    source.add_event_listener("caught_up", lambda m: caught_up.append(m.json()))
    rng = random.Random(20261201)
    cuts_mid_run = 0
    completed = False
    with trio.fail_after(120):
        while not completed:
            cut = rng.randint(1, 3) if cuts_mid_run < 20 else None
            async with source.connect() as messages:
                n = 0
                async for m in messages:
                    if m.type == "caught_up":
                        continue
                    body = m.json()
                    assert set(body) == {"runId", "seq", "ts", "type", "data", "phase"}
                    assert (body["runId"], body["type"], str(body["seq"])) == (run["id"], m.type, m.last_event_id)
                    if m.type == "completed":
                        completed = True
                        break
                    n += 1
                    if cut is not None and n >= cut:
                        cuts_mid_run += 1
                        break  # drop the connection mid-run, like a flaky network
    assert cuts_mid_run == 20 and source.connections >= 21
    # each connection resumed where the last one ended (Last-Event-ID), and said so in caught_up
    assert caught_up[0]["from"] == 0 and all(c["type"] == "caught_up" for c in caught_up)
    assert [c["from"] for c in caught_up[1:]] == [c for c in _resume_points(got, caught_up)]
    # every client event once, in order: the same list as one uninterrupted read of the whole run
    full = EventSource(url)
    whole: list[tuple[int, str]] = []
    for kind in CLIENT_EVENT_TYPES:
        full.add_event_listener(kind, lambda m: whole.append((m.json()["seq"], m.type)))
    async with full.connect() as messages:
        async for m in messages:
            if m.type == "caught_up":
                break
    assert got == whole and len({s for s, _ in got}) == len(got)
    assert [s for s, _ in got] == sorted(s for s, _ in got)
    kinds = [k for _, k in got]
    assert kinds[-1] == "completed" and {"state", "step_started", "outline_item", "outline_ready",
                                         "outline_confirmed", "course_created", "agents", "scene_ready"} <= set(kinds)
    assert "lease.claimed" not in kinds and not any("." in k for k in kinds)  # internal events stay out


def _resume_points(got, caught_up):
    """The seq each reconnect must have resumed after: the last seq received before it (checked loosely: every
    reported 'from' must be a seq the client had received, in increasing order)."""
    seqs = {s for s, _ in got}
    froms = [c["from"] for c in caught_up[1:]]
    assert all(f in seqs for f in froms) and froms == sorted(froms)
    return froms


async def test_the_run_sse_frames_and_cursors(server):
    client, base = server
    run = (await client.post("/api/generation-runs", json={"requirement": "Rivers", "outlineReview": "auto"})
           ).json()["run"]
    await wait_run(client, run["id"], "completed")
    url = f"{base}/api/generation-runs/{run['id']}/events"
    async with open_sse(url) as r:
        assert r.headers["cache-control"] == "no-cache, no-transform"
        text = ""
        async for line in r.lines:
            text += line + "\n"
            if "event: caught_up" in text and text.endswith("\n\n"):
                break
    frames = [f for f in text.split("\n\n") if f]
    first = frames[0].split("\n")
    assert first[0].startswith("id: ") and first[1].startswith("event: ") and first[2].startswith("data: ")
    data = json.loads(first[2][6:])
    assert data["phase"] == "backlog" and data["seq"] == int(first[0][4:]) and isinstance(data["ts"], int)
    last = frames[-1].split("\n")
    assert last[0] == "event: caught_up" and not any(line.startswith("id:") for line in last)
    caught = json.loads(last[1][6:])
    seqs = [int(f.split("\n")[0][4:]) for f in frames[:-1]]
    assert caught == {"type": "caught_up", "from": 0, "seq": caught["seq"]} and caught["seq"] >= seqs[-1]

    async def first_seq(**kw) -> tuple[int, int]:
        async with open_sse(url + kw.get("query", ""), kw.get("headers")) as r:
            async for line in r.lines:
                if line.startswith("id: "):
                    return int(line[4:]), 0
                if line.startswith("data: ") and "caught_up" in line:
                    return -1, json.loads(line[6:])["from"]
        raise AssertionError("no frame")

    middle = seqs[len(seqs) // 2]
    assert (await first_seq(query=f"?after={middle}"))[0] > middle
    # Last-Event-ID wins over ?after
    assert (await first_seq(query="?after=0", headers={"Last-Event-ID": str(middle)}))[0] > middle
    # a malformed cursor, or one no client can have seen, starts from the beginning
    for bad in ("x", "-4", "9999999"):
        assert (await first_seq(headers={"Last-Event-ID": bad}))[0] == seqs[0], bad


async def test_the_owner_feed_lists_runs_in_progress_then_each_change(server):
    client, base = server
    async with open_sse(f"{base}/api/generation-runs/events") as r:

        async def frame() -> dict:
            async for line in r.lines:
                if line.startswith("data: "):
                    return json.loads(line[6:])
            raise AssertionError("the feed ended")

        with trio.fail_after(60):
            assert await frame() == {"type": "runs", "runs": []}
            run = (await client.post("/api/generation-runs", json={"requirement": "Clouds", "outlineReview": "auto"})
                   ).json()["run"]
            states = []
            while True:
                f = await frame()
                assert f["type"] == "run" and f["run"]["id"] == run["id"]
                states.append(f["run"]["state"])
                if f["run"]["state"] == "completed":
                    break
    assert states[0] in ("preparing", "outlining") and "generating" in states


async def test_an_outline_carries_its_media_generations_both_ways(server):
    """The snapshot's outline says which pictures and videos each scene asks for (OpenMAIC's mediaGenerations);
    confirming it as proposed is no edit, an edit keeps, drops or adds media, and bad entries are refused."""
    client, _ = server
    run = (await client.post("/api/generation-runs", json={"requirement": "How volcanoes erupt"})).json()["run"]
    url = f"/api/generation-runs/{run['id']}"
    outline = (await wait_run(client, run["id"], "awaiting_outline_confirmation"))["outline"]
    asked = {m["elementId"]: m for o in outline["outlines"] for m in o.get("mediaGenerations", [])}
    assert {m["type"] for m in asked.values()} == {"image", "video"}, outline
    assert all(m["prompt"] and m["aspectRatio"] == "16:9" for m in asked.values())
    image_at = next(i for i, o in enumerate(outline["outlines"])
                    if any(m["type"] == "image" for m in o.get("mediaGenerations", [])))
    scenes = outline["outlines"]

    def with_media(i: int, media: list[dict]) -> list[dict]:
        return [{**o, "mediaGenerations": media} if k == i else o for k, o in enumerate(scenes)]

    for outlines, path in [
        (with_media(image_at, [{"type": "audio", "prompt": "a hum"}]), f"outlines[{image_at}].mediaGenerations[0].type"),
        (with_media(image_at, [{"type": "image", "prompt": "  "}]), f"outlines[{image_at}].mediaGenerations[0].prompt"),
        (with_media(image_at, [{"type": "image", "prompt": "a cone", "aspectRatio": "2:1"}]),
         f"outlines[{image_at}].mediaGenerations[0].aspectRatio"),
        (with_media(image_at, [{"type": "image", "prompt": "a cone", "elementId": "has space"}]),
         f"outlines[{image_at}].mediaGenerations[0].elementId"),
        (with_media(image_at, [{"type": "image", "prompt": "a", "elementId": "x"},
                               {"type": "video", "prompt": "b", "elementId": "x"}]),
         f"outlines[{image_at}].mediaGenerations[1].elementId"),
    ]:
        body = api_error(await client.post(f"{url}/confirm-outline", json={
            "commandId": "c-bad", "outlineRevision": 1, "outlines": outlines}), 400, "INVALID_REQUEST")
        assert body["details"]["path"] == path, body

    # Sent back as proposed: no edit, the same revision.
    same = await client.post(f"{url}/confirm-outline", json={"commandId": "c-same", "outlineRevision": 1,
                                                             "outlines": scenes})
    assert same.status_code == 200 and same.json()["outlineRevision"] == 1, same.text

    # An edit on a second run: the video goes, the picture stays, a new picture without an id gets one.
    run2 = (await client.post("/api/generation-runs", json={"requirement": "How volcanoes erupt"})).json()["run"]
    url2 = f"/api/generation-runs/{run2['id']}"
    scenes = (await wait_run(client, run2["id"], "awaiting_outline_confirmation"))["outline"]["outlines"]
    kept = next(m for o in scenes for m in o.get("mediaGenerations", []) if m["type"] == "image")
    edited = [{k: v for k, v in o.items() if k != "mediaGenerations"} for o in scenes]
    edited[0]["mediaGenerations"] = [kept, {"type": "image", "prompt": "A cross-section of a volcano"}]
    r = await client.post(f"{url2}/confirm-outline", json={"commandId": "c-edit", "outlineRevision": 1,
                                                           "outlines": edited})
    assert r.status_code == 200 and r.json()["outlineRevision"] == 2, r.text
    done = await wait_run(client, run2["id"], "completed")
    media = done["outline"]["outlines"][0]["mediaGenerations"]
    assert media[0] == kept and media[1]["type"] == "image" and media[1]["aspectRatio"] == "16:9"
    new_id = media[1]["elementId"]
    assert new_id.startswith("gen_img_") and new_id != kept["elementId"]
    assert all("mediaGenerations" not in o for o in done["outline"]["outlines"][1:])
    detail = (await client.get(url2)).json()["run"]
    assert set(detail["media"]) == {kept["elementId"], new_id}
    await wait_run(client, run["id"], "completed")
