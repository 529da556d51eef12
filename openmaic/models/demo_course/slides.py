"""The slide answer: ``{background, elements, remark}`` for a ``slide`` brief, laid out by a small layout engine.

The layout follows the scene's position and content: the first scene is a title slide; a scene with a generated
picture or video puts it beside its text; a ``[Chart]`` or ``[Table]`` key point asks for a chart (when the
subject has numbers to plot) or a table; a formula scene gets a ``latex`` element; steps and timelines are
shapes joined by arrows; mistakes and examples are two columns; the last scene is a grid of summary cards; any
other slide is a card of key points. Everything stays inside the 50 px margin of the 1000 × 562.5 canvas. The
background is a tint of the course's palette, chosen from the requirement so every slide of a course matches.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from openmaic.models.demo_course import canvas as c
from openmaic.models.demo_course.brief import outline_titles, scene_of, seed, strings, text_of
from openmaic.models.demo_course.knowledge import Model, field_of, find_model, sample
from openmaic.models.demo_course.language import EN, ZH, audience, audience_name, course_language, pick
from openmaic.models.demo_course.subjects import Subject, find_subject, pick_lang
from openmaic.models.demo_course.topic import topic_of

_MARKER = re.compile(r"^\s*\[(chart|table|formula)\]\s*", re.I)
_STEP_PREFIX = re.compile(r"^\s*(?:step\s*\d+\s*[:.)-]\s*|第[一二三四五六七八九十\d]+步[：:]\s*|\d+[.)、]\s*)", re.I)
_RATIOS = {"16:9": 9 / 16, "4:3": 3 / 4, "1:1": 1.0, "9:16": 16 / 9}


@dataclass
class Ctx:
    """What a layout needs: the scene, its language and palette, the media to place and the course's model."""

    lang: str
    title: str
    description: str  # an instruction to the writer, never shown as it is
    audience: str
    points: list[str]
    markers: dict[str, str]
    palette: c.Palette
    images: list[dict[str, Any]]
    videos: list[dict[str, Any]]
    model: Model | None
    subject: Subject | None
    order: int
    total: int
    field: str


def _context(brief: dict[str, Any]) -> Ctx:
    scene = scene_of(brief)
    lang = course_language(brief)
    requirement = text_of(brief.get("requirement"))
    points, markers = [], {}
    for p in strings(scene.get("keyPoints")):
        m = _MARKER.match(p)
        if m:
            markers[m.group(1).lower()] = p[m.end() :]
            p = p[m.end() :]
        points.append(p)
    media = [m for m in brief.get("media") or [] if isinstance(m, dict) and text_of(m.get("ref"))]
    titles = outline_titles(brief)
    order = scene.get("order") if isinstance(scene.get("order"), int) else 0
    title = text_of(scene.get("title"), pick(lang, "Overview", "概览"))
    if not order and title in titles:
        order = titles.index(title) + 1
    topic = topic_of(requirement) or title
    return Ctx(
        lang=lang,
        title=title,
        description=text_of(scene.get("description")),
        audience=audience_name(lang, audience(requirement)),
        points=points or [text_of(scene.get("description"), title)],
        markers=markers,
        palette=c.PALETTES[seed("palette", requirement or text_of(brief.get("courseTitle"))) % len(c.PALETTES)],
        images=[m for m in media if m.get("type") == "image"],
        videos=[m for m in media if m.get("type") == "video"],
        model=find_model(topic, requirement, title),
        subject=find_subject(topic, requirement),
        order=order or 1,
        total=len(titles) or max(order, 1),
        field=field_of(topic, requirement),
    )


def _has(ctx: Ctx, *words: str) -> bool:
    text = (ctx.title + " " + ctx.description).lower()
    return any(w in text for w in words)


def choose_layout(ctx: Ctx) -> str:
    """The layout for a scene, by position first, then by what it holds."""
    if ctx.order == 1:
        return "title"
    if ctx.videos:
        return "video"
    if ctx.images:
        return "picture"
    if "chart" in ctx.markers:
        return "chart" if ctx.model is not None else "table"
    if "table" in ctx.markers:
        return "table"
    if ctx.model is not None and ("formula" in ctx.markers or _has(ctx, "formula", "equation", "公式", "方程")):
        return "formula"
    if _has(ctx, "timeline", "history", "时间线", "历程", "年表"):
        return "timeline"
    if ctx.order == ctx.total or _has(ctx, "summary", "recap", "review", "总结", "回顾", "小结"):
        return "summary"
    if _has(ctx, "step by step", "steps", "process", "procedure", "步骤", "过程", "流程"):
        return "steps"
    if _has(ctx, "mistake", "misconception", "myth", "compar", " vs", "误区", "误解", "对比", "比较", "区别"):
        return "columns"
    return ("columns", "card")[seed("layout", ctx.title) % 2]


# --- layouts ---------------------------------------------------------------------------------------------


def _header(ctx: Ctx) -> tuple[list[dict[str, Any]], float]:
    """The title and a short accent rule under it; returns the elements and where content may start."""
    title = c.text_block("text_title", c.MARGIN, c.MARGIN, 900, 64, [ctx.title], ctx.palette.ink, (28, 26, 24),
                         bold=True)  # fmt: skip
    rule_top = c.MARGIN + title["height"] + 4
    rule = c.shape("shape_rule", c.MARGIN + 10, rule_top, 80, 4, ctx.palette.primary)
    return [title, rule], rule_top + 22


def _title_layout(ctx: Ctx) -> list[dict[str, Any]]:
    p = ctx.palette
    els: list[dict[str, Any]] = [c.shape("shape_band", c.MARGIN, 150, 10, 190, p.primary)]
    width = 875 if not (ctx.images or ctx.videos) else 440
    title = c.text_block("text_title", 75, 150, width, 130, [ctx.title], p.ink, (40, 36, 32, 28), bold=True)
    els.append(title)
    sub_top = 150 + title["height"] + 10
    sub = c.text_block("text_subtitle", 75, sub_top, width, c.BOTTOM - 60 - sub_top, [_subtitle(ctx)],
                       p.primary, (22, 20, 18))  # fmt: skip
    els.append(sub)
    if ctx.videos:
        els.append(_video(ctx.videos[0], 540, 130, 410, 300))
    elif ctx.images:
        els.append(_picture(ctx, ctx.images[0], 540, 130, 410, 300))
    tags = " · ".join(ctx.points[:3]) if ctx.lang == EN else "　·　".join(ctx.points[:3])
    els.append(c.text_block("text_tags", 75, c.BOTTOM - 46, 875, 46, [tags], "#64748b", (16, 14)))
    return els


def _subtitle(ctx: Ctx) -> str:
    if ctx.order > 1:  # a title slide in the middle of a course: its first point
        return ctx.points[0]
    return pick(ctx.lang, f"A guided course for {ctx.audience}, one idea at a time",
                f"面向{ctx.audience}的系统课程，一次讲透一个要点")  # fmt: skip


def _picture(ctx: Ctx, media: dict[str, Any], left: float, top: float, width: float, room: float) -> dict[str, Any]:
    ratio = _RATIOS.get(str(media.get("aspectRatio")), 9 / 16)
    w, h = width, width * ratio
    if h > room:
        h, w = room, room / ratio
    return c.image("image_main", left + (width - w) / 2, top + (room - h) / 2, w, h, str(media["ref"]))


def _bullets(ctx: Ctx, left: float, top: float, width: float, room: float, eid: str = "text_points") -> dict[str, Any]:
    bullet = "• " if ctx.lang == EN else "● "
    return c.text_block(eid, left, top, width, room, [bullet + p for p in ctx.points[:5]], ctx.palette.ink,
                        (22, 20, 18, 16, 14))  # fmt: skip


def _picture_layout(ctx: Ctx) -> list[dict[str, Any]]:
    els, top = _header(ctx)
    room = c.BOTTOM - top
    els.append(c.shape("shape_card", c.MARGIN, top, 440, room, ctx.palette.tint))
    text = _bullets(ctx, c.MARGIN + 20, top + 20, 400, room - 40)
    text["top"] = c._n(top + (room - text["height"]) / 2)
    els.append(text)
    els.append(_picture(ctx, ctx.images[0], 510, top, 440, room))
    return els


def _video_layout(ctx: Ctx) -> list[dict[str, Any]]:
    els, top = _header(ctx)
    room = c.BOTTOM - top
    text = _bullets(ctx, c.MARGIN, top, 400, room)
    els.append(text)
    els.append(_video(ctx.videos[0], c.RIGHT - 470, top, 470, room))
    return els


def _video(media: dict[str, Any], left: float, top: float, width: float, room: float) -> dict[str, Any]:
    ratio = _RATIOS.get(str(media.get("aspectRatio")), 9 / 16)
    w, h = width, width * ratio
    if h > room:
        h, w = room, room / ratio
    return c.video("video_main", left + (width - w) / 2, top + (room - h) / 2, w, h, str(media["ref"]))


def _card_layout(ctx: Ctx) -> list[dict[str, Any]]:
    els, top = _header(ctx)
    room = c.BOTTOM - top
    p = ctx.palette
    els.append(c.shape("shape_card", c.MARGIN, top, 900, room, p.tint))
    els.append(c.shape("shape_accent", c.MARGIN, top, 8, room, p.primary))
    text = _bullets(ctx, c.MARGIN + 40, top + 20, 840, room - 40)
    text["top"] = c._n(top + (room - text["height"]) / 2)
    els.append(text)
    return els


def _columns_layout(ctx: Ctx) -> list[dict[str, Any]]:
    els, top = _header(ctx)
    room = c.BOTTOM - top
    p = ctx.palette
    wrong = _has(ctx, "mistake", "misconception", "myth", "误区", "误解")
    heads = (
        (pick(ctx.lang, "Watch out", "容易出错"), pick(ctx.lang, "Think instead", "正确思路"))
        if wrong
        else (pick(ctx.lang, "Key points", "要点"), pick(ctx.lang, "Remember", "记住"))
    )
    half = (len(ctx.points) + 1) // 2
    tip = pick(ctx.lang, "Test each point on an example of your own.", "用自己的例子检验每个要点。")
    columns = (ctx.points[:half], ctx.points[half:] or [tip])
    for i, (head, body) in enumerate(zip(heads, columns, strict=True)):
        left = c.MARGIN + i * 460
        color = p.secondary if (wrong and i == 0) else p.primary
        els.append(c.shape(f"shape_col_{i + 1}", left, top, 440, room, p.tint))
        els.append(c.shape(f"shape_head_{i + 1}", left, top, 440, 50, color,
                           label=c.paragraphs_html([head], 20, bold=True)))  # fmt: skip
        mark = "• " if ctx.lang == EN else "● "
        els.append(c.text_block(f"text_col_{i + 1}", left + 20, top + 66, 400, room - 82,
                                [mark + b for b in body], p.ink, (20, 18, 16, 14)))  # fmt: skip
    return els


def _formula_layout(ctx: Ctx) -> list[dict[str, Any]]:
    assert ctx.model is not None
    els, top = _header(ctx)
    p = ctx.palette
    els.append(c.shape("shape_formula_card", c.MARGIN, top, 900, 130, p.tint))
    els.append(c.latex("latex_formula", 150, top + 15, 700, 100, ctx.model.latex, p.ink))
    legend = [f"{v.label[1] if ctx.lang == ZH else v.label[0]}: {v.low:g}–{v.high:g} {v.unit}".strip()
              for v in ctx.model.variables]  # fmt: skip
    result = ctx.model.result[1] if ctx.lang == ZH else ctx.model.result[0]
    legend.append(f"{result} ({ctx.model.unit})" if ctx.model.unit else result)
    low = top + 150
    room = c.BOTTOM - low
    els.append(c.text_block("text_symbols", c.MARGIN, low, 420, room,
                            [pick(ctx.lang, "Quantities", "涉及的量")] + ["· " + s for s in legend], p.ink,
                            (18, 16, 14)))  # fmt: skip
    els.append(_bullets(ctx, 510, low, 440, room))
    return els


def _chart_layout(ctx: Ctx) -> list[dict[str, Any]]:
    assert ctx.model is not None
    els, top = _header(ctx)
    room = c.BOTTOM - top
    var, xs, ys = sample(ctx.model)
    unit = f" {var.unit}" if var.unit else ""
    labels = [f"{x:g}{unit}" for x in xs]
    legend = ctx.model.result[1] if ctx.lang == ZH else ctx.model.result[0]
    if ctx.model.unit:
        legend += f" ({ctx.model.unit})"
    kind = ("line", "bar")[seed("chart", ctx.title) % 2]
    els.append(c.chart("chart_main", c.MARGIN, top, 560, room, kind, labels, legend, ys, ctx.palette))
    points = ctx.points[:4]
    els.append(c.shape("shape_card", 630, top, 320, room, ctx.palette.tint))
    mark = "• " if ctx.lang == EN else "● "
    els.append(c.text_block("text_points", 650, top + 20, 280, room - 40, [mark + p for p in points],
                            ctx.palette.ink, (18, 16, 14)))  # fmt: skip
    return els


def _table_layout(ctx: Ctx) -> list[dict[str, Any]]:
    els, top = _header(ctx)
    rows_src = [p for p in ctx.points if p != ctx.markers.get("table") and p != ctx.markers.get("chart")]
    rows_src = (rows_src or ctx.points)[:4]
    focus = [
        pick(ctx.lang, "Its role in the whole", "在整体中的作用"),
        pick(ctx.lang, "What sets it apart", "与其他部分的不同"),
        pick(ctx.lang, "When it matters most", "最关键的场合"),
        pick(ctx.lang, "A quick check", "快速自查"),
    ]
    rows = [[pick(ctx.lang, "Point", "要点"), pick(ctx.lang, "What to look for", "关注点")]]
    rows += [[p, focus[i % len(focus)]] for i, p in enumerate(rows_src)]
    if ctx.subject is not None and ctx.subject.ideas and ctx.subject.examples:
        # A subject the demo knows: each key idea beside an example of it.
        zh = ctx.lang == ZH
        rows = [[pick(ctx.lang, "Key idea", "核心概念"), pick(ctx.lang, "Example", "例子")]]
        rows += [list(pair) for pair in zip(pick_lang(ctx.subject.ideas, zh), pick_lang(ctx.subject.examples, zh),
                                            strict=False)]  # fmt: skip
    caption = ctx.markers.get("table") or ctx.markers.get("chart") or ctx.title
    cap = c.text_block("text_caption", c.MARGIN, top, 900, 50, [caption], ctx.palette.primary, (18, 16, 14))
    els.append(cap)
    table_top = top + cap["height"] + 10
    row_h = min(56.0, (c.BOTTOM - table_top) / len(rows))
    els.append(c.table("table_main", c.MARGIN, table_top, 900, rows, ctx.palette, [0.55, 0.45], row_h))
    return els


def _flow(ctx: Ctx, labels: list[str], *, timeline: bool) -> list[dict[str, Any]]:
    els, top = _header(ctx)
    p = ctx.palette
    n = max(1, min(5, len(labels)))
    labels = labels[:n]
    gap = 60.0
    width = (900 - gap * (n - 1)) / n
    room = c.BOTTOM - top
    if timeline:
        axis_y = top + room / 2
        # The arrow head is three strokes long and centred on the end: the axis stops short of the margin.
        els.append(c.line("line_axis", c.MARGIN, axis_y, c.RIGHT - 12, axis_y, p.primary, arrow=True, stroke=4))
        for i, label in enumerate(labels):
            cx = c.MARGIN + width / 2 + i * (width + gap)
            els.append(c.shape(f"shape_dot_{i + 1}", cx - 12, axis_y - 12, 24, 24,
                               p.secondary if i % 2 else p.primary, path=c.CIRCLE))  # fmt: skip
            block = c.text_block(f"text_event_{i + 1}", cx - width / 2 - 20, 0, width + 40, axis_y - top - 30,
                                 [label], p.ink, (18, 16, 14), align="center")  # fmt: skip
            block["top"] = c._n(axis_y - 24 - block["height"]) if i % 2 == 0 else c._n(axis_y + 24)
            block["left"] = c._n(max(c.MARGIN, min(c.RIGHT - block["width"], block["left"])))
            els.append(block)
        return els
    box_h = max(c.fit([lab], width - 10, 200, (18, 16, 14))[2] for lab in labels) + 44
    box_top = top + max(0.0, (room - box_h - 70) / 2)
    for i, label in enumerate(labels):
        left = c.MARGIN + i * (width + gap)
        _, size, _ = c.fit([label], width - 10, box_h - 44, (18, 16, 14))
        content = c.paragraphs_html([str(i + 1)], 22, bold=True) + c.paragraphs_html([label], size)
        els.append(c.shape(f"shape_step_{i + 1}", left, box_top, width, box_h,
                           p.primary if i % 2 == 0 else p.secondary, label=content))  # fmt: skip
        if i:
            els.append(c.line(f"line_arrow_{i}", left - gap + 10, box_top + box_h / 2, left - 10,
                              box_top + box_h / 2, p.ink))  # fmt: skip
    note_top = box_top + box_h + 20
    note = pick(ctx.lang, "Each step hands its result to the next.", "每一步的结果都是下一步的起点。")
    if c.BOTTOM - note_top >= 46:
        els.append(c.text_block("text_note", c.MARGIN, note_top, 900, c.BOTTOM - note_top, [note],
                                "#475569", (18, 16, 14), align="center"))  # fmt: skip
    return els


def _summary_layout(ctx: Ctx) -> list[dict[str, Any]]:
    els, top = _header(ctx)
    p = ctx.palette
    points = ctx.points[:4]
    n = len(points)
    cols = 2 if n == 4 else n
    rows = 2 if n == 4 else 1
    gap = 20.0
    # Whole pixels, rounded down, so rounding never pushes the last card past the margin.
    w = int((900 - gap * (cols - 1)) / cols)
    h = int((c.BOTTOM - top - gap * (rows - 1)) / rows)
    for i, point in enumerate(points):
        left = c.MARGIN + (i % cols) * (w + gap)
        tp = top + (i // cols) * (h + gap)
        els.append(c.shape(f"shape_card_{i + 1}", left, tp, w, h, p.tint))
        block = c.text_block(f"text_card_{i + 1}", left + 60, tp + 12, w - 76, h - 24, [point], p.ink,
                             (22, 20, 18, 16, 14))  # fmt: skip
        # Badge and text sit together in the middle of the card.
        block["top"] = c._n(tp + (h - block["height"]) / 2)
        els.append(c.shape(f"shape_badge_{i + 1}", left + 16, block["top"] + 5, 36, 36, p.primary, path=c.CIRCLE,
                           label=c.paragraphs_html([str(i + 1)], 18, bold=True)))  # fmt: skip
        els.append(block)
    return els


def _background(ctx: Ctx, layout: str) -> dict[str, Any]:
    p = ctx.palette
    if layout in ("title", "summary"):
        return {"type": "gradient", "gradient": {"type": "linear", "rotate": 135,
                "colors": [{"pos": 0, "color": p.page}, {"pos": 100, "color": p.page2}]}}  # fmt: skip
    return {"type": "solid", "color": p.page}


_ZH_LAYOUTS = {
    "title": "标题页", "video": "视频", "picture": "图文", "chart": "图表", "table": "表格", "formula": "公式",
    "steps": "步骤", "timeline": "时间线", "summary": "总结卡片", "columns": "双栏", "card": "要点卡片",
}  # fmt: skip


def slide(brief: dict[str, Any]) -> dict[str, Any]:
    """The slide answer for a ``slide`` brief."""
    ctx = _context(brief)
    layout = choose_layout(ctx)
    if layout == "title":
        elements = _title_layout(ctx)
    elif layout == "video":
        elements = _video_layout(ctx)
    elif layout == "picture":
        elements = _picture_layout(ctx)
    elif layout == "chart":
        elements = _chart_layout(ctx)
    elif layout == "table":
        elements = _table_layout(ctx)
    elif layout == "formula":
        elements = _formula_layout(ctx)
    elif layout in ("steps", "timeline"):
        elements = _flow(ctx, [_STEP_PREFIX.sub("", p) or p for p in ctx.points], timeline=layout == "timeline")
    elif layout == "summary":
        elements = _summary_layout(ctx)
    elif layout == "columns":
        elements = _columns_layout(ctx)
    else:
        elements = _card_layout(ctx)
    remark = pick(ctx.lang, f"Layout: {layout}. {ctx.description}", f"版式：{_ZH_LAYOUTS[layout]}。{ctx.description}")
    return {"background": _background(ctx, layout), "elements": elements, "remark": remark}
