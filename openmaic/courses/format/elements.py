"""Slide elements and the slide canvas (OpenMAIC ``@openmaic/dsl`` ``slides.ts``; format §3.2–§3.3).

Every element is told apart by ``type``. All but ``line`` carry the box ``left``/``top``/``width``/``height``
and ``rotate``; a line has neither ``height`` nor ``rotate`` (its ``width`` is the stroke thickness).
"""

from __future__ import annotations

from typing import Literal, TypeAlias

from openmaic.courses.format.base import UNSET, Num, Opt, Struct, TaggedStruct

__all__ = [
    "AudioElement", "Background", "BackgroundImage", "ChartData", "ChartElement", "ChartOptions", "CodeElement",
    "CodeLine", "ELEMENT_TYPES", "Element", "ElementLink", "ElementOutline", "Gradient", "GradientColor",
    "ImageClip", "ImageElement", "LatexElement", "LineElement", "SectionTag", "Shadow", "ShapeElement", "ShapeText",
    "Slide", "SlideAnimation", "TableCell", "TableCellBorder", "TableCellBorders", "TableCellStyle",
    "ChartType", "TableElement", "TableTheme", "TextElement", "Theme", "VideoElement", "Whiteboard",
]  # fmt: skip

LineStyle = Literal["solid", "dashed", "dotted"]
VAlign = Literal["top", "middle", "bottom"]
TextType = Literal[
    "title", "subtitle", "content", "item", "itemTitle", "notes", "header", "footer", "partNumber", "itemNumber"
]
LinePoint = Literal["", "arrow", "dot"]
ChartType = Literal["bar", "column", "line", "pie", "ring", "area", "radar", "scatter"]
PathFormula = Literal[
    "roundRect", "roundRectDiagonal", "roundRectSingle", "roundRectSameSide", "cutRectDiagonal", "cutRectSingle",
    "cutRectSameSide", "cutRoundRect", "message", "roundMessage", "L", "ringRect", "plus", "triangle",
    "parallelogramLeft", "parallelogramRight", "trapezoid", "bullet", "indicator", "donut", "diagStripe",
]  # fmt: skip
Pair: TypeAlias = tuple[Num, Num]


class Shadow(Struct, kw_only=True):
    """A shadow; offsets and blur in px."""

    h: Num
    v: Num
    blur: Num
    color: str


class ElementOutline(Struct, kw_only=True):
    """A border (an element's ``outline``; not the course outline)."""

    style: Opt[LineStyle] = UNSET
    width: Opt[Num] = UNSET
    color: Opt[str] = UNSET


class ElementLink(Struct, kw_only=True):
    """A hyperlink to a URL (``web``) or a slide id (``slide``)."""

    type: Literal["web", "slide"]
    target: str


class GradientColor(Struct, kw_only=True):
    pos: Num
    color: str


class Gradient(Struct, kw_only=True):
    """``rotate`` is the linear angle in degrees; radial ignores it."""

    type: Literal["linear", "radial"]
    colors: list[GradientColor]
    rotate: Num


class _Element(TaggedStruct, kw_only=True):
    """The members every element has (``line`` included)."""

    id: str
    left: Num
    top: Num
    width: Num
    lock: Opt[bool] = UNSET
    groupId: Opt[str] = UNSET
    link: Opt[ElementLink] = UNSET
    name: Opt[str] = UNSET


class _BoxElement(_Element, kw_only=True):
    """The members of every element but ``line``."""

    height: Num
    rotate: Num


class TextElement(_BoxElement, kw_only=True, tag="text"):
    """Text as HTML (sanitized on the way in); 10 px padding inside the box."""

    content: str
    defaultFontName: str
    defaultColor: str
    outline: Opt[ElementOutline] = UNSET
    fill: Opt[str] = UNSET
    lineHeight: Opt[Num] = UNSET
    wordSpace: Opt[Num] = UNSET
    opacity: Opt[Num] = UNSET
    shadow: Opt[Shadow] = UNSET
    paragraphSpace: Opt[Num] = UNSET
    vertical: Opt[bool] = UNSET
    textType: Opt[TextType] = UNSET
    vAlign: Opt[VAlign] = UNSET


class ImageClip(Struct, kw_only=True):
    """Crop: ``range`` in percent of the source, ``shape`` a clip shape name (unknown means ``rect``)."""

    range: tuple[Pair, Pair]
    shape: str


class ImageElement(_BoxElement, kw_only=True, tag="image"):
    """A picture; ``src`` is a media reference (§5)."""

    fixedRatio: bool
    src: str
    outline: Opt[ElementOutline] = UNSET
    filters: Opt[dict[str, str]] = UNSET
    clip: Opt[ImageClip] = UNSET
    flipH: Opt[bool] = UNSET
    flipV: Opt[bool] = UNSET
    shadow: Opt[Shadow] = UNSET
    radius: Opt[Num] = UNSET
    colorMask: Opt[str] = UNSET
    imageType: Opt[Literal["pageFigure", "itemFigure", "background"]] = UNSET
    softEdge: Opt[Num] = UNSET


class ShapeText(Struct, kw_only=True):
    """Text inside a shape; ``align`` is the vertical placement."""

    content: str
    defaultFontName: str
    defaultColor: str
    align: VAlign
    lineHeight: Opt[Num] = UNSET
    wordSpace: Opt[Num] = UNSET
    paragraphSpace: Opt[Num] = UNSET
    type: Opt[TextType] = UNSET


class ShapeElement(_BoxElement, kw_only=True, tag="shape"):
    """An SVG path in ``viewBox`` units, scaled to the box."""

    viewBox: Pair
    path: str
    fixedRatio: bool
    fill: str
    gradient: Opt[Gradient] = UNSET
    pattern: Opt[str] = UNSET
    outline: Opt[ElementOutline] = UNSET
    opacity: Opt[Num] = UNSET
    flipH: Opt[bool] = UNSET
    flipV: Opt[bool] = UNSET
    shadow: Opt[Shadow] = UNSET
    special: Opt[bool] = UNSET
    text: Opt[ShapeText] = UNSET
    pathFormula: Opt[PathFormula] = UNSET
    keypoints: Opt[list[Num]] = UNSET


class LineElement(_Element, kw_only=True, tag="line"):
    """A line from ``start`` to ``end`` (relative to ``left``/``top``); ``width`` is the stroke in px."""

    start: Pair
    end: Pair
    style: LineStyle
    color: str
    points: tuple[LinePoint, LinePoint]
    shadow: Opt[Shadow] = UNSET
    broken: Opt[Pair] = UNSET
    broken2: Opt[Pair] = UNSET
    curve: Opt[Pair] = UNSET
    cubic: Opt[tuple[Pair, Pair]] = UNSET


class ChartData(Struct, kw_only=True):
    """One ``series`` row per legend, one value per label."""

    labels: list[str]
    legends: list[str]
    series: list[list[Num]]


class ChartOptions(Struct, kw_only=True):
    lineSmooth: Opt[bool] = UNSET
    stack: Opt[bool] = UNSET


class ChartElement(_BoxElement, kw_only=True, tag="chart"):
    """An ECharts chart (``bar`` is vertical bars, ``column`` horizontal)."""

    chartType: ChartType
    data: ChartData
    themeColors: list[str]
    options: Opt[ChartOptions] = UNSET
    fill: Opt[str] = UNSET
    outline: Opt[ElementOutline] = UNSET
    textColor: Opt[str] = UNSET
    lineColor: Opt[str] = UNSET


class TableCellStyle(Struct, kw_only=True):
    bold: Opt[bool] = UNSET
    em: Opt[bool] = UNSET
    underline: Opt[bool] = UNSET
    strikethrough: Opt[bool] = UNSET
    color: Opt[str] = UNSET
    backcolor: Opt[str] = UNSET
    fontsize: Opt[str] = UNSET
    fontname: Opt[str] = UNSET
    align: Opt[Literal["left", "center", "right", "justify"]] = UNSET


class TableCellBorder(Struct, kw_only=True):
    width: Num
    style: LineStyle
    color: str


class TableCellBorders(Struct, kw_only=True):
    top: Opt[TableCellBorder] = UNSET
    bottom: Opt[TableCellBorder] = UNSET
    left: Opt[TableCellBorder] = UNSET
    right: Opt[TableCellBorder] = UNSET


class TableCell(Struct, kw_only=True):
    """A cell; ``text`` is HTML (sanitized on the way in). A merged area is written once, at its top-left."""

    id: str
    colspan: Num
    rowspan: Num
    text: str
    style: Opt[TableCellStyle] = UNSET
    padding: Opt[str] = UNSET
    vAlign: Opt[VAlign] = UNSET
    borders: Opt[TableCellBorders] = UNSET


class TableTheme(Struct, kw_only=True):
    color: str
    rowHeader: bool
    rowFooter: bool
    colHeader: bool
    colFooter: bool


class TableElement(_BoxElement, kw_only=True, tag="table"):
    """Rows of cells; ``colWidths`` are fractions of the width summing to 1."""

    outline: ElementOutline
    colWidths: list[Num]
    cellMinHeight: Num
    data: list[list[TableCell]]
    theme: Opt[TableTheme] = UNSET
    rowHeights: Opt[list[Num]] = UNSET


class LatexElement(_BoxElement, kw_only=True, tag="latex"):
    """A formula: ``latex`` the TeX, ``html`` what is drawn."""

    latex: str
    html: Opt[str] = UNSET
    path: Opt[str] = UNSET
    color: Opt[str] = UNSET
    strokeWidth: Opt[Num] = UNSET
    viewBox: Opt[Pair] = UNSET
    fixedRatio: Opt[bool] = UNSET
    align: Opt[Literal["left", "center", "right"]] = UNSET


class VideoElement(_BoxElement, kw_only=True, tag="video"):
    """A video: ``src`` a playable reference, ``mediaRef`` a generated video's key in ``stage.videoManifest``."""

    autoplay: bool
    src: Opt[str] = UNSET
    mediaRef: Opt[str] = UNSET
    poster: Opt[str] = UNSET
    ext: Opt[str] = UNSET


class AudioElement(_BoxElement, kw_only=True, tag="audio"):
    fixedRatio: bool
    color: str
    loop: bool
    autoplay: bool
    src: str
    ext: Opt[str] = UNSET


class CodeLine(Struct, kw_only=True):
    """One source line; ``id`` (``L1``, ``L2`` …) is the handle ``wb_edit_code`` uses."""

    id: str
    content: str


class CodeElement(_BoxElement, kw_only=True, tag="code"):
    language: str
    lines: list[CodeLine]
    fileName: Opt[str] = UNSET
    showLineNumbers: Opt[bool] = UNSET
    fontSize: Opt[Num] = UNSET


Element: TypeAlias = (
    TextElement | ImageElement | ShapeElement | LineElement | ChartElement | TableElement | LatexElement
    | VideoElement | AudioElement | CodeElement
)  # fmt: skip
ELEMENT_TYPES: tuple[str, ...] = ("text", "image", "shape", "line", "chart", "table", "latex", "video", "audio", "code")


class Theme(Struct, kw_only=True):
    """A slide's theme; elements inherit ``fontColor``/``fontName``."""

    backgroundColor: str
    themeColors: list[str]
    fontColor: str
    fontName: str
    outline: Opt[ElementOutline] = UNSET
    shadow: Opt[Shadow] = UNSET


class BackgroundImage(Struct, kw_only=True):
    src: str
    size: Literal["cover", "contain", "repeat"]


class Background(Struct, kw_only=True):
    """A slide background; absent means white."""

    type: Literal["solid", "image", "gradient"]
    color: Opt[str] = UNSET
    image: Opt[BackgroundImage] = UNSET
    gradient: Opt[Gradient] = UNSET


class SlideAnimation(Struct, kw_only=True):
    id: str
    elId: str
    effect: str
    type: Literal["in", "out", "attention"]
    duration: Num
    trigger: Literal["click", "meantime", "auto"]


class SectionTag(Struct, kw_only=True):
    id: str
    title: Opt[str] = UNSET


TurningMode = Literal[
    "no", "fade", "slideX", "slideY", "random", "slideX3D", "slideY3D", "rotate", "scaleY", "scaleX", "scale",
    "scaleReverse",
]  # fmt: skip


class Slide(Struct, kw_only=True):
    """The slide canvas (``content.canvas``): a 1000 × 562.5 design canvas by convention."""

    id: str
    viewportSize: Num
    viewportRatio: Num
    theme: Theme
    elements: list[Element]
    background: Opt[Background] = UNSET
    animations: Opt[list[SlideAnimation]] = UNSET
    turningMode: Opt[TurningMode] = UNSET
    sectionTag: Opt[SectionTag] = UNSET
    type: Opt[Literal["cover", "contents", "transition", "content", "end"]] = UNSET
    script: Opt[str] = UNSET


class Whiteboard(Struct, kw_only=True):
    """A stage whiteboard page: a slide without ``theme``, ``turningMode``, ``sectionTag`` and ``type``."""

    id: str
    viewportSize: Num
    viewportRatio: Num
    elements: list[Element]
    background: Opt[Background] = UNSET
    animations: Opt[list[SlideAnimation]] = UNSET
    script: Opt[str] = UNSET
