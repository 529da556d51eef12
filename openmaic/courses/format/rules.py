"""OpenMAIC's structural rules on plain JSON values, as its own gates apply them (format §6.1–§6.5).

* ``@openmaic/dsl``'s ``validateStage``/``validateScene``/``validateAction``: required members with the right
  JSON kind, known discriminants, the scene ``type`` ↔ ``content.type`` binding;
* the app's write gate (``lib/document-store/validators.ts``): no ``currentSceneId`` on the stage; non-empty
  ``id``/``stageId``/``title`` and a finite ``order`` on interactive and PBL scenes, which it checks more
  leniently otherwise (any object ``widgetConfig``; ``projectV2`` container arrays unless a real legacy
  ``projectConfig`` is kept beside it);
* the storage gate (``@openmaic/storage``'s document handler): scene ids are strings, unique, addressable;
  ``stageId`` equals the document's; ``order`` is finite; the stamp has a path to the current version.

Unlike OpenMAIC, which stops at the first storage-gate failure, every function here collects every problem.
JSON ``null`` in an object member has already been dropped (:func:`drop_nulls`): the app tolerates it.
"""

from __future__ import annotations

import json
import math
from typing import Any

from openmaic.courses.format.actions import ACTION_TYPES
from openmaic.courses.format.problems import Problem, child
from openmaic.courses.format.scenes import SCENE_TYPES, WIDGET_TYPES

__all__ = ["OPAQUE_MEMBERS", "action_rules", "drop_nulls", "scene_rules", "stage_rules", "storage_rules"]

OPAQUE_MEMBERS = frozenset({"widgetConfig", "projectV2", "projectConfig", "state", "widgetOutline",
                            "interactiveConfig", "pblConfig"})  # fmt: skip
"""Members whose trees are kept verbatim (their ``null`` values may mean something to the widget or project)."""

_KIND = {"string": str, "number": (int, float), "object": dict, "array": list}

_ACTION_FIELDS: dict[str, dict[str, str]] = {
    "spotlight": {"elementId": "string"},
    "laser": {"elementId": "string"},
    "play_video": {"elementId": "string"},
    "speech": {"text": "string"},
    "wb_open": {},
    "wb_draw_text": {"content": "string", "x": "number", "y": "number"},
    "wb_draw_shape": {"shape": "string", "x": "number", "y": "number", "width": "number", "height": "number"},
    "wb_draw_chart": {"chartType": "string", "x": "number", "y": "number", "width": "number", "height": "number",
                      "data": "object"},
    "wb_draw_latex": {"latex": "string", "x": "number", "y": "number"},
    "wb_draw_table": {"x": "number", "y": "number", "width": "number", "height": "number", "data": "array"},
    "wb_draw_line": {"startX": "number", "startY": "number", "endX": "number", "endY": "number"},
    "wb_draw_code": {"language": "string", "code": "string", "x": "number", "y": "number"},
    "wb_edit_code": {"elementId": "string", "operation": "string"},
    "wb_clear": {},
    "wb_delete": {"elementId": "string"},
    "wb_close": {},
    "discussion": {"topic": "string"},
    "widget_highlight": {"target": "string"},
    "widget_setState": {"state": "object"},
    "widget_annotation": {"target": "string"},
    "widget_reveal": {"target": "string"},
}  # fmt: skip
assert set(_ACTION_FIELDS) == set(ACTION_TYPES)

_UI_PHASES = ("hero", "generating", "workspace", "completed")
_PROJECT_STATUSES = ("designing", "review", "active", "completed", "archived")


def drop_nulls(value: Any) -> Any:
    """``value`` without object members whose value is ``null`` (through objects and arrays; opaque trees kept)."""
    if isinstance(value, dict):
        return {key: member if key in OPAQUE_MEMBERS else drop_nulls(member)
                for key, member in value.items() if member is not None}  # fmt: skip
    if isinstance(value, list):
        return [drop_nulls(item) for item in value]
    return value


def _is_kind(value: Any, kind: str) -> bool:
    if isinstance(value, bool):
        return False
    return isinstance(value, _KIND[kind])


def _is_number(value: Any) -> bool:
    return _is_kind(value, "number")


def _dump(value: Any) -> str:
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        return repr(value)


def _req_string(doc: dict[str, Any], key: str, path: str, out: list[Problem]) -> None:
    if not isinstance(doc.get(key), str):
        out.append(Problem(child(path, key), f"expected string `{key}`"))


def _req_number(doc: dict[str, Any], key: str, path: str, out: list[Problem]) -> None:
    if not _is_number(doc.get(key)):
        out.append(Problem(child(path, key), f"expected number `{key}`"))


def stage_rules(doc: Any, path: str = "/") -> list[Problem]:
    """``validateStage`` plus the app gate's ``currentSceneId`` rule."""
    if not isinstance(doc, dict):
        return [Problem(path, "stage must be an object")]
    out: list[Problem] = []
    _req_string(doc, "id", path, out)
    _req_string(doc, "name", path, out)
    _req_number(doc, "createdAt", path, out)
    _req_number(doc, "updatedAt", path, out)
    if "currentSceneId" in doc:
        out.append(Problem(child(path, "currentSceneId"),
                           "`currentSceneId` is device playback state and is not allowed on a stage"))  # fmt: skip
    if "dslVersion" in doc:
        out.append(Problem(child(path, "dslVersion"), "`dslVersion` belongs at the document root, not in the stage"))
    return out


def action_rules(doc: Any, path: str = "/") -> list[Problem]:
    """``validateAction``: a string ``id``, a known ``type``, and that type's required members by kind."""
    if not isinstance(doc, dict):
        return [Problem(path, "action must be an object")]
    out: list[Problem] = []
    _req_string(doc, "id", path, out)
    kind = doc.get("type")
    if not isinstance(kind, str) or kind not in _ACTION_FIELDS:
        out.append(Problem(child(path, "type"), f"unknown action type: {_dump(kind)}"))
        return out
    for field, field_kind in _ACTION_FIELDS[kind].items():
        if field not in doc:
            out.append(Problem(child(path, field), f"{kind} action requires `{field}`"))
        elif not _is_kind(doc[field], field_kind):
            out.append(Problem(child(path, field), f"{kind} action field `{field}` must be {field_kind}"))
    return out


def _is_project(project: Any) -> bool:
    """The DSL's structural ``isPBLProject``."""
    return (
        isinstance(project, dict)
        and project.get("uiPhase") in _UI_PHASES
        and project.get("status") in _PROJECT_STATUSES
        and all(isinstance(project.get(k), str)
                for k in ("title", "description", "language", "proficiency", "createdAt", "updatedAt"))
        and all(isinstance(project.get(k), list)
                for k in ("tags", "milestones", "roles", "submissions", "evaluations", "threads", "engagementEvents"))
    )  # fmt: skip


def _object_list(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(item, dict) for item in value)


def _has_containers(project: dict[str, Any]) -> bool:
    """The app's ``hasPBLProjectV2Containers``."""
    if not all(_object_list(project.get(k))
               for k in ("milestones", "roles", "submissions", "evaluations", "threads", "engagementEvents")):
        return False  # fmt: skip
    if any(not _object_list(m.get("microtasks")) for m in project["milestones"]):
        return False
    if any(not _object_list(t.get("messages")) for t in project["threads"]):
        return False
    if "gains" in project and not isinstance(project["gains"], list):
        return False
    if "runtimeEvents" in project and not _object_list(project["runtimeEvents"]):
        return False
    scenario = project.get("scenario")
    return scenario is None or (isinstance(scenario, dict) and _object_list(scenario.get("characters")))


def _real_legacy_config(config: Any) -> bool:
    """A structurally sound, non-empty v1 ``projectConfig`` (the app's ``!isEmptyLegacyPBLConfig``)."""
    if not isinstance(config, dict) or not isinstance(config.get("projectInfo"), dict):
        return False
    agents, board = config.get("agents"), config.get("issueboard")
    if not _object_list(agents) or any(not isinstance(a.get("name", ""), str) for a in agents):
        return False
    return isinstance(board, dict) and _object_list(board.get("issues"))


def _interactive_rules(content: dict[str, Any], path: str, out: list[Problem], *, app: bool) -> None:
    html, url = content.get("html"), content.get("url")
    if not isinstance(html, str) and not isinstance(url, str):
        out.append(Problem(path, "interactive content requires `html` or `url` as a string"))
    if "url" in content and not isinstance(url, str):
        out.append(Problem(child(path, "url"), "`url` must be a string when present"))
    if "html" in content and not isinstance(html, str):
        out.append(Problem(child(path, "html"), "`html` must be a string when present"))
    widget_type = content.get("widgetType")
    if not app and "widgetType" in content and widget_type not in WIDGET_TYPES:
        out.append(Problem(child(path, "widgetType"), f"unknown widget type: {_dump(widget_type)}"))
    if "widgetConfig" in content:
        config = content["widgetConfig"]
        if not isinstance(config, (dict, list) if app else dict):
            out.append(Problem(child(path, "widgetConfig"), "`widgetConfig` must be an object when present"))
        elif not app and config.get("type") not in WIDGET_TYPES:
            out.append(Problem(child(path, "widgetConfig", ) + "/type",
                               f"unknown widget config type: {_dump(config.get('type'))}"))  # fmt: skip


def _pbl_rules(content: dict[str, Any], path: str, out: list[Problem], *, app: bool) -> None:
    config = content.get("projectConfig")
    if "projectConfig" in content and not isinstance(config, dict):
        out.append(Problem(child(path, "projectConfig"), "`projectConfig` must be an object when present"))
    if "projectV2" not in content:
        return
    project = content["projectV2"]
    if app:
        if not _real_legacy_config(config) and not (isinstance(project, dict) and _has_containers(project)):
            out.append(Problem(child(path, "projectV2"),
                               "`projectV2` must contain milestones (each with microtasks), roles, submissions, "
                               "evaluations, threads (each with messages) and engagementEvents arrays"))  # fmt: skip
    elif not _is_project(project):
        out.append(Problem(child(path, "projectV2"), "`projectV2` must be a structurally valid PBL project"))


def scene_rules(doc: Any, path: str = "/", *, dsl: bool = True) -> list[Problem]:
    """The app gate (``validateAppScene``): ``validateScene`` for slide and quiz scenes, the app's own rules for
    interactive and PBL ones (non-empty strings, containers, lenient widget configs).

    With ``dsl`` (the default) the DSL's ``validateScene`` applies to interactive and PBL scenes as well (known
    widget types, the structural project check, ``validateAction`` on their actions), so a scene that passes is
    accepted by both of OpenMAIC's validators; without it, exactly what the app's stores accept."""
    if not isinstance(doc, dict):
        return [Problem(path, "scene must be an object")]
    out: list[Problem] = []
    kind = doc.get("type")
    app = kind not in ("slide", "quiz")  # the app gate's branch: unknown types are refused there too
    for key in ("id", "stageId", "title"):
        if app and not (isinstance(doc.get(key), str) and doc[key]):
            out.append(Problem(child(path, key), f"expected non-empty string `{key}`"))
        else:
            _req_string(doc, key, path, out)
    _req_number(doc, "order", path, out)
    if kind not in SCENE_TYPES:
        out.append(Problem(child(path, "type"), f"unknown scene type: {_dump(kind)}"))
    content = doc.get("content")
    content_path = child(path, "content")
    if not isinstance(content, dict):
        out.append(Problem(content_path, "scene `content` must be an object"))
    elif kind in SCENE_TYPES:
        if content.get("type") != kind:
            out.append(Problem(child(content_path, "type"), f"content type {_dump(content.get('type'))} does not "
                               f"match scene type {_dump(kind)}"))  # fmt: skip
        elif kind == "slide" and not isinstance(content.get("canvas"), dict):
            out.append(Problem(child(content_path, "canvas"), "slide content requires an object `canvas`"))
        elif kind == "quiz" and not isinstance(content.get("questions"), list):
            out.append(Problem(child(content_path, "questions"), "quiz content requires a `questions` array"))
        elif kind == "interactive":
            for app_rules in (False, True) if dsl else (True,):
                _interactive_rules(content, content_path, out, app=app_rules)
        elif kind == "pbl":
            for app_rules in (False, True) if dsl else (True,):
                _pbl_rules(content, content_path, out, app=app_rules)
    if "actions" in doc and (dsl or not app):  # the app gate does not look at interactive or PBL actions
        actions = doc["actions"]
        if not isinstance(actions, list):
            out.append(Problem(child(path, "actions"), "`actions` must be an array"))
        else:
            for index, action in enumerate(actions):
                out += action_rules(action, child(child(path, "actions"), index))
    return list(dict.fromkeys(out))  # the DSL's and the app's rules can say the same thing twice


def storage_rules(doc: Any, path: str = "/", *, stage_id: str | None = None,
                  scene_id: str | None = None) -> list[Problem]:  # fmt: skip
    """The storage gate's per-scene rules (the document-level ones live in :mod:`validate`)."""
    if not isinstance(doc, dict):
        return []  # scene_rules said so
    out: list[Problem] = []
    sid = doc.get("id")
    if isinstance(sid, str) and sid in (".", ".."):
        out.append(Problem(child(path, "id"), f"scene id must not be {sid!r} (it names the scene in URLs)"))
    if scene_id is not None and isinstance(sid, str) and sid != scene_id:
        out.append(Problem(child(path, "id"), f"scene {sid!r} is not scene {scene_id!r}"))
    if stage_id is not None and doc.get("stageId") != stage_id:
        out.append(Problem(child(path, "stageId"), f"scene {_dump(sid)} has stageId {_dump(doc.get('stageId'))} "
                           f"but belongs to document {_dump(stage_id)}"))  # fmt: skip
    order = doc.get("order")
    if _is_number(order) and not math.isfinite(order):
        out.append(Problem(child(path, "order"), "`order` must be a finite number"))
    return out
