"""A command repeated with its commandId answers exactly as the first time, however far its run or session has
moved on since (docs/api.md): the answer is the resource as the command left it, never as it is now.

The server here has no workers: the test moves each run and session on itself, by appending what a worker would,
so every answer is compared at a known point."""

from __future__ import annotations

import contextlib
import datetime as dt
from collections.abc import AsyncIterator

import httpx

from openmaic.courses.schema import OutlineItem
from openmaic.events.core import LeaseClaimed, LeaseReleased, SessionCreated, SessionEnded
from openmaic.events.log import EventLog, NewStream, StreamAppend
from openmaic.events.types import Event
from openmaic.media.events import LaneItem, MediaElementSettled, MediaLaneOpened
from openmaic.media.lane import lane_id
from openmaic.runs.events import RunOutlineProposed, RunStateChanged
from openmaic.store.ports import free_port
from tests.serving import FAST_CONFIG, serve_processes, wait_ready


@contextlib.asynccontextmanager
async def api_only(db_url: str, tmp_path) -> AsyncIterator[httpx.AsyncClient]:
    """An `openmaic serve --role api`: nothing moves a run or a session but the test."""
    port = free_port()
    with serve_processes(db_url, tmp_path, [("api", port)], FAST_CONFIG) as procs:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", trust_env=False, timeout=10) as client:
            await wait_ready(client, procs, tmp_path)
            yield client


async def move_on(log: EventLog, stream_id: str, *events: Event, status: str | None = None) -> None:
    """What a worker would append next."""
    await log.append(StreamAppend(stream_id=stream_id, events=list(events), status=status))


def ok(r: httpx.Response, status: int = 200) -> dict:
    assert r.status_code == status, r.text
    return r.json()


async def start_run(client: httpx.AsyncClient, review: str) -> str:
    return ok(await client.post("/api/generation-runs", json={"requirement": "Tides", "outlineReview": review}),
              202)["run"]["id"]


async def test_run_commands_replayed_after_the_run_moved_on_answer_as_the_first_time(db, db_url, tmp_path):
    log = EventLog(db)
    async with api_only(db_url, tmp_path) as client:
        run = await start_run(client, "countdown")
        url = f"/api/generation-runs/{run}"
        until = dt.datetime.now(dt.UTC) + dt.timedelta(hours=1)
        await move_on(log, run, RunOutlineProposed(revision=1, title="Tides", items=[
            OutlineItem(title="The moon", goal="Why the sea rises")], countdown_until=until),
            RunStateChanged(state="awaiting_outline_confirmation", previous="outlining"), status="waiting")
        held = ok(await client.post(f"{url}/hold-outline", json={"commandId": "h1"}))
        assert held["state"] == "awaiting_outline_confirmation"
        confirmed = ok(await client.post(f"{url}/confirm-outline", json={"commandId": "c1", "outlineRevision": 1}))
        assert confirmed["state"] == "generating" and confirmed["outlineRevision"] == 1
        await move_on(log, run, RunStateChanged(state="completed", previous="generating"),
                      SessionEnded(status="completed"), status="terminal")
        assert ok(await client.get(url))["run"]["state"] == "completed"
        assert ok(await client.post(f"{url}/hold-outline", json={"commandId": "h1"})) == held
        assert ok(await client.post(f"{url}/confirm-outline", json={"commandId": "c1", "outlineRevision": 1})) \
            == confirmed

        paused = await start_run(client, "wait")
        url = f"/api/generation-runs/{paused}"
        await move_on(log, paused, RunStateChanged(state="paused", previous="generating", step="outline",
                                                   error="the model failed"), status="waiting")
        retried = ok(await client.post(f"{url}/retry", json={"commandId": "r1"}))
        assert retried["state"] == "preparing"  # back to the state it was paused in
        await move_on(log, paused, RunStateChanged(state="completed", previous="generating"), status="terminal")
        assert ok(await client.post(f"{url}/retry", json={"commandId": "r1"})) == retried


async def test_deletes_repeated_after_the_run_ended_answer_as_the_first_time(db, db_url, tmp_path):
    log = EventLog(db)
    async with api_only(db_url, tmp_path) as client:
        run = await start_run(client, "wait")
        course = (await log.read_stream(run))[1]
        course_id = log.decode(course).course_id
        deleted = ok(await client.delete(f"/api/classrooms/{course_id}", params={"commandId": "d1"}))
        # The run was asked to stop by the course's deletion: discarding it now is answered by that request.
        discarded = ok(await client.delete(f"/api/generation-runs/{run}"))
        assert discarded["state"] == "ended"
        await move_on(log, run, RunStateChanged(state="ended", previous="preparing"), SessionEnded(status="ended"),
                      status="terminal")
        assert ok(await client.delete(f"/api/generation-runs/{run}")) == discarded
        assert ok(await client.delete(f"/api/classrooms/{course_id}", params={"commandId": "d1"})) == deleted


async def test_a_message_replayed_after_the_session_moved_on_answers_as_the_first_time(db, db_url, tmp_path):
    log = EventLog(db)
    async with api_only(db_url, tmp_path) as client:
        session = ok(await client.post("/api/agent/sessions", json={"prompt": "Tidy the course"}), 202)["id"]
        await move_on(log, session, LeaseClaimed(attempt=1, worker="w", reason="queued"), status="running")
        url = f"/api/agent/sessions/{session}/messages"
        first = ok(await client.post(url, json={"text": "shorter, please", "commandId": "m1"}), 202)
        assert first["message"]["delivery"] == "steer"  # the agent was working
        await move_on(log, session, LeaseReleased(attempt=1, reason="idle"), status="waiting")
        assert ok(await client.get(f"/api/agent/sessions/{session}"))["status"] == "succeeded"
        assert ok(await client.post(url, json={"text": "shorter, please", "commandId": "m1"}), 202) == first


async def test_a_media_retry_replayed_after_the_run_moved_on_answers_as_the_first_time(db, db_url, tmp_path):
    log = EventLog(db)
    async with api_only(db_url, tmp_path) as client:
        run = await start_run(client, "wait")
        row = await log.stream_row(run)
        assert row is not None
        await log.append(StreamAppend(stream_id=lane_id(run), create=NewStream("media", row.owner_id), status="waiting",
                                      events=[SessionCreated(kind="media", owner_id=row.owner_id),
                                              MediaLaneOpened(run_id=run, course_id="c", items=[LaneItem(
                                                  element_id="gen_img_1", kind="image", prompt="the moon",
                                                  scene_index=0, scene_id="s0")]),
                                              MediaElementSettled(element_id="gen_img_1", status="failed",
                                                                  message="Image generation failed")]))
        url = f"/api/generation-runs/{run}/retry"
        body = {"commandId": "mr1", "media": {"elementId": "gen_img_1"}}
        first = ok(await client.post(url, json=body))
        await move_on(log, run, RunStateChanged(state="completed", previous="generating"), status="terminal")
        assert ok(await client.post(url, json=body)) == first
