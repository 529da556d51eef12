"""Element normalization, as OpenMAIC's ``normalizeElement`` does it (format §6.9), then typing.

For the members it owns: a **missing** member gets its default, a member **present with the wrong type** is
an error, a well-formed member is kept. It never touches ``id``, ``left``, ``top``, ``width``, ``height`` or
``rotate``; it is pure and idempotent.

* text: ``content`` ``""``, ``defaultFontName`` ``Microsoft YaHei``, ``defaultColor`` ``#333333`` (an empty
  string counts as missing);
* image: ``fixedRatio`` ``true``;
* shape: ``viewBox`` ``[width, height]``, ``path`` the rectangle over the box (``""`` counts as missing),
  ``fill`` ``#5b9bd5`` (only when absent: ``""`` means no fill), ``fixedRatio`` ``false``; a present ``text``
  gets ``content``, font, colour and ``align`` ``middle`` (an unknown ``align`` is an error);
* line: ``start`` ``[0, 0]``, ``end`` ``[width, height]``, ``style`` ``solid``, ``color`` ``#333333``,
  ``points`` ``["", ""]``;
* chart, table, latex, video, audio, code: unchanged; any other ``type`` is an error.

:func:`normalize_elements` is what generation uses on a model's elements: drop ``null`` members, normalize,
decode strictly into the element structs, sanitize the HTML, and drop (and report) what still fails.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import msgspec

from openmaic.courses.format.elements import Element
from openmaic.courses.format.problems import FormatInvalid, Problem, child, from_validation_error
from openmaic.courses.format.rules import drop_nulls
from openmaic.courses.format.sanitize import sanitize_element

__all__ = ["ELEMENT_DEFAULTS", "normalize_element", "normalize_elements"]

ELEMENT_DEFAULTS: dict[str, dict[str, Any]] = {
    "text": {"defaultFontName": "Microsoft YaHei", "defaultColor": "#333333", "content": ""},
    "image": {"fixedRatio": True},
    "shape": {"fill": "#5b9bd5", "fixedRatio": False},
    "shapeText": {"content": "", "defaultFontName": "Microsoft YaHei", "defaultColor": "#333333", "align": "middle"},
    "line": {"style": "solid", "color": "#333333", "points": ["", ""]},
}
_PASSED_THROUGH = ("chart", "table", "latex", "video", "audio", "code")
_LINE_STYLES = ("solid", "dashed", "dotted")
_MARKERS = ("", "arrow", "dot")
_ALIGNS = ("top", "middle", "bottom")


class _Bad(Exception):
    def __init__(self, field: str, message: str) -> None:
        self.field, self.message = field, message


def _dump(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=repr)


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _string(el: dict[str, Any], field: str, default: str, *, keep_empty: bool = False, name: str = "") -> str:
    value = el.get(field)
    if value is None or (value == "" and not keep_empty):
        return default
    if not isinstance(value, str):
        raise _Bad(name or field, f"`{name or field}` must be a string, got {_dump(value)}")
    return value


def _bool(el: dict[str, Any], field: str, default: bool) -> bool:
    value = el.get(field)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise _Bad(field, f"`{field}` must be a boolean, got {_dump(value)}")
    return value


def _geom(el: dict[str, Any], field: str) -> int | float:
    value = el.get(field)
    if value is None:
        return 0
    if not _number(value):
        raise _Bad(field, f"`{field}` must be a number, got {_dump(value)}")
    return value


def _pair(el: dict[str, Any], field: str, derive: Callable[[], list[Any]]) -> list[Any]:
    value = el.get(field)
    if value is None:
        return derive()
    if not (isinstance(value, list) and len(value) == 2 and all(_number(v) for v in value)):
        raise _Bad(field, f"`{field}` must be an [x, y] number pair, got {_dump(value)}")
    return value


def _js(number: int | float) -> str:
    """A number as JavaScript prints it in a template string (``100``, not ``100.0``)."""
    return str(int(number)) if float(number).is_integer() else repr(float(number))


def _shape_text(el: dict[str, Any]) -> dict[str, Any]:
    text = el["text"]
    if not isinstance(text, dict):
        raise _Bad("text", f"`text` must be an object (shape text), got {_dump(text)}")
    align = text.get("align")
    if align is not None and align not in _ALIGNS:
        raise _Bad("text/align", f"`text.align` must be one of 'top' | 'middle' | 'bottom', got {_dump(align)}")
    defaults = ELEMENT_DEFAULTS["shapeText"]
    return {
        **text,
        **{f: _string(text, f, defaults[f], name=f"text.{f}") for f in ("content", "defaultFontName", "defaultColor")},
        "align": defaults["align"] if align is None else align,
    }


def _normalized(el: dict[str, Any]) -> dict[str, Any]:
    kind = el.get("type")
    if kind == "text":
        defaults = ELEMENT_DEFAULTS["text"]
        return {**el, **{f: _string(el, f, defaults[f]) for f in ("defaultFontName", "defaultColor", "content")}}
    if kind == "image":
        return {**el, "fixedRatio": _bool(el, "fixedRatio", True)}
    if kind == "shape":
        width, height = _geom(el, "width"), _geom(el, "height")
        out = {
            **el,
            "viewBox": _pair(el, "viewBox", lambda: [width, height]),
            "path": _string(el, "path", f"M0 0 L{_js(width)} 0 L{_js(width)} {_js(height)} L0 {_js(height)} Z"),
            "fill": _string(el, "fill", ELEMENT_DEFAULTS["shape"]["fill"], keep_empty=True),
            "fixedRatio": _bool(el, "fixedRatio", False),
        }
        if el.get("text") is not None:
            out["text"] = _shape_text(el)
        return out
    if kind == "line":
        style = el.get("style")
        if style not in (None, "") and style not in _LINE_STYLES:
            raise _Bad("style", f"`style` must be one of 'solid' | 'dashed' | 'dotted', got {_dump(style)}")
        points = el.get("points")
        if points is not None and not (isinstance(points, list) and len(points) == 2
                                       and all(isinstance(p, str) and p in _MARKERS for p in points)):  # fmt: skip
            raise _Bad("points", f"`points` must be a [start, end] pair of markers (\"\", \"arrow\", \"dot\"), "
                                 f"got {_dump(points)}")  # fmt: skip
        return {
            **el,
            "start": _pair(el, "start", lambda: [0, 0]),
            "end": _pair(el, "end", lambda: [_geom(el, "width"), _geom(el, "height")]),
            "style": style or "solid",
            "color": _string(el, "color", ELEMENT_DEFAULTS["line"]["color"]),
            "points": ["", ""] if points is None else points,
        }
    if kind in _PASSED_THROUGH:
        return el
    raise _Bad("type", f"unknown element type {_dump(kind)}")


def normalize_element(value: Any, *, path: str = "/") -> dict[str, Any]:
    """``value`` (a JSON element) with OpenMAIC's defaults filled; raises :class:`FormatInvalid` (at ``path``)
    for a member of the wrong type, an unknown ``type``, or something that is not an object."""
    if not isinstance(value, dict):
        raise FormatInvalid([Problem(path, f"an element must be an object, got {_dump(value)}")])
    try:
        return _normalized(value)
    except _Bad as bad:
        where = path
        for key in bad.field.split("/"):
            where = child(where, key)
        raise FormatInvalid([Problem(where, f"{value.get('type')} element {_dump(value.get('id'))}: {bad.message}")])


def normalize_elements(values: list[Any], *, drop_invalid: bool = True,
                       path: str = "/elements") -> tuple[list[Element], list[Problem]]:  # fmt: skip
    """A model's elements as typed, sanitized :data:`Element` s, and a problem for each element dropped.

    Each element loses its ``null`` members, is normalized, decoded strictly (so a missing box member, a wrong
    enum or a ``line`` without its points is caught here) and has its HTML sanitized. With ``drop_invalid``
    (the default) a bad element is dropped and reported; without it, :class:`FormatInvalid` names every one.
    """
    elements: list[Element] = []
    problems: list[Problem] = []
    for index, value in enumerate(values):
        where = child(path, index)
        try:
            normalized = normalize_element(drop_nulls(value), path=where)
            element = msgspec.convert(normalized, Element, strict=True)
        except FormatInvalid as error:
            problems += error.problems
            continue
        except msgspec.ValidationError as error:
            problems.append(from_validation_error(error, where))
            continue
        elements.append(sanitize_element(element))
    if problems and not drop_invalid:
        raise FormatInvalid(problems)
    return elements, problems
