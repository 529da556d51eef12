"""A log written before run events took OpenMAIC's vocabulary still reads: nothing stored is lost or rewritten.

``tests/fixtures/legacy-log.jsonl`` is an audit export (docs/audit.md) of owner ``alice`` written by the code of
commit cd8cddc, when ``run.created`` v1 held ``agents: "auto" | [ids]`` and a one-string learner profile and
``run.state_changed`` v1 ended runs as ``stopped``. It holds four runs (an edited confirmation with preset
agents, a learner profile and a material; a paused and retried run; a run whose course was deleted while it
waited; a countdown) and a workbench session. The test loads the stored rows as they are, then reads them with
today's code: the upcasters lift the old versions, every stream folds, the client views and job views read, and
an export from the database verifies byte for byte against the original chains.
"""

from __future__ import annotations

import json
from pathlib import Path

import msgspec

from openmaic.config import default_config
from openmaic.courses.events import CourseDocument, evolve_course
from openmaic.courses import format as fmt
from openmaic.courses.document import document_of
from openmaic.courses.views import classroom_view
from openmaic.events.log import EventLog
from openmaic.events.types import registry
from openmaic.runs.client_events import ClientView
from openmaic.runs.events import AgentsChoice, LearnerProfile, RunCreated, RunStateChanged
from openmaic.runs.fold import RunState
from openmaic.runs.service import RunService
from openmaic.runs.views import job_view, run_view
from openmaic.tools.audit import export, plan_export, verify
from openmaic.workbench import fold as workbench_fold
from openmaic.workbench.views import SESSION_EVENT_TYPES, SessionView, session_meta
from tests.integration.log_fixtures import load_log_fixture, log_fixture

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "legacy-log.jsonl"
OWNER = "alice"


def fixture() -> tuple[dict, list[dict]]:
    return log_fixture(FIXTURE)


async def load(db) -> dict[str, str]:
    """Insert the fixture's rows as they were stored; returns each stream's kind."""
    return await load_log_fixture(db, FIXTURE)


async def test_the_fixture_was_written_with_the_old_versions():
    _, rows = fixture()
    versions = {(r["type"], r["v"]) for r in rows if "type" in r}
    assert ("run.created", 1) in versions and ("run.state_changed", 1) in versions
    assert any(r["type"] == "run.state_changed" and r["data"]["state"] == "stopped" for r in rows if "type" in r)
    assert RunCreated.version == 2 and RunStateChanged.version == 2
    assert verify(FIXTURE).ok


async def test_an_old_log_folds_and_reads_with_todays_code(db, tmp_path):
    kinds = await load(db)
    log = EventLog(db)
    svc = RunService(log, default_config())
    runs = sorted(s for s, k in kinds.items() if k == "generation")
    assert len(runs) == 4
    states: dict[str, RunState] = {}
    for run_id in runs:
        row, state = await svc.read(OWNER, run_id)
        states[run_id] = state
        # every event decodes with today's types (the old versions through their upcasters)
        for e in await log.read_stream(run_id, limit=10_000):
            log.decode(e)
    by_end = {s.state: s for s in states.values()}
    assert sorted(s.state for s in states.values()) == ["completed", "completed", "completed", "ended"]

    # run A: preset agents and a learner profile, lifted from v1's list and string
    (a,) = [s for s in states.values() if s.input.agents.mode == "preset"]
    assert a.input.agents.agent_ids[1] == "assistant" and a.input.agents.agent_ids[0].startswith("agent_")
    assert a.input.learner_profile == LearnerProfile(bio="A curious 13-year-old")
    assert a.confirmed_revision == 2 and a.confirmed[0].title == "Why plants need light"
    assert all(s.input.agents == AgentsChoice() for s in states.values() if s is not a)
    ended = by_end["ended"]
    assert ended.stop_reason == "course deleted" and ended.ended == "stopped"

    # the job views and snapshots read
    for run_id, s in states.items():
        job = job_view(run_id, s, "http://h")
        if s.state == "completed":
            assert job.status == "succeeded" and job.result.scenes_count == s.scenes_total >= 3
        else:
            assert (job.status, job.error) == ("failed", "The classroom was deleted before its generation finished")
        row, _ = await svc.read(OWNER, run_id)
        view = run_view(run_id, s, created_at=row.created_at, updated_at=row.updated_at)
        assert view.state == ("ended" if s is ended else "completed")

    # the client view of run A, from its start: OpenMAIC's vocabulary, each at its own seq, in order
    view = ClientView(RunState(), max_attempts=3)
    out = []
    for e in await log.read_stream(a.run_id, limit=10_000):
        ce = view.next(log.decode(e), e.seq)
        if ce is not None:
            out.append((e.seq, *ce))
    assert [seq for seq, _, _ in out] == sorted({seq for seq, _, _ in out})
    types = [t for _, t, _ in out]
    assert types[0] == "step_started" and "state" in types and types[-1] == "completed"
    assert {"step_started", "step_completed", "material_kinds", "outline_item", "outline_ready",
            "outline_confirmed", "agents", "scene_ready"} <= set(types)
    (confirmed,) = [d for _, t, d in out if t == "outline_confirmed"]
    assert {k: confirmed[k] for k in ("revision", "edited", "by")} == {"revision": 2, "edited": True, "by": "user"}
    assert confirmed["outline"].outlines[0].title == "Why plants need light"
    course = CourseDocument()
    for e in await log.read_stream(a.course_id, limit=10_000):
        course = evolve_course(course, log.decode(e), e.seq)
    assert [d["sceneId"] for _, t, d in out if t == "scene_ready"] == [sc.id for sc in course.scenes][:3]
    (end,) = [d for _, t, d in out if t == "completed"]
    assert end == {"stageId": a.course_id}

    # every course reads as today's classroom (the page at result.url reads this)
    for s in states.values():
        if s.state != "completed":
            continue
        room = classroom_view(s.course_id, await svc.owned_course(OWNER, s.course_id))
        # a workbench session may have added scenes after them; every scene is OpenMAIC's, lifted from the old shape
        assert len(room.scenes) >= s.scenes_total and not room.pending_scenes
        document = fmt.to_json(document_of(s.course_id, await svc.owned_course(OWNER, s.course_id)))
        assert fmt.validate_document(document) == []
        assert room.generating_run_id is None and room.stage.generatedAgentConfigs

    # the workbench session folds too, and reads as OpenMAIC's Pro session: its meta and its client events
    (session,) = [s for s, k in kinds.items() if k == "workbench"]
    ws, _ = await log.fold(session, workbench_fold.initial(), workbench_fold.evolve)
    assert ws.turns >= 1
    row = await log.stream_row(session)
    meta = session_meta(session, OWNER, ws, attempt=row.attempt, created_at=row.created_at,
                        updated_at=row.updated_at)
    assert meta.status in ("succeeded", "failed", "cancelled", "running", "queued") and meta.stage_id
    session_view = SessionView(workbench_fold.initial())
    lifecycle = [out[0] for e in await log.read_stream(session, limit=10_000)
                 if (out := session_view.next(log.decode(e), e.seq)) is not None]
    assert lifecycle[0] == "session_start" and "user_message" in lifecycle and "turn_end" in lifecycle
    assert set(lifecycle) <= set(SESSION_EVENT_TYPES)

    # and the audit chains: what the database holds exports and verifies, with the original heads
    out_file = tmp_path / "again.jsonl"
    await export(db, out_file, await plan_export(db, owner=OWNER), owner=OWNER)
    report = verify(out_file)
    assert report.ok, report.describe()
    heads = {r["stream_end"]: r["head_hash"] for r in fixture()[1] if "stream_end" in r}
    again = {json.loads(line)["stream_end"]: json.loads(line)["head_hash"]
             for line in out_file.read_text().splitlines()[1:] if '"stream_end"' in line}
    assert again == heads


def test_the_upcasters_lift_each_old_shape():
    created = registry.decode("run.created", 1, json.dumps({
        "course_id": "c", "owner_id": "o", "run_id": "r",
        "input": {"requirement": "x", "agents": ["teacher"], "learner_profile": "likes maps"}}).encode())
    assert created.input.agents == AgentsChoice(mode="preset", agent_ids=["teacher"])
    assert created.input.learner_profile == LearnerProfile(bio="likes maps")
    auto = registry.decode("run.created", 1, b'{"course_id":"c","owner_id":"o","input":{"requirement":"x"}}')
    assert auto.input.agents == AgentsChoice()
    changed = registry.decode("run.state_changed", 1, b'{"state":"stopped","previous":"generating"}')
    assert (changed.state, changed.previous) == ("ended", "generating")
    assert msgspec.json.decode(registry.encode(changed)[2])["state"] == "ended"
