"""The classroom as a PowerPoint file (python-pptx): one 16:9 slide per scene, in course order.

A slide scene's elements are placed at their positions (the 1000 × 562.5 design canvas mapped onto the slide):
text boxes with their text (sizes and bold kept), pictures with their bytes when the asset store has them (else a
labelled box), shapes as rectangles or ellipses (other paths as rectangles) with their fill and text, lines as
connectors, tables, charts as native charts, formulas and code as text, videos as their poster. Every speech of the
scene's script goes into the slide's notes. A quiz scene becomes a slide listing its questions and options (the
answers in the notes); an interactive or PBL scene a slide with its title. The background colour is kept.
"""

from __future__ import annotations

import io
import re
from collections.abc import Mapping
from typing import Any

from pptx import Presentation
from pptx.chart.data import CategoryChartData, XyChartData
from pptx.dml.color import RGBColor
from pptx.enum.chart import XL_CHART_TYPE, XL_LEGEND_POSITION
from pptx.enum.shapes import MSO_CONNECTOR, MSO_SHAPE
from pptx.util import Emu, Pt

from openmaic.exports.document import AssetBytes, actions_of, asset_id_of, canvas_of, paragraphs, plain_text, scenes_of

__all__ = ["build_pptx"]

SLIDE_W = 12_192_000  # 13.333 in: PowerPoint's 16:9
SLIDE_H = 6_858_000
PX = SLIDE_W / 1000  # EMU per design pixel
PT_PER_PX = 960 / 1000  # the slide is 960 pt wide
_PICTURES = {"image/png", "image/jpeg", "image/gif", "image/bmp", "image/tiff"}
_CHARTS = {"bar": XL_CHART_TYPE.COLUMN_CLUSTERED, "column": XL_CHART_TYPE.BAR_CLUSTERED, "line": XL_CHART_TYPE.LINE,
           "area": XL_CHART_TYPE.AREA, "pie": XL_CHART_TYPE.PIE, "ring": XL_CHART_TYPE.DOUGHNUT,
           "radar": XL_CHART_TYPE.RADAR}  # fmt: skip
_HEX = re.compile(r"^#([0-9a-fA-F]{3}|[0-9a-fA-F]{6})$")


def _rgb(color: Any) -> RGBColor | None:
    if not isinstance(color, str) or not _HEX.match(color.strip()):
        return None
    h = color.strip()[1:]
    if len(h) == 3:
        h = "".join(c * 2 for c in h)
    return RGBColor.from_string(h.upper())


def _emu(v: Any) -> Emu:
    return Emu(int(float(v or 0) * PX))


def _box(el: Mapping[str, Any]) -> tuple[Emu, Emu, Emu, Emu]:
    return _emu(el.get("left")), _emu(el.get("top")), _emu(max(1, el.get("width") or 1)), \
        _emu(max(1, el.get("height") or 1))


def _write(frame: Any, markup: str, *, color: Any = None, mono: bool = False, size_px: float | None = None) -> None:
    frame.word_wrap = True
    lines = paragraphs(markup) if not mono else []
    texts = [(p.text, p.size, p.bold) for p in lines] if lines else [(t, size_px, False) for t in markup.split("\n")]
    for i, (text, size, bold) in enumerate(texts):
        para = frame.paragraphs[0] if i == 0 else frame.add_paragraph()
        run = para.add_run()
        run.text = text
        run.font.size = Pt(round((size or size_px or 16) * PT_PER_PX, 1))
        run.font.bold = bold or None
        if mono:
            run.font.name = "Consolas"
        rgb = _rgb(color)
        if rgb is not None:
            run.font.color.rgb = rgb


def _labelled(slide: Any, el: Mapping[str, Any], label: str) -> None:
    shape = slide.shapes.add_shape(MSO_SHAPE.RECTANGLE, *_box(el))
    shape.fill.solid()
    shape.fill.fore_color.rgb = RGBColor(0xE5, 0xE7, 0xEB)
    shape.line.fill.background()
    _write(shape.text_frame, label, color="#374151", size_px=14, mono=True)


def _picture(slide: Any, el: Mapping[str, Any], ref: Any, assets: AssetBytes, label: str) -> None:
    got = assets.get(asset_id_of(ref) or "")
    if got is not None and got[1].split(";")[0] in _PICTURES:
        try:
            slide.shapes.add_picture(io.BytesIO(got[0]), *_box(el))
            return
        except Exception:  # noqa: BLE001 - bytes Pillow cannot read: the labelled box below stands in
            pass
    _labelled(slide, el, label)


def _shape(slide: Any, el: Mapping[str, Any]) -> None:
    path = str(el.get("path") or "")
    kind = MSO_SHAPE.OVAL if re.search(r"[Aa]", path) else MSO_SHAPE.RECTANGLE  # arcs: the circle paths
    shape = slide.shapes.add_shape(kind, *_box(el))
    rgb = _rgb(el.get("fill"))
    if rgb is None and el.get("gradient"):
        rgb = _rgb(((el["gradient"].get("colors") or [{}])[0]).get("color"))
    if rgb is None:
        shape.fill.background()
    else:
        shape.fill.solid()
        shape.fill.fore_color.rgb = rgb
    outline = el.get("outline") or {}
    if outline.get("width"):
        shape.line.width = Pt(outline["width"])
        shape.line.color.rgb = _rgb(outline.get("color")) or RGBColor(0xD1, 0x44, 0x24)
    else:
        shape.line.fill.background()
    text = el.get("text") or {}
    if text.get("content"):
        _write(shape.text_frame, text["content"], color=text.get("defaultColor"))


def _line(slide: Any, el: Mapping[str, Any]) -> None:
    left, top = float(el.get("left") or 0), float(el.get("top") or 0)
    (sx, sy), (ex, ey) = el.get("start") or [0, 0], el.get("end") or [0, 0]
    line = slide.shapes.add_connector(MSO_CONNECTOR.STRAIGHT, _emu(left + sx), _emu(top + sy), _emu(left + ex),
                                      _emu(top + ey))
    line.line.width = Pt(max(0.5, float(el.get("width") or 2) * PT_PER_PX))
    rgb = _rgb(el.get("color"))
    if rgb is not None:
        line.line.color.rgb = rgb


def _table(slide: Any, el: Mapping[str, Any]) -> None:
    rows = [r for r in el.get("data") or [] if isinstance(r, list)]
    cols = max((sum(max(1, c.get("colspan") or 1) for c in r) for r in rows), default=0)
    if not rows or not cols:
        return
    table = slide.shapes.add_table(len(rows), cols, *_box(el)).table
    for r, row in enumerate(rows):
        c = 0
        for cell in row:
            table.cell(r, min(c, cols - 1)).text = plain_text(str(cell.get("text") or ""))
            c += max(1, cell.get("colspan") or 1)


def _chart(slide: Any, el: Mapping[str, Any]) -> None:
    data = el.get("data") or {}
    series = [s for s in data.get("series") or [] if isinstance(s, list)]
    if not series:
        return
    if el.get("chartType") == "scatter":
        xy = XyChartData()
        points = xy.add_series(", ".join(data.get("legends") or []) or "series")
        for x, y in zip(series[0], series[1] if len(series) > 1 else series[0], strict=False):
            points.add_data_point(x, y)
        slide.shapes.add_chart(XL_CHART_TYPE.XY_SCATTER, *_box(el), xy)
        return
    chart_data = CategoryChartData()
    chart_data.categories = [str(label) for label in data.get("labels") or []]
    legends = data.get("legends") or []
    for i, values in enumerate(series[:1] if el.get("chartType") in ("pie", "ring") else series):
        chart_data.add_series(str(legends[i]) if i < len(legends) else f"Series {i + 1}", values)
    chart = slide.shapes.add_chart(_CHARTS.get(el.get("chartType"), XL_CHART_TYPE.COLUMN_CLUSTERED), *_box(el),
                                   chart_data).chart
    chart.has_legend = len(series) > 1 or el.get("chartType") in ("pie", "ring")
    if chart.has_legend:
        chart.legend.position = XL_LEGEND_POSITION.BOTTOM
        chart.legend.include_in_layout = False


def _element(slide: Any, el: Mapping[str, Any], assets: AssetBytes) -> None:
    kind = el.get("type")
    if kind == "text":
        box = slide.shapes.add_textbox(*_box(el))
        _write(box.text_frame, str(el.get("content") or ""), color=el.get("defaultColor"))
    elif kind == "image":
        _picture(slide, el, el.get("src"), assets, "Picture")
    elif kind == "video":
        _picture(slide, el, el.get("poster"), assets, "Video")
    elif kind == "shape":
        _shape(slide, el)
    elif kind == "line":
        _line(slide, el)
    elif kind == "table":
        _table(slide, el)
    elif kind == "chart":
        _chart(slide, el)
    elif kind == "latex":
        box = slide.shapes.add_textbox(*_box(el))
        _write(box.text_frame, str(el.get("latex") or ""), color=el.get("color"), mono=True, size_px=20)
    elif kind == "code":
        box = slide.shapes.add_textbox(*_box(el))
        code = "\n".join(str(line.get("content") or "") for line in el.get("lines") or [])
        _write(box.text_frame, code, mono=True, size_px=float(el.get("fontSize") or 14))


def _title(slide: Any, text: str, top: float = 40) -> None:
    box = slide.shapes.add_textbox(_emu(50), _emu(top), _emu(900), _emu(60))
    _write(box.text_frame, f"<p style=\"font-size: 30px;\"><strong>{_escape(text)}</strong></p>")


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _quiz(slide: Any, scene: Mapping[str, Any]) -> list[str]:
    _title(slide, str(scene.get("title") or ""))
    box = slide.shapes.add_textbox(_emu(50), _emu(110), _emu(900), _emu(420))
    lines, answers = [], []
    content = scene.get("content") if isinstance(scene.get("content"), dict) else {}
    questions = [q for q in content.get("questions") or [] if isinstance(q, dict)]
    for i, q in enumerate(questions, start=1):
        lines.append(f"<p style=\"font-size: 18px;\"><strong>{i}. {_escape(str(q.get('question') or ''))}</strong></p>")
        for o in q.get("options") or []:
            lines.append(f"<p style=\"font-size: 16px;\">{_escape(str(o.get('value')))}. {_escape(str(o.get('label')))}</p>")
        if q.get("answer"):
            answers.append(f"{i}. {', '.join(map(str, q['answer']))}")
        if q.get("analysis"):
            answers.append(f"{i}. {q['analysis']}")
    _write(box.text_frame, "".join(lines))
    return answers


def build_pptx(classroom: Mapping[str, Any], assets: AssetBytes) -> bytes:
    """The .pptx bytes of ``classroom`` (see the module docstring), with ``assets`` for its pictures."""
    prs = Presentation()
    prs.slide_width, prs.slide_height = Emu(SLIDE_W), Emu(SLIDE_H)
    blank = prs.slide_layouts[6]
    stage = classroom.get("stage") or {}
    prs.core_properties.title = str(stage.get("name") or classroom.get("title") or "")[:255]
    for scene in scenes_of(classroom):
        slide = prs.slides.add_slide(blank)
        notes = [str(a.get("text") or "") for a in actions_of(scene) if a.get("type") == "speech"]
        canvas = canvas_of(scene)
        if scene.get("type") == "slide" and canvas is not None:
            background = canvas.get("background") or {}
            rgb = _rgb(background.get("color") if background.get("type") == "solid" else
                       ((background.get("gradient") or {}).get("colors") or [{}])[0].get("color"))
            if rgb is not None:
                slide.background.fill.solid()
                slide.background.fill.fore_color.rgb = rgb
            for el in canvas.get("elements") or []:
                if isinstance(el, dict):
                    _element(slide, el, assets)
        elif scene.get("type") == "quiz":
            notes += _quiz(slide, scene)
        else:
            _title(slide, str(scene.get("title") or ""), top=240)
        if notes:
            slide.notes_slide.notes_text_frame.text = "\n\n".join(n for n in notes if n)
    out = io.BytesIO()
    prs.save(out)
    return out.getvalue()
