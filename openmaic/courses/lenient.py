"""Reading stored JSON that was accepted before the format's validator existed, keeping all it can.

Documents saved through the browser persistence routes before this server validated them against the course
format are in the log as the client sent them. Reading them must not fail and must lose as little as possible: a
scene is read whole when it fits the format; otherwise its elements and actions that do not fit are left out one
by one (never the scene for one bad element), and only a scene that still does not fit is skipped. ``null``
members count as absent, as OpenMAIC's own normalizer treats them.
"""

from __future__ import annotations

from typing import Any

import msgspec

from openmaic.courses import format as fmt
from openmaic.courses.format.sanitize import sanitize_scene, sanitize_stage

__all__ = ["drop_nulls", "lenient_scene", "lenient_stage"]


def drop_nulls(value: Any) -> Any:
    """``value`` with every ``null`` object member removed (recursively; array items are kept)."""
    if isinstance(value, dict):
        return {k: drop_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [drop_nulls(v) for v in value]
    return value


def _fits(value: Any, tp: Any) -> bool:
    try:
        msgspec.convert(value, tp)
    except msgspec.ValidationError:
        return False
    return True


def lenient_stage(raw: Any) -> fmt.Stage | None:
    """A stored stage as the format reads it, its unreadable members left out; None without an id."""
    if not isinstance(raw, dict) or not isinstance(raw.get("id"), str):
        return None
    value = drop_nulls(raw)
    value.setdefault("name", "")
    value.setdefault("createdAt", 0)
    value.setdefault("updatedAt", value["createdAt"])
    try:
        return sanitize_stage(msgspec.convert(value, fmt.Stage))
    except msgspec.ValidationError:
        pass
    core = {k: value[k] for k in ("id", "name", "createdAt", "updatedAt") if k in value}
    for key, member in value.items():  # keep each optional member that fits on its own
        if key not in core and _fits({**core, key: member}, fmt.Stage):
            core[key] = member
    try:
        return sanitize_stage(msgspec.convert(core, fmt.Stage))
    except msgspec.ValidationError:
        return None


def lenient_scene(raw: Any, *, stage_id: str) -> fmt.Scene | None:
    """A stored scene as the format reads it (see the module doc); None when it cannot be read at all."""
    if not isinstance(raw, dict):
        return None
    value = drop_nulls(raw)
    value["stageId"] = stage_id
    try:
        return sanitize_scene(msgspec.convert(value, fmt.Scene))
    except msgspec.ValidationError:
        pass
    content = value.get("content")
    if isinstance(content, dict) and isinstance(content.get("canvas"), dict):
        canvas = content["canvas"]
        canvas["elements"] = [e for e in canvas.get("elements") or [] if _fits(e, fmt.Element)]
    value["actions"] = [a for a in value.get("actions") or [] if _fits(a, fmt.Action)]
    for key in ("whiteboards", "multiAgent"):
        if key in value and not _fits({**value, key: value[key]}, fmt.Scene):
            value.pop(key)
    try:
        return sanitize_scene(msgspec.convert(value, fmt.Scene))
    except msgspec.ValidationError:
        return None
