"""Reading the classroom document for the exports: which assets it names, its scenes in order, and the plain text of
the HTML its text elements hold."""

from __future__ import annotations

import html
import re
from collections.abc import Iterator, Mapping
from html.parser import HTMLParser
from typing import Any

__all__ = ["AssetBytes", "Paragraph", "actions_of", "asset_id_of", "canvas_of", "paragraphs", "plain_text",
           "referenced_assets", "scenes_of"]

AssetBytes = dict[str, tuple[bytes, str]]
"""asset id -> (bytes, media type)."""

_ASSET_URL = re.compile(r"^/api/assets/(asset_[0-9a-f]{32})$")
_ASSET_ID = re.compile(r"^asset_[0-9a-f]{32}$")


def asset_id_of(ref: Any) -> str | None:
    """The asset id a media slot names (``/api/assets/<id>`` or the bare id), else None."""
    if not isinstance(ref, str):
        return None
    m = _ASSET_URL.match(ref)
    if m:
        return m.group(1)
    return ref if _ASSET_ID.match(ref) else None


def scenes_of(classroom: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The classroom's written scenes, in course order."""
    return sorted((s for s in classroom.get("scenes") or [] if isinstance(s, dict)), key=lambda s: s.get("order", 0))


def actions_of(scene: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The scene's script (its actions that are objects; anything else in a malformed document is passed over)."""
    actions = scene.get("actions")
    return [a for a in actions if isinstance(a, dict)] if isinstance(actions, list) else []


def canvas_of(scene: Mapping[str, Any]) -> dict[str, Any] | None:
    """A slide scene's canvas, or None."""
    content = scene.get("content")
    canvas = content.get("canvas") if isinstance(content, dict) else None
    return canvas if isinstance(canvas, dict) else None


def _elements(scene: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    elements = (canvas_of(scene) or {}).get("elements")
    yield from (el for el in elements if isinstance(el, dict)) if isinstance(elements, list) else ()


def referenced_assets(classroom: Mapping[str, Any], *, audio: bool = True) -> list[str]:
    """Every asset id the slides' media slots name (pictures, videos, posters, backgrounds, audio elements) and,
    with ``audio``, every speech's narration, each once, in document order."""
    seen: dict[str, None] = {}

    def add(ref: Any) -> None:
        asset = asset_id_of(ref)
        if asset:
            seen.setdefault(asset, None)

    for scene in scenes_of(classroom):
        canvas = canvas_of(scene) or {}
        add(((canvas.get("background") or {}).get("image") or {}).get("src"))
        for el in _elements(scene):
            if el.get("type") in ("image", "video", "audio"):
                add(el.get("src"))
            if el.get("type") == "video":
                add(el.get("poster"))
        if audio:
            for action in actions_of(scene):
                if action.get("type") == "speech":
                    add(action.get("audioId"))
    return list(seen)


class Paragraph:
    """One line of text: its text, its font size in design px (None: the box's default) and whether it is bold."""

    def __init__(self) -> None:
        self.text = ""
        self.size: float | None = None
        self.bold = False


_BLOCKS = {"p", "div", "li", "h1", "h2", "h3", "h4", "h5", "h6", "br", "tr"}
_SIZE = re.compile(r"font-size:\s*([\d.]+)px")


class _Lines(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.lines: list[Paragraph] = [Paragraph()]
        self.bold = 0

    def _new(self) -> None:
        if self.lines[-1].text.strip():
            self.lines.append(Paragraph())

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _BLOCKS:
            self._new()
        if tag in ("strong", "b") or tag.startswith("h") and tag[1:].isdigit():
            self.bold += 1
        style = dict(attrs).get("style") or ""
        m = _SIZE.search(style)
        if m and self.lines[-1].size is None:
            self.lines[-1].size = float(m.group(1))
        if tag == "li":
            self.lines[-1].text += "• "

    def handle_endtag(self, tag: str) -> None:
        if tag in ("strong", "b") or tag.startswith("h") and tag[1:].isdigit():
            self.bold = max(0, self.bold - 1)
        if tag in _BLOCKS:
            self._new()

    def handle_data(self, data: str) -> None:
        if data.strip() and self.bold:
            self.lines[-1].bold = True
        self.lines[-1].text += re.sub(r"\s+", " ", data)


def paragraphs(markup: str) -> list[Paragraph]:
    """The lines of a text element's HTML (one per block), without empty ones."""
    parser = _Lines()
    parser.feed(markup or "")
    parser.close()
    out = []
    for p in parser.lines:
        p.text = p.text.strip()
        if p.text:
            out.append(p)
    return out


def plain_text(markup: str) -> str:
    """The text of an HTML fragment, one line per block."""
    return "\n".join(p.text for p in paragraphs(markup)) or html.unescape(re.sub(r"<[^>]+>", "", markup or "")).strip()
