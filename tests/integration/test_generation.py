"""Generation runs against a real PostgreSQL and a real worker: every state and transition, failures and retry,
course deletion, per-owner limits, a worker killed mid-step, materials and agents.

Models: the offline demo provider (the default config), and the fake OpenAI server for failures. Run as a
module (``python -m tests.integration.test_generation URL JSON``) it is a worker process for the kill test.
"""

from __future__ import annotations

import base64
import json
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import msgspec
import pytest
import trio

from openmaic import errors
from openmaic.actors.commands import Commands
from openmaic.config import Config, ProviderSpec, Secret, default_config
from openmaic.courses.events import CourseDocument, evolve_course
from openmaic.courses import format as fmt
from openmaic.courses.document import document_of
from openmaic.events.log import EventLog, RecordedEvent
from openmaic.materials import (
    MODEL_IMAGE_BYTES, UnreadableFile, UnsupportedFileType, get_asset, get_material, images_for_model, store_material,
)  # fmt: skip
from openmaic.media.lane import MediaKind
from openmaic.runs.agents import BUILTIN_AGENTS, Agent, create_agent
from openmaic.runs.events import AgentsChoice, LearnerProfile, RunInput
from openmaic.runs.kind import GenerationKind
from openmaic.runs.service import RunService, TooManyRuns
from openmaic.store.queries import Q
from tests.fakes.provider_server import EndsEarly, Json, Status, Text, open_fake_provider
from tests.runtime import FAST, open_worker, wait_for

ROOT = Path(__file__).resolve().parents[2]
KEY = "sk-test-SECRET-generation"
OWNER = "alice"


def config(*, latency_ms: int = 0, active: int = 2, waiting: int = 10, fake_url: str | None = None,
           fake_slot: str = "course.content.quiz", fake_retries: int = 0, deadlines: dict[str, float] | None = None,
           **runtime: Any) -> Config:
    """The default (demo) configuration with short runtime settings; ``fake_url`` routes ``fake_slot`` to it."""
    providers = {"demo": ProviderSpec(preset="demo", options={"latencyMs": latency_ms})}
    slots = {"llm": "demo:course", "agent": "demo:agent"}
    if fake_url is not None:
        providers["fake"] = ProviderSpec(preset="openai-compatible", base_url=fake_url, api_key=Secret(KEY),
                                         options={"maxRetries": fake_retries, "timeoutS": 5.0})
        slots[fake_slot] = "fake:gpt-test"
    rt = msgspec.structs.replace(FAST, **{"step_retries": 2, **runtime})
    if deadlines:
        rt = msgspec.structs.replace(rt, step_deadlines=msgspec.structs.replace(rt.step_deadlines, **deadlines))
    base = default_config()
    limits = msgspec.structs.replace(base.limits, active_runs_per_owner=active, waiting_runs_per_owner=waiting)
    return msgspec.structs.replace(base, providers=providers, slots=slots, runtime=rt, limits=limits)


def open_generation_worker(url: str, cfg: Config, *, media: dict[str, Any] | None = None, **kind: Any) -> Any:
    """A worker on the generation kind and its media lanes (short retry backoff and admission poll), shut down
    on exit. ``media`` pins media slots (``{"image": None}``: off)."""
    kind.setdefault("retry_backoff_s", 0.05)
    kind.setdefault("admission_poll_s", 0.2)
    kinds = {"generation": GenerationKind(cfg, **kind), "media": MediaKind(cfg)}
    return open_worker(url, cfg.runtime, kinds=kinds, config=cfg, media=media)


@pytest.fixture
def log(db):
    return EventLog(db)


def service(log: EventLog, **kw: Any) -> RunService:
    return RunService(log, config(**kw))


async def events(log: EventLog, sid: str) -> list[RecordedEvent]:
    return await log.read_stream(sid, limit=100_000)


async def decoded(log: EventLog, sid: str, type_: str) -> list[Any]:
    return [log.decode(e) for e in await events(log, sid) if e.type == type_]


async def course_doc(log: EventLog, course_id: str) -> CourseDocument:
    doc = CourseDocument()
    for e in await events(log, course_id):
        doc = evolve_course(doc, log.decode(e), e.seq)
    return doc


async def wait_state(svc: RunService, run_id: str, *states: str, timeout: float = 30.0, owner: str = OWNER) -> Any:
    snap = None

    async def reached() -> bool:
        nonlocal snap
        snap = await svc.snapshot(owner, run_id)
        return snap.state in states

    try:
        await wait_for(reached, timeout=timeout)
    except trio.TooSlowError:
        evs = await svc.log.read_stream(run_id, limit=100_000)
        tail = "\n".join(f"  {e.seq} {e.type} {bytes(e.data)[:160].decode(errors='replace')}" for e in evs[-15:])
        raise AssertionError(f"run {run_id} did not reach {states}; last events:\n{tail}") from None
    return snap


def requirement(topic: str = "photosynthesis") -> str:
    return f"Teach 8th graders about {topic}"


async def assert_complete_course(log: EventLog, svc: RunService, run_id: str, owner: str = OWNER) -> CourseDocument:
    """The run completed, every scene is ready with content and a script, the course is unlocked, and the whole
    course is a document OpenMAIC's validators accept."""
    snap = await svc.snapshot(owner, run_id)
    assert (snap.state, snap.status, snap.error) == ("completed", "terminal", None)
    assert snap.scenes_completed == snap.scenes_total == len(snap.outline)
    doc = await course_doc(log, snap.course_id)
    assert doc.locked_by is None and not doc.deleted and not doc.pending
    assert [s.title for s in doc.scenes] == [i.title for i in snap.outline]
    for scene in doc.scenes:
        assert scene.id in doc.ready and scene.content.type == scene.type and scene.actions
        assert any(isinstance(a, fmt.SpeechAction) for a in scene.actions)
    assert fmt.validate_document(fmt.to_json(document_of(snap.course_id, doc))) == []
    ended = await decoded(log, run_id, "session.ended")
    assert [e.status for e in ended] == ["completed"]
    return doc


def step_completions(evs: list[RecordedEvent], log: EventLog) -> Counter[str]:
    return Counter(log.decode(e).step for e in evs if e.type == "run.step_completed")


# -- confirmation modes -----------------------------------------------------------------------------------------


async def test_wait_then_confirm_an_edited_outline_and_complete(db_url, log):
    svc = service(log)
    snap = await svc.create_run(OWNER, "c1", RunInput(requirement=requirement(), outline_review="wait"))
    assert (snap.state, snap.status, snap.outline_revision) == ("preparing", "queued", 0)
    assert (await svc.create_run(OWNER, "c1", RunInput(requirement=requirement()))).id == snap.id  # idempotent
    async with open_generation_worker(db_url, config()) as worker:
        await wait_state(svc, snap.id, "awaiting_outline_confirmation")

        async def parked() -> bool:  # the run holds no worker while it waits
            return not worker.actors and (await svc.snapshot(OWNER, snap.id)).status == "waiting"

        await wait_for(parked, timeout=5)
        s = await svc.snapshot(OWNER, snap.id)
        assert s.status == "waiting" and s.outline_revision == 1 and 4 <= len(s.outline) <= 8
        streamed = await decoded(log, snap.id, "run.outline_item")
        assert [i.item for i in streamed] == s.outline and [i.index for i in streamed] == list(range(len(s.outline)))

        with pytest.raises(errors.Conflict, match="stale"):
            await svc.confirm_outline(OWNER, snap.id, "x1", 0)
        with pytest.raises(errors.InvalidInput):
            await svc.confirm_outline(OWNER, snap.id, "x2", 1, [])
        edited = [msgspec.structs.replace(s.outline[0], title="Why plants need light"), *s.outline[1:3]]
        r = await svc.confirm_outline(OWNER, snap.id, "confirm-1", 1, edited)
        again = await svc.confirm_outline(OWNER, snap.id, "confirm-1", 1, edited)
        assert again.replayed and again.seq == r.seq
        with pytest.raises(errors.Conflict):  # confirmed already: not awaiting any more (and revision 1 is stale)
            await svc.confirm_outline(OWNER, snap.id, "confirm-2", 1)
        await wait_state(svc, snap.id, "completed")
    doc = await assert_complete_course(log, svc, snap.id)
    assert doc.outline_revision == 2 and [s.title for s in doc.scenes] == [i.title for i in edited]
    confirmed = await decoded(log, snap.id, "run.outline_confirmed")
    assert [(c.revision, c.by, [i.title for i in c.items]) for c in confirmed] == \
        [(2, "user", [i.title for i in edited])]
    states = [e.state for e in await decoded(log, snap.id, "run.state_changed")]
    assert states == ["outlining", "awaiting_outline_confirmation", "generating", "completed"]
    with pytest.raises(errors.Conflict, match="only a paused run"):
        await svc.retry(OWNER, snap.id, "r1")


async def test_auto_review_builds_a_complete_demo_course_with_one_checkpoint_per_step(db_url, log):
    svc = service(log)
    snap = await svc.create_run(OWNER, "c1", RunInput(requirement=requirement("the water cycle"),
                                                      outline_review="auto", interactive=True))
    async with open_generation_worker(db_url, config()):
        await wait_state(svc, snap.id, "completed")
    doc = await assert_complete_course(log, svc, snap.id)
    assert 4 <= len(doc.scenes) <= 8 and "Water Cycle" in doc.title
    assert {s.type for s in doc.scenes} >= {"slide", "quiz", "interactive"}
    assert [c.by for c in await decoded(log, snap.id, "run.outline_confirmed")] == ["auto"]
    run_events = await events(log, snap.id)
    steps = step_completions(run_events, log)
    n = len(doc.scenes)
    scene_steps = (f"scene:{i}:{p}" for i in range(n) for p in ("content", "actions", "narration"))
    assert set(steps) == {"research", "outline", "agents", *scene_steps}
    assert set(steps.values()) == {1}
    # each step's completion, its output and its course change were committed by one transaction
    course_tx = {e.tx for e in await events(log, snap.course_id) if e.type != "course.created"}
    step_tx = {e.tx for e in run_events if e.type == "run.step_completed" and log.decode(e).step != "research"}
    assert step_tx <= course_tx
    [proposed] = [e for e in run_events if e.type == "run.outline_proposed"]
    [outline_set] = [e for e in await events(log, snap.course_id) if e.type == "course.outline_set"]
    assert proposed.tx == outline_set.tx


async def test_countdown_confirms_by_itself_after_two_and_a_half_seconds(db_url, log):
    svc = service(log)
    snap = await svc.create_run(OWNER, "c1", RunInput(requirement=requirement(), outline_review="countdown"))
    async with open_generation_worker(db_url, config()):
        s = await wait_state(svc, snap.id, "awaiting_outline_confirmation")
        assert s.countdown_until is not None
        await wait_state(svc, snap.id, "completed")
    await assert_complete_course(log, svc, snap.id)
    evs = await events(log, snap.id)
    [proposed] = [e for e in evs if e.type == "run.outline_proposed"]
    [confirmed] = [e for e in evs if e.type == "run.outline_confirmed"]
    assert log.decode(confirmed).by == "countdown"
    waited = (confirmed.recorded_at - proposed.recorded_at).total_seconds()
    assert 2.3 <= waited <= 8, waited


async def test_a_confirmation_during_the_countdown_wins(db_url, log):
    svc = service(log)
    snap = await svc.create_run(OWNER, "c1", RunInput(requirement=requirement(), outline_review="countdown"))
    async with open_generation_worker(db_url, config()):
        s = await wait_state(svc, snap.id, "awaiting_outline_confirmation")
        with trio.fail_after(2):
            await svc.confirm_outline(OWNER, snap.id, "confirm-1", s.outline_revision)
        await wait_state(svc, snap.id, "completed")
    await assert_complete_course(log, svc, snap.id)
    assert [c.by for c in await decoded(log, snap.id, "run.outline_confirmed")] == ["user"]
    assert len(await decoded(log, snap.course_id, "course.outline_set")) == 1


# -- failures -----------------------------------------------------------------------------------------------------

QUIZ = [
    {"type": "single", "question": "What do plants make in photosynthesis?",
     "options": [{"label": "Glucose", "value": "A"}, {"label": "Salt", "value": "B"}, {"label": "Iron", "value": "C"}],
     "answer": ["A"], "analysis": "Glucose stores the energy.", "points": 10},
]  # fmt: skip


async def test_a_failing_step_pauses_the_run_and_retry_reruns_exactly_that_step(db_url, log):
    async with open_fake_provider() as fake:
        cfg = config(fake_url=fake.openai_url)
        svc = RunService(log, cfg)
        fake.push(Status(500), Status(500), Status(500))
        snap = await svc.create_run(OWNER, "c1", RunInput(requirement=requirement(), outline_review="auto"))
        async with open_generation_worker(db_url, cfg):
            await wait_state(svc, snap.id, "paused")

            async def parked() -> bool:
                return (await svc.snapshot(OWNER, snap.id)).status == "waiting"

            await wait_for(parked, timeout=5)
            s = await svc.snapshot(OWNER, snap.id)
            quiz = next(i for i, item in enumerate(s.outline) if item.type == "quiz")
            step = f"scene:{quiz}:content"
            assert s.step == step and s.status == "waiting"
            assert s.error == "the model provider 'fake' failed after 1 attempt (HTTP 500)"
            failed = await decoded(log, snap.id, "run.step_failed")
            assert [(f.step, f.will_retry) for f in failed] == [(step, True), (step, True), (step, False)]
            assert all(KEY not in bytes(e.data).decode() for e in await events(log, snap.id))
            with pytest.raises(errors.Conflict):
                await svc.confirm_outline(OWNER, snap.id, "x", s.outline_revision)
            before = await events(log, snap.id)

            fake.push(Text(json.dumps(QUIZ)))
            r = await svc.retry(OWNER, snap.id, "retry-1")
            assert (await svc.retry(OWNER, snap.id, "retry-1")).seq == r.seq
            await wait_state(svc, snap.id, "completed")
            assert len(fake.requests) == 4
            with pytest.raises(errors.Conflict, match="only a paused run"):
                await svc.retry(OWNER, snap.id, "retry-2")
    doc = await assert_complete_course(log, svc, snap.id)
    assert doc.scenes[quiz].content.questions[0].options[0].label == "Glucose"
    after = (await events(log, snap.id))[len(before):]
    started = [log.decode(e).step for e in after if e.type == "run.step_started"]
    assert started[0] == step  # the retried run resumed with exactly the failed step ...
    everything = step_completions(await events(log, snap.id), log)
    assert set(everything.values()) == {1}  # ... and no step ever completed twice
    assert [e.state for e in await decoded(log, snap.id, "run.state_changed")][-3:] == ["paused", "generating",
                                                                                        "completed"]


OUTLINE = {
    "languageDirective": "Teach in English.",
    "courseTitle": "Fractions",
    "outlines": [
        {"type": "slide", "title": "What is a fraction", "description": "Read fractions", "keyPoints": ["parts"]},
        {"type": "slide", "title": "Adding fractions", "description": "Add them", "keyPoints": ["common denominators"]},
        {"type": "quiz", "title": "Check", "description": "Test", "keyPoints": ["adding"]},
    ],
}


async def test_outline_items_stream_and_restart_when_the_provider_retries(db_url, log):
    async with open_fake_provider() as fake:
        cfg = config(fake_url=fake.openai_url, fake_slot="course.outline", fake_retries=1)
        svc = RunService(log, cfg)
        partial = json.dumps(OUTLINE)[:180]  # the first item and a half, then the stream breaks off
        fake.push(EndsEarly(text=partial), Text(json.dumps(OUTLINE), chunks=6))
        snap = await svc.create_run(OWNER, "c1", RunInput(requirement="Teach fractions"))
        async with open_generation_worker(db_url, cfg):
            s = await wait_state(svc, snap.id, "awaiting_outline_confirmation")
    items = [(i["type"], i["title"], i["description"], i["keyPoints"]) for i in OUTLINE["outlines"]]
    assert [(o.type, o.title, o.description, o.keyPoints) for o in s.outline] == items
    assert s.title == "Fractions" and len(fake.requests) == 2
    types = [e.type for e in await events(log, snap.id)]
    streamed = await decoded(log, snap.id, "run.outline_item")
    if "run.outline_restarted" in types:  # the first attempt's item went out before the stream broke
        assert [i.item.title for i in streamed][:1] == ["What is a fraction"]
        after = types[types.index("run.outline_restarted"):]
        assert after.count("run.outline_item") == 3
    assert [i.item for i in streamed][-3:] == s.outline and [i.index for i in streamed][-3:] == [0, 1, 2]
    outline_started = [e for e in await decoded(log, snap.id, "run.step_started") if e.step == "outline"]
    assert len(outline_started) == 1 and "run.step_failed" not in types


async def test_a_step_past_its_deadline_pauses_the_run(db_url, log):
    cfg = config(latency_ms=20, step_retries=1, deadlines={"content": 0.05})
    svc = RunService(log, cfg)
    snap = await svc.create_run(OWNER, "c1", RunInput(requirement=requirement(), outline_review="auto"))
    async with open_generation_worker(db_url, cfg):
        s = await wait_state(svc, snap.id, "paused")
    assert (s.step, s.error) == ("scene:0:content", "step scene:0:content exceeded its deadline of 0.05 s")
    failed = await decoded(log, snap.id, "run.step_failed")
    assert [(f.step, f.will_retry) for f in failed] == [("scene:0:content", True), ("scene:0:content", False)]


async def test_cancelling_a_run_stops_it_and_unlocks_its_course(db_url, log):
    svc = service(log)
    snap = await svc.create_run(OWNER, "c1", RunInput(requirement=requirement()))
    async with open_generation_worker(db_url, config()):
        await wait_state(svc, snap.id, "awaiting_outline_confirmation")
        await Commands(log).cancel(OWNER, snap.id, "cancel-1")
        s = await wait_state(svc, snap.id, "ended")
    assert s.status == "terminal"
    assert [e.status for e in await decoded(log, snap.id, "session.ended")] == ["ended"]
    assert (await course_doc(log, snap.course_id)).locked_by is None


# -- deleting the course -------------------------------------------------------------------------------------------


async def test_deleting_the_course_of_a_waiting_run_stops_it(db_url, log):
    svc = service(log)
    snap = await svc.create_run(OWNER, "c1", RunInput(requirement=requirement()))
    async with open_generation_worker(db_url, config()):
        await wait_state(svc, snap.id, "awaiting_outline_confirmation")
        with pytest.raises(errors.StreamNotFound):
            await svc.delete_course("mallory", snap.course_id, "d1")
        r = await svc.delete_course(OWNER, snap.course_id, "d1")
        assert (await svc.delete_course(OWNER, snap.course_id, "d1")).seq == r.seq
        s = await wait_state(svc, snap.id, "ended", timeout=10)
    assert s.status == "terminal"
    assert [e.status for e in await decoded(log, snap.id, "session.ended")] == ["ended"]
    assert (await course_doc(log, snap.course_id)).deleted
    with pytest.raises(errors.StreamNotFound):
        await svc.delete_course(OWNER, snap.course_id, "d2")
    with pytest.raises(errors.Conflict, match="ended"):
        await svc.confirm_outline(OWNER, snap.id, "c", 1)


async def test_a_run_whose_course_was_deleted_takes_no_more_commands(log):
    svc = service(log)
    snap = await svc.create_run(OWNER, "c1", RunInput(requirement=requirement()))
    await svc.delete_course(OWNER, snap.course_id, "d1")
    s = await svc.snapshot(OWNER, snap.id)
    assert s.status == "queued" and s.title == "Teach 8th graders about photosynthesis"
    with pytest.raises(errors.Conflict, match="its course was deleted"):
        await svc.retry(OWNER, snap.id, "r1")


async def test_deleting_the_course_mid_generation_stops_the_run_at_the_next_step_boundary(db_url, log):
    cfg = config(latency_ms=15)
    svc = RunService(log, cfg)
    snap = await svc.create_run(OWNER, "c1", RunInput(requirement=requirement(), outline_review="auto"))
    async with open_generation_worker(db_url, cfg):
        s = await wait_state(svc, snap.id, "generating")
        await wait_for(lambda: _has_step_started(log, snap.id, "scene:0:content"))
        await svc.delete_course(OWNER, snap.course_id, "d1")
        s = await wait_state(svc, snap.id, "ended", timeout=10)
    assert s.scenes_completed < s.scenes_total
    evs = await events(log, snap.id)
    # (the media lane's element in flight may still settle: its state is not one of the run's steps)
    types = [e.type for e in evs if e.type != "run.media"]
    stop = types.index("run.stop_requested")
    # after the request, at most the step in flight committed; no new step started
    assert "run.step_started" not in types[stop:]
    assert types[-2:] == ["run.state_changed", "session.ended"]
    # the deleted course got no unlock, and nothing was written to it after the step in flight
    course_types = [e.type for e in await events(log, snap.course_id) if e.type != "course.media_set"]
    assert "course.unlocked" not in course_types
    assert course_types[course_types.index("course.deleted") + 1:] in ([], ["course.scene_set"])


# -- per-owner limits ----------------------------------------------------------------------------------------------


async def test_at_most_the_limit_of_an_owners_runs_execute_at_once(db, db_url, log):
    # Starts are refused past the limit (below); runs that got past it at once (two API processes, say) are held
    # back by the admission step: here the API allows three while the workers execute at most two.
    cfg = config(latency_ms=2, active=2)
    svc = RunService(log, config(latency_ms=2, active=3))
    runs = [await svc.create_run(OWNER, f"c{i}", RunInput(requirement=requirement(t), outline_review="auto"))
            for i, t in enumerate(("light", "sound", "heat"))]
    other = await svc.create_run("bob", "c0", RunInput(requirement=requirement("magnets"), outline_review="auto"))
    peak = {OWNER: 0, "bob": 0}
    done = trio.Event()

    async def sample() -> None:
        while not done.is_set():
            for owner in peak:
                row = await db.fetchrow(Q.runs_executing, owner, "")
                peak[owner] = max(peak[owner], row["active"])
            await trio.sleep(0.005)

    async with open_generation_worker(db_url, cfg), trio.open_nursery() as nursery:
        nursery.start_soon(sample)
        for r in [*runs]:
            await wait_state(svc, r.id, "completed", timeout=60)
        await wait_state(svc, other.id, "completed", owner="bob", timeout=60)
        done.set()
    assert peak[OWNER] == 2 and peak["bob"] == 1
    deferred = [d for r in runs for d in await decoded(log, r.id, "run.admission_deferred")]
    assert deferred and all(d.active == 2 and d.limit == 2 for d in deferred)
    for r in runs:
        await assert_complete_course(log, svc, r.id)


async def test_starts_past_the_active_limit_are_a_429_and_write_nothing(log):
    svc = service(log, active=2)
    first, _ = await svc.start(OWNER, RunInput(requirement=requirement()))
    await svc.start(OWNER, RunInput(requirement=requirement()))
    streams = await log.db.fetchval("SELECT count(*) FROM streams")
    with pytest.raises(TooManyRuns) as exc:
        await svc.start(OWNER, RunInput(requirement=requirement()))
    assert (exc.value.status, exc.value.error_code) == (429, "ACTIVE_RUN_LIMIT")
    assert "2 runs in progress" in exc.value.message
    assert await log.db.fetchval("SELECT count(*) FROM streams") == streams
    await svc.start("bob", RunInput(requirement=requirement()))  # another owner is not affected
    with pytest.raises(errors.StreamNotFound):
        await svc.snapshot("bob", first.id)


async def test_runs_waiting_for_their_owner_count_against_the_waiting_limit(db_url, log):
    svc = service(log, active=5, waiting=2)
    waiting = [(await svc.start(OWNER, RunInput(requirement=requirement(t))))[0].id for t in ("a", "b")]
    async with open_generation_worker(db_url, config(active=5)):
        for run_id in waiting:
            await wait_state(svc, run_id, "awaiting_outline_confirmation")

        async def parked() -> bool:
            rows = [(await svc.read(OWNER, r))[0] for r in waiting]
            return all(row.status == "waiting" for row in rows)

        await wait_for(parked, timeout=10)
    with pytest.raises(TooManyRuns) as exc:
        await svc.start(OWNER, RunInput(requirement=requirement()))
    assert exc.value.error_code == "ACTIVE_RUN_LIMIT" and "2 runs waiting for you" in exc.value.message


async def test_concurrent_starts_do_not_pass_the_active_limit(log):
    svc = service(log, active=3)
    outcomes: list[str] = []

    async def start() -> None:
        try:
            await svc.start(OWNER, RunInput(requirement=requirement()))
            outcomes.append("ok")
        except TooManyRuns:
            outcomes.append("429")

    async with trio.open_nursery() as nursery:
        for _ in range(8):
            nursery.start_soon(start)
    assert sorted(outcomes) == ["429"] * 5 + ["ok"] * 3


# -- validation ------------------------------------------------------------------------------------------------------


async def test_run_input_is_validated(log):
    svc = service(log)
    preset = AgentsChoice(mode="preset", agent_ids=["teacher", "nobody"])
    cases = [
        (RunInput(requirement="   "), "requirement", "MISSING_REQUIRED_FIELD"),
        (RunInput(requirement="x" * 20_001), "requirement", "INVALID_REQUEST"),
        (RunInput(requirement="ok", material_ids=["mat_nope"]), "materialIds[0]", "INVALID_REQUEST"),
        (RunInput(requirement="ok", material_ids=["mat_" + "0" * 26]), "materialIds", "INVALID_REQUEST"),
        (RunInput(requirement="ok", material_ids=[f"mat_{i:026d}" for i in range(6)]), "materialIds",
         "INVALID_REQUEST"),
        (RunInput(requirement="ok", agents=preset), "agents.agentIds[1]", "INVALID_REQUEST"),
        (RunInput(requirement="ok", agents=AgentsChoice(mode="preset")), "agents.agentIds", "MISSING_REQUIRED_FIELD"),
        (RunInput(requirement="ok", agents=AgentsChoice(agent_ids=["no spaces"])), "agents.agentIds[0]",
         "INVALID_REQUEST"),
        (RunInput(requirement="ok", learner_profile=LearnerProfile(bio="b" * 2001)), "learnerProfile.bio",
         "INVALID_REQUEST"),
    ]
    for i, (inp, path, code) in enumerate(cases):
        with pytest.raises(errors.InvalidInput) as exc:
            await svc.create_run(OWNER, f"v{i}", inp)
        assert (exc.value.details["path"], exc.value.status, exc.value.error_code) == (path, 400, code), path
    assert await log.db.fetchval("SELECT count(*) FROM streams") == 0
    with pytest.raises(errors.StreamNotFound):
        await svc.snapshot(OWNER, "run_missing")
    with pytest.raises(errors.StreamNotFound):
        await svc.retry(OWNER, "run_missing", "r")


# -- materials and agents --------------------------------------------------------------------------------------------


def pdf(text: str) -> bytes:
    """A minimal one-page PDF showing ``text`` in Helvetica."""
    stream = f"BT /F1 18 Tf 72 720 Td ({text}) Tj ET".encode()
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
        b"/Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for n, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % n + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % o for o in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)


PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 32


async def test_materials_are_stored_extracted_and_owner_scoped(db):
    txt = await store_material(db, OWNER, "notes.txt", "text/plain", "\ufeffChlorophyll is green.\r\n".encode())
    assert (txt.text, txt.media_type, txt.asset_id) == ("Chlorophyll is green.\n", "text/plain", None)
    md = await store_material(db, OWNER, "../../etc/outline.md", "", b"# Light\n\n* photons")
    assert md.filename == "outline.md" and md.media_type == "text/markdown" and md.text.startswith("# Light")
    doc = await store_material(db, OWNER, "paper.pdf", "application/octet-stream", pdf("Stomata open at dawn"))
    assert doc.media_type == "application/pdf" and "Stomata open at dawn" in doc.text
    img = await store_material(db, OWNER, "leaf.bin", "application/octet-stream", PNG)
    assert img.media_type == "image/png" and img.text == "" and img.asset_id
    assert await get_asset(db, OWNER, img.asset_id) == ("image/png", PNG)
    # What reading found is stored with it: a later read has the same pages, characters and excerpt.
    assert doc.pages == 1 and doc.characters == len(doc.text) and "Stomata open at dawn" in doc.excerpt
    assert (await get_material(db, OWNER, doc.id)) == doc
    with pytest.raises(errors.NotFound):
        await get_material(db, "mallory", doc.id)
    with pytest.raises(errors.NotFound):
        await get_asset(db, "mallory", img.asset_id)
    with pytest.raises(UnsupportedFileType) as exc:
        await store_material(db, OWNER, "tool.exe", "application/x-msdownload", b"MZ\x90\x00")
    assert exc.value.status == 415 and "unsupported file type" in exc.value.message
    with pytest.raises(UnreadableFile) as bad:
        await store_material(db, OWNER, "latin1.txt", "text/plain", "café".encode("latin-1"))
    assert bad.value.status == 400
    with pytest.raises(UnreadableFile):
        await store_material(db, OWNER, "broken.pdf", "application/pdf", b"%PDF-1.4\nnot really")


async def test_a_run_reads_its_materials_and_uses_the_requested_agents(db, db_url, log):
    svc = service(log)
    notes = await store_material(db, OWNER, "notes.txt", "text/plain", b"Chlorophyll absorbs red and blue light.")
    leaf = await store_material(db, OWNER, "leaf.png", "image/png", PNG)
    theirs = await store_material(db, "mallory", "x.txt", "text/plain", b"secret")
    mine = (await create_agent(db, OWNER, Agent(id="oak", name="Professor Oak", role="teacher",
                                                persona="Loves plants."))).config()
    with pytest.raises(errors.InvalidInput):
        await svc.create_run(OWNER, "bad", RunInput(requirement="x", material_ids=[theirs.id]))
    with pytest.raises(errors.InvalidInput):
        await svc.create_run("mallory", "bad", RunInput(requirement="x", agents=AgentsChoice(mode="preset",
                                                                                                agent_ids=[mine.id])))
    inp = RunInput(requirement=requirement(), outline_review="auto", material_ids=[notes.id, leaf.id],
                   agents=AgentsChoice(mode="preset", agent_ids=[mine.id, "default-2", "default-4"]))
    snap = await svc.create_run(OWNER, "c1", inp)
    async with open_generation_worker(db_url, config()):
        await wait_state(svc, snap.id, "completed")
    doc = await assert_complete_course(log, svc, snap.id)
    [extracted] = await decoded(log, snap.id, "run.materials_extracted")
    assert "Chlorophyll absorbs red and blue light." in extracted.text and extracted.images == [leaf.asset_id]
    assert extracted.kinds == ["txt", "png"]
    assert list(doc.agents) == [mine, BUILTIN_AGENTS["default-2"].config(), BUILTIN_AGENTS["default-4"].config()]
    assert doc.agents[2].role == "student"  # OpenMAIC's agent configs, as the stage carries them
    states = [e.state for e in await decoded(log, snap.id, "run.state_changed")]
    assert states == ["outlining", "generating", "completed"]
    assert step_completions(await events(log, snap.id), log)["materials"] == 1


# -- a worker killed mid-step ------------------------------------------------------------------------------------------


async def test_a_worker_killed_mid_step_resumes_from_the_last_checkpoint(db_url, log):
    cfg_args = {"latency_ms": 12, "lease_ttl_s": 1.0, "heartbeat_s": 0.2}
    cfg = config(**cfg_args)
    svc = RunService(log, cfg)
    snap = await svc.create_run(OWNER, "c1", RunInput(requirement=requirement(), outline_review="auto"))
    proc = subprocess.Popen([sys.executable, "-m", "tests.integration.test_generation", db_url, json.dumps(cfg_args)],
                            cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        with trio.fail_after(30):
            assert (await trio.to_thread.run_sync(proc.stdout.readline)).strip()
        # mid-step: a few scenes are checkpointed and a step has started but not completed
        await wait_for(lambda: _mid_step(log, snap.id, scenes=2), timeout=30, interval=0.005)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()
    killed_at = await events(log, snap.id)
    committed = step_completions(killed_at, log)
    async with open_generation_worker(db_url, cfg):
        await wait_state(svc, snap.id, "completed", timeout=60)
    await assert_complete_course(log, svc, snap.id)
    evs = await events(log, snap.id)
    resumed = evs[len(killed_at):]
    # The new worker took the killed one's lease over, as the next attempt. (A heartbeat held up past the 1 s lease
    # on a busy machine makes a worker presume its lease lost, and the run is claimed again as a later attempt,
    # before the kill or after it.)
    claims = [log.decode(e) for e in evs if e.type == "lease.claimed"]
    last = [e for e in killed_at if e.type in ("lease.claimed", "lease.released")][-1]
    takeover = next(log.decode(e) for e in resumed if e.type == "lease.claimed")
    # A lease the killed worker still held is orphaned; one it had given up is queued again.
    expected = "orphaned" if last.type == "lease.claimed" else "queued"
    assert (takeover.reason, takeover.attempt) == (expected, log.decode(last).attempt + 1), claims
    assert [c.attempt for c in claims] == list(range(1, len(claims) + 1)), claims
    assert step_completions(resumed, log).keys().isdisjoint(committed)  # nothing checkpointed ran again
    assert set(step_completions(evs, log).values()) == {1}
    first = next(log.decode(e).step for e in resumed if e.type == "run.step_started")
    last_started = [log.decode(e).step for e in killed_at if e.type == "run.step_started"][-1]
    assert first == last_started  # the step in flight is the one that ran again
    course = Counter((e.scene.id, e.ready, bool(e.scene.actions),
                      any(getattr(a, "audioId", None) for a in e.scene.actions or []))
                     for e in await decoded(log, snap.course_id, "course.scene_set"))
    assert set(course.values()) == {1}


async def _mid_step(log: EventLog, sid: str, scenes: int) -> bool:
    types = [e.type for e in await log.read_stream(sid, limit=100_000)]
    return types.count("run.scene_actions") >= scenes and types[-1] == "run.step_started"


async def _has_step_started(log: EventLog, sid: str, step: str) -> bool:
    return any(e.type == "run.step_started" and log.decode(e).step == step for e in await events(log, sid))


async def _worker_main(url: str, overrides: dict[str, Any]) -> None:
    async with open_generation_worker(url, config(**overrides)) as worker:
        print(worker.id, flush=True)
        await trio.sleep_forever()


if __name__ == "__main__":
    trio.run(_worker_main, sys.argv[1], json.loads(sys.argv[2]))


async def test_the_materials_images_are_shown_to_the_model_that_writes_the_outline(db, db_url, log):
    big = b"\x89PNG\r\n\x1a\n" + b"\x01" * (MODEL_IMAGE_BYTES + 1)
    leaf = await store_material(db, OWNER, "leaf.png", "image/png", PNG)
    huge = await store_material(db, OWNER, "huge.png", "image/png", big)
    notes = await store_material(db, OWNER, "notes.txt", "text/plain", b"Leaves are green.")
    theirs = await store_material(db, "mallory", "theirs.png", "image/png", PNG + b"mallory")
    async with open_fake_provider() as fake:
        cfg = config(fake_url=fake.openai_url, fake_slot="course.outline")
        svc = RunService(log, cfg)
        fake.push(Text(json.dumps(OUTLINE)))
        snap = await svc.create_run(OWNER, "c1", RunInput(requirement="Leaves", material_ids=[leaf.id, huge.id,
                                                                                                notes.id]))  # fmt: skip
        async with open_generation_worker(db_url, cfg):
            await wait_state(svc, snap.id, "awaiting_outline_confirmation")
    (request,) = fake.requests
    (user,) = [m for m in request.body["messages"] if m["role"] == "user"]
    text, *images = user["content"]
    assert text["type"] == "text" and "Leaves are green." in text["text"] and "1 attached image" in text["text"]
    # The small image as a data URL; the one over the providers' size limit is left out.
    assert images == [{"type": "image_url",
                       "image_url": {"url": "data:image/png;base64," + base64.b64encode(PNG).decode()}}]
    # Another owner's asset is never shown, whatever ids a run's state names.
    assert await images_for_model(db, OWNER, [theirs.asset_id, leaf.asset_id]) == [("image/png", PNG)]
    # Only asset ids are in the log, never the bytes.
    assert all(base64.b64encode(PNG).decode() not in bytes(e.data).decode() for e in await events(log, snap.id))


# -- model output is made valid, never trusted (a fake provider answering the broken shapes real models produce) --

BROKEN_SLIDE = ('Sure! Here is the slide:\n```json\n{"background": {"type": "image", "image": {"src": "https://x.example/a.png"}},'
                ' "elements": [{"id": "t", "type": "text", "left": 1400, "top": -30, "width": 3000, "height": 80,'
                ' "content": "<p onmouseover=\\"steal()\\">Leaves<script>alert(1)</script></p>"},'
                ' {"id": "i", "type": "image", "left": 500, "top": 100, "width": 300, "height": 200,'
                ' "src": "https://tracker.example/pixel.png"},'
                ' {"id": "h", "type": "hologram", "left": 0, "top": 0, "width": 10, "height": 10},'
                ' {"id": "l", "type": "line", "left": 10, "top": 10, "width": "3", "start": [0, 0], "end": [9, 0]},'
                ' {"id": "m", "type": "latex", "left": 60, "top": 300, "width": 300, "height": 80, "latex": "a^2+b^2=c^2"},'
                ' {"id": "c", "type": "text", "left": 60, "top": 420, "width": 400, "heig')  # the answer was cut off


async def test_broken_model_output_is_made_valid_and_never_stored_invalid(db_url, log):
    async with open_fake_provider() as fake:
        cfg = config(fake_url=fake.openai_url, fake_slot="course.content.slide")
        svc = RunService(log, cfg)
        fake.push(*[Text(BROKEN_SLIDE, chunks=4) for _ in range(12)])
        snap = await svc.create_run(OWNER, "c1", RunInput(requirement=requirement(), outline_review="auto"))
        async with open_generation_worker(db_url, cfg):
            await wait_state(svc, snap.id, "completed")
    doc = await assert_complete_course(log, svc, snap.id)  # every scene passes the format's validator
    slides = [s for s in doc.scenes if s.type == "slide"]
    assert slides and len(fake.requests) == len(slides)
    for scene in slides:
        elements = scene.content.canvas.elements
        assert [e.type for e in elements] == ["text", "latex"]  # the rest could not be made valid: left out
        text = elements[0]
        assert "script" not in text.content and "onmouseover" not in text.content and "Leaves" in text.content
        assert 0 <= text.left and text.left + text.width <= 1000 and 0 <= text.top
        assert "<math" in elements[1].html
        assert scene.content.canvas.background == fmt.Background(type="solid", color="#ffffff")
    # nothing invalid was ever written to the course, not even on the way
    for e in await decoded(log, snap.course_id, "course.scene_set"):
        assert fmt.validate_scene(fmt.to_json(e.scene), stage_id=snap.course_id) == []


async def test_a_scene_that_cannot_be_made_valid_pauses_the_run_naming_the_problem(db_url, log):
    async with open_fake_provider() as fake:
        cfg = config(fake_url=fake.openai_url, fake_slot="course.content.slide", step_retries=1)
        svc = RunService(log, cfg)
        fake.push(*[Text('{"elements": [{"type": "hologram"}, {"typ')] * 6)
        snap = await svc.create_run(OWNER, "c1", RunInput(requirement=requirement(), outline_review="auto"))
        async with open_generation_worker(db_url, cfg):
            s = await wait_state(svc, snap.id, "paused")
    assert s.error == "the slide reply has no usable element (each needs a known type, a position and a size)"
    assert len(fake.requests) == 6  # each attempt asked again twice, showing the model what was wrong
    retried = fake.requests[1].body["messages"][-1]["content"]
    assert "could not be used" in str(retried) and "no usable element" in str(retried)
    doc = await course_doc(log, snap.course_id)
    assert all(fmt.validate_scene(fmt.to_json(sc), stage_id=snap.course_id) == [] for sc in doc.scenes)
    assert not [sc for sc in doc.scenes if sc.type == "slide"] or doc.pending
