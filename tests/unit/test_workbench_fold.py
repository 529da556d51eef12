"""The workbench session fold and decisions, without a database: history, delivery, repair, tools' pure part."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from openmaic.actors.kind import Core, Finish, Outcome, Step, Wait, evolve_core
from openmaic.config import default_config
from openmaic.courses import format as fmt
from openmaic.courses.events import CourseCreated, CourseDocument, CourseSceneSet, evolve_course
from openmaic.events.core import (
    LeaseClaimed,
    LeaseReleased,
    ModelOutputDelta,
    ModelTurnCompleted,
    SessionCancelRequested,
    SessionCreated,
    SessionEnded,
    SessionMessagePosted,
    ToolCalled,
    ToolResult,
)
from openmaic.events.types import Event
from openmaic.models.types import AssistantMessage, ToolCall, ToolResultMessage, UserMessage
from openmaic.workbench import fold
from openmaic.workbench.events import ModelOutputReset
from openmaic.workbench.kind import MAX_ROUNDS, OVER_CAP_ERROR, WorkbenchKind, deliverable
from openmaic.workbench.tools import (
    CANCELLED,
    INTERRUPTED,
    TOOL_SPECS,
    AddScene,
    ToolEnv,
    ToolFailure,
    apply,
    new_scene_id,
    parse_arguments,
)

KIND = WorkbenchKind(default_config())


class Folded:
    """The session's events folded by both the runtime (Core) and the kind (SessionState)."""

    def __init__(self) -> None:
        self.core = Core()
        self.state = fold.initial()
        self.seq = 0

    def add(self, *events: Event) -> Folded:
        for e in events:
            self.seq += 1
            self.core = evolve_core(self.core, e, self.seq)
            self.state = KIND.evolve(self.state, e, self.seq)
        return self

    def decide(self) -> Step | Wait | Finish:
        return KIND.decide(self.state, self.core)


def call(cid: str, name: str, **args: Any) -> dict[str, Any]:
    return {"id": cid, "name": name, "arguments": args}


def created(message: str | None = "hello") -> Folded:
    f = Folded().add(SessionCreated(kind="workbench", owner_id="o", input={"course_id": "c1"}))
    if message is not None:
        f.add(SessionMessagePosted(text=message))
    return f


def test_a_session_with_a_message_is_queued_then_running_and_its_first_turn_delivers_it():
    f = created()
    assert (f.state.status, f.state.course_id, len(f.state.undelivered)) == ("queued", "c1", 1)
    f.add(LeaseClaimed(attempt=1, worker="w", reason="queued"))
    assert f.state.status == "running"
    d = f.decide()
    assert isinstance(d, Step) and d.name == "turn:1"
    assert [m.text for m in deliverable(f.state, f.core)] == ["hello"]


def test_history_holds_committed_turns_in_order_and_never_output_deltas():
    f = created().add(LeaseClaimed(attempt=1, worker="w", reason="queued"))
    f.add(ModelOutputDelta(text="Let me look"))
    assert f.state.partial_output
    f.add(ModelTurnCompleted(text="Let me look", tool_calls=[call("c1", "read_course")], delivered=[2]))
    assert not f.state.partial_output and f.core.pending == ()
    assert f.decide().name == "tool:c1"
    f.add(ToolCalled(call_id="c1", name="read_course"), ToolResult(call_id="c1", name="read_course", result={"a": 1}))
    assert f.state.needs_model and f.decide().name == "turn:2"
    f.add(ModelTurnCompleted(text="Done."))
    assert fold.history_messages(f.state) == [
        UserMessage(text="hello"),
        AssistantMessage(text="Let me look", tool_calls=[ToolCall(id="c1", name="read_course", arguments={})]),
        ToolResultMessage(call_id="c1", name="read_course", content='{"a":1}'),
        AssistantMessage(text="Done."),
    ]
    assert isinstance(f.decide(), Wait)
    f.add(LeaseReleased(attempt=1, reason="idle"))
    assert (f.state.status, f.state.turns) == ("idle", 2)


def test_a_second_result_for_the_same_call_does_not_enter_the_history():
    f = created().add(ModelTurnCompleted(tool_calls=[call("c1", "read_course")], delivered=[2]))
    f.add(ToolResult(call_id="c1", name="read_course", result=1),
          ToolResult(call_id="c1", name="read_course", result=2))
    assert sum(isinstance(m, ToolResultMessage) for m in f.state.history) == 1


def test_steer_messages_join_the_next_call_and_queued_ones_wait_for_the_exchange_to_end():
    f = created().add(LeaseClaimed(attempt=1, worker="w", reason="queued"))
    f.add(ModelTurnCompleted(tool_calls=[call("c1", "read_course")], delivered=[2]))
    f.add(SessionMessagePosted(text="later", delivery="queued"), SessionMessagePosted(text="now", delivery="steer"))
    f.add(ToolResult(call_id="c1", name="read_course", result={}))
    assert [m.text for m in deliverable(f.state, f.core)] == ["now"]
    f.add(ModelTurnCompleted(text="ok", delivered=[6]))
    assert [m.text for m in f.core.pending] == ["later"]
    assert [m.text for m in deliverable(f.state, f.core)] == ["later"]
    d = f.decide()
    assert isinstance(d, Step) and d.name == "turn:3"
    users = [m.text for m in f.state.history if isinstance(m, UserMessage)]
    assert users == ["hello", "now"]


async def test_calls_open_at_a_new_claim_are_repaired_before_the_next_model_call():
    f = created().add(LeaseClaimed(attempt=1, worker="w", reason="queued"))
    f.add(ModelTurnCompleted(tool_calls=[call("c1", "add_scene", title="x"), call("c2", "read_course")],
                             delivered=[2]))
    assert f.decide().name == "tool:c1"  # the same attempt runs its own calls
    f.add(ToolCalled(call_id="c1", name="add_scene"))
    f.add(LeaseClaimed(attempt=2, worker="w2", reason="orphaned"))
    d = f.decide()
    assert isinstance(d, Step) and d.name == "repair"
    outcome = await d.handler(None)  # type: ignore[arg-type]
    assert isinstance(outcome, Outcome) and not outcome.progress
    assert [(e.call_id, e.ok, e.interrupted, e.error) for e in outcome.events] == [
        ("c1", False, True, INTERRUPTED), ("c2", False, True, INTERRUPTED)]
    f.add(*outcome.events)
    assert f.state.open_calls == () and f.state.needs_model
    assert f.decide().name == "turn:2"
    results = [m for m in f.state.history if isinstance(m, ToolResultMessage)]
    assert [(m.call_id, m.is_error) for m in results] == [("c1", True), ("c2", True)]


async def test_calls_stopped_by_a_cancel_are_repaired_as_cancelled_not_as_a_stopped_worker():
    f = created().add(LeaseClaimed(attempt=1, worker="w", reason="queued"))
    f.add(ModelTurnCompleted(tool_calls=[call("c1", "add_scene", title="x")], delivered=[2]))
    f.add(ToolCalled(call_id="c1", name="add_scene"), SessionCancelRequested(),
          SessionEnded(status="cancelled"), LeaseReleased(attempt=1, reason="idle"))
    f.add(SessionMessagePosted(text="go on"), LeaseClaimed(attempt=2, worker="w", reason="queued"))
    d = f.decide()
    assert isinstance(d, Step) and d.name == "repair"
    outcome = await d.handler(None)  # type: ignore[arg-type]
    assert [(e.call_id, e.interrupted, e.error) for e in outcome.events] == [("c1", True, CANCELLED)]
    f.add(*outcome.events, ModelTurnCompleted(text="ok", delivered=[7]))
    assert not f.state.cancelled_calls  # a later crash is a stopped worker again


def test_ask_user_ends_the_exchange_and_the_next_message_answers_it():
    f = created().add(ModelTurnCompleted(tool_calls=[call("c1", "ask_user", question="Which?")], delivered=[2]))
    f.add(ToolResult(call_id="c1", name="ask_user", result={"question": "Which?"}))
    assert (f.state.question, f.state.needs_model) == ("Which?", False)
    assert isinstance(f.decide(), Wait)
    f.add(SessionMessagePosted(text="The second one"))
    assert f.decide().name == "turn:2"
    f.add(ModelTurnCompleted(text="OK", delivered=[f.seq]))
    assert f.state.question is None


def test_endings_cancel_over_cap_and_failures():
    f = created().add(ModelOutputDelta(text="par"))
    end = KIND.cancelled(f.state, f.core)
    assert [type(e) for e in end.events] == [ModelOutputReset, SessionEnded]
    assert end.events[-1].status == "cancelled"
    end = KIND.over_cap(f.state, f.core)
    assert (end.events[-1].status, end.events[-1].error) == ("failed", OVER_CAP_ERROR)
    failed = KIND.step_failed(f.state, f.core, "turn:1", "the model provider 'x' failed after 5 attempts (HTTP 500)")
    assert isinstance(failed, Finish) and failed.events[-1].error.startswith("the model provider 'x' failed")
    f.add(SessionEnded(status="failed", error="boom"), SessionCancelRequested())
    assert (f.state.status, f.state.error) == ("failed", "boom")
    f.add(SessionMessagePosted(text="again"))
    assert f.state.status == "queued" and f.decide().name == "turn:1"
    f.add(ModelTurnCompleted(text="fine", delivered=[2, f.seq]))
    assert f.state.error is None


def test_a_failed_tool_step_becomes_an_error_result_and_the_turn_goes_on():
    f = created().add(ModelTurnCompleted(tool_calls=[call("c1", "generate_scene", scene_id="s")], delivered=[2]))
    out = KIND.step_failed(f.state, f.core, "tool:c1", "step tool:c1 exceeded its deadline of 90 s")
    assert isinstance(out, Outcome)
    (result,) = out.events
    assert (result.call_id, result.ok) == ("c1", False) and "deadline" in result.error


def test_a_long_tool_loop_is_asked_to_answer_without_tools():
    f = created().add(ModelTurnCompleted(tool_calls=[call("c0", "read_course")], delivered=[2]))
    for i in range(MAX_ROUNDS):
        f.add(ToolResult(call_id=f"c{i}", name="read_course", result={}))
        f.add(ModelTurnCompleted(tool_calls=[call(f"c{i + 1}", "read_course")]))
    f.add(ToolResult(call_id=f"c{MAX_ROUNDS}", name="read_course", result={}))
    assert f.state.rounds > MAX_ROUNDS
    assert f.decide().name == f"turn:{MAX_ROUNDS + 2}"


# -- tools: argument validation and pure effects -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "arguments", "expected"),
    [
        ("add_scene", {"title": 5, "goal": "g"},
         "invalid arguments for add_scene: Expected `str`, got `int` - at `$.title`"),
        ("add_scene", {"title": "t", "goal": "g", "colour": "red"}, "unknown field `colour`"),
        ("retitle_course", {"_invalid_json": "not json"}, "must be a JSON object"),
        ("no_such_tool", {}, "there is no tool named 'no_such_tool'"),
        ("update_scene", {"scene_id": "s", "ops": []}, "at `$.ops`"),
    ],
)
def test_invalid_arguments_are_tool_failures(name, arguments, expected):
    with pytest.raises(ToolFailure, match=expected.replace("$", r"\$").replace("(", r"\(")):
        parse_arguments(ToolCall(id="c", name=name, arguments=arguments))


def test_valid_arguments_decode_to_their_structs():
    args = parse_arguments(ToolCall(id="c", name="add_scene",
                                    arguments={"title": "T", "goal": "G", "kind": "quiz", "position": None}))
    assert args == AddScene(title="T", goal="G", kind="quiz")
    assert {t.name for t in TOOL_SPECS} >= {"read_course", "add_scene", "update_scene", "generate_scene", "ask_user"}
    assert all(t.parameters["type"] == "object" and t.parameters["additionalProperties"] is False for t in TOOL_SPECS)


def _doc(*events: Event) -> CourseDocument:
    doc = CourseDocument()
    for i, e in enumerate(events, 1):
        doc = evolve_course(doc, e, i)
    return doc


ENV = ToolEnv(session_id="sess", course_id="c1", log=None, models=None)  # type: ignore[arg-type]


def _apply(doc: CourseDocument, name: str, prepared: Any = None, **arguments: Any) -> tuple[Any, list[Event]]:
    c = ToolCall(id="call_1", name=name, arguments=arguments)
    return apply(ENV, c, parse_arguments(c), doc, prepared)


def _slide_scene(sid: str = "s1", title: str = "One") -> fmt.Scene:
    canvas = fmt.Slide(id="cv", viewportSize=1000, viewportRatio=0.5625, theme=fmt.DEFAULT_THEME, elements=[
        fmt.TextElement(id="t1", left=60, top=50, width=880, height=70, rotate=0, content="<p>One</p>",
                        defaultFontName="Microsoft YaHei", defaultColor="#333333")])
    return fmt.Scene(id=sid, stageId="c1", type="slide", title=title, order=1,
                     content=fmt.SlideContent(canvas=canvas),
                     actions=[fmt.SpotlightAction(id="a1", elementId="t1"), fmt.SpeechAction(id="a2", text="Hi")])


def test_edits_make_course_events_and_are_refused_on_a_locked_or_deleted_course():
    outline = fmt.SceneOutline(id="s1", type="slide", title="One", description="g", keyPoints=["a"], order=1)
    doc = _doc(CourseCreated(title="C"), CourseSceneSet(scene=_slide_scene(), outline=outline))
    written = _slide_scene(new_scene_id("sess", "call_1"), "Two")
    result, events = _apply(doc, "add_scene", written, title="Two", goal="g2", position=0)
    assert result["added"] == new_scene_id("sess", "call_1") and result["position"] == 0
    assert new_scene_id("sess", "call_1") == new_scene_id("sess", "call_1")  # a re-applied call adds no second scene
    after = evolve_course(doc, events[0], 3)
    assert [(s.title, s.order) for s in after.scenes] == [("Two", 1), ("One", 2)]
    assert after.outlines[written.id].description == "g2"
    _, events = _apply(doc, "update_scene", scene_id="s1",
                       ops=[{"op": "set_title", "value": "Uno"}, {"op": "append_bullet", "value": "b"}])
    assert events[0].scene.title == "Uno" and events[0].outline.keyPoints == ["a", "b"]
    assert events[0].outline.description == "g"
    with pytest.raises(ToolFailure, match="must be a list of strings"):
        _apply(doc, "update_scene", scene_id="s1", ops=[{"op": "replace_bullets", "value": "x"}])
    with pytest.raises(ToolFailure, match="no scene 'nope'"):
        _apply(doc, "delete_scene", scene_id="nope")
    with pytest.raises(ToolFailure, match="every scene id exactly once"):
        _apply(doc, "reorder_scenes", scene_ids=["s1", "s1"])
    locked = _doc(CourseCreated(title="C", locked_by="run-1"))
    with pytest.raises(ToolFailure, match="read-only while generation run run-1 builds it"):
        _apply(locked, "retitle_course", title="New")
    view, events = _apply(locked, "read_course")
    assert (view["read_only"], view["scenes"], events) == (True, [], [])


def test_element_question_and_script_edits_are_validated_by_the_course_format():
    doc = _doc(CourseCreated(title="C"), CourseSceneSet(scene=_slide_scene()))
    box = {"left": 60, "top": 200, "width": 400, "height": 60, "rotate": 0, "defaultFontName": "Microsoft YaHei",
           "defaultColor": "#333333"}
    _, events = _apply(doc, "set_element", scene_id="s1",
                       element={"id": "t2", "type": "text", "content": "<p onclick='x()'>New</p>", **box})
    added = events[0].scene.content.canvas.elements[-1]
    assert (added.id, "onclick" in added.content) == ("t2", False)  # sanitized on the way in
    with pytest.raises(ToolFailure, match="would make the scene invalid: .*elements/1"):
        _apply(doc, "set_element", scene_id="s1", element={"id": "t3", "type": "text", "left": "far"})
    _, events = _apply(doc, "delete_element", scene_id="s1", element_id="t1")
    assert events[0].scene.content.canvas.elements == [] and [a.id for a in events[0].scene.actions] == ["a2"]
    with pytest.raises(ToolFailure, match="not on the slide: ghost"):
        _apply(doc, "set_actions", scene_id="s1", actions=[{"id": "x", "type": "laser", "elementId": "ghost"}])
    with pytest.raises(ToolFailure, match="invalid"):
        _apply(doc, "set_actions", scene_id="s1", actions=[{"id": "x", "type": "speech"}])
    _, events = _apply(doc, "set_actions", scene_id="s1",
                       actions=[{"id": "x", "type": "laser", "elementId": "t1"}, {"id": "y", "type": "speech",
                                                                                   "text": "Look."}])
    assert [a.type for a in events[0].scene.actions] == ["laser", "speech"]
    with pytest.raises(ToolFailure, match="questions belong to quizzes"):
        _apply(doc, "set_question", scene_id="s1", question={"id": "q"})
