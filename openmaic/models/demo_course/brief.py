"""Reading a generation brief: the JSON object after the last ``Brief (JSON):`` line of the last user message.

Every generation call ends its user message with that line and the brief (COURSE-API §2). The object may
continue over several lines (a pretty-printed brief), so everything after the marker line is decoded as one
JSON value; a brief that does not decode, or is not an object, is no brief at all.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from typing import Any

MARKER = "Brief (JSON):"

_MARKER_LINE = re.compile(r"^[ \t]*Brief \(JSON\):[ \t]*", re.M)


def _user_text(messages: Sequence[Any]) -> str:
    """The text of the last user message (``UserMessage`` structs or ``{"role", "content"}`` dicts)."""
    for m in reversed(list(messages)):
        if isinstance(m, dict):
            if m.get("role") == "user":
                content = m.get("content", m.get("text", ""))
                return content if isinstance(content, str) else ""
            continue
        if getattr(m, "role", None) == "user" or type(m).__name__ == "UserMessage":
            return str(getattr(m, "text", ""))
    return ""


def read_brief(messages: Sequence[Any]) -> dict[str, Any] | None:
    """The brief of the last user message, or None when it carries none."""
    text = _user_text(messages)
    starts = [m.end() for m in _MARKER_LINE.finditer(text)]
    if not starts:
        return None
    rest = text[starts[-1] :].strip()
    try:
        value, _ = json.JSONDecoder().raw_decode(rest)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def has_brief(messages: Sequence[Any]) -> bool:
    """Whether the last user message carries a brief."""
    return read_brief(messages) is not None


def seed(*parts: Any) -> int:
    """A stable 64-bit number from values (never Python's salted ``hash``)."""
    text = "\x1f".join(p if isinstance(p, str) else json.dumps(p, sort_keys=True, ensure_ascii=False) for p in parts)
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")


def text_of(value: Any, default: str = "") -> str:
    """A trimmed string from a JSON value (anything else gives ``default``)."""
    return value.strip() if isinstance(value, str) and value.strip() else default


def strings(value: Any) -> list[str]:
    """The non-empty strings of a JSON list."""
    return [v.strip() for v in value if isinstance(v, str) and v.strip()] if isinstance(value, list) else []


def scene_of(brief: dict[str, Any]) -> dict[str, Any]:
    """The brief's scene outline (an empty object when absent)."""
    scene = brief.get("scene")
    return scene if isinstance(scene, dict) else {}


def outline_titles(brief: dict[str, Any]) -> list[str]:
    """The titles of the course's outlines, given as objects or as plain titles."""
    out: list[str] = []
    for o in brief.get("outlines") or []:
        if isinstance(o, str):
            out.append(o)
        elif isinstance(o, dict):
            out.append(text_of(o.get("title")))
    return out
