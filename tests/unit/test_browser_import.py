"""The translation of a 1.1.x stage into a course: pure, and the same ids every time."""

from __future__ import annotations

import msgspec

from openmaic.browser_import.records import StageImport
from openmaic.browser_import.translate import course_id, plain_text, translate_stage

BROWSER = "0123456789abcdef0123456789abcdef"


def stage(**scene) -> StageImport:
    body = {"stage": {"id": "st", "name": "Light", "languageDirective": "Answer in French"},
            "scenes": [{"id": "s1", "type": "slide", "title": "Waves", **scene}]}
    return msgspec.convert(body, StageImport)


def test_the_same_records_give_the_same_ids_and_another_browser_other_ones():
    assert course_id(BROWSER, "st") == course_id(BROWSER, "st") != course_id("f" * 32, "st")
    assert course_id(BROWSER, "st").startswith("course-") and len(course_id(BROWSER, "st")) == 23
    a, b = translate_stage(BROWSER, "ada", stage()), translate_stage(BROWSER, "ada", stage())
    assert a == b and a.outline.scenes[0].id == b.outline.scenes[0].id


def test_slide_text_is_read_top_to_bottom_and_a_language_directive_is_not_a_language():
    t = translate_stage(BROWSER, "ada", stage(content={"type": "slide", "canvas": {"elements": [
        {"type": "text", "top": 50, "left": 0, "content": "<p>second &amp; last</p>"},
        {"type": "text", "top": 5, "left": 90, "content": "<ul><li>first</li><li>also first</li></ul>"},
        {"type": "shape", "top": 0}, "not an element"]}}))
    slide = t.outline.scenes[0].content.slide
    assert slide.bullets == ["first\nalso first", "second & last"]
    assert t.created.language == "en" and t.outline.title == "Light"


def test_a_multiple_choice_answer_is_its_first_correct_option_and_short_answers_are_dropped():
    t = translate_stage(BROWSER, "ada", stage(type="quiz", content={"type": "quiz", "questions": [
        {"type": "multiple", "question": "Pick", "options": [{"label": "x", "value": "A"}, {"label": "y", "value": "B"},
                                                             {"label": "z", "value": "C"}], "answer": ["C", "B"]},
        {"type": "short_answer", "question": "Why"}]}))
    (q,) = t.outline.scenes[0].content.quiz.questions
    assert (q.options, q.answer) == (["x", "y", "z"], 2) and t.dropped == {"shortAnswerQuestions": 1}


def test_a_scene_with_several_clips_keeps_none_as_its_narration():
    body = msgspec.convert({
        "stage": {"id": "st"},
        "scenes": [{"id": "s", "type": "slide", "actions": [
            {"type": "speech", "text": "one", "audioId": "a1"}, {"type": "speech", "text": "two", "audioId": "a2"}]}],
        "audio": [{"id": "a1", "data": "AAAA"}, {"id": "a2", "data": "AAAA"}]}, StageImport)
    t = translate_stage(BROWSER, "ada", body)
    assert t.outline.scenes[0].narration_asset_id is None and t.assets == [] and t.dropped["narrationClips"] == 2
    assert t.outline.scenes[0].content.slide.notes == "one\ntwo"


def test_plain_text_of_anything_but_a_string_is_empty():
    assert plain_text(None) == plain_text(3) == "" and plain_text("<b>a</b><br>b") == "a\nb"


def test_media_are_content_addressed_per_owner():
    body = msgspec.convert({
        "stage": {"id": "st"},
        "scenes": [{"id": "s", "type": "slide", "content": {"type": "slide", "canvas": {"elements": [
            {"id": "e1", "type": "image", "src": "gen_img_1"}, {"id": "e2", "type": "image", "src": "gen_img_2"}]}}}],
        "media": [{"id": "st:gen_img_1", "type": "image", "mimeType": "image/png", "data": "AAAA"},
                  {"id": "st:gen_img_2", "type": "image", "mimeType": "image/png", "data": "AAAA"}]}, StageImport)
    ada, bob = translate_stage(BROWSER, "ada", body), translate_stage(BROWSER, "bob", body)
    (stored,) = ada.assets  # the same bytes twice are one asset
    assert stored.kind == "image" and [m.asset_id for m in ada.outline.scenes[0].media] == [stored.id, stored.id]
    assert bob.assets[0].id != stored.id


def test_a_media_element_id_of_another_shape_gets_one_of_ours():
    body = msgspec.convert({
        "stage": {"id": "st"},
        "scenes": [{"id": "s", "type": "slide", "content": {"type": "slide", "canvas": {"elements": [
            {"id": "pic 1/ü", "type": "image", "src": "gen_img_1"}]}}}],
        "media": [{"id": "st:gen_img_1", "type": "image", "mimeType": "image/png", "data": "AAAA"}]}, StageImport)
    (media,) = translate_stage(BROWSER, "ada", body).outline.scenes[0].media
    assert media.element_id.startswith("el-") and media.status == "done"
    assert media == translate_stage(BROWSER, "ada", body).outline.scenes[0].media[0]
