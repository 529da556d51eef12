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

import uuid
from dataclasses import dataclass
from collections.abc import Awaitable, Callable, Sequence
from typing import Annotated, Any, Literal

import msgspec

from openmaic.actors.commands import until_decided
from openmaic.courses.events import (
    CourseDocument,
    CourseRetitled,
    CourseSceneDeleted,
    CourseScenesReordered,
    CourseSceneSet,
    Scene,
    evolve_course,
)
from openmaic.courses.schema import SceneContent, SceneKind, json_schema
from openmaic.events.core import ToolResult
from openmaic.events.log import EventLog, StreamAppend
from openmaic.events.types import Event
from openmaic.models.errors import ModelNotReady, ProviderError
from openmaic.models.types import INVALID_ARGUMENTS_KEY, ToolCall, ToolSpec
from openmaic.workbench.content import generate_scene_content

Title = Annotated[str, msgspec.Meta(min_length=1, max_length=200)]
Text = Annotated[str, msgspec.Meta(max_length=2000)]

INTERRUPTED = "interrupted: the worker stopped before this tool finished; it was not applied"


class ToolFailure(Exception):
    """A tool could not do what was asked; ``message`` goes back to the model as the tool's error."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class _Args(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Base of tool arguments: strict, so a misspelt argument is an error the model sees."""


class ReadCourse(_Args):
    """Read the whole course: its title and every scene (id, title, goal, kind, key points, content summary)."""


class ReadOutline(_Args):
    """Read the course outline: its title and the scenes' ids, titles, goals, kinds and key points."""


class AddScene(_Args):
    """Add a new scene. position is the 0-based index to insert at (null appends it at the end)."""

    title: Title
    goal: Text
    kind: SceneKind = "slide"
    position: Annotated[int, msgspec.Meta(ge=0)] | None = None
    key_points: list[Text] = []


class SceneOp(_Args):
    """One change to a scene: set_title and set_goal take a string; replace_bullets takes a list of strings;
    append_bullet takes a string. Bullets are the scene's key points (and its slide's bullets)."""

    op: Literal["set_title", "set_goal", "replace_bullets", "append_bullet"]
    value: str | list[str]


class UpdateScene(_Args):
    """Change a scene's title, goal or bullets with a list of operations applied in order."""

    scene_id: str
    ops: Annotated[list[SceneOp], msgspec.Meta(min_length=1)]


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
    """Write (or rewrite) a scene's content — slide, quiz or interactive page, by the scene's kind — from its
    title, goal and key points."""

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
        Tool("add_scene", AddScene, True),
        Tool("update_scene", UpdateScene, True),
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


def _content_summary(content: SceneContent | None) -> dict[str, Any] | None:
    # The interactive page's HTML can be large; the model gets what it needs to reason about the scene.
    if content is None:
        return None
    if content.slide is not None:
        return {"kind": "slide", "title": content.slide.title, "bullets": content.slide.bullets}
    if content.quiz is not None:
        return {"kind": "quiz", "title": content.quiz.title,
                "questions": [q.question for q in content.quiz.questions]}
    if content.interactive is not None:
        return {"kind": "interactive", "title": content.interactive.title,
                "instructions": content.interactive.instructions}
    return {"kind": content.kind}


def course_view(doc: CourseDocument, course_id: str, *, outline_only: bool = False) -> dict[str, Any]:
    """The course as a tool result: JSON the model reads (``scenes`` is a list of objects with an ``id``)."""
    scenes = []
    for s in doc.scenes:
        item: dict[str, Any] = {"id": s.id, "title": s.title, "goal": s.goal, "kind": s.kind,
                                "key_points": list(s.key_points)}
        if not outline_only:
            item["status"] = s.status
            item["content"] = _content_summary(s.content)
        scenes.append(item)
    view: dict[str, Any] = {"course_id": course_id, "title": doc.title, "scenes": scenes}
    if not outline_only:
        view.update(language=doc.language, requirement=doc.requirement,
                    read_only=doc.locked_by is not None or doc.deleted, deleted=doc.deleted)
    return view


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


def _scene(doc: CourseDocument, scene_id: str) -> Scene:
    scene = doc.scene(scene_id)
    if scene is None:
        known = ", ".join(s.id for s in doc.scenes) or "none"
        raise ToolFailure(f"there is no scene {scene_id!r} (scene ids: {known})")
    return scene


def new_scene_id(session_id: str, call_id: str) -> str:
    """A scene id that is the same every time the same call is applied (a retry adds no second scene)."""
    return "scene_" + uuid.uuid5(uuid.NAMESPACE_URL, f"openmaic:workbench:{session_id}:{call_id}").hex[:12]


def _bullets(scene: Scene, bullets: list[str]) -> Scene:
    r = msgspec.structs.replace
    content = scene.content
    if content is not None and content.slide is not None:
        content = r(content, slide=r(content.slide, bullets=list(bullets)))
    return r(scene, key_points=list(bullets), content=content)


def _update(scene: Scene, ops: list[SceneOp]) -> Scene:
    r = msgspec.structs.replace
    for i, op in enumerate(ops):
        where = f"ops[{i}] ({op.op})"
        if op.op == "replace_bullets":
            if not isinstance(op.value, list):
                raise ToolFailure(f"{where}: value must be a list of strings")
            scene = _bullets(scene, op.value)
            continue
        if not isinstance(op.value, str):
            raise ToolFailure(f"{where}: value must be a string")
        if op.op == "set_title":
            if not op.value.strip():
                raise ToolFailure(f"{where}: the title must not be empty")
            content = scene.content
            if content is not None and content.slide is not None:
                content = r(content, slide=r(content.slide, title=op.value))
            scene = r(scene, title=op.value, content=content)
        elif op.op == "set_goal":
            scene = r(scene, goal=op.value)
        else:
            scene = _bullets(scene, [*scene.key_points, op.value])
    return scene


def apply(env: ToolEnv, call: ToolCall, args: _Args, doc: CourseDocument,
          prepared: Any = None) -> tuple[Any, list[Event]]:
    """What ``args`` does to ``doc``: ``(result for the model, course events to append)``. Pure."""
    match args:
        case ReadCourse():
            return course_view(doc, env.course_id), []
        case ReadOutline():
            return course_view(doc, env.course_id, outline_only=True), []
        case AskUser(question=question):
            return {"question": question, "note": "The user will answer in their next message."}, []
    _writable(doc)
    match args:
        case AddScene(title=title, goal=goal, kind=kind, position=position, key_points=points):
            scene = Scene(id=new_scene_id(env.session_id, call.id), title=title, goal=goal, kind=kind,
                          key_points=list(points))
            at = len(doc.scenes) if position is None else min(position, len(doc.scenes))
            return {"added": scene.id, "position": at}, [CourseSceneSet(scene=scene, position=at)]
        case UpdateScene(scene_id=sid, ops=ops):
            scene = _update(_scene(doc, sid), ops)
            return {"updated": sid, "scene": {"title": scene.title, "goal": scene.goal,
                                              "key_points": scene.key_points}}, [CourseSceneSet(scene=scene)]
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
            if not isinstance(prepared, SceneContent):
                raise ToolFailure("generate_scene needs the scene's generated content")
            content = prepared
            done = msgspec.structs.replace(scene, kind=content.kind, content=content, status="ready")
            if content.slide is not None and not scene.key_points:
                done = msgspec.structs.replace(done, key_points=list(content.slide.bullets))
            return {"generated": sid, "content": _content_summary(content)}, [CourseSceneSet(scene=done)]
    raise ToolFailure(f"{call.name} is not implemented")  # pragma: no cover - every tool is matched above


async def _prepare(env: ToolEnv, args: _Args) -> Any:
    """The slow, outside-the-transaction part of a tool (generate_scene's model call), done once per call."""
    if not isinstance(args, GenerateScene):
        return None
    doc = await load_course(env.log, env.course_id)
    _writable(doc)  # checked before spending a model call; checked again when the result is committed
    scene = _scene(doc, args.scene_id)
    try:
        return await generate_scene_content(env.models, doc, scene, owner=env.owner)
    except (ProviderError, ModelNotReady) as exc:
        raise ToolFailure(f"the scene's content could not be generated: {exc.message}") from None


def result_event(call: ToolCall, *, ok: bool, result: Any = None, error: str | None = None,
                 interrupted: bool = False) -> ToolResult:
    return ToolResult(call_id=call.id, name=call.name, ok=ok, result=result, error=error, interrupted=interrupted)


def interrupted_result(call: ToolCall) -> ToolResult:
    """The explicit result that repairs a call whose attempt stopped before its result was committed."""
    return result_event(call, ok=False, error=INTERRUPTED, interrupted=True)


async def run_tool(env: ToolEnv, call: ToolCall, commit: Commit) -> ToolResult | None:
    """Run one tool call.

    Returns the ``tool.result`` to commit when the call changed nothing (a read, or an error); when it changed
    the course, the result and the course events have already been committed together through ``commit``
    (which must raise WrongExpectedSeq when the course moved on) and None is returned.
    """
    try:
        args = parse_arguments(call)
        prepared = await _prepare(env, args)

        async def attempt() -> ToolResult | None:
            doc = await load_course(env.log, env.course_id)
            result, course_events = apply(env, call, args, doc, prepared)
            ok = result_event(call, ok=True, result=result)
            if not course_events:
                return ok
            course = StreamAppend(stream_id=env.course_id, events=course_events, expected_seq=doc.seq)
            await commit([ok], [course])  # WrongExpectedSeq: another writer moved the course; apply again
            return None

        return await until_decided(
            attempt, lambda: ToolFailure("the course is changing too fast to apply this edit; try again"))
    except ToolFailure as failure:
        return result_event(call, ok=False, error=failure.message)

