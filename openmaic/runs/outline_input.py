"""An outline as a client sends it back (``confirm-outline``'s ``outlines``): OpenMAIC's ``SceneOutline``s, kept
whole (key points, quiz settings, widget, media requests and anything else the format holds), or refused with the
field that is wrong.

Nothing a client sends is repaired silently where the client relies on it: a media element's id is how the client
finds that element's state later, so a malformed or repeated one is refused, never renamed; an entry without one
gets the next free ``gen_img_<n>`` / ``gen_vid_<n>``. The proposed outline's entries come back unchanged, so
confirming the outline as it was proposed is no edit. An entry whose type changed gets the settings its new type
needs, as OpenMAIC's outline editor fills them (a quiz: 3 medium single-choice questions; an interactive scene: a
simulation of its title).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import msgspec

from openmaic import errors
from openmaic.courses import format as fmt
from openmaic.courses.lenient import drop_nulls

__all__ = ["outline_items"]

ELEMENT_ID = re.compile(r"^[A-Za-z0-9_.:-]{1,128}$")
_TYPES = ("slide", "quiz", "interactive")


def _refuse(path: str, message: str) -> errors.InvalidInput:
    return errors.InvalidInput(f"{path}: {message}", path=path)


def outline_items(outlines: Sequence[Any]) -> list[fmt.SceneOutline]:
    """OpenMAIC ``SceneOutline`` JSON objects as outline entries; InvalidInput naming the first that this server
    cannot build."""
    given = {m.get("elementId") for o in outlines if isinstance(o, dict)
             for m in o.get("mediaGenerations") or [] if isinstance(m, dict) and m.get("elementId")}
    placed: set[str] = set()
    counts = {"image": 0, "video": 0}
    items = []
    for i, raw in enumerate(outlines):
        at = f"outlines[{i}]"
        if not isinstance(raw, dict):
            raise _refuse(at, "each outline entry is an object")
        o = drop_nulls(raw)
        if o.get("type") not in _TYPES:
            raise _refuse(f"{at}.type", f"{o.get('type')!r} scenes are not supported; use slide, quiz or interactive")
        if not isinstance(o.get("title"), str) or not o["title"].strip():
            raise _refuse(f"{at}.title", "every scene needs a title")
        o.setdefault("id", f"scene_{i + 1}")
        o.setdefault("description", "")
        o.setdefault("keyPoints", [])
        o["order"] = i + 1
        if o["type"] == "quiz":
            o.setdefault("quizConfig", {"questionCount": 3, "difficulty": "medium", "questionTypes": ["single"]})
        if o["type"] == "interactive" and o.get("widgetType") not in fmt.WIDGET_TYPES:
            o["widgetType"] = "simulation"
            o.setdefault("widgetOutline", {"concept": o["title"]})
        media = []
        for j, m in enumerate(o.get("mediaGenerations") or []):
            mat = f"{at}.mediaGenerations[{j}]"
            if not isinstance(m, dict) or m.get("type") not in ("image", "video"):
                raise _refuse(f"{mat}.type", "use image or video")
            if not isinstance(m.get("prompt"), str) or not m["prompt"].strip():
                raise _refuse(f"{mat}.prompt", f"say what the {m['type']} should show")
            if "aspectRatio" in m and m["aspectRatio"] not in fmt.ASPECT_RATIOS:
                raise _refuse(f"{mat}.aspectRatio", f"{m['aspectRatio']!r} is not one of "
                                                    f"{', '.join(fmt.ASPECT_RATIOS)}")
            element_id = m.get("elementId") or ""
            if not element_id:
                while not element_id or element_id in given:
                    counts[m["type"]] += 1
                    element_id = f"gen_{'img' if m['type'] == 'image' else 'vid'}_{counts[m['type']]}"
                given.add(element_id)
            elif not isinstance(element_id, str) or not ELEMENT_ID.match(element_id):
                raise _refuse(f"{mat}.elementId", "use 1 to 128 letters, digits and _ . : -")
            elif element_id in placed:
                raise _refuse(f"{mat}.elementId", f"{element_id!r} is used twice in the outline")
            placed.add(element_id)
            media.append({"aspectRatio": "16:9", **m, "prompt": m["prompt"].strip(), "elementId": element_id})
        if media:
            o["mediaGenerations"] = media
        else:
            o.pop("mediaGenerations", None)
        try:
            items.append(msgspec.convert(o, fmt.SceneOutline))
        except msgspec.ValidationError as exc:
            problem = fmt.from_validation_error(exc, at) if hasattr(fmt, "from_validation_error") else None
            path = problem.path if problem is not None else at
            raise errors.InvalidInput(f"{at}: {exc}", path=path) from None
    return items
