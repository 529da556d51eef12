"""Normalization defaults, the HTML sanitizer, TeX rendering, and the manifest walk of the course format."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from openmaic.courses import format as fmt

EXAMPLE = json.loads((Path(__file__).resolve().parents[1] / "fixtures" / "course_format_example.json").read_text())
BOX = {"left": 0, "top": 0, "width": 100, "height": 50, "rotate": 0}


# --- normalization (§6.9) ---------------------------------------------------------------------------------------

def test_text_defaults_and_empty_strings_count_as_missing() -> None:
    out = fmt.normalize_element({"id": "t", "type": "text", **BOX, "defaultColor": ""})
    assert (out["content"], out["defaultFontName"], out["defaultColor"]) == ("", "Microsoft YaHei", "#333333")


def test_image_and_shape_defaults() -> None:
    assert fmt.normalize_element({"id": "i", "type": "image", **BOX, "src": "x"})["fixedRatio"] is True
    shape = fmt.normalize_element({"id": "s", "type": "shape", **BOX, "height": 50.5, "path": ""})
    assert shape["viewBox"] == [100, 50.5]
    assert shape["path"] == "M0 0 L100 0 L100 50.5 L0 50.5 Z"
    assert (shape["fill"], shape["fixedRatio"]) == ("#5b9bd5", False)
    assert fmt.normalize_element({"id": "s", "type": "shape", **BOX, "fill": ""})["fill"] == ""  # no fill: kept


def test_shape_text_defaults_and_a_bad_align() -> None:
    shape = fmt.normalize_element({"id": "s", "type": "shape", **BOX, "text": {"content": "<p>x</p>"}})
    assert shape["text"] == {"content": "<p>x</p>", "defaultFontName": "Microsoft YaHei", "defaultColor": "#333333",
                             "align": "middle"}  # fmt: skip
    with pytest.raises(fmt.FormatInvalid) as caught:
        fmt.normalize_element({"id": "s", "type": "shape", **BOX, "text": {"align": "centre"}})
    assert caught.value.problems[0].path == "/text/align"


def test_line_defaults_and_the_members_it_checks() -> None:
    line = fmt.normalize_element({"id": "l", "type": "line", "left": 0, "top": 0, "width": 3})
    assert (line["start"], line["end"], line["style"], line["color"], line["points"]) == (
        [0, 0], [3, 0], "solid", "#333333", ["", ""])
    for member, value in (("style", "wavy"), ("points", ["", "star"]), ("start", [0]), ("color", 3)):
        with pytest.raises(fmt.FormatInvalid) as caught:
            fmt.normalize_element({"id": "l", "type": "line", "left": 0, "top": 0, "width": 3, member: value})
        assert caught.value.problems[0].path == f"/{member}"


def test_wrong_types_unknown_types_and_non_objects_are_refused() -> None:
    for value in ({"id": "t", "type": "text", **BOX, "content": 5}, {"id": "i", "type": "image", "fixedRatio": "y"},
                  {"id": "x", "type": "sticker"}, ["text"]):  # fmt: skip
        with pytest.raises(fmt.FormatInvalid):
            fmt.normalize_element(value)


def test_normalization_is_idempotent_and_leaves_well_formed_elements_alone() -> None:
    for element in EXAMPLE["scenes"][0]["content"]["canvas"]["elements"]:
        assert fmt.normalize_element(element) == element
        assert fmt.normalize_element(fmt.normalize_element(element)) == element


def test_normalize_elements_drops_and_reports_bad_ones() -> None:
    values: list[Any] = [
        {"id": "t", "type": "text", **BOX, "content": "<p onmouseover=x()>hi</p>", "lineHeight": None},
        {"id": "x", "type": "sticker"},
        {"id": "i", "type": "image", **BOX},  # no src
        {"id": "l", "type": "line", "left": 0, "top": 0, "width": 2, "height": 9, "rotate": 0},
    ]
    elements, problems = fmt.normalize_elements(values)
    assert [type(e) for e in elements] == [fmt.TextElement, fmt.LineElement]
    assert elements[0].content == "<p>hi</p>"
    assert "height" not in fmt.to_json(elements[1]) and "rotate" not in fmt.to_json(elements[1])
    assert [p.path for p in problems] == ["/elements/1/type", "/elements/2"]
    with pytest.raises(fmt.FormatInvalid):
        fmt.normalize_elements(values, drop_invalid=False)


# --- the HTML sanitizer -----------------------------------------------------------------------------------------

@pytest.mark.parametrize(
    ("html", "expected"),
    [("<p>x<script>alert(1)</script></p>", "<p>x</p>"),
     ('<p><img src=x onerror="alert(1)">y</p>', "<p>y</p>"),
     ('<p onclick="x()">z</p>', "<p>z</p>"),
     ('<a href="javascript:alert(1)">a</a>', '<a rel="noopener noreferrer">a</a>'),
     ('<a href="https://e.org">b</a>', '<a href="https://e.org" rel="noopener noreferrer">b</a>'),
     ('<p style="position: fixed; color: red; background: url(x.png)">c</p>', '<p style="color:red">c</p>'),
     ('<p style="color: expression(alert(1))">d</p>', "<p>d</p>"),
     ("<div><table><tr><td>e</td></tr></table></div>", "e"),
     ("3 < 4 & 5", "3 &lt; 4 &amp; 5"),
     ("plain text", "plain text")],
)  # fmt: skip
def test_sanitizer_strips_what_is_not_the_subset(html: str, expected: str) -> None:
    assert fmt.sanitize_html(html) == expected
    assert fmt.sanitize_html(expected) == expected  # a fixed point


def test_sanitizer_keeps_the_subset() -> None:
    html = ('<h2 style="text-align:center">T</h2><p style="font-size:18px;color:#1e3a5f;line-height:1.5;'
            'font-weight:700;font-family:Arial;font-style:italic;text-decoration:underline;background-color:#fff">'
            "<strong>b</strong><b>b</b><em>e</em><i>i</i><u>u</u><span>s</span>H<sub>2</sub>O x<sup>2</sup><br></p>"
            "<ul><li>one</li></ul><ol><li>two</li></ol>")  # fmt: skip
    assert fmt.sanitize_html(html) == html


# --- TeX --------------------------------------------------------------------------------------------------------

def test_render_latex_gives_mathml() -> None:
    html = fmt.render_latex(r"\frac{V}{R} = I")
    assert html.startswith('<span class="katex-display"') and "<mfrac>" in html and "<math " in html


@pytest.mark.parametrize("tex", ["", r"\frac{a}{", "}", r"\notacommand x", r"\text{<script>alert(1)</script>}"])
def test_render_latex_refuses_what_it_cannot_render(tex: str) -> None:
    with pytest.raises(fmt.FormatInvalid):
        fmt.render_latex(tex)


# --- the manifest walk and element ids --------------------------------------------------------------------------

def test_manifest_of_the_example() -> None:
    document = fmt.decode_document(EXAMPLE)
    assert fmt.asset_refs(document) == [("https://example.org/media/simple-circuit.png", "image")]
    assert fmt.reference_counts(document) == {"https://example.org/media/simple-circuit.png": 1}
    assert fmt.scene_element_ids(document.scenes[0]) == {e["id"] for e in
                                                         EXAMPLE["scenes"][0]["content"]["canvas"]["elements"]}
    assert fmt.scene_element_ids(document.scenes[1]) == set()


def test_manifest_order_kinds_and_owners() -> None:
    raw = json.loads(json.dumps(EXAMPLE))
    canvas = raw["scenes"][0]["content"]["canvas"]
    canvas["background"] = {"type": "image", "image": {"src": "ast_bg", "size": "cover"}}
    canvas["elements"].append({"id": "v", "type": "video", **BOX, "autoplay": False, "src": "gen_vid_1",
                               "mediaRef": "gen_vid_1", "poster": "ast_poster"})  # fmt: skip
    raw["scenes"][0]["actions"][1]["audioId"] = "ast_voice"
    raw["scenes"][1]["actions"][0]["audioId"] = "ast_voice"
    raw["stage"]["videoManifest"] = {"gen_vid_1": {"type": "video", "prompt": "p"}, "gen_vid_2": {"type": "video",
                                                                                                  "prompt": "q"}}
    raw["stage"]["whiteboard"] = [{"id": "w", "viewportSize": 1000, "viewportRatio": 0.5625,
                                   "elements": [{"id": "i", "type": "image", **BOX, "src": "ast_bg",
                                                 "fixedRatio": True}]}]  # fmt: skip
    document = fmt.decode_document(raw)
    assert fmt.asset_refs(document) == [
        ("ast_bg", "image"), ("ast_bg", "background"), ("https://example.org/media/simple-circuit.png", "image"),
        ("gen_vid_1", "video"), ("ast_poster", "poster"), ("ast_voice", "audio"), ("gen_vid_2", "video")]
    counts = fmt.reference_counts(document)
    assert counts["gen_vid_1"] == 1 and counts["ast_voice"] == 2 and counts["ast_bg"] == 2
    assert "gen_vid_2" not in counts


def test_manifest_and_element_ids_of_json_values() -> None:
    assert fmt.asset_refs(EXAMPLE) == [("https://example.org/media/simple-circuit.png", "image")]
    assert "latex_ohm" in fmt.scene_element_ids(EXAMPLE["scenes"][0])
