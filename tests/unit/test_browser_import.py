"""A 1.1.x stage as a course holding OpenMAIC's document: pure, and the same ids every time."""

from __future__ import annotations

import msgspec

from openmaic.browser_import.records import StageImport
from openmaic.browser_import.translate import course_id, translate_stage
from openmaic.courses import format as fmt

BROWSER = "0123456789abcdef0123456789abcdef"
BOX = {"left": 60, "top": 50, "width": 400, "height": 60, "rotate": 0}
CANVAS = {"id": "cv", "viewportSize": 1000, "viewportRatio": 0.5625,
          "theme": {"backgroundColor": "#fff", "themeColors": ["#000"], "fontColor": "#333", "fontName": "x"}}


def stage(**scene) -> StageImport:
    body = {"stage": {"id": "st", "name": "Light", "languageDirective": "Answer in French"},
            "scenes": [{"id": "s1", "type": "slide", "title": "Waves", **scene}]}
    return msgspec.convert(body, StageImport)


def slide(*elements: dict) -> dict:
    return {"type": "slide", "canvas": {**CANVAS, "elements": list(elements)}}


def valid(t) -> None:
    assert fmt.validate_document(fmt.to_json(t.document.document)) == []


def test_the_same_records_give_the_same_ids_and_another_browser_other_ones():
    assert course_id(BROWSER, "st") == course_id(BROWSER, "st") != course_id("f" * 32, "st")
    assert course_id(BROWSER, "st").startswith("course-") and len(course_id(BROWSER, "st")) == 23
    body = stage(content=slide({"id": "t", "type": "text", "content": "<p>x</p>", "defaultFontName": "f",
                                "defaultColor": "#000", **BOX}))
    a, b = translate_stage(BROWSER, "ada", body), translate_stage(BROWSER, "ada", body)
    assert a == b and a.document.document.stage.id == "st" and a.document.document.scenes[0].id == "s1"
    assert a.created.language == "en" and a.document.document.stage.languageDirective == "Answer in French"
    valid(a)


def test_a_slide_is_kept_as_the_canvas_it_was_and_what_does_not_fit_is_left_out_and_counted():
    t = translate_stage(BROWSER, "ada", stage(content=slide(
        {"id": "t", "type": "text", "content": "<p onclick='x()'>kept</p>", "defaultFontName": "f",
         "defaultColor": "#000", **BOX},
        {"id": "z", "type": "hologram", **BOX}, "not an element"),
        actions=[{"id": "a1", "type": "spotlight", "elementId": "t"}, {"id": "a2", "type": "teleport"},
                 {"id": "a3", "type": "speech", "text": "hi", "audioUrl": "https://x/y.mp3"}]))
    (scene,) = t.document.document.scenes
    assert [e.id for e in scene.content.canvas.elements] == ["t"]
    assert "onclick" not in scene.content.canvas.elements[0].content  # sanitized as every write path does
    assert [a.id for a in scene.actions] == ["a1", "a3"] and scene.actions[1].audioUrl is fmt.UNSET
    assert t.dropped == {"elements": 2, "actions": 1}
    valid(t)


def test_a_quiz_keeps_every_question_type():
    t = translate_stage(BROWSER, "ada", stage(type="quiz", content={"type": "quiz", "questions": [
        {"id": "q1", "type": "multiple", "question": "Pick", "options": [{"label": "x", "value": "A"},
                                                                          {"label": "y", "value": "B"}],
         "answer": ["A", "B"]},
        {"id": "q2", "type": "short_answer", "question": "Why"}]}))
    (scene,) = t.document.document.scenes
    assert [(q.type, q.answer) for q in scene.content.questions] == [("multiple", ["A", "B"]),
                                                                       ("short_answer", fmt.UNSET)]
    valid(t)


def test_each_speech_keeps_its_own_clip_and_a_clip_not_kept_is_not_named():
    body = msgspec.convert({
        "stage": {"id": "st"},
        "scenes": [{"id": "s", "type": "slide", "content": slide(), "actions": [
            {"id": "1", "type": "speech", "text": "one", "audioId": "a1"},
            {"id": "2", "type": "speech", "text": "two", "audioId": "a2"},
            {"id": "3", "type": "speech", "text": "three", "audioId": "gone"}]}],
        "audio": [{"id": "a1", "data": "AAAA"}, {"id": "a2", "data": "AAAB"}]}, StageImport)
    t = translate_stage(BROWSER, "ada", body)
    audio = [a.audioId for a in t.document.document.scenes[0].actions]
    assert audio[:2] == [x.id for x in t.assets] and audio[2] is fmt.UNSET
    assert {x.kind for x in t.assets} == {"narration"}
    valid(t)


def test_media_are_content_addressed_per_owner_and_put_in_their_places():
    body = msgspec.convert({
        "stage": {"id": "st"},
        "scenes": [{"id": "s", "type": "slide", "content": slide(
            {"id": "e1", "type": "image", "src": "gen_img_1", "fixedRatio": True, **BOX},
            {"id": "e2", "type": "image", "src": "gen_img_2", "fixedRatio": True, **BOX},
            {"id": "e3", "type": "video", "src": "gen_vid_9", "autoplay": False, **BOX})}],
        "media": [{"id": "st:gen_img_1", "type": "image", "mimeType": "image/png", "data": "AAAA"},
                  {"id": "st:gen_img_2", "type": "image", "mimeType": "image/png", "data": "AAAA"}]}, StageImport)
    ada, bob = translate_stage(BROWSER, "ada", body), translate_stage(BROWSER, "bob", body)
    (stored,) = ada.assets  # the same bytes twice are one asset
    e1, e2, e3 = ada.document.document.scenes[0].content.canvas.elements
    assert e1.src == e2.src == f"/api/assets/{stored.id}"
    assert (e3.mediaRef, e3.src) == ("gen_vid_9", fmt.UNSET) and ada.dropped == {"missingMedia": 1}
    assert bob.assets[0].id != stored.id
    valid(ada)
