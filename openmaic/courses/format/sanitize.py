"""The HTML a course may carry in text, shape text and table cells, and nothing else (format §3.3).

OpenMAIC's renderers inject that HTML as is, so whatever enters a course from a model or a user passes through
:func:`sanitize_html` (``nh3``, the Python binding of the Ammonia sanitizer): the tags OpenMAIC's generator is
told to use (``p``, ``span``, ``strong``, ``b``, ``em``, ``i``, ``u``, ``h1``–``h6``, lists, ``br``, ``sub``,
``sup``, and ``a`` with ``http``/``https``/``mailto`` links only), the ``style`` attribute limited to the
typographic properties the canvases honour, no scripts, no event handlers, no comments. The output is a fixed
point: sanitizing it again changes nothing.
"""

from __future__ import annotations

import re

import msgspec
import nh3

from openmaic.courses.format.base import UNSET
from openmaic.courses.format.elements import Element, ShapeElement, Slide, TableElement, TextElement, Whiteboard
from openmaic.courses.format.scenes import Scene, SlideContent
from openmaic.courses.format.stage import Stage

__all__ = ["ALLOWED_STYLES", "ALLOWED_TAGS", "sanitize_element", "sanitize_html", "sanitize_scene", "sanitize_stage"]

ALLOWED_TAGS = frozenset({"p", "span", "strong", "b", "em", "i", "u", "h1", "h2", "h3", "h4", "h5", "h6",
                          "ul", "ol", "li", "br", "sub", "sup", "a"})  # fmt: skip
ALLOWED_STYLES = frozenset({"font-size", "color", "text-align", "line-height", "font-weight", "font-family",
                            "font-style", "text-decoration", "background-color"})  # fmt: skip
_DROPPED_WITH_CONTENT = frozenset({"script", "style", "iframe", "object", "embed", "noscript", "template",
                                   "textarea", "select", "title", "svg", "math"})  # fmt: skip
# A declaration value that could fetch or run something (url(), IE's expression(), escapes that hide either).
_UNSAFE_VALUE = re.compile(r"url\s*\(|expression|javascript:|\\|/\*|<|>|@", re.I)


def _style(declarations: str) -> str | None:
    kept = []
    for declaration in declarations.split(";"):
        name, colon, value = declaration.partition(":")
        name, value = name.strip().lower(), value.strip()
        if colon and name in ALLOWED_STYLES and value and _UNSAFE_VALUE.search(value) is None:
            kept.append(f"{name}:{value}")
    return ";".join(kept) or None


def _attribute(tag: str, attribute: str, value: str) -> str | None:
    return _style(value) if attribute == "style" else value


def sanitize_html(html: str) -> str:
    """``html`` reduced to the format's subset (tags, links and styles above); text is kept and escaped."""
    if "<" not in html and "&" not in html and ">" not in html:
        return html  # plain text: nothing to remove or escape
    return nh3.clean(
        html,
        tags=set(ALLOWED_TAGS),
        clean_content_tags=set(_DROPPED_WITH_CONTENT),
        attributes={"*": {"style"}, "a": {"href", "title"}},
        attribute_filter=_attribute,
        url_schemes={"http", "https", "mailto"},
        filter_style_properties=set(ALLOWED_STYLES),
        link_rel="noopener noreferrer",
        strip_comments=True,
    )


def sanitize_element(element: Element) -> Element:
    """``element`` with its HTML (text content, shape text, table cell text) sanitized."""
    replace = msgspec.structs.replace
    if isinstance(element, TextElement):
        return replace(element, content=sanitize_html(element.content))
    if isinstance(element, ShapeElement) and element.text is not UNSET:
        return replace(element, text=replace(element.text, content=sanitize_html(element.text.content)))
    if isinstance(element, TableElement):
        rows = [[replace(cell, text=sanitize_html(cell.text)) for cell in row] for row in element.data]
        return replace(element, data=rows)
    return element


def _page(page: Slide | Whiteboard) -> Slide | Whiteboard:
    return msgspec.structs.replace(page, elements=[sanitize_element(e) for e in page.elements])


def sanitize_scene(scene: Scene) -> Scene:
    """``scene`` with the HTML of its slide canvas and whiteboards sanitized."""
    changes: dict[str, object] = {}
    if isinstance(scene.content, SlideContent):
        changes["content"] = msgspec.structs.replace(scene.content, canvas=_page(scene.content.canvas))
    if scene.whiteboards is not UNSET:
        changes["whiteboards"] = [_page(page) for page in scene.whiteboards]
    return msgspec.structs.replace(scene, **changes) if changes else scene


def sanitize_stage(stage: Stage) -> Stage:
    """``stage`` with the HTML of its whiteboard pages sanitized."""
    if stage.whiteboard is UNSET:
        return stage
    return msgspec.structs.replace(stage, whiteboard=[_page(page) for page in stage.whiteboard])
