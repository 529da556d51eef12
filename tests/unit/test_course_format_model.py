"""The course document's structs: OpenMAIC's §10 example decodes into them and encodes back to the same JSON."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec
import pytest

from openmaic.courses import format as fmt

EXAMPLE = Path(__file__).resolve().parents[1] / "fixtures" / "course_format_example.json"


def example() -> dict[str, Any]:
    return json.loads(EXAMPLE.read_text())


def differences(a: Any, b: Any, path: str = "") -> list[str]:
    """Every place where two JSON values differ (numbers compare by value and kind: 1 vs 1.0 is a difference)."""
    if isinstance(a, dict) and isinstance(b, dict):
        found = [f"{path}/{k}: only in the first" for k in a.keys() - b.keys()]
        found += [f"{path}/{k}: only in the second" for k in b.keys() - a.keys()]
        for k in a.keys() & b.keys():
            found += differences(a[k], b[k], f"{path}/{k}")
        return found
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return [f"{path}: {len(a)} items against {len(b)}"]
        return [d for i, (x, y) in enumerate(zip(a, b, strict=True)) for d in differences(x, y, f"{path}/{i}")]
    if type(a) is not type(b) or a != b:
        return [f"{path}: {a!r} != {b!r}"]
    return []


def test_example_round_trips_member_by_member() -> None:
    value = example()
    document = msgspec.convert(value, fmt.Document, strict=True)
    assert differences(value, json.loads(fmt.encode(document))) == []
    assert differences(value, fmt.to_json(document)) == []


def test_example_decodes_into_the_typed_unions() -> None:
    document = msgspec.convert(example(), fmt.Document)
    slide, quiz, lab = document.scenes
    assert isinstance(slide.content, fmt.SlideContent)
    kinds = [type(e) for e in slide.content.canvas.elements]
    assert kinds == [fmt.ShapeElement, fmt.TextElement, fmt.TextElement, fmt.LineElement, fmt.LatexElement,
                     fmt.ChartElement, fmt.ImageElement]  # fmt: skip
    assert [e.type for e in slide.content.canvas.elements][3] == "line"
    assert isinstance(slide.actions[-1], fmt.DiscussionAction)
    assert isinstance(quiz.content, fmt.QuizContent) and quiz.content.questions[2].type == "short_answer"
    assert isinstance(lab.content, fmt.InteractiveContent) and lab.content.widgetConfig["type"] == "simulation"
    assert isinstance(lab.actions[2], fmt.WidgetSetStateAction) and lab.actions[2].type == "widget_setState"
    assert document.dslVersion == fmt.DSL_VERSION


def test_optional_members_are_left_out_and_the_stamp_is_always_written() -> None:
    stage = fmt.Stage(id="s", name="n", createdAt=1, updatedAt=2)
    assert json.loads(fmt.encode(fmt.Document(stage=stage, scenes=[]))) == {
        "stage": {"id": "s", "name": "n", "createdAt": 1, "updatedAt": 2}, "scenes": [], "dslVersion": "0.2.0"}


def test_a_line_has_no_height_or_rotate() -> None:
    line = fmt.LineElement(id="l", left=0, top=0, width=2, start=(0, 0), end=(10, 0), style="solid",
                           color="#333333", points=("", "arrow"))  # fmt: skip
    data = fmt.to_json(line)
    assert data["type"] == "line" and "height" not in data and "rotate" not in data


@pytest.mark.parametrize(
    ("action", "tag"),
    [(fmt.WbDrawTextAction(id="a", content="x", x=1, y=2), "wb_draw_text"),
     (fmt.WidgetSetStateAction(id="a", state={}), "widget_setState"),
     (fmt.PlayVideoAction(id="a", elementId="v"), "play_video")],
)  # fmt: skip
def test_action_tags_keep_openmaics_spelling(action: Any, tag: str) -> None:
    assert fmt.to_json(action)["type"] == tag
    assert type(msgspec.convert(fmt.to_json(action), fmt.Action)) is type(action)


def test_encode_refuses_what_no_json_store_accepts_and_repairs_negative_zero() -> None:
    with pytest.raises(fmt.FormatInvalid) as caught:
        fmt.encode(fmt.SpotlightAction(id="a", elementId="e", dimOpacity=float("nan")))
    assert caught.value.problems[0].path == "/dimOpacity"
    with pytest.raises(fmt.FormatInvalid):
        fmt.encode(fmt.SpeechAction(id="a", text="bad \x00"))
    assert fmt.encode(fmt.SpotlightAction(id="a", elementId="e", dimOpacity=-0.0)).endswith(b'"dimOpacity":0.0}')


def test_constants() -> None:
    assert (fmt.DSL_VERSION, fmt.VIEWPORT_SIZE, fmt.VIEWPORT_RATIO) == ("0.2.0", 1000, 0.5625)
    assert [a.id for a in fmt.PRESET_AGENTS] == [f"default-{n}" for n in range(1, 7)]
    assert [a.role for a in fmt.PRESET_AGENTS] == ["teacher", "assistant"] + ["student"] * 4
    assert len(fmt.AGENT_COLORS) == 12 and len(fmt.AGENT_AVATARS) == 10
    assert fmt.to_json(fmt.DEFAULT_THEME)["outline"] == {"style": "solid", "width": 2, "color": "#d14424"}


def test_new_id() -> None:
    ids = {fmt.new_id("text") for _ in range(200)}
    assert len(ids) == 200
    assert all(len(i) == len("text_") + 8 and i.startswith("text_") and i[5:].isalnum() for i in ids)
