"""A scene's content from a model's answer: a slide canvas, a quiz or an interactive page, made valid.

**A slide** (``{background?, elements, remark?}``): ``null`` members are dropped; each element is repaired where
the repair is certain and dropped where it is not, one at a time (never the slide for one element): ids become
``<type>_<8>`` and unique; an element without numbers for its box is dropped; ``rotate`` is 0 (a line has neither ``rotate`` nor ``height``); a box is moved and
shrunk onto the 1000 × 562.5 canvas; an image must name one of the scene's image refs (anything else, an invented
URL above all, is dropped), a video one of its video refs (a ``gen_vid_…`` in ``src`` moves to ``mediaRef``; an
unknown ref becomes the scene's only video ref, else the video is dropped); a formula is rendered to HTML
(dropped if it cannot be); text HTML is sanitized to the format's subset when the scene is decoded; then the
format's normalizer fills defaults and drops what still does not fit. Only a solid (with a colour) or gradient
background is kept. A slide with no element left is an ``OutputInvalid``.

**A quiz** (a JSON array of questions): option strings become ``{label, value: "A"…}``; the answer is read from
``answer``/``correctAnswer``/``correct_answer`` (values, labels, letters or 0-based indexes) into option values;
a choice question whose answer names no option is dropped; a short answer loses options and answer and keeps a
grading rubric; points default to 1.

**An interactive page**: the HTML document in the answer (from ``<!DOCTYPE html>`` or ``<html`` to the last
``</html>``, else a fenced block holding HTML); its ``widget-config`` JSON becomes ``widgetConfig``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

import msgspec

from openmaic.courses import format as fmt
from openmaic.courses.lenient import drop_nulls
from openmaic.models.errors import OutputInvalid

__all__ = ["read_interactive", "read_quiz", "read_slide"]

_W, _H = 1000.0, 562.5
_LETTERS = "ABCDEFGH"
_TYPES = ("text", "image", "shape", "line", "chart", "table", "latex", "video", "audio", "code")


def _num(value: Any, default: float) -> float:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else default


def _tidy(value: float) -> int | float:
    """A whole number written as one (``50``, not ``50.0``), as OpenMAIC's own documents write them."""
    return int(value) if value.is_integer() else round(value, 2)


def _placed(e: dict[str, Any]) -> bool:
    """The element says where it goes: numbers for its box (a line: its origin and stroke)."""
    keys = ("left", "top", "width") if e.get("type") == "line" else ("left", "top", "width", "height")
    return all(isinstance(e.get(k), int | float) and not isinstance(e.get(k), bool) for k in keys)


def _fit_box(e: dict[str, Any]) -> None:
    """Move and shrink the element's box onto the canvas (a line: its origin)."""
    left, top = _num(e.get("left"), 50.0), _num(e.get("top"), 50.0)
    if e["type"] == "line":
        e["left"], e["top"] = _tidy(min(max(left, 0.0), _W)), _tidy(min(max(top, 0.0), _H))
        e["width"] = _tidy(min(max(_num(e.get("width"), 2.0), 1.0), 12.0))
        return
    width = min(max(_num(e.get("width"), 200.0), 10.0), _W)
    height = min(max(_num(e.get("height"), 60.0), 10.0), _H)
    e["left"] = _tidy(min(max(left, 0.0), _W - width))
    e["top"] = _tidy(min(max(top, 0.0), _H - height))
    e["width"], e["height"] = _tidy(width), _tidy(height)


def _element(e: dict[str, Any], images: set[str], videos: set[str]) -> dict[str, Any] | None:
    kind = e.get("type")
    if kind not in _TYPES or not _placed(e):
        return None  # where an element goes cannot be guessed: it is left out, not put somewhere
    _fit_box(e)
    if kind == "line":
        e.pop("height", None)
        e.pop("rotate", None)
        e.setdefault("start", [0, 0])
        e.setdefault("end", [100, 0])
    else:
        e["rotate"] = 0
    if kind == "image":
        if e.get("src") not in images:
            return None
    elif kind == "video":
        src = e.get("src")
        if isinstance(src, str) and src in videos:
            e["mediaRef"] = e.pop("src")
        elif src is not None:
            e.pop("src")
        if e.get("mediaRef") not in videos:
            if len(videos) != 1:
                return None
            e["mediaRef"] = next(iter(videos))
        e.setdefault("autoplay", False)
    elif kind == "latex":
        tex = e.get("latex")
        if not isinstance(tex, str) or not tex.strip():
            return None
        try:
            e["html"] = fmt.render_latex(tex)
        except fmt.FormatInvalid:
            return None
        for key in ("path", "viewBox", "strokeWidth"):
            e.pop(key, None)
        e["fixedRatio"] = True
    elif kind == "text":
        e.setdefault("lineHeight", 1.5)
    elif kind in ("audio",):
        return None  # narration belongs to speech actions; a model has no audio to place
    return e


def _background(raw: Any) -> fmt.Background:
    if isinstance(raw, dict) and raw.get("type") == "solid" and isinstance(raw.get("color"), str):
        return fmt.Background(type="solid", color=raw["color"])
    if isinstance(raw, dict) and raw.get("type") == "gradient":
        try:
            return msgspec.convert({"type": "gradient", "gradient": raw.get("gradient")}, fmt.Background)
        except msgspec.ValidationError:
            pass
    return fmt.Background(type="solid", color="#ffffff")


def read_slide(text: str, media: Mapping[str, str]) -> fmt.SlideContent:
    """A slide canvas from a model's answer; ``media`` maps the refs the slide may place to ``image``/``video``."""
    data = fmt.parse_json_response(text)
    data = drop_nulls(data)
    raw = data.get("elements") if isinstance(data, dict) else data if isinstance(data, list) else None
    if not isinstance(raw, list):
        raise OutputInvalid("the slide reply has no \"elements\" list")
    images = {r for r, k in media.items() if k == "image"}
    videos = {r for r, k in media.items() if k == "video"}
    repaired = []
    used: set[str] = set()
    for e in raw:
        if not isinstance(e, dict):
            continue
        e = _element(dict(e), images, videos)
        if e is None:
            continue
        ident = fmt.new_id(e["type"])
        while ident in used:
            ident = fmt.new_id(e["type"])
        used.add(ident)
        e["id"] = ident
        repaired.append(e)
    elements, _dropped = fmt.normalize_elements(repaired, drop_invalid=True)
    if not elements:
        raise OutputInvalid("the slide reply has no usable element (each needs a known type, a position and a size)")
    canvas = fmt.Slide(id=fmt.new_id("slide"), viewportSize=fmt.VIEWPORT_SIZE, viewportRatio=fmt.VIEWPORT_RATIO,
                       theme=fmt.DEFAULT_THEME, elements=list(elements),
                       background=_background(data.get("background") if isinstance(data, dict) else None))
    return fmt.SlideContent(canvas=canvas)


def _answer(q: dict[str, Any], options: list[dict[str, str]]) -> list[str]:
    given = q.get("answer", q.get("correctAnswer", q.get("correct_answer")))
    given = given if isinstance(given, list) else [given]
    values = {o["value"] for o in options}
    out = []
    for g in given:
        if isinstance(g, int) and not isinstance(g, bool) and 0 <= g < len(options):
            out.append(options[g]["value"])
        elif isinstance(g, str):
            g = g.strip()
            if g in values:
                out.append(g)
            elif len(g) == 1 and g.upper() in values:
                out.append(g.upper())
            else:
                out += [o["value"] for o in options if o["label"].strip() == g]
    return list(dict.fromkeys(out))


def _question(q: dict[str, Any], used: set[str]) -> dict[str, Any] | None:
    stem = " ".join(str(q.get("question") or "").split())
    if not stem:
        return None
    ident = q.get("id") if isinstance(q.get("id"), str) and q["id"] not in used else fmt.new_id("q")
    used.add(ident)
    raw_options = q.get("options") if isinstance(q.get("options"), list) else []
    options = []
    for i, o in enumerate(raw_options[: len(_LETTERS)]):
        if isinstance(o, str) and o.strip():
            options.append({"label": o.strip(), "value": _LETTERS[i]})
        elif isinstance(o, dict) and str(o.get("label") or "").strip():
            options.append({"label": str(o["label"]).strip(), "value": str(o.get("value") or _LETTERS[i])})
    kind = q.get("type") if q.get("type") in ("single", "multiple", "short_answer") else (
        "short_answer" if q.get("type") == "text" or not options else "single")
    points = q.get("points") if isinstance(q.get("points"), int | float) and q["points"] > 0 else 1
    out: dict[str, Any] = {"id": ident, "type": kind, "question": stem, "points": points}
    analysis = " ".join(str(q.get("analysis") or q.get("explanation") or "").split())
    if analysis:
        out["analysis"] = analysis
    if kind == "short_answer":
        rubric = " ".join(str(q.get("commentPrompt") or "").split())
        out["commentPrompt"] = rubric or f"Give full marks to an answer that is correct and complete. {analysis}".strip()
        out["hasAnswer"] = False
        return out
    answer = _answer(q, options)
    if len(options) < 2 or not answer:
        return None
    if kind == "single" and len(answer) > 1:
        kind = out["type"] = "multiple"
    out.update(options=options, answer=answer, hasAnswer=True)
    return out


def read_quiz(text: str) -> fmt.QuizContent:
    """A quiz from a model's answer (see the module doc); OutputInvalid when no question is usable."""
    data = drop_nulls(fmt.parse_json_response(text))
    raw = data.get("questions") if isinstance(data, dict) else data
    used: set[str] = set()
    questions = [q for r in raw if isinstance(r, dict) and (q := _question(r, used)) is not None] \
        if isinstance(raw, list) else []
    if not questions:
        raise OutputInvalid("the quiz reply has no usable question (a choice question needs options and an answer "
                            "naming one of them)")
    return msgspec.convert({"type": "quiz", "questions": questions}, fmt.QuizContent)


_FENCE = re.compile(r"```(?:html)?\s*\n([\s\S]*?)```", re.I)
_CONFIG = re.compile(r'<script[^>]*id=["\']widget-config["\'][^>]*>([\s\S]*?)</script>', re.I)


def _html(text: str) -> str | None:
    start = re.search(r"<!DOCTYPE html|<html", text, re.I)
    end = text.lower().rfind("</html>")
    if start is not None and end > start.start():
        return text[start.start(): end + len("</html>")]
    for block in _FENCE.findall(text):
        if "<" in block and re.search(r"<(html|body|div|script)", block, re.I):
            return block.strip()
    stripped = text.strip()
    return stripped if stripped.startswith("<") else None


def read_interactive(text: str, widget_type: str | None) -> fmt.InteractiveContent:
    """An interactive page from a model's answer (see the module doc)."""
    page = _html(text)
    if page is None:
        raise OutputInvalid("the interactive reply holds no HTML document")
    config: dict[str, Any] | None = None
    found = _CONFIG.search(page)
    if found is not None:
        try:
            parsed = json.loads(found.group(1))
            config = parsed if isinstance(parsed, dict) else None
        except ValueError:
            config = None
    kind = widget_type or (config or {}).get("type") or "simulation"
    if kind not in fmt.WIDGET_TYPES:
        kind = "simulation"
    config = {**(config or {}), "type": kind}
    return msgspec.convert({"type": "interactive", "html": page, "url": "", "widgetType": kind,
                            "widgetConfig": config}, fmt.InteractiveContent)
