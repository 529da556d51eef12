"""The course document's validators: OpenMAIC's rules (its own test cases, ported), the app and storage gates,
strict typing, JSON safety, and what decode_* give back."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from openmaic.api.errors import describe, error_body
from openmaic.courses import format as fmt

EXAMPLE = json.loads((Path(__file__).resolve().parents[1] / "fixtures" / "course_format_example.json").read_text())


def paths(problems: list[fmt.Problem]) -> list[str]:
    return [p.path for p in problems]


def example() -> dict[str, Any]:
    return copy.deepcopy(EXAMPLE)


# --- validateStage (validate.test.ts) ---------------------------------------------------------------------------

def test_stage_well_formed() -> None:
    assert fmt.validate_stage({"id": "s", "name": "n", "createdAt": 1, "updatedAt": 2}) == []


def test_stage_collects_every_missing_required_field() -> None:
    assert set(paths(fmt.validate_stage({"id": "s"}))) >= {"/name", "/createdAt", "/updatedAt"}


@pytest.mark.parametrize("value", [None, "x", [], 3])
def test_stage_must_be_an_object(value: Any) -> None:
    assert paths(fmt.validate_stage(value)) == ["/"]


def test_app_gate_refuses_current_scene_id_and_a_stamp_inside_the_stage() -> None:
    stage = {"id": "s", "name": "n", "createdAt": 1, "updatedAt": 2, "currentSceneId": "x", "dslVersion": "0.2.0"}
    assert paths(fmt.validate_stage(stage, strict=False)) == ["/currentSceneId", "/dslVersion"]


# --- validateScene ----------------------------------------------------------------------------------------------

OK = {"id": "sc1", "stageId": "st1", "type": "slide", "title": "Intro", "order": 0,
      "content": {"type": "slide", "canvas": {"id": "c"}}}  # fmt: skip


def scene(**changes: Any) -> dict[str, Any]:
    return {**copy.deepcopy(OK), **changes}


def test_scene_well_formed_slide() -> None:
    assert fmt.validate_scene(OK, strict=False) == []


@pytest.mark.parametrize(
    ("kind", "content"),
    [("slide", {"type": "slide", "canvas": {"id": "c"}}),
     ("quiz", {"type": "quiz", "questions": []}),
     ("interactive", {"type": "interactive", "html": "<!doctype html><p>Hello</p>"}),
     ("pbl", {"type": "pbl", "projectConfig": {"projectInfo": {"title": "Legacy"}}})],
)  # fmt: skip
def test_scene_accepts_each_content_kind(kind: str, content: dict[str, Any]) -> None:
    assert fmt.validate_scene(scene(type=kind, content=content), strict=False) == []
    if kind != "slide":  # a canvas of only an id is no slide for strict typing
        assert fmt.validate_scene(scene(type=kind, content=content)) == []


def test_scene_unknown_content_type() -> None:
    assert "/content/type" in paths(fmt.validate_scene(scene(content={"type": "bogus"}), strict=False))


def test_quiz_scene_needs_its_questions_array() -> None:
    assert "/content/questions" in paths(fmt.validate_scene(scene(type="quiz", content={"type": "quiz"})))


@pytest.mark.parametrize(
    ("content", "path"),
    [({"type": "interactive"}, "/content"),
     ({"type": "interactive", "widgetType": "video", "html": "x"}, "/content/widgetType"),
     ({"type": "interactive", "html": 42}, "/content/html"),
     ({"type": "interactive", "url": 42, "html": "x"}, "/content/url"),
     ({"type": "interactive", "html": "x", "widgetConfig": {"type": "video"}}, "/content/widgetConfig/type")],
)  # fmt: skip
def test_malformed_interactive_content(content: dict[str, Any], path: str) -> None:
    assert path in paths(fmt.validate_scene(scene(type="interactive", content=content)))


def test_html_only_and_url_only_interactive_content() -> None:
    for content in ({"type": "interactive", "html": "<div/>"}, {"type": "interactive", "url": "https://e.org"}):
        assert fmt.validate_scene(scene(type="interactive", content=content)) == []


@pytest.mark.parametrize(
    ("content", "path"),
    [({"type": "pbl", "projectV2": "not-an-object"}, "/content/projectV2"),
     ({"type": "pbl", "projectV2": {}}, "/content/projectV2"),
     ({"type": "pbl", "projectConfig": []}, "/content/projectConfig")],
)  # fmt: skip
def test_malformed_pbl_content(content: dict[str, Any], path: str) -> None:
    assert path in paths(fmt.validate_scene(scene(type="pbl", content=content), strict=False))


def test_content_type_must_match_scene_type() -> None:
    assert "/content/type" in paths(fmt.validate_scene(scene(type="quiz"), strict=False))


def test_nested_actions_are_validated_and_the_bad_one_named() -> None:
    value = scene(actions=[{"id": "a", "type": "speech", "text": "hi"}, {"id": "b", "type": "nope"}])
    assert paths(fmt.validate_scene(value, strict=False)) == ["/actions/1/type"]


# --- validateAction ---------------------------------------------------------------------------------------------

def test_action_well_formed() -> None:
    assert fmt.validate_action({"id": "a", "type": "spotlight", "elementId": "e"}) == []


def test_action_unknown_type() -> None:
    assert paths(fmt.validate_action({"id": "a", "type": "frobnicate"})) == ["/type"]


def test_action_missing_a_required_field() -> None:
    assert paths(fmt.validate_action({"id": "a", "type": "spotlight"})) == ["/elementId"]
    assert paths(fmt.validate_action({"id": "a", "type": "discussion"})) == ["/topic"]


def test_action_required_field_of_the_wrong_kind() -> None:
    problems = fmt.validate_action({"id": "a", "type": "spotlight", "elementId": 123})
    assert paths(problems) == ["/elementId"] and "must be string" in problems[0].message
    assert paths(fmt.validate_action({"id": "a", "type": "wb_draw_table", "x": 1, "y": 1, "width": 1, "height": 1,
                                      "data": {}})) == ["/data"]  # fmt: skip
    assert paths(fmt.validate_action({"id": "a", "type": "wb_draw_text", "content": "c", "x": True, "y": 1})) == ["/x"]


def test_action_needs_a_string_id() -> None:
    assert paths(fmt.validate_action({"type": "laser", "elementId": "e"})) == ["/id"]


def test_action_strict_typing_checks_enums_and_optional_members() -> None:
    assert paths(fmt.validate_action({"id": "a", "type": "wb_draw_shape", "shape": "hexagon", "x": 1, "y": 1,
                                      "width": 1, "height": 1})) == ["/shape"]  # fmt: skip
    assert paths(fmt.validate_action({"id": "a", "type": "laser", "elementId": "e", "color": 3})) == ["/color"]
    assert fmt.validate_action({"id": "a", "type": "laser", "elementId": "e", "color": 3}, strict=False) == []


# --- the app gate -----------------------------------------------------------------------------------------------

def test_app_gate_wants_non_empty_strings_on_interactive_scenes_only() -> None:
    interactive = scene(type="interactive", id="", title="", content={"type": "interactive", "html": "x"})
    assert paths(fmt.validate_scene(interactive, strict=False)) == ["/id", "/title"]
    assert fmt.validate_scene(scene(id="", title=""), strict=False) == []


def test_app_gate_tolerates_historical_widget_configs_that_the_dsl_refuses() -> None:
    content = {"type": "interactive", "html": "x", "widgetConfig": {"concept": "no type"}, "widgetType": "legacy"}
    assert fmt.validate_scene(scene(type="interactive", content=content), strict=False) == []
    assert paths(fmt.validate_scene(scene(type="interactive", content=content))) == [
        "/content/widgetType", "/content/widgetConfig/type"]
    primitive = {"type": "interactive", "html": "x", "widgetConfig": "sim"}
    assert paths(fmt.validate_scene(scene(type="interactive", content=primitive), strict=False)) == [
        "/content/widgetConfig"]


def project(**changes: Any) -> dict[str, Any]:
    base = {"uiPhase": "hero", "title": "t", "description": "d", "tags": [], "language": "en", "proficiency": "",
            "status": "active", "roles": [], "milestones": [{"id": "m", "microtasks": []}], "submissions": [],
            "evaluations": [], "threads": [{"agentId": "a", "messages": []}], "engagementEvents": [],
            "createdAt": "2026-08-22T09:00:00.000Z", "updatedAt": "2026-08-22T09:00:00.000Z"}  # fmt: skip
    return {**base, **changes}


def test_app_gate_wants_project_containers_unless_a_real_legacy_config_is_kept() -> None:
    assert fmt.validate_scene(scene(type="pbl", content={"type": "pbl", "projectV2": project()})) == []
    broken = project(milestones=[{"id": "m"}])
    assert paths(fmt.validate_scene(scene(type="pbl", content={"type": "pbl", "projectV2": broken}),
                                    strict=False)) == ["/content/projectV2"]  # fmt: skip
    legacy = {"projectInfo": {"title": "v1"}, "agents": [{"name": "a"}], "issueboard": {"issues": []}}
    kept = {"type": "pbl", "projectV2": broken, "projectConfig": legacy}
    assert fmt.validate_scene(scene(type="pbl", content=kept), strict=False) == []


def test_a_null_project_is_absent() -> None:
    assert fmt.validate_scene(scene(type="pbl", content={"type": "pbl", "projectV2": None})) == []


# --- the storage gate and documents -----------------------------------------------------------------------------

def test_the_reference_example_is_valid_at_every_level() -> None:
    assert fmt.validate_document(EXAMPLE) == []
    assert fmt.validate_document(EXAMPLE, strict=False) == []
    assert fmt.validate_document(json.dumps(EXAMPLE).encode(), stage_id="stg_ohm_0001") == []


def test_document_envelope() -> None:
    assert paths(fmt.validate_document([])) == ["/"]
    assert paths(fmt.validate_document({"stage": "x", "scenes": {}})) == ["/stage", "/scenes"]


def test_storage_gate_per_scene() -> None:
    doc = example()
    doc["scenes"][1]["stageId"] = "elsewhere"
    doc["scenes"][2]["id"] = doc["scenes"][0]["id"]
    assert paths(fmt.validate_document(doc)) == ["/scenes/1/stageId", "/scenes/2/id"]
    assert paths(fmt.validate_document(example(), stage_id="another")) == ["/stage/id"]
    assert paths(fmt.validate_scene(EXAMPLE["scenes"][0], stage_id="another", scene_id="x")) == ["/id", "/stageId"]


def test_ids_that_cannot_name_a_url_segment() -> None:
    doc = example()
    doc["stage"]["id"] = ".."
    for s in doc["scenes"]:
        s["stageId"] = ".."
    doc["scenes"][0]["id"] = "."
    assert paths(fmt.validate_document(doc)) == ["/stage/id", "/scenes/0/id"]


def test_stamps() -> None:
    for stamp, message in (("legacy", "invalid dslVersion"), ("0.1.5", "no migration path"), ("9.0.0", "newer")):
        problems = fmt.validate_document({**example(), "dslVersion": stamp})
        assert paths(problems) == ["/dslVersion"] and message in problems[0].message
    assert fmt.validate_document({k: v for k, v in EXAMPLE.items() if k != "dslVersion"}) == []
    assert fmt.validate_document({**example(), "dslVersion": "0.1.0"}) == []


# --- strict typing ----------------------------------------------------------------------------------------------

def test_strict_typing_names_every_bad_element_question_and_action() -> None:
    doc = example()
    elements = doc["scenes"][0]["content"]["canvas"]["elements"]
    elements[0]["left"] = "60"
    elements[2]["type"] = "blob"
    del elements[3]["points"]
    doc["scenes"][0]["actions"][3]["speed"] = "fast"
    doc["scenes"][1]["content"]["questions"][0]["type"] = "essay"
    doc["scenes"][1]["content"]["questions"][1]["options"][0]["label"] = 1
    doc["stage"]["generatedAgentConfigs"][0]["priority"] = "high"
    assert paths(fmt.validate_document(doc)) == [
        "/stage/generatedAgentConfigs/0/priority",
        "/scenes/0/content/canvas/elements/0/left", "/scenes/0/content/canvas/elements/2/type",
        "/scenes/0/content/canvas/elements/3", "/scenes/0/actions/3/speed",
        "/scenes/1/content/questions/0/type", "/scenes/1/content/questions/1/options/0/label",
    ]  # fmt: skip
    assert fmt.validate_document(doc, strict=False) == []


def test_strict_typing_of_the_canvas_and_a_stage_whiteboard() -> None:
    bad = scene(content={"type": "slide", "canvas": {"id": "c", "viewportSize": 1000, "viewportRatio": 0.5625,
                                                     "elements": []}})  # fmt: skip
    assert paths(fmt.validate_scene(bad)) == ["/content/canvas"]
    stage = {"id": "s", "name": "n", "createdAt": 1, "updatedAt": 2,
             "whiteboard": [{"id": "w", "viewportSize": 1000, "viewportRatio": 0.5625, "elements": [{"id": 1}]}]}
    assert paths(fmt.validate_stage(stage)) == ["/whiteboard/0/elements/0"]


def test_null_members_are_dropped_not_refused() -> None:
    doc = example()
    doc["stage"]["description"] = None
    doc["scenes"][0]["content"]["canvas"]["elements"][1]["lineHeight"] = None
    doc["scenes"][0]["actions"][8]["prompt"] = None
    doc["scenes"][2]["content"]["widgetConfig"]["variables"][0]["unit"] = None  # opaque: kept
    assert fmt.validate_document(doc) == []
    decoded = fmt.decode_document(doc)
    assert decoded.stage.description is fmt.UNSET
    assert decoded.scenes[2].content.widgetConfig["variables"][0]["unit"] is None
    required = example()
    required["stage"]["name"] = None
    assert paths(fmt.validate_document(required)) == ["/stage/name"]


# --- JSON safety ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize(
    ("value", "path"),
    [({"x": float("nan")}, "/x"), ({"x": float("inf")}, "/x"), ({"x": -0.0}, "/x"), ({"x": "a\x00b"}, "/x"),
     ({"x": ["\ud800"]}, "/x/0"), ({"x\x00": 1}, "/"), ({"x": {1, 2}}, "/x"), ({"x": b"raw"}, "/x"),
     ({"x": {"y": {1: "a"}}}, "/x/y"), ({"x": [{"\udfff": 1}]}, "/x/0")],
)  # fmt: skip
def test_values_that_are_not_json_safe(value: dict[str, Any], path: str) -> None:
    stage = {"id": "s", "name": "n", "createdAt": 1, "updatedAt": 2, "style": value}
    assert paths(fmt.validate_stage(stage)) == [f"/style{path}".rstrip("/")]


@pytest.mark.parametrize(
    ("raw", "path"),
    [(b'{"stage": {"createdAt": -0}}', "/stage/createdAt"), (b'{"a": [NaN]}', "/a/0"),
     (b'{"a": -0.0e3}', "/a"), (b'{"a": "\\u0000"}', "/a"), (b'{"a": "\\ud800"}', "/a"), (b'{"a": ', "/")],
)  # fmt: skip
def test_raw_bytes_that_are_not_json_safe(raw: bytes, path: str) -> None:
    assert paths(fmt.validate_document(raw)) == [path]


def test_a_minus_sign_in_a_string_is_no_negative_zero() -> None:
    assert fmt.validate_action(b'{"id": "a", "type": "speech", "text": "-0 and -0.0"}') == []


# --- decode_* ---------------------------------------------------------------------------------------------------

def test_decode_sanitizes_text_shape_text_and_table_cells() -> None:
    canvas = example()["scenes"][0]
    elements = canvas["content"]["canvas"]["elements"]
    elements[1]["content"] = '<p onclick="steal()">Hi<script>alert(1)</script></p>'
    elements[0]["text"] = {"content": "<img src=x onerror=alert(1)>card", "defaultFontName": "A",
                           "defaultColor": "#000", "align": "middle"}  # fmt: skip
    elements.append({"id": "table_1", "type": "table", "left": 0, "top": 0, "width": 100, "height": 50, "rotate": 0,
                     "outline": {"width": 1, "style": "solid", "color": "#000"}, "colWidths": [1],
                     "cellMinHeight": 36, "data": [[{"id": "c", "colspan": 1, "rowspan": 1,
                                                     "text": '<a href="javascript:x()">go</a>'}]]})  # fmt: skip
    decoded = fmt.decode_scene(canvas, stage_id="stg_ohm_0001")
    shape, text = decoded.content.canvas.elements[:2]
    assert text.content == "<p>Hi</p>"
    assert shape.text.content == "card"
    assert decoded.content.canvas.elements[-1].data[0][0].text == '<a rel="noopener noreferrer">go</a>'


def test_decode_raises_format_invalid_naming_every_problem() -> None:
    with pytest.raises(fmt.FormatInvalid) as caught:
        fmt.decode_action({"id": 1, "type": "spotlight"})
    assert paths(caught.value.problems) == ["/id", "/elementId"]
    assert "/id" in caught.value.message
    body = json.loads(error_body(problem := describe(caught.value)))
    assert problem.status == 400 and body["errorCode"] == "VALIDATION_FAILED"
    assert body["details"]["problems"] == [{"path": "/id", "message": "expected string `id`"},
                                           {"path": "/elementId", "message": "spotlight action requires `elementId`"}]


def test_decode_document_migrates_and_types() -> None:
    legacy = {k: v for k, v in EXAMPLE.items() if k != "dslVersion"}
    document = fmt.decode_document(json.dumps(legacy).encode())
    assert document.dslVersion == fmt.DSL_VERSION
    assert isinstance(fmt.decode_action(EXAMPLE["scenes"][2]["actions"][2]), fmt.WidgetSetStateAction)
    assert fmt.decode_stage(EXAMPLE["stage"]).generatedAgentConfigs[1].id == "agt_student_1"


def test_decoding_the_example_loses_nothing_but_html_formatting() -> None:
    from tests.unit.test_course_format_model import differences

    decoded = fmt.to_json(fmt.decode_document(EXAMPLE))
    assert differences(EXAMPLE, decoded) == [
        "/scenes/0/content/canvas/elements/1/content: "
        "'<p style=\"font-size: 32px;\"><strong>Ohm\\'s law</strong></p>' != "
        "'<p style=\"font-size:32px\"><strong>Ohm\\'s law</strong></p>'",
        "/scenes/0/content/canvas/elements/2/content: " + repr(EXAMPLE["scenes"][0]["content"]["canvas"]["elements"][2]
                                                               ["content"]) + " != "  # fmt: skip
        + repr(EXAMPLE["scenes"][0]["content"]["canvas"]["elements"][2]["content"].replace("font-size: 16px;",
                                                                                            "font-size:16px")),
    ]


def test_the_outline_is_kept_verbatim_nulls_included() -> None:
    doc = example()
    doc["outline"]["outlines"][0]["languageNote"] = None
    assert fmt.decode_document(doc).outline["outlines"][0]["languageNote"] is None
    assert "outline" not in fmt.to_json(fmt.decode_document({**example(), "outline": None}))


def test_unknown_element_and_action_types_are_named() -> None:
    doc = example()
    doc["scenes"][0]["content"]["canvas"]["elements"][0]["type"] = "sticker"
    (problem,) = fmt.validate_document(doc)
    assert problem.path == "/scenes/0/content/canvas/elements/0/type" and "unknown element type 'sticker'" in (
        problem.message)
