"""Validating and decoding course documents: OpenMAIC's rules, then strict typing into the structs.

Each ``validate_*`` takes a plain JSON value (dicts and lists, as decoded) and returns every problem found, as
:class:`Problem` s with JSON-pointer-like paths; ``[]`` means valid. The checks, in order:

1. JSON-safe values (format §6.8): no NaN or infinity, no negative zero, no NUL or lone surrogate in strings or
   keys, nothing but JSON types. Raw bytes are checked before decoding (:func:`decode_json`), where ``-0``
   can still be seen.
2. JSON ``null`` in an object member is dropped (the app tolerates it; the structs never write it), except
   inside opaque trees (``widgetConfig``, ``projectV2``, a widget action's ``state`` …).
3. OpenMAIC's structural rules, its app write gate and its storage gate (:mod:`.rules`, :func:`document_rules`).
4. With ``strict`` (the default), strict typing: the stage, every element, question and action, and each
   scene's envelope must decode into its struct (``msgspec.convert(strict=True)``: a string is not a number,
   an unknown enum value or element type is an error). Each part is decoded on its own so that every bad
   element or action is reported, not only the first.

``decode_*`` validate, raise :class:`FormatInvalid` naming every problem, and return the typed value with the
HTML of text elements, shape text and table cells sanitized (:func:`.sanitize.sanitize_html`).
"""

from __future__ import annotations

from typing import Any

import msgspec

from openmaic.courses.format.actions import ACTION_TYPES, Action
from openmaic.courses.format.codec import decode_json, json_problems
from openmaic.courses.format.elements import ELEMENT_TYPES, Element, Slide, Whiteboard
from openmaic.courses.format.problems import FormatInvalid, Problem, child, from_validation_error
from openmaic.courses.format.rules import action_rules, drop_nulls, scene_rules, stage_rules, storage_rules
from openmaic.courses.format.sanitize import sanitize_scene, sanitize_stage
from openmaic.courses.format.scenes import QuizQuestion, Scene
from openmaic.courses.format.stage import Document, Stage, VideoManifestEntry
from openmaic.courses.format.version import migrate, version_problems

__all__ = [
    "decode_action", "decode_document", "decode_scene", "decode_stage", "document_rules", "validate_action",
    "validate_document", "validate_scene", "validate_stage",
]  # fmt: skip


_UNION_NAMES = {id(Element): ("element", ELEMENT_TYPES), id(Action): ("action", ACTION_TYPES)}


def _typed(value: Any, tp: Any, path: str) -> list[Problem]:
    try:
        msgspec.convert(value, tp, strict=True)
    except msgspec.ValidationError as error:
        problem = from_validation_error(error, path)
        if id(tp) in _UNION_NAMES and problem.path == child(path, "type") and isinstance(value, dict):
            noun, kinds = _UNION_NAMES[id(tp)]
            problem = Problem(problem.path, f"unknown {noun} type {value.get('type')!r} (one of {', '.join(kinds)})")
        return [problem]
    return []


def _canvas_types(canvas: Any, path: str, tp: type) -> list[Problem]:
    """A slide or whiteboard page: each element on its own, then the page around them."""
    if not isinstance(canvas, dict):
        return _typed(canvas, tp, path)
    elements = canvas.get("elements")
    if not isinstance(elements, list):
        return _typed(canvas, tp, path)
    out: list[Problem] = []
    for index, element in enumerate(elements):
        out += _typed(element, Element, child(child(path, "elements"), index))
    return out + _typed({**canvas, "elements": []}, tp, path)


def _items_types(items: Any, tp: Any, path: str) -> list[Problem]:
    if not isinstance(items, list):
        return _typed(items, list[tp], path)
    out: list[Problem] = []
    for index, item in enumerate(items):
        out += _typed(item, tp, child(path, index))
    return out


def _scene_types(scene: dict[str, Any], path: str) -> list[Problem]:
    shell = dict(scene)
    out: list[Problem] = []
    content = scene.get("content")
    if isinstance(content, dict):
        content_path = child(path, "content")
        if content.get("type") == "slide" and "canvas" in content:
            out += _canvas_types(content["canvas"], child(content_path, "canvas"), Slide)
            canvas = content["canvas"]
            shell["content"] = {**content, "canvas": {**canvas, "elements": []} if isinstance(canvas, dict) else canvas}
        elif content.get("type") == "quiz" and isinstance(content.get("questions"), list):
            out += _items_types(content["questions"], QuizQuestion, child(content_path, "questions"))
            shell["content"] = {**content, "questions": []}
    if isinstance(scene.get("actions"), list):
        out += _items_types(scene["actions"], Action, child(path, "actions"))
        shell["actions"] = []
    if isinstance(scene.get("whiteboards"), list):
        for index, page in enumerate(scene["whiteboards"]):
            out += _canvas_types(page, child(child(path, "whiteboards"), index), Slide)
        shell["whiteboards"] = []
    # The shell repeats problems already found inside the canvas; report each place once.
    found = {p.path for p in out}
    return out + [p for p in _typed(shell, Scene, path) if p.path not in found]


def _stage_types(stage: dict[str, Any], path: str) -> list[Problem]:
    out: list[Problem] = []
    shell = dict(stage)
    if isinstance(stage.get("whiteboard"), list):
        for index, page in enumerate(stage["whiteboard"]):
            out += _canvas_types(page, child(child(path, "whiteboard"), index), Whiteboard)
        shell["whiteboard"] = []
    if isinstance(stage.get("videoManifest"), dict):  # msgspec's paths do not name dict keys
        for ref, entry in stage["videoManifest"].items():
            out += _typed(entry, VideoManifestEntry, child(child(path, "videoManifest"), ref))
        shell["videoManifest"] = {}
    found = {p.path for p in out}
    return out + [p for p in _typed(shell, Stage, path) if p.path not in found]


def _drop_nulls(value: Any, document: bool) -> Any:
    if document and isinstance(value, dict) and value.get("outline") is not None:
        # A document's outline is opaque: stored and returned verbatim, nulls included.
        return {**drop_nulls({k: v for k, v in value.items() if k != "outline"}), "outline": value["outline"]}
    return drop_nulls(value)


def _prepare(value: Any, *, document: bool = False) -> tuple[Any, list[Problem]]:
    """JSON-safety problems of ``value`` (bytes are decoded first), and the value with nulls dropped."""
    if isinstance(value, (bytes, bytearray, memoryview, str)):
        try:
            value = decode_json(bytes(value) if not isinstance(value, str) else value)
        except FormatInvalid as error:
            return None, error.problems
        return _drop_nulls(value, document), []
    problems = json_problems(value)
    return _drop_nulls(value, document), problems


def validate_stage(value: Any, *, strict: bool = True) -> list[Problem]:
    """Every problem of a stage (JSON value or JSON bytes): ``validateStage``, the app gate, strict typing."""
    stage, problems = _prepare(value)
    if problems:
        return problems
    problems = stage_rules(stage)
    if strict and not problems:
        problems = _stage_types(stage, "/")
    return problems


def validate_action(value: Any, *, strict: bool = True) -> list[Problem]:
    """Every problem of one action: ``validateAction``, then strict typing."""
    action, problems = _prepare(value)
    if problems:
        return problems
    problems = action_rules(action)
    if strict and not problems:
        problems = _typed(action, Action, "/")
    return problems


def _within(path: str, place: str) -> bool:
    return place == "/" or path == place or path.startswith(place + "/")


def _scene_problems(scene: Any, path: str, *, stage_id: str | None, scene_id: str | None,
                    strict: bool) -> list[Problem]:  # fmt: skip
    problems = scene_rules(scene, path, dsl=strict) + storage_rules(scene, path, stage_id=stage_id, scene_id=scene_id)
    if strict and isinstance(scene, dict):
        found = {p.path for p in problems}
        # Typing adds what the rules did not say; a place the rules already named is not reported twice.
        problems += [p for p in _scene_types(scene, path) if not any(_within(p.path, f) for f in found)]
    return problems


def validate_scene(value: Any, *, stage_id: str | None = None, scene_id: str | None = None,
                   strict: bool = True) -> list[Problem]:  # fmt: skip
    """Every problem of one scene: ``validateScene``, the app gate, the storage gate (``stageId`` must be
    ``stage_id`` and ``id`` must be ``scene_id`` when given; finite ``order``) and, with ``strict``, strict
    typing. ``strict=False`` is exactly what OpenMAIC's app stores accept."""
    scene, problems = _prepare(value)
    if problems:
        return problems
    return _scene_problems(scene, "/", stage_id=stage_id, scene_id=scene_id, strict=strict)


def document_rules(document: Any, *, stage_id: str | None = None, strict: bool = True) -> list[Problem]:
    """The storage gate on a whole document (nulls already dropped), with every stage and scene rule."""
    if not isinstance(document, dict):
        return [Problem("/", "a course document must be a JSON object")]
    problems: list[Problem] = []
    stage, scenes = document.get("stage"), document.get("scenes")
    if not isinstance(stage, dict):
        problems.append(Problem("/stage", "a course document requires an object `stage`"))
    if not isinstance(scenes, list):
        problems.append(Problem("/scenes", "a course document requires a `scenes` array"))
    problems += version_problems(document)
    if isinstance(stage, dict):
        stage_problems = stage_rules(stage, "/stage")
        if strict and not stage_problems:
            stage_problems = _stage_types(stage, "/stage")
        problems += stage_problems
        sid = stage.get("id")
        if isinstance(sid, str) and sid in (".", ".."):
            problems.append(Problem("/stage/id", f"stage id must not be {sid!r} (it names the document in URLs)"))
        if stage_id is not None and sid != stage_id:
            problems.append(Problem("/stage/id", f"stage {sid!r} does not belong to document {stage_id!r}"))
    own_id = stage.get("id") if isinstance(stage, dict) and isinstance(stage.get("id"), str) else None
    seen: set[str] = set()
    for index, scene in enumerate(scenes if isinstance(scenes, list) else []):
        path = child("/scenes", index)
        problems += _scene_problems(scene, path, stage_id=own_id, scene_id=None, strict=strict)
        scene_key = scene.get("id") if isinstance(scene, dict) else None
        if isinstance(scene_key, str):
            if scene_key in seen:
                problems.append(Problem(child(path, "id"), f"duplicate scene id {scene_key!r}"))
            seen.add(scene_key)
    return problems


def validate_document(value: Any, *, stage_id: str | None = None, strict: bool = True) -> list[Problem]:
    """Every problem of a whole document ``{stage, scenes, outline?, dslVersion?}`` (JSON value or bytes).

    ``stage_id`` is the id the document is addressed by, when there is one. A stamp newer than
    :data:`DSL_VERSION` is a problem here (OpenMAIC's stores answer it with 409 ``FUTURE_VERSION``: check
    :func:`is_future` first to answer so).
    """
    document, problems = _prepare(value, document=True)
    if problems:
        return problems
    return document_rules(document, stage_id=stage_id, strict=strict)


def _raise(problems: list[Problem]) -> None:
    if problems:
        raise FormatInvalid(problems)


def decode_stage(value: Any) -> Stage:
    """A valid stage, typed and sanitized; raises :class:`FormatInvalid` naming every problem."""
    stage, problems = _prepare(value)
    _raise(problems or validate_stage(stage))
    return sanitize_stage(msgspec.convert(stage, Stage, strict=True))


def decode_scene(value: Any, *, stage_id: str | None, scene_id: str | None = None) -> Scene:
    """A valid scene of the document ``stage_id`` (``None``: any), typed and sanitized; raises
    :class:`FormatInvalid`."""
    scene, problems = _prepare(value)
    _raise(problems or validate_scene(scene, stage_id=stage_id, scene_id=scene_id))
    return sanitize_scene(msgspec.convert(scene, Scene, strict=True))


def decode_action(value: Any) -> Action:
    """A valid action, typed; raises :class:`FormatInvalid`."""
    action, problems = _prepare(value)
    _raise(problems or validate_action(action))
    return msgspec.convert(action, Action, strict=True)  # type: ignore[return-value]


def decode_document(value: Any, *, stage_id: str | None = None) -> Document:
    """A valid document, migrated to :data:`DSL_VERSION`, typed and sanitized; raises :class:`FormatInvalid`."""
    document, problems = _prepare(value, document=True)
    _raise(problems or validate_document(document, stage_id=stage_id))
    document = migrate(document)
    typed = msgspec.convert(document, Document, strict=True)
    return msgspec.structs.replace(typed, stage=sanitize_stage(typed.stage),
                                   scenes=[sanitize_scene(scene) for scene in typed.scenes])  # fmt: skip
