"""Courses written before courses were OpenMAIC's document still fold, display and verify: nothing stored is lost.

``tests/fixtures/course-log-v1.jsonl`` is an audit export (docs/audit.md) of owner ``local`` written by the code of
commit b92bf1e, when a course scene was ``{title, goal, kind, key_points, content: {slide: {title, bullets, notes}
| quiz | interactive}, actions: {actions: [{kind, agent_id, text}]}, media, narration_asset_id}``: three generation
runs through ``POST /api/generation-runs`` (one interactive with pictures and a video, one with preset agents) and
one through ``POST /api/generate-classroom`` from a Chinese requirement, every scene narrated; a Pro session that
retitled a course; and OpenMAIC's example document saved through ``PUT /api/persistence/documents/{id}``.

The rows are loaded as they were stored, then read with today's code: every event decodes (the old versions
through their upcasters), every course folds into a document that OpenMAIC's validators accept and that every
door serves alike, and an export from the database verifies byte for byte against the original chains.
"""

from __future__ import annotations

import json
from pathlib import Path

import openmaic.kinds  # noqa: F401  (registers every event type)
from openmaic.config import default_config
from openmaic.courses import format as fmt
from openmaic.courses.document import document_of
from openmaic.courses.views import classroom_view
from openmaic.events.log import EventLog
from openmaic.runs.service import RunService
from openmaic.tools.audit import export, plan_export, verify
from tests.integration.log_fixtures import load_log_fixture, log_fixture

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "course-log-v1.jsonl"
OWNER = "local"


async def test_the_fixture_holds_the_old_shapes():
    _, rows = log_fixture(FIXTURE)
    versions = {(r["type"], r["v"]) for r in rows if "type" in r}
    assert {("course.scene_set", 1), ("course.outline_set", 1), ("course.agents_set", 1),
            ("run.scene_content", 1), ("run.scene_actions", 1), ("run.outline_item", 1),
            ("course.browser_document_set", 1)} <= versions
    old = [r["data"]["scene"] for r in rows if r.get("type") == "course.scene_set"]
    assert {s["content"]["kind"] for s in old if s.get("content")} == {"slide", "quiz", "interactive"}
    assert any(s.get("narration_asset_id") for s in old) and any(s.get("media") for s in old)
    assert verify(FIXTURE).ok


async def test_every_course_of_the_old_log_is_an_openmaic_document_at_every_door(db, tmp_path):
    kinds = await load_log_fixture(db, FIXTURE)
    log = EventLog(db)
    svc = RunService(log, default_config())
    for stream_id in kinds:
        for e in await log.read_stream(stream_id, limit=10_000):
            log.decode(e)  # every event decodes with today's types
    courses = sorted(s for s, k in kinds.items() if k == "course")
    assert len(courses) == 6  # five generated (two of them before the owner hit the run limit), one saved
    seen_types: set[str] = set()
    narrated = media_done = browser = 0
    for course_id in courses:
        doc = await svc.owned_course(OWNER, course_id)
        document = document_of(course_id, doc)
        as_json = fmt.to_json(document)
        assert fmt.validate_document(as_json) == [], course_id
        room = classroom_view(course_id, doc)
        assert [fmt.to_json(s) for s in room.scenes] == as_json["scenes"] and room.stage == document.stage
        assert not room.pending_scenes and room.generating_run_id is None
        assert document.stage.name and document.stage.createdAt > 0
        for scene in document.scenes:
            seen_types.add(scene.type)
            assert scene.stageId == document.stage.id and scene.actions
            narrated += any(isinstance(a, fmt.SpeechAction) and a.audioId for a in scene.actions)
            if isinstance(scene.content, fmt.SlideContent):
                media_done += sum(1 for e in scene.content.canvas.elements
                                  if isinstance(e, fmt.ImageElement | fmt.VideoElement)
                                  and str(e.src).startswith("/api/assets/"))
        if doc.browser:
            browser += 1
            # OpenMAIC's own example, saved by a browser: read back member for member as it was written
            example = json.loads((FIXTURE.parent / "course_format_example.json").read_text())
            assert as_json["stage"] == example["stage"]
            assert [s["id"] for s in as_json["scenes"]] == [s["id"] for s in example["scenes"]]
            assert as_json["scenes"][2] == example["scenes"][2]
        else:
            agents = document.stage.generatedAgentConfigs
            assert agents and sum(a.role == "teacher" for a in agents) == 1
            assert {a.role for a in agents} <= {"teacher", "assistant", "student"}
    assert seen_types == {"slide", "quiz", "interactive"}
    assert narrated >= 10 and media_done >= 3 and browser == 1

    # the Pro session's edit (it retitled the course) is in the course it edited
    renamed = [document_of(c, await svc.owned_course(OWNER, c)) for c in courses]
    assert [d.stage.name for d in renamed].count("Plants make food") == 1

    # and the audit chains: what the database holds exports and verifies, with the original heads
    out_file = tmp_path / "again.jsonl"
    await export(db, out_file, await plan_export(db, owner=OWNER), owner=OWNER)
    report = verify(out_file)
    assert report.ok, report.describe()
    heads = {r["stream_end"]: r["head_hash"] for r in log_fixture(FIXTURE)[1] if "stream_end" in r}
    again = {json.loads(line)["stream_end"]: json.loads(line)["head_hash"]
             for line in out_file.read_text().splitlines()[1:] if '"stream_end"' in line}
    assert again == heads
