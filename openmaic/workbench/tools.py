"""The workbench's typed tools: argument types (msgspec Structs), their JSON Schemas, and what each one does.

Arguments are validated with msgspec (unknown fields are refused); anything wrong — invalid JSON, an unknown
tool, a bad argument, a locked or deleted course, a scene that does not exist — becomes a tool *error result*
that goes back to the model, never an exception that stops the session.

Reads fold the course stream with :func:`~openmaic.courses.events.evolve_course`. Writes append course events
fenced by ``expected_seq`` = the head they read (optimistic concurrency: a concurrent writer makes the append
fail, and the tool re-reads and re-applies), and they are committed in ONE append with the ``tool.result``
that reports them, so a crash can never leave an edit applied without its result (or the reverse).
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from collections.abc import Awaitable, Callable, Sequence
from typing import Annotated, Any, Literal

import msgspec

from openmaic.actors.commands import until_decided
from openmaic.courses import format as fmt
from openmaic.courses.document import stage_of
from openmaic.courses.events import (
    CourseDocument,
    CourseRetitled,
    CourseSceneDeleted,
    CourseScenesReordered,
    CourseSceneSet,
    evolve_course,
)
from openmaic.courses.schema import json_schema
from openmaic.events.core import ToolResult
from openmaic.events.log import EventLog, StreamAppend
from openmaic.events.types import Event
from openmaic.models.errors import ModelNotReady, ProviderError
from openmaic.models.types import INVALID_ARGUMENTS_KEY, ToolCall, ToolSpec
from openmaic.workbench.content import outline_of, run_choices_of, write_scene

Title = Annotated[str, msgspec.Meta(min_length=1, max_length=200)]
Text = Annotated[str, msgspec.Meta(max_length=2000)]
SceneType = Literal["slide", "quiz", "interactive"]

INTERRUPTED = "interrupted: the worker stopped before this tool finished; it was not applied"
CANCELLED = "stopped because you cancelled before this tool finished; it was not applied"


class ToolFailure(Exception):
    """A tool could not do what was asked; ``message`` goes back to the model as the tool's error."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class _Args(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Base of tool arguments: strict, so a misspelt argument is an error the model sees."""


class ReadCourse(_Args):
    """Read the whole course: its title and every scene (id, type, title, order, what it teaches, and a summary of
    its content: a slide's elements by id, a quiz's questions by id, an interactive page's widget)."""


class ReadOutline(_Args):
    """Read the course outline: its title and the scenes' ids, types, titles, descriptions and key points."""


class ReadScene(_Args):
    """Read one scene whole, as OpenMAIC's course format holds it: its content (a slide's canvas with every element,
    a quiz's questions, an interactive page) and its actions (the script)."""

    scene_id: str


class AddScene(_Args):
    """Add a new scene and write it (content and script) from its title, goal and key points. kind is the scene
    type (slide, quiz or interactive); position is the 0-based index to insert at (null appends it at the end)."""

    title: Title
    goal: Text
    kind: SceneType = "slide"
    position: Annotated[int, msgspec.Meta(ge=0)] | None = None
    key_points: list[Text] = []


class SceneOp(_Args):
    """One change to a scene: set_title and set_goal take a string; replace_bullets takes a list of strings;
    append_bullet takes a string. Bullets are the scene's key points (what generate_scene writes it from)."""

    op: Literal["set_title", "set_goal", "replace_bullets", "append_bullet"]
    value: str | list[str]


class UpdateScene(_Args):
    """Change a scene's title, goal or key points with a list of operations applied in order."""

    scene_id: str
    ops: Annotated[list[SceneOp], msgspec.Meta(min_length=1)]


class SetElement(_Args):
    """Put one element on a slide scene's canvas, in OpenMAIC's slide format: an object with id, type (text, image,
    shape, line, chart, table, latex, video, code), left, top, width, height, rotate and its type's fields (a text
    element: content as HTML such as <p style="font-size: 20px;">…</p>, defaultFontName, defaultColor). An element
    with an existing id replaces it; a new id adds it on top. The canvas is 1000 × 562.5."""

    scene_id: str
    element: dict[str, Any]


class DeleteElement(_Args):
    """Remove an element from a slide scene (by its id); spotlights and lasers pointing at it go too."""

    scene_id: str
    element_id: str


class SetQuestion(_Args):
    """Put one question in a quiz scene, in OpenMAIC's quiz format: {id, type: single|multiple|short_answer,
    question, options: [{label, value: "A"}], answer: ["A"], analysis, points, commentPrompt (short answers)}. An
    existing id replaces that question; a new id adds it at the end."""

    scene_id: str
    question: dict[str, Any]


class DeleteQuestion(_Args):
    """Remove a question from a quiz scene (by its id)."""

    scene_id: str
    question_id: str


class SetActions(_Args):
    """Replace a scene's script (its actions, in playing order), in OpenMAIC's action format: each an object with
    id and type: speech {text}, spotlight {elementId}, laser {elementId}, play_video {elementId}, discussion {topic,
    prompt, agentId} (last only), wb_open, wb_draw_text {content, x, y}, wb_close, widget_highlight {target}, …
    Element ids must be on the scene's slide."""

    scene_id: str
    actions: list[dict[str, Any]]


class DeleteScene(_Args):
    """Delete a scene."""

    scene_id: str


class ReorderScenes(_Args):
    """Put the scenes in a new order: scene_ids lists every scene id exactly once, in the new order."""

    scene_ids: list[str]


class RetitleCourse(_Args):
    """Give the course a new title."""

    title: Title


class GenerateScene(_Args):
    """Rewrite a scene whole (content and script) from its title, goal and key points."""

    scene_id: str


class AskUser(_Args):
    """Ask the user a question and end this turn; their next message is the answer."""

    question: Annotated[str, msgspec.Meta(min_length=1, max_length=2000)]


class Tool(msgspec.Struct, frozen=True):
    name: str
    args: type[_Args]
    writes: bool


TOOLS: dict[str, Tool] = {
    t.name: t
    for t in [
        Tool("read_course", ReadCourse, False),
        Tool("read_outline", ReadOutline, False),
        Tool("read_scene", ReadScene, False),
        Tool("add_scene", AddScene, True),
        Tool("update_scene", UpdateScene, True),
        Tool("set_element", SetElement, True),
        Tool("delete_element", DeleteElement, True),
        Tool("set_question", SetQuestion, True),
        Tool("delete_question", DeleteQuestion, True),
        Tool("set_actions", SetActions, True),
        Tool("delete_scene", DeleteScene, True),
        Tool("reorder_scenes", ReorderScenes, True),
        Tool("retitle_course", RetitleCourse, True),
        Tool("generate_scene", GenerateScene, True),
        Tool("ask_user", AskUser, False),
    ]
}


def _spec(tool: Tool) -> ToolSpec:
    schema = json_schema(tool.args)
    description = (tool.args.__doc__ or tool.name).strip()
    schema.pop("title", None)
    schema.pop("description", None)
    return ToolSpec(name=tool.name, description=" ".join(description.split()), parameters=schema)


TOOL_SPECS: list[ToolSpec] = [_spec(t) for t in TOOLS.values()]
"""What the provider is sent: each tool's name, description and JSON Schema."""


def parse_arguments(call: ToolCall) -> _Args:
    """The call's arguments as its tool's type, or ToolFailure naming what is wrong."""
    tool = TOOLS.get(call.name)
    if tool is None:
        raise ToolFailure(f"there is no tool named {call.name!r}; the tools are: {', '.join(TOOLS)}")
    if INVALID_ARGUMENTS_KEY in call.arguments:
        raise ToolFailure(f"invalid arguments for {call.name}: they must be a JSON object")
    try:
        return msgspec.convert(call.arguments, tool.args)
    except msgspec.ValidationError as exc:
        raise ToolFailure(f"invalid arguments for {call.name}: {exc}") from None


# -- reading the course -------------------------------------------------------------------------------------------


async def fold_course(log: EventLog, course_id: str) -> CourseDocument:
    """The course folded from its stream; ``seq`` is the head it was read at (0: no such stream)."""
    return (await log.fold(course_id, CourseDocument(), evolve_course))[0]


async def load_course(log: EventLog, course_id: str) -> CourseDocument:
    """The course folded from its stream, or ToolFailure when it does not exist."""
    doc = await fold_course(log, course_id)
    if doc.seq == 0:
        raise ToolFailure("the course of this session does not exist")
    return doc


def _plain(html: str) -> str:
    return " ".join(re.sub(r"<[^>]+>", " ", html).split())


def _element_summary(e: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"id": e.id, "type": e.type}
    if isinstance(e, fmt.TextElement):
        out["text"] = _plain(e.content)[:200]
    elif isinstance(e, fmt.LatexElement):
        out["latex"] = e.latex[:200]
    elif isinstance(e, fmt.ImageElement | fmt.VideoElement):
        out["media"] = e.src if isinstance(e, fmt.ImageElement) else e.mediaRef
    return out


def _content_summary(content: fmt.SceneContent) -> dict[str, Any]:
    # The interactive page's HTML can be large; the model gets what it needs to reason about the scene, and
    # read_scene for the whole of it.
    if isinstance(content, fmt.SlideContent):
        return {"type": "slide", "elements": [_element_summary(e) for e in content.canvas.elements]}
    if isinstance(content, fmt.QuizContent):
        return {"type": "quiz", "questions": [{"id": q.id, "type": q.type, "question": q.question}
                                              for q in content.questions]}
    if isinstance(content, fmt.InteractiveContent):
        return {"type": "interactive", "widgetType": content.widgetType or None}
    return {"type": content.type}


def course_view(doc: CourseDocument, course_id: str, *, outline_only: bool = False) -> dict[str, Any]:
    """The course as a tool result: JSON the model reads (``scenes`` is a list of objects with an ``id``)."""
    scenes = []
    for s in doc.scenes:
        o = outline_of(doc, s)
        item: dict[str, Any] = {"id": s.id, "type": s.type, "title": s.title, "order": s.order,
                                "goal": o.description, "key_points": list(o.keyPoints)}
        if not outline_only:
            item["status"] = "ready" if s.id in doc.ready else "being written"
            item["content"] = _content_summary(s.content)
            item["actions"] = len(s.actions or [])
        scenes.append(item)
    for p in doc.pending:
        scenes.append({"id": p.id, "type": p.type, "title": p.title, "order": p.order, "status": "not written yet"})
    view: dict[str, Any] = {"course_id": course_id, "title": doc.title, "scenes": scenes}
    if not outline_only:
        view.update(language=doc.language, requirement=doc.requirement,
                    read_only=doc.locked_by is not None or doc.deleted, deleted=doc.deleted,
                    agents=[{"id": a.id, "name": a.name, "role": a.role} for a in doc.agents])
    return view


def scene_json(scene: fmt.Scene, *, html_limit: int = 6000) -> Any:
    """A scene as read_scene returns it: the format's JSON, an interactive page's HTML cut to ``html_limit``."""
    out = fmt.to_json(scene)
    content = out.get("content") or {}
    if isinstance(content.get("html"), str) and len(content["html"]) > html_limit:
        content["html"] = content["html"][:html_limit] + " …(cut)"
    return out


# -- applying a tool ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ToolEnv:
    """What a tool acts on: the session, its course, the log, and the model router (for generate_scene)."""

    session_id: str
    course_id: str
    log: EventLog
    models: Any
    owner: str = ""
    """The session's owner: generate_scene routes through their own model settings."""


Commit = Callable[[Sequence[Event], Sequence[StreamAppend]], Awaitable[Any]]


def _writable(doc: CourseDocument) -> None:
    if doc.deleted:
        raise ToolFailure("the course was deleted; it cannot be edited")
    if doc.locked_by is not None:
        raise ToolFailure(
            f"the course is read-only while generation run {doc.locked_by} builds it; "
            "it can be edited once the run completes"
        )


def _scene(doc: CourseDocument, scene_id: str) -> fmt.Scene:
    scene = doc.scene(scene_id)
    if scene is None:
        known = ", ".join(s.id for s in doc.scenes) or "none"
        pending = " (it is not written yet)" if any(p.id == scene_id for p in doc.pending) else ""
        raise ToolFailure(f"there is no scene {scene_id!r}{pending} (scene ids: {known})")
    return scene


def new_scene_id(session_id: str, call_id: str) -> str:
    """A scene id that is the same every time the same call is applied (a retry adds no second scene)."""
    return "scene_" + uuid.uuid5(uuid.NAMESPACE_URL, f"openmaic:workbench:{session_id}:{call_id}").hex[:12]


def _update(scene: fmt.Scene, outline: fmt.SceneOutline, ops: list[SceneOp]) -> tuple[fmt.Scene, fmt.SceneOutline]:
    r = msgspec.structs.replace
    for i, op in enumerate(ops):
        where = f"ops[{i}] ({op.op})"
        if op.op == "replace_bullets":
            if not isinstance(op.value, list):
                raise ToolFailure(f"{where}: value must be a list of strings")
            outline = r(outline, keyPoints=list(op.value))
            continue
        if not isinstance(op.value, str):
            raise ToolFailure(f"{where}: value must be a string")
        if op.op == "set_title":
            if not op.value.strip():
                raise ToolFailure(f"{where}: the title must not be empty")
            scene, outline = r(scene, title=op.value), r(outline, title=op.value)
        elif op.op == "set_goal":
            outline = r(outline, description=op.value)
        else:
            outline = r(outline, keyPoints=[*outline.keyPoints, op.value])
    return scene, outline


def checked(value: Any, stage_id: str) -> fmt.Scene:
    """A scene edited as JSON, validated by the course format (ToolFailure naming every problem)."""
    try:
        return fmt.decode_scene(value, stage_id=stage_id)
    except fmt.FormatInvalid as exc:
        problems = "; ".join(f"{p.path}: {p.message}" for p in exc.problems[:8])
        raise ToolFailure(f"that would make the scene invalid: {problems}") from None


def _targets(actions: list[Any], elements: set[str]) -> None:
    missing = sorted({a.get("elementId") for a in actions if isinstance(a, dict)
                      and a.get("type") in ("spotlight", "laser", "play_video") and a.get("elementId") not in elements})
    if missing:
        raise ToolFailure(f"actions point at elements that are not on the slide: {', '.join(map(str, missing))} "
                          f"(its element ids: {', '.join(sorted(elements)) or 'none'})")


def _edit(doc: CourseDocument, scene: fmt.Scene, change: Callable[[dict[str, Any]], None]) -> CourseSceneSet:
    """The event that writes ``scene`` with ``change`` applied to its JSON, once the format accepts it."""
    value = fmt.to_json(scene)
    change(value)
    edited = checked(value, scene.stageId)
    return CourseSceneSet(scene=edited, ready=scene.id in doc.ready)


def _slide(scene: fmt.Scene) -> None:
    if scene.type != "slide":
        raise ToolFailure(f"scene {scene.id!r} is a {scene.type} scene; elements belong to slides")


def _quiz(scene: fmt.Scene) -> None:
    if scene.type != "quiz":
        raise ToolFailure(f"scene {scene.id!r} is a {scene.type} scene; questions belong to quizzes")


def _set_by_id(items: list[Any], item: dict[str, Any], what: str) -> None:
    if not isinstance(item.get("id"), str) or not item["id"]:
        raise ToolFailure(f"the {what} needs an id (a new one adds it, an existing one replaces it)")
    at = next((i for i, x in enumerate(items) if isinstance(x, dict) and x.get("id") == item["id"]), None)
    if at is None:
        items.append(item)
    else:
        items[at] = item


def apply(env: ToolEnv, call: ToolCall, args: _Args, doc: CourseDocument,
          prepared: Any = None) -> tuple[Any, list[Event]]:
    """What ``args`` does to ``doc``: ``(result for the model, course events to append)``. Pure."""
    match args:
        case ReadCourse():
            return course_view(doc, env.course_id), []
        case ReadOutline():
            return course_view(doc, env.course_id, outline_only=True), []
        case ReadScene(scene_id=sid):
            return scene_json(_scene(doc, sid)), []
        case AskUser(question=question):
            return {"question": question, "note": "The user will answer in their next message."}, []
    _writable(doc)
    match args:
        case AddScene(title=title, goal=goal, kind=kind, position=position, key_points=points):
            if not isinstance(prepared, fmt.Scene):
                raise ToolFailure("add_scene needs the scene it wrote")
            at = len(doc.scenes) if position is None else min(position, len(doc.scenes))
            outline = fmt.SceneOutline(id=prepared.id, type=kind, title=title, description=goal,
                                       keyPoints=list(points), order=at + 1)
            return ({"added": prepared.id, "position": at, "content": _content_summary(prepared.content)},
                    [CourseSceneSet(scene=prepared, position=at, outline=outline)])
        case UpdateScene(scene_id=sid, ops=ops):
            scene = _scene(doc, sid)
            scene, outline = _update(scene, outline_of(doc, scene), ops)
            return ({"updated": sid, "scene": {"title": scene.title, "goal": outline.description,
                                               "key_points": outline.keyPoints}},
                    [CourseSceneSet(scene=scene, ready=sid in doc.ready, outline=outline)])
        case SetElement(scene_id=sid, element=element):
            scene = _scene(doc, sid)
            _slide(scene)
            event = _edit(doc, scene, lambda v: _set_by_id(v["content"]["canvas"]["elements"], dict(element),
                                                           "element"))
            return {"updated": sid, "element": element.get("id")}, [event]
        case DeleteElement(scene_id=sid, element_id=eid):
            scene = _scene(doc, sid)
            _slide(scene)
            if eid not in {e.id for e in scene.content.canvas.elements}:  # type: ignore[union-attr]
                raise ToolFailure(f"scene {sid!r} has no element {eid!r}")

            def drop(v: dict[str, Any]) -> None:
                v["content"]["canvas"]["elements"] = [e for e in v["content"]["canvas"]["elements"] if e["id"] != eid]
                v["actions"] = [a for a in v.get("actions") or [] if a.get("elementId") != eid]
            return {"updated": sid, "deleted": eid}, [_edit(doc, scene, drop)]
        case SetQuestion(scene_id=sid, question=question):
            scene = _scene(doc, sid)
            _quiz(scene)
            event = _edit(doc, scene, lambda v: _set_by_id(v["content"]["questions"], dict(question), "question"))
            return {"updated": sid, "question": question.get("id")}, [event]
        case DeleteQuestion(scene_id=sid, question_id=qid):
            scene = _scene(doc, sid)
            _quiz(scene)
            if qid not in {q.id for q in scene.content.questions}:  # type: ignore[union-attr]
                raise ToolFailure(f"scene {sid!r} has no question {qid!r}")
            event = _edit(doc, scene, lambda v: v["content"].update(
                questions=[q for q in v["content"]["questions"] if q["id"] != qid]))
            return {"updated": sid, "deleted": qid}, [event]
        case SetActions(scene_id=sid, actions=actions):
            scene = _scene(doc, sid)
            if scene.type == "slide":
                _targets(actions, {e.id for e in scene.content.canvas.elements})  # type: ignore[union-attr]
            event = _edit(doc, scene, lambda v: v.update(actions=[dict(a) for a in actions]))
            return {"updated": sid, "actions": len(actions)}, [event]
        case DeleteScene(scene_id=sid):
            _scene(doc, sid)
            return {"deleted": sid}, [CourseSceneDeleted(scene_id=sid)]
        case ReorderScenes(scene_ids=ids):
            current = [s.id for s in doc.scenes]
            if sorted(ids) != sorted(current) or len(set(ids)) != len(ids):
                raise ToolFailure(f"scene_ids must list every scene id exactly once; the scene ids are: "
                                  f"{', '.join(current) or 'none'}")
            return {"order": ids}, [CourseScenesReordered(scene_ids=list(ids))]
        case RetitleCourse(title=title):
            if not title.strip():
                raise ToolFailure("the title must not be empty")
            return {"title": title}, [CourseRetitled(title=title)]
        case GenerateScene(scene_id=sid):
            scene = _scene(doc, sid)
            if not isinstance(prepared, fmt.Scene):
                raise ToolFailure("generate_scene needs the scene's generated content")
            done = msgspec.structs.replace(prepared, order=scene.order)
            return {"generated": sid, "content": _content_summary(done.content)}, [CourseSceneSet(scene=done)]
    raise ToolFailure(f"{call.name} is not implemented")  # pragma: no cover - every tool is matched above


async def _prepare(env: ToolEnv, call: ToolCall, args: _Args) -> Any:
    """The slow, outside-the-transaction part of a tool (writing a scene with the model), done once per call."""
    if not isinstance(args, GenerateScene | AddScene):
        return None
    doc = await load_course(env.log, env.course_id)
    _writable(doc)  # checked before spending a model call; checked again when the result is committed
    stage_id = stage_of(env.course_id, doc).id
    if isinstance(args, GenerateScene):
        scene = _scene(doc, args.scene_id)
        outline = outline_of(doc, scene)
        position, sid = next(i for i, s in enumerate(doc.scenes) if s.id == scene.id), scene.id
        others = msgspec.structs.replace(doc, scenes=tuple(s for s in doc.scenes if s.id != sid))
    else:
        outline = fmt.SceneOutline(id="new", type=args.kind, title=args.title, description=args.goal,
                                   keyPoints=list(args.key_points), order=0)
        if args.kind == "quiz":
            outline = msgspec.structs.replace(outline, quizConfig=fmt.QuizConfig(
                questionCount=3, difficulty="medium", questionTypes=["single", "multiple"]))
        elif args.kind == "interactive":
            outline = msgspec.structs.replace(outline, widgetType="simulation",
                                              widgetOutline={"concept": args.title})
        position = len(doc.scenes) if args.position is None else min(args.position, len(doc.scenes))
        sid, others = new_scene_id(env.session_id, call.id), doc
    try:
        return await write_scene(env.models, others, outline, position=position, scene_id=sid, stage_id=stage_id,
                                 owner=env.owner, choices=await run_choices_of(env.log, env.course_id, env.owner))
    except (ProviderError, ModelNotReady) as exc:
        raise ToolFailure(f"the scene could not be written: {exc.message}") from None


def result_event(call: ToolCall, *, ok: bool, result: Any = None, error: str | None = None,
                 interrupted: bool = False) -> ToolResult:
    return ToolResult(call_id=call.id, name=call.name, ok=ok, result=result, error=error, interrupted=interrupted)


def interrupted_result(call: ToolCall, *, cancelled: bool = False) -> ToolResult:
    """The explicit result that repairs a call whose attempt stopped before its result was committed: by the
    teacher's cancel (``cancelled``), or because the worker running it stopped."""
    return result_event(call, ok=False, error=CANCELLED if cancelled else INTERRUPTED, interrupted=True)


async def run_tool(env: ToolEnv, call: ToolCall, commit: Commit) -> ToolResult | None:
    """Run one tool call.

    Returns the ``tool.result`` to commit when the call changed nothing (a read, or an error); when it changed
    the course, the result and the course events have already been committed together through ``commit``
    (which must raise WrongExpectedSeq when the course moved on) and None is returned.
    """
    try:
        args = parse_arguments(call)
        prepared = await _prepare(env, call, args)

        async def attempt() -> ToolResult | None:
            doc = await load_course(env.log, env.course_id)
            result, course_events = apply(env, call, args, doc, prepared)
            ok = result_event(call, ok=True, result=result)
            if not course_events:
                return ok
            # Signed with the session, so the course's history names it and the session can be undone whole.
            course_events = [msgspec.structs.replace(e, by=env.session_id) if hasattr(e, "by") else e
                             for e in course_events]
            course = StreamAppend(stream_id=env.course_id, events=course_events, expected_seq=doc.seq)
            await commit([ok], [course])  # WrongExpectedSeq: another writer moved the course; apply again
            return None

        return await until_decided(
            attempt, lambda: ToolFailure("the course is changing too fast to apply this edit; try again"))
    except ToolFailure as failure:
        return result_event(call, ok=False, error=failure.message)

