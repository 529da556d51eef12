"""The generation run's pure fold and decisions, without a database: every state and transition."""

from __future__ import annotations

import datetime as dt

import msgspec
import pytest

from openmaic.actors.kind import Core, Finish, Outcome, Step, Wait
from openmaic.config import default_config
from openmaic.courses.events import CourseAgentsSet, CourseOutlineSet, CourseUnlocked
from openmaic.courses import format as fmt
from openmaic.events.core import LeaseReleased, SessionEnded
from openmaic.runs.decide import AWAITING, INTERRUPTED, PAUSED, QUEUED, check_outline, confirmation
from openmaic.runs.events import (
    RunCourseCreated,
    RunAdmissionDeferred,
    RunAdmitted,
    RunAgentsSelected,
    RunCreated,
    RunInput,
    RunMaterialsExtracted,
    RunMediaPassDone,
    RunMediaState,
    RunOutlineConfirmed,
    RunOutlineItem,
    RunOutlineProposed,
    RunOutlineRestarted,
    RunResearchDone,
    RunRetryRequested,
    RunSceneActions,
    RunSceneContent,
    RunSceneNarrated,
    RunStateChanged,
    RunStepCompleted,
    RunStepFailed,
    RunStopRequested,
)
from openmaic.runs.fold import COUNTDOWN_WAIT, RunState, evolve, fold, next_step, scene_id
from openmaic.runs.kind import RESUME_NOW, GenerationKind
from openmaic.runs.service import course_title, run_ids
from openmaic.runs.views import job_view

ITEMS = [
    fmt.SceneOutline(id="scene_1", type="slide", title="Intro", description="See it", keyPoints=["a", "b"], order=1),
    fmt.SceneOutline(id="scene_2", type="quiz", title="Check", description="Test it", keyPoints=[], order=2),
]
TEACHER = fmt.AgentConfig(id="teacher", name="T", role="teacher", persona="p", avatar="/a.png", color="#000",
                          priority=10)
CONTENT = fmt.SlideContent(canvas=fmt.Slide(
    id="cv", viewportSize=1000, viewportRatio=0.5625, theme=fmt.DEFAULT_THEME,
    elements=[fmt.TextElement(id="t", left=60, top=50, width=880, height=70, rotate=0, content="<p>Intro</p>",
                              defaultFontName="Microsoft YaHei", defaultColor="#333333")]))
ACTIONS = [fmt.SpeechAction(id="a1", text="hi")]
UNTIL = dt.datetime(2030, 1, 1, tzinfo=dt.UTC)

KIND = GenerationKind(msgspec.structs.replace(default_config(), runtime=msgspec.structs.replace(
    default_config().runtime, step_retries=2)))


def run(*events, review: str = "wait", material_ids: list[str] | None = None) -> RunState:
    inp = RunInput(requirement="Teach fractions", outline_review=review, material_ids=material_ids or [])
    created = RunCreated(course_id="course_1", owner_id="o", input=inp, run_id="run_1")
    return fold((e, n) for n, e in enumerate([created, *events], 2))


def core(attempt: int = 1, seq: int = 0) -> Core:
    return Core(seq=seq, owner_id="o", attempt=attempt)


def decide(state: RunState, attempt: int = 1):
    return KIND.decide(state, core(attempt, state.seq))


def confirmed_run(**kw) -> RunState:
    return run(
        RunAdmitted(attempt=1),
        RunOutlineProposed(revision=1, title="Fractions", items=ITEMS),
        RunOutlineConfirmed(revision=1, items=ITEMS),
        RunStateChanged(state="generating", previous="awaiting_outline_confirmation"),
        **kw,
    )


# -- the fold ------------------------------------------------------------------------------------------------------


def test_a_new_run_is_preparing_and_its_first_decision_is_admission():
    s = run()
    assert (s.state, s.course_id, s.owner_id, s.run_id, s.seq) == ("preparing", "course_1", "o", "run_1", 2)
    assert next_step(s) == "research"
    assert next_step(evolve(s, RunResearchDone(skipped=True), 3)) == "outline"
    d = decide(s)
    assert isinstance(d, Step) and d.name == "admission"


def test_admission_is_per_attempt_and_a_deferral_waits_until_its_time():
    s = run(RunAdmitted(attempt=1))
    assert isinstance(decide(s), Step) and decide(s).name == "research"
    # a later attempt (after a wait or a takeover) is admitted again
    assert decide(s, attempt=2).name == "admission"
    s = run(RunAdmissionDeferred(attempt=1, active=2, limit=2, until=UNTIL))
    d = decide(s)
    assert isinstance(d, Wait) and (d.wake_at, d.reason) == (UNTIL, QUEUED)
    assert decide(s, attempt=2).name == "admission"


def test_materials_come_first_when_there_are_any():
    s = run(RunAdmitted(attempt=1), material_ids=["m1"])
    assert decide(s).name == "materials"
    s = evolve(s, RunMaterialsExtracted(text="notes", images=["asset_1"]), 9)
    assert (s.materials_text, s.material_images, next_step(s)) == ("notes", ("asset_1",), "research")


def test_streamed_items_restart_on_index_zero_and_on_a_restart_event():
    s = run(*(RunOutlineItem(index=i, item=ITEMS[i]) for i in range(2)))
    assert s.streamed == tuple(ITEMS) and s.outline == tuple(ITEMS)
    s = evolve(s, RunOutlineItem(index=0, item=ITEMS[1]), 10)
    assert s.streamed == (ITEMS[1],)
    assert evolve(s, RunOutlineRestarted(), 11).streamed == ()


def test_wait_review_parks_the_run_until_a_confirmation():
    s = run(RunAdmitted(attempt=1), RunOutlineProposed(revision=1, title="Fractions", items=ITEMS),
            RunStateChanged(state="awaiting_outline_confirmation", previous="outlining"))
    assert (s.outline_revision, s.proposed, s.streamed) == (1, tuple(ITEMS), ())
    d = decide(s)
    assert isinstance(d, Wait) and d.wake_at is None and d.reason == AWAITING and not d.events
    # parking needs no admission: a claim without a confirmation parks again
    assert isinstance(decide(s, attempt=5), Wait)


def test_countdown_waits_until_its_deadline_then_confirms_itself_fenced():
    s = run(RunAdmitted(attempt=1), RunOutlineProposed(revision=1, title="Fractions", items=ITEMS,
                                                       countdown_until=UNTIL),
            RunStateChanged(state="awaiting_outline_confirmation", previous="outlining"), review="countdown")
    d = decide(s)
    assert isinstance(d, Wait) and (d.wake_at, d.reason) == (UNTIL, COUNTDOWN_WAIT)
    s = evolve(s, LeaseReleased(attempt=1, reason=COUNTDOWN_WAIT), 20)
    d = decide(s, attempt=2)
    # a Wait, so the runtime fences it by the head seq: a user's confirmation at the same moment wins
    assert isinstance(d, Wait) and d.wake_at == RESUME_NOW
    confirmed, created, changed = d.events
    assert isinstance(confirmed, RunOutlineConfirmed) and (confirmed.by, confirmed.revision) == ("countdown", 1)
    assert created == RunCourseCreated(course_id="course_1")
    assert (changed.state, changed.previous) == ("generating", "awaiting_outline_confirmation")
    [course] = d.also
    [outline_set] = course.events
    assert course.stream_id == "course_1" and isinstance(outline_set, CourseOutlineSet)
    assert outline_set.scene_ids == [scene_id("course_1", 1, i) for i in range(2)]


def test_a_second_confirmation_never_changes_the_confirmed_outline():
    s = confirmed_run()
    again = evolve(s, RunOutlineConfirmed(revision=2, items=ITEMS[:1], by="countdown"), 30)
    assert (again.confirmed, again.confirmed_revision, again.confirmed_by) == (tuple(ITEMS), 1, "user")


def test_an_edited_confirmation_is_a_new_revision_with_its_own_scene_ids():
    s = run(RunOutlineProposed(revision=1, title="Fractions", items=ITEMS))
    events, course = confirmation(s, 2, ITEMS[:1], "user")
    named = msgspec.structs.replace(ITEMS[0], id=scene_id("course_1", 2, 0))
    assert events[0] == RunOutlineConfirmed(revision=2, items=[named], by="user")
    [outline_set] = course.events
    assert outline_set.revision == 2 and outline_set.scene_ids == [scene_id("course_1", 2, 0)]
    assert outline_set.outlines == [named]
    assert scene_id("course_1", 2, 0) != scene_id("course_1", 1, 0)


def test_a_run_logged_before_narration_keeps_its_pipeline():
    s = evolve(confirmed_run(), RunAgentsSelected(agents=[TEACHER]), 40)
    s = evolve(evolve(s, RunSceneContent(index=0, content=CONTENT), 41), RunSceneActions(index=0, actions=ACTIONS), 42)
    assert (s.narrates, s.scenes_completed, next_step(s)) == (False, 1, "scene:1:content")


def test_the_pipeline_runs_agents_then_content_actions_and_narration_scene_by_scene_then_completes():
    s = evolve(confirmed_run(), RunResearchDone(skipped=True), 39)
    assert (s.scenes_total, s.scenes_completed, next_step(s)) == (2, 0, "agents")
    s = evolve(s, RunAgentsSelected(agents=[TEACHER]), 40)
    order = []
    for i in range(2):
        order.append(next_step(s))
        s = evolve(s, RunSceneContent(index=i, content=CONTENT), 41 + 3 * i)
        order.append(next_step(s))
        s = evolve(s, RunSceneActions(index=i, actions=ACTIONS), 42 + 3 * i)
        order.append(next_step(s))
        s = evolve(s, RunSceneNarrated(index=i, skipped=True), 43 + 3 * i)
    assert order == ["scene:0:content", "scene:0:actions", "scene:0:narration", "scene:1:content",
                     "scene:1:actions", "scene:1:narration"]
    assert (s.scenes_completed, next_step(s)) == (2, None)
    d = decide(s)
    assert isinstance(d, Finish)
    assert [type(e) for e in d.events] == [RunStateChanged, SessionEnded] and d.events[1].status == "completed"
    assert d.also[0].stream_id == "course_1" and d.also[0].events == [CourseUnlocked(run_id="run_1")]
    ready = s.scene(0, CONTENT, ACTIONS)
    assert (ready.id, ready.stageId, ready.title, ready.order) == (scene_id("course_1", 1, 0), "course_1", "Intro", 1)
    assert fmt.validate_scene(fmt.to_json(ready), stage_id="course_1") == []


def test_with_media_the_run_waits_for_the_lanes_first_pass_holding_no_worker():
    picture = fmt.MediaGeneration(type="image", prompt="A pie cut in four", elementId="gen_img_1")
    items = [msgspec.structs.replace(ITEMS[0], mediaGenerations=[picture]), ITEMS[1]]
    s = run(RunAdmitted(attempt=1), RunResearchDone(skipped=True),
            RunOutlineProposed(revision=1, title="Fractions", items=items),
            RunOutlineConfirmed(revision=1, items=items), RunStateChanged(state="generating", previous="outlining"),
            RunAgentsSelected(agents=[TEACHER]))
    for i in range(2):
        for e in (RunSceneContent(index=i, content=CONTENT), RunSceneActions(index=i, actions=ACTIONS),
                  RunSceneNarrated(index=i, asset_id=f"asset_{i}")):
            s = evolve(s, e, s.seq + 1)
    assert (s.media_pending, next_step(s)) == (True, "media")
    d = decide(s)
    assert isinstance(d, Wait) and d.wake_at is None and d.reason == "generating media"
    assert job_view("run_1", s, "http://h").step == "generating_media"
    s = evolve(s, RunMediaState(element_id="gen_img_1", media_type="image", status="done", asset_id="a1"), s.seq + 1)
    assert s.media["gen_img_1"].status == "done"
    s = evolve(s, RunMediaPassDone(media_pass=1), s.seq + 1)
    assert next_step(s) is None and isinstance(decide(s), Finish)


def test_a_failed_step_is_retried_then_pauses_and_a_retry_resumes_exactly_that_step():
    s = confirmed_run()
    out = KIND.step_failed(s, core(), "agents", "boom")
    assert isinstance(out, Outcome) and out.events == [RunStepFailed(step="agents", error="boom", will_retry=True)]
    assert not out.progress
    s = evolve(evolve(s, out.events[0], 50), out.events[0], 51)
    assert s.failures == {"agents": 2}
    out = KIND.step_failed(s, core(), "agents", "boom")
    assert isinstance(out, Outcome)
    failed, paused = out.events
    assert not failed.will_retry and (paused.state, paused.step, paused.error) == ("paused", "agents", "boom")
    s = evolve(evolve(s, failed, 52), paused, 53)
    assert (s.state, s.previous, s.paused_step, s.error) == ("paused", "generating", "agents", "boom")
    d = decide(s)
    assert isinstance(d, Wait) and d.reason == PAUSED and d.wake_at is None
    # retry: the control plane's events
    s = evolve(s, RunRetryRequested(step="agents"), 54)
    s = evolve(s, RunStateChanged(state="generating", previous="paused", step="agents"), 55)
    assert (s.state, s.failures, s.error, s.retry_requested) == ("generating", {"agents": 0}, None, True)
    s = evolve(s, RunAdmitted(attempt=2), 56)
    assert decide(s, attempt=2).name == "agents"
    s = evolve(s, RunStepCompleted(step="agents"), 57)
    assert s.failures == {} and not s.retry_requested


def test_a_failed_step_backs_off_before_running_again():
    s = evolve(confirmed_run(), RunStepFailed(step="agents", error="x", will_retry=True), 60)
    base = KIND.decide(confirmed_run(), core(1, 0)).deadline
    assert decide(s).deadline == pytest.approx(base + KIND.retry_backoff_s)
    assert base == KIND.deadlines.agents + 1.0  # the handler's own deadline fires first


def test_a_crash_loop_pauses_with_interrupted_too_many_times():
    s = confirmed_run()
    d = KIND.over_cap(s, core())
    assert isinstance(d, Wait) and d.reason == PAUSED
    [changed] = d.events
    assert (changed.state, changed.step, changed.error) == ("paused", "agents", INTERRUPTED)


def test_a_stop_request_settles_ended_and_a_deleted_course_is_not_unlocked():
    s = evolve(confirmed_run(), RunStopRequested(reason="course deleted"), 70)
    d = decide(s)
    assert isinstance(d, Finish) and d.events[-1] == SessionEnded(status="ended")
    assert d.events[0] == RunStateChanged(state="ended", previous="generating", step=None)
    assert d.also == []
    assert isinstance(KIND.over_cap(s, core()), Finish)
    # a cancel request stops too, and hands the (live) course back
    c = KIND.cancelled(confirmed_run(), core())
    assert c.events[-1].status == "ended" and c.also[0].events == [CourseUnlocked(run_id="run_1")]


def test_a_stop_request_wins_over_a_pause():
    s = run(RunStateChanged(state="paused", step="outline", error="x"), RunStopRequested())
    assert isinstance(decide(s), Finish)


def test_outputs_for_scenes_outside_the_outline_are_ignored():
    s = confirmed_run()
    assert evolve(s, RunSceneContent(index=7, content=CONTENT), 80).scenes == s.scenes


def test_outline_checks_name_the_offending_item():
    check_outline(ITEMS)
    with pytest.raises(Exception, match="no scenes"):
        check_outline([])
    with pytest.raises(Exception) as exc:
        check_outline([ITEMS[0], msgspec.structs.replace(ITEMS[0], title=" ")])
    assert exc.value.details["path"] == "outline[1].title"


def test_ids_and_titles_for_new_runs():
    assert run_ids("o", "c1") == run_ids("o", "c1") != run_ids("o", "c2")
    assert run_ids("o", "c1") != run_ids("p", "c1")
    run_id, course_id = run_ids("o", "c1")
    assert run_id.startswith("run_") and course_id.startswith("course_") and run_id[4:] == course_id[7:]
    assert course_title("Teach 8th graders about photosynthesis") == "Teach 8th graders about photosynthesis"
    long = "one two three four five six seven eight nine ten"
    assert course_title(long) == "one two three four five six seven eight…"
    assert course_title("\n\n  Fractions.\nmore") == "Fractions"


def test_course_agents_and_state_survive_a_round_trip_through_the_stored_json():
    s = evolve(confirmed_run(), RunAgentsSelected(agents=[TEACHER]), 90)
    assert s.agents == (TEACHER,) and s.agents_done
    event = CourseAgentsSet(agents=[TEACHER])
    assert msgspec.json.decode(msgspec.json.encode(event), type=CourseAgentsSet) == event
