"""Slide elements with the fields of OpenMAIC's canvas (COURSE-FORMAT §3.3), sized the way the canvas draws them.

Text boxes take their height from the line count at line-height 1.5 with 10 px padding; a block of text is fitted
to the room it has by trying smaller font sizes and, as a last resort, dropping its last paragraphs. Lines carry
no height or rotate: ``width`` is the stroke and ``start``/``end`` are explicit.
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from typing import Any

from openmaic.models.demo_course.language import text_height, wrap

WIDTH, HEIGHT, MARGIN = 1000.0, 562.5, 50.0
RIGHT, BOTTOM = WIDTH - MARGIN, HEIGHT - MARGIN
FONT = "Microsoft YaHei"
RECT = "M 0 0 L 1 0 L 1 1 L 0 1 Z"
CIRCLE = "M 1 0.5 A 0.5 0.5 0 1 1 0 0.5 A 0.5 0.5 0 1 1 1 0.5 Z"


@dataclass(frozen=True)
class Palette:
    """A course's colours: the primary accent, a second accent, a light tint, the text colour and the page."""

    primary: str
    secondary: str
    tint: str
    ink: str
    page: str
    page2: str


PALETTES = (
    Palette("#2563eb", "#f59e0b", "#e8f0fe", "#1e293b", "#f8fafc", "#e0ecff"),
    Palette("#059669", "#8b5cf6", "#e7f7f0", "#1f2937", "#f7fbf9", "#d9f2e6"),
    Palette("#7c3aed", "#ec4899", "#f1ebfe", "#1e1b4b", "#faf8ff", "#ebe3fd"),
    Palette("#ea580c", "#0ea5e9", "#fff1e6", "#292524", "#fffaf5", "#ffe8d4"),
)


def paragraphs_html(paragraphs: list[str], size: int, *, bold: bool = False, color: str | None = None,
                    align: str | None = None) -> str:  # fmt: skip
    """One ``<p>`` per paragraph with an inline font size (the HTML subset of §3.3)."""
    style = f"font-size: {size}px;"
    if color:
        style += f" color: {color};"
    if align:
        style += f" text-align: {align};"
    out = []
    for p in paragraphs:
        body = html.escape(p, quote=False)
        out.append(f'<p style="{style}">{"<strong>" + body + "</strong>" if bold else body}</p>')
    return "".join(out)


def measure(paragraphs: list[str], size: int, width: float) -> float:
    """The height of a text box ``width`` wide holding ``paragraphs`` at ``size`` px."""
    lines = sum(len(wrap(p, size, (width - 20) * 0.92)) for p in paragraphs)
    return text_height(lines, size, len(paragraphs))


def fit(paragraphs: list[str], width: float, room: float, sizes: tuple[int, ...]) -> tuple[list[str], int, float]:
    """The paragraphs (maybe fewer), font size and height that fit ``room``: the largest size that fits all."""
    paragraphs = [p for p in paragraphs if p.strip()] or [" "]
    while True:
        for size in sizes:
            h = measure(paragraphs, size, width)
            if h <= room:
                return paragraphs, size, h
        if len(paragraphs) == 1:
            size = sizes[-1]
            text = paragraphs[0]
            while len(text) > 4 and measure([text + "…"], size, width) > room:
                text = text[: max(4, int(len(text) * 0.8))]
            return [text.rstrip() + "…"], size, min(room, measure([text + "…"], size, width))
        paragraphs = paragraphs[:-1]


def text(eid: str, left: float, top: float, width: float, height: float, content: str, color: str,
         **extra: Any) -> dict[str, Any]:  # fmt: skip
    """A text element."""
    return {
        "id": eid, "type": "text", "left": _n(left), "top": _n(top), "width": _n(width), "height": _n(height),
        "rotate": 0, "content": content, "defaultFontName": FONT, "defaultColor": color, "lineHeight": 1.5,
        "paragraphSpace": 5, **extra,
    }  # fmt: skip


def text_block(eid: str, left: float, top: float, width: float, room: float, paragraphs: list[str], color: str,
               sizes: tuple[int, ...], *, bold: bool = False, align: str | None = None) -> dict[str, Any]:  # fmt: skip
    """A text element fitted into ``room`` px of height."""
    paragraphs, size, height = fit(paragraphs, width, room, sizes)
    return text(eid, left, top, width, height, paragraphs_html(paragraphs, size, bold=bold, align=align), color)


def shape(eid: str, left: float, top: float, width: float, height: float, fill: str, *, path: str = RECT,
          label: str | None = None, label_color: str = "#ffffff", outline: dict[str, Any] | None = None,
          **extra: Any) -> dict[str, Any]:  # fmt: skip
    """A shape (a rectangle by default) with an optional centred label."""
    el: dict[str, Any] = {
        "id": eid, "type": "shape", "left": _n(left), "top": _n(top), "width": _n(width), "height": _n(height),
        "rotate": 0, "viewBox": [1, 1], "path": path, "fill": fill, "fixedRatio": False, **extra,
    }  # fmt: skip
    if outline:
        el["outline"] = outline
    if label is not None:
        el["text"] = {"content": label, "defaultFontName": FONT, "defaultColor": label_color, "align": "middle",
                      "lineHeight": 1.4}  # fmt: skip
    return el


def line(eid: str, x1: float, y1: float, x2: float, y2: float, color: str, *, arrow: bool = True,
         stroke: int = 3, style: str = "solid") -> dict[str, Any]:  # fmt: skip
    """A straight line from (x1, y1) to (x2, y2): origin at the smaller corner, explicit ends, no height."""
    left, top = min(x1, x2), min(y1, y2)
    return {
        "id": eid, "type": "line", "left": _n(left), "top": _n(top), "width": stroke,
        "start": [_n(x1 - left), _n(y1 - top)], "end": [_n(x2 - left), _n(y2 - top)], "style": style,
        "color": color, "points": ["", "arrow" if arrow else ""],
    }  # fmt: skip


def image(eid: str, left: float, top: float, width: float, height: float, src: str) -> dict[str, Any]:
    """A picture whose box has the picture's aspect ratio."""
    return {"id": eid, "type": "image", "left": _n(left), "top": _n(top), "width": _n(width),
            "height": _n(height), "rotate": 0, "src": src, "fixedRatio": True, "radius": 8}  # fmt: skip


def video(eid: str, left: float, top: float, width: float, height: float, ref: str) -> dict[str, Any]:
    """A generated video, named by its media reference."""
    return {"id": eid, "type": "video", "left": _n(left), "top": _n(top), "width": _n(width),
            "height": _n(height), "rotate": 0, "autoplay": False, "mediaRef": ref}  # fmt: skip


def latex(eid: str, left: float, top: float, width: float, height: float, tex: str, color: str) -> dict[str, Any]:
    """A formula: ``latex`` only (the pipeline renders its ``html``)."""
    return {"id": eid, "type": "latex", "left": _n(left), "top": _n(top), "width": _n(width),
            "height": _n(height), "rotate": 0, "latex": tex, "color": color, "align": "center"}  # fmt: skip


def chart(eid: str, left: float, top: float, width: float, height: float, kind: str, labels: list[str],
          legend: str, values: list[float], palette: Palette) -> dict[str, Any]:  # fmt: skip
    """A one-series chart: one value per label."""
    return {
        "id": eid, "type": "chart", "left": _n(left), "top": _n(top), "width": _n(width), "height": _n(height),
        "rotate": 0, "chartType": kind, "data": {"labels": labels, "legends": [legend], "series": [values]},
        "themeColors": [palette.primary, palette.secondary], "textColor": palette.ink,
        **({"options": {"lineSmooth": True}} if kind == "line" else {}),
    }  # fmt: skip


def table(eid: str, left: float, top: float, width: float, rows: list[list[str]], palette: Palette,
          col_widths: list[float], row_height: float) -> dict[str, Any]:  # fmt: skip
    """A table whose first row is a header; cell text is escaped (it is inserted as HTML)."""
    data = [
        [
            {"id": f"{eid}_r{r}c{c}", "colspan": 1, "rowspan": 1, "text": html.escape(cell, quote=False),
             "style": {"fontsize": "16px" if r else "17px", "bold": r == 0, "align": "left"}}
            for c, cell in enumerate(row)
        ]
        for r, row in enumerate(rows)
    ]  # fmt: skip
    return {
        "id": eid, "type": "table", "left": _n(left), "top": _n(top), "width": _n(width),
        "height": _n(row_height * len(rows)), "rotate": 0,
        "outline": {"width": 1, "style": "solid", "color": "#d0d7e2"}, "colWidths": col_widths,
        "cellMinHeight": _n(row_height), "data": data,
        "theme": {"color": palette.primary, "rowHeader": True, "rowFooter": False, "colHeader": False,
                  "colFooter": False},
    }  # fmt: skip


def _n(value: float) -> float | int:
    """A coordinate as an int when whole (JSON stays tidy), else rounded to one decimal; never negative zero."""
    value = round(float(value), 1) + 0.0
    return int(value) if value.is_integer() else value


def box_of(el: dict[str, Any]) -> tuple[float, float, float, float]:
    """An element's box (left, top, right, bottom) on the canvas; a line's from its two ends."""
    if el["type"] == "line":
        xs = [el["left"] + el["start"][0], el["left"] + el["end"][0]]
        ys = [el["top"] + el["start"][1], el["top"] + el["end"][1]]
        return min(xs), min(ys), max(xs), max(ys)
    return el["left"], el["top"], el["left"] + el["width"], el["top"] + el["height"]
