"""A generation run's step and a workbench turn whose commit the database cuts off are redone, never failed or
charged; a step's failure reaches the user as its cause (the provider and what failed), never an exception class."""

from __future__ import annotations

from typing import Any

import trio

from openmaic.events.core import DATABASE_TROUBLE
from openmaic.events.log import EventLog
from openmaic.runs.events import RunInput
from openmaic.runs.service import RunService
from openmaic.runs.views import job_view
from openmaic.workbench import WorkbenchSessions
from tests.fakes.provider_server import Held, Json, Status, Text, open_fake_provider
from tests.faults.blocking import held
from tests.integration.test_generation import (
    OWNER, QUIZ, config, decoded, events, open_generation_worker, requirement, step_completions, wait_state,
)  # fmt: skip
from tests.integration.test_media_lane import run_state
from tests.integration.test_workbench import make_config, open_workbench_worker, wait_status
from tests.runtime import wait_for


def lock_row(sid: str) -> str:
    return f"SELECT 1 FROM streams WHERE id = '{sid}' FOR UPDATE"


async def _n(fake: Any, n: int) -> bool:
    return len(fake.requests) >= n


async def test_a_run_step_whose_commit_is_cut_off_is_redone_without_a_retry(db_url, db):
    log = EventLog(db)
    async with open_fake_provider() as fake:
        cfg = config(fake_url=fake.openai_url)
        svc = RunService(log, cfg)
        gate = trio.Event()
        fake.push(Held(Json(QUIZ), gate), Json(QUIZ))
        snap = await svc.create_run(OWNER, "c1", RunInput(requirement=requirement(), outline_review="auto"))
        async with open_generation_worker(db_url, cfg):
            await wait_for(lambda: _n(fake, 1), timeout=30)  # the quiz scene's content is being written
            # The run's row is held while the answer comes: the step's commit waits on it and its backend is ended.
            async with held(db_url, lock_row(snap.id)) as blocker:
                gate.set()
                await blocker.terminate_blocked()
            await wait_state(svc, snap.id, "completed", timeout=60)
        assert await decoded(log, snap.id, "run.step_failed") == []  # no retry charged
        (interrupted,) = await decoded(log, snap.id, "session.interrupted")
        assert interrupted.reason == DATABASE_TROUBLE and interrupted.step.endswith(":content")
        assert set(step_completions(await events(log, snap.id), log).values()) == {1}
        assert len(fake.requests) == 2  # the answer could not be kept (its commit was lost): the step was redone
        claims = await decoded(log, snap.id, "lease.claimed")
        assert [c.reason for c in claims].count("orphaned") == 0


async def test_an_unreachable_provider_is_named_in_the_runs_error(db_url, db):
    log = EventLog(db)
    # Nothing listens on the discard port: every connection is refused.
    cfg = config(fake_url="http://127.0.0.1:9/v1", fake_slot="course.outline")
    svc = RunService(log, cfg)
    snap = await svc.create_run(OWNER, "c1", RunInput(requirement=requirement(), outline_review="auto"))
    async with open_generation_worker(db_url, cfg):
        s = await wait_state(svc, snap.id, "paused", timeout=30)
    expected = "the model provider 'fake' failed after 1 attempt (could not connect)"
    assert (s.step, s.error) == ("outline", expected)
    assert job_view(snap.id, await run_state(log, snap.id), "http://h").error == f"outline: {expected}"
    assert {f.error for f in await decoded(log, snap.id, "run.step_failed")} == {expected}


async def test_a_workbench_turn_whose_commit_is_cut_off_is_redone_not_failed(db_url, db):
    log = EventLog(db)
    sessions = WorkbenchSessions(log)
    async with open_fake_provider() as fake:
        gate = trio.Event()
        fake.push(Held(Text("All done.", chunks=2), gate), Text("All done.", chunks=2))
        snap = await sessions.create_session("o", "create-1", message="hello")
        async with open_workbench_worker(db_url, make_config(fake)):
            await wait_for(lambda: _n(fake, 1))
            async with held(db_url, lock_row(snap.id)) as blocker:
                gate.set()
                await blocker.terminate_blocked()
            await wait_status(sessions, snap.id, "idle")
        assert [log.decode(e) for e in await log.read_stream(snap.id) if e.type == "session.ended"] == []
        s = await sessions.snapshot("o", snap.id)
        assert (s.status, s.error, s.turns) == ("idle", None, 1)
        (turn,) = [log.decode(e) for e in await log.read_stream(snap.id) if e.type == "model.turn_completed"]
        assert (turn.text, turn.delivered) == ("All done.", [2])
        interrupted = [log.decode(e) for e in await log.read_stream(snap.id) if e.type == "session.interrupted"]
        assert [(i.reason, i.step) for i in interrupted] == [(DATABASE_TROUBLE, "turn:1")]


async def _provider_quiet_after_stop(log: EventLog, db_url: str, fake: Any, slot: str, stop: Any) -> None:
    """The provider answers 500 (retry after 0.3 s) for as long as it is asked; once the run is stopped, no request
    reaches it later than a second after the stop was answered, and the run has ended."""
    cfg = config(fake_url=fake.openai_url, fake_slot=slot, fake_retries=30)
    svc = RunService(log, cfg)
    fake.push(*[Status(500, headers={"retry-after": "0.3"})] * 40)
    snap = await svc.create_run(OWNER, "c1", RunInput(requirement=requirement(), outline_review="auto"))
    async with open_generation_worker(db_url, cfg):
        await wait_for(lambda: _n(fake, 2), timeout=30)  # retrying
        await stop(svc, snap)
        await trio.sleep(1.0)
        seen = len(fake.requests)
        await trio.sleep(2.0)
        assert len(fake.requests) == seen, "the provider was called after the run was stopped"
        s = await wait_state(svc, snap.id, "ended", timeout=5)
    assert s.status == "terminal"
    assert await decoded(log, snap.id, "run.step_failed") == []


async def test_discarding_a_run_aborts_its_provider_call_within_a_second(db_url, db):
    async def discard(svc: RunService, snap: Any) -> None:
        await svc.discard(OWNER, snap.id)

    async with open_fake_provider() as fake:
        await _provider_quiet_after_stop(EventLog(db), db_url, fake, "course.outline", discard)


async def test_deleting_a_runs_course_aborts_its_provider_call_within_a_second(db_url, db):
    async def delete(svc: RunService, snap: Any) -> None:
        await svc.delete_course(OWNER, snap.course_id, "d1")

    async with open_fake_provider() as fake:
        await _provider_quiet_after_stop(EventLog(db), db_url, fake, "course.content.quiz", delete)
