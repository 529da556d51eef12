"""Model answers made valid, never trusted (openmaic.steps.outputs, openmaic.steps.contents), pure.

Each case is a broken shape real models produce: truncated JSON, prose around it, wrong types, unknown element
types, elements off the canvas, invented picture URLs, HTML with scripts, answers as labels. Whatever comes out
must pass the course format's validator.
"""

from __future__ import annotations

import json

import msgspec
import pytest

from openmaic.courses import format as fmt
from openmaic.models.errors import OutputInvalid
from openmaic.steps.contents import read_interactive, read_quiz, read_slide
from openmaic.steps.outputs import preset_roster, read_actions, read_agents, read_outline


def scene_of(content: fmt.SceneContent, actions: list[fmt.Action] | None = None) -> fmt.Scene:
    scene = fmt.Scene(id="s1", stageId="c1", type=content.type, title="Leaves", order=1,  # type: ignore[arg-type]
                      content=content)
    return msgspec.structs.replace(scene, actions=actions) if actions else scene


def assert_valid(scene: fmt.Scene) -> None:
    assert fmt.validate_scene(fmt.to_json(scene), stage_id="c1") == []


# -- the outline -------------------------------------------------------------------------------------------------


def test_a_truncated_outline_keeps_its_complete_scenes_with_ids_orders_and_run_refs():
    text = ('Here is the plan:\n```json\n{"languageDirective": "Teach in English.", "courseTitle": "Leaves", '
            '"outlines": [{"type": "slide", "title": "What leaves do", "description": "Intro", "keyPoints": '
            '["light", "water"], "mediaGenerations": [{"type": "image", "prompt": "a leaf", "elementId": '
            '"gen_img_1"}]}, {"type": "quiz", "title": "Check", "description": "q"}, {"type": "slide", "title": "Tru')
    out = read_outline(text, salt="run-1")
    assert [(o.type, o.title, o.order, o.id) for o in out.outlines] == \
        [("slide", "What leaves do", 1, "scene_1"), ("quiz", "Check", 2, "scene_2")]
    ref = out.outlines[0].mediaGenerations[0].elementId  # type: ignore[index]
    assert ref.startswith("gen_img_") and ref != "gen_img_1"
    assert read_outline(text, salt="run-1").outlines[0].mediaGenerations[0].elementId == ref  # type: ignore[index]
    assert out.outlines[1].quizConfig == fmt.QuizConfig(questionCount=3, difficulty="medium", questionTypes=["single"])
    assert out.course_title == "Leaves" and out.language_directive == "Teach in English."


def test_outline_entries_of_unknown_or_unbuildable_types_become_slides_and_media_off_are_dropped():
    text = json.dumps({"outlines": [
        {"type": "video-lesson", "title": "A", "description": "d"},
        {"type": "interactive", "title": "B", "description": "no widget"},
        {"type": "interactive", "title": "C", "description": "sim", "widgetType": "simulation"},
        {"type": "slide", "description": "Only a description here", "keyPoints": "one\ntwo",
         "mediaGenerations": [{"type": "video", "prompt": "v"}]},
    ]})
    out = read_outline(text, salt="x", video_generation=False)
    assert [o.type for o in out.outlines] == ["slide", "slide", "interactive", "slide"]
    assert out.outlines[2].widgetOutline == {"concept": "C"}
    assert out.outlines[3].title == "Only a description here" and out.outlines[3].keyPoints == ["one", "two"]
    assert out.outlines[3].mediaGenerations is fmt.UNSET


@pytest.mark.parametrize("text", ["", "no json at all", '{"outlines": "nope"}', '{"outlines": [1, 2]}'])
def test_an_outline_with_nothing_usable_is_refused_with_the_problem_named(text):
    with pytest.raises(OutputInvalid, match="outline"):
        read_outline(text, salt="x")


def test_a_roster_needs_two_agents_and_exactly_one_teacher():
    ok = read_agents('{"agents": [{"name": "Ms A", "role": "teacher", "persona": "p"}, '
                     '{"name": "Bo", "role": "classmate", "persona": "q"}]}')
    assert ok is not None and [(a.id, a.role) for a in ok] == [("gen-server-0", "teacher"), ("gen-server-1", "student")]
    assert all(a.avatar and a.color and a.priority for a in ok)
    assert read_agents('{"agents": [{"name": "A", "role": "teacher"}, {"name": "B", "role": "teacher"}]}') is None
    assert read_agents("[truncated") is None
    presets = preset_roster()
    assert presets[0].id == "default-1" and presets[0].role == "teacher"


# -- a slide -----------------------------------------------------------------------------------------------------


def test_a_slide_keeps_what_it_can_and_nothing_invalid():
    text = json.dumps({"background": {"type": "image", "image": {"src": "https://evil.example/x.png"}},
                       "elements": [
        {"id": "t", "type": "text", "left": 1200, "top": -40, "width": 2000, "height": 70,
         "content": '<p onclick="steal()">Hi<script>alert(1)</script></p>'},
        {"id": "t", "type": "text", "left": 60, "top": 100, "width": 400, "height": 50, "content": "<p>Two</p>"},
        {"id": "i", "type": "image", "left": 500, "top": 100, "width": 300, "height": 200,
         "src": "https://evil.example/x.png"},
        {"id": "g", "type": "image", "left": 500, "top": 100, "width": 300, "height": 200, "src": "gen_img_ab"},
        {"id": "v", "type": "video", "left": 500, "top": 300, "width": 300, "height": 200, "src": "gen_vid_cd"},
        {"id": "z", "type": "hologram", "left": 0, "top": 0, "width": 10, "height": 10},
        {"id": "l", "type": "line", "left": 10, "top": 10, "width": 3, "height": 5, "rotate": 90,
         "end": [100, 0]},
        {"id": "m", "type": "latex", "left": 60, "top": 400, "width": 300, "height": 80, "latex": "E = mc^2"},
        {"id": "bad", "type": "shape", "left": "x", "top": 0, "width": 10, "height": 10},
    ]})
    content = read_slide(text, {"gen_img_ab": "image", "gen_vid_cd": "video"})
    elements = content.canvas.elements
    assert [e.type for e in elements] == ["text", "text", "image", "video", "line", "latex"]
    assert len({e.id for e in elements}) == len(elements)
    first = elements[0]
    assert first.left + first.width <= 1000 and first.top >= 0  # type: ignore[union-attr]
    image, video = elements[2], elements[3]
    assert image.src == "gen_img_ab" and video.mediaRef == "gen_vid_cd"  # type: ignore[union-attr]
    assert isinstance(elements[4], fmt.LineElement) and elements[4].start == (0, 0)
    assert "<math" in elements[5].html  # type: ignore[union-attr]
    assert content.canvas.background == fmt.Background(type="solid", color="#ffffff")
    scene = fmt.decode_scene(fmt.to_json(scene_of(content)), stage_id="c1")  # the door every write goes through
    html = scene.content.canvas.elements[0].content  # type: ignore[union-attr]
    assert "script" not in html and "onclick" not in html and "Hi" in html


def test_a_slide_without_any_usable_element_is_refused():
    with pytest.raises(OutputInvalid, match="no usable element"):
        read_slide('{"elements": [{"type": "hologram"}]}', {})
    with pytest.raises(OutputInvalid, match="elements"):
        read_slide("I cannot draw slides.", {})


# -- a quiz ------------------------------------------------------------------------------------------------------


def test_quiz_answers_as_labels_indexes_and_letters_become_option_values():
    text = json.dumps([
        {"type": "single", "question": "2+2?", "options": ["3", "4", "5"], "answer": "4", "points": 5},
        {"question": "Pick evens", "type": "multiple", "options": [{"label": "2", "value": "A"},
                                                                    {"label": "3", "value": "B"},
                                                                    {"label": "4", "value": "C"}],
         "correctAnswer": ["a", "C"]},
        {"type": "single", "question": "Index?", "options": ["x", "y"], "correct_answer": 1},
        {"type": "single", "question": "No answer", "options": ["x", "y"]},
        {"type": "short_answer", "question": "Why?", "options": ["ignored"], "answer": ["A"]},
        {"type": "text", "question": "Explain"},
    ])
    quiz = read_quiz(text)
    assert [(q.type, q.answer) for q in quiz.questions] == [
        ("single", ["B"]), ("multiple", ["A", "C"]), ("single", ["B"]), ("short_answer", fmt.UNSET),
        ("short_answer", fmt.UNSET)]
    short = quiz.questions[3]
    assert short.options is fmt.UNSET and short.hasAnswer is False and short.commentPrompt
    assert quiz.questions[0].points == 5 and quiz.questions[1].points == 1
    assert_valid(scene_of(quiz))


def test_a_quiz_with_no_usable_question_is_refused():
    with pytest.raises(OutputInvalid, match="quiz"):
        read_quiz('[{"type": "single", "question": "?", "options": ["a"], "answer": "a"}]')


# -- an interactive page -------------------------------------------------------------------------------------------


def test_an_interactive_page_is_taken_from_prose_and_its_widget_config_read():
    page = ('<!DOCTYPE html><html><body><input id="speed-slider">'
            '<script type="application/json" id="widget-config">{"type": "simulation", "concept": "v"}</script>'
            "</body></html>")
    content = read_interactive(f"Sure! Here it is:\n{page}\nEnjoy.", "simulation")
    assert content.html == page and content.url == "" and content.widgetType == "simulation"
    assert content.widgetConfig == {"type": "simulation", "concept": "v"}
    assert_valid(scene_of(content))
    with pytest.raises(OutputInvalid, match="HTML"):
        read_interactive("I would rather not.", None)


# -- a script ------------------------------------------------------------------------------------------------------


def slide() -> fmt.SlideContent:
    return read_slide(json.dumps({"elements": [
        {"type": "text", "left": 60, "top": 50, "width": 880, "height": 70, "content": "<p>Title</p>"},
        {"type": "line", "left": 60, "top": 200, "width": 3, "start": [0, 0], "end": [100, 0]},
        {"type": "video", "left": 500, "top": 300, "width": 300, "height": 200, "mediaRef": "gen_vid_a"},
    ]}), {"gen_vid_a": "video"})


AGENTS = [fmt.AgentConfig(id="t", name="T", role="teacher", persona="", avatar="a", color="#000", priority=10),
          fmt.AgentConfig(id="s", name="S", role="student", persona="", avatar="a", color="#000", priority=5)]


def test_a_script_points_only_at_elements_that_exist_and_ends_at_its_discussion():
    content = slide()
    title, line, video = (e.id for e in content.canvas.elements)
    text = json.dumps([
        {"type": "action", "name": "spotlight", "params": {"elementId": "nope"}},
        {"type": "text", "content": "  Hello  class "},
        {"type": "action", "name": "laser", "params": {"elementId": line}},
        {"type": "action", "name": "laser", "params": {"elementId": "ghost"}},
        {"type": "action", "name": "play_video", "params": {"elementId": title}},
        {"type": "action", "name": "play_video", "params": {"elementId": video}},
        {"tool_name": "discussion", "parameters": {"topic": "Why?", "agentId": "nobody"}},
        {"type": "text", "content": "never reached"},
    ])[:-5]  # and the answer was cut off
    actions = read_actions(text, scene_of(content), AGENTS)
    assert [a.type for a in actions] == ["spotlight", "speech", "play_video", "discussion"]
    assert actions[0].elementId == title and actions[1].text == "Hello class"  # type: ignore[union-attr]
    assert actions[2].elementId == video and actions[3].agentId == "s"  # type: ignore[union-attr]
    assert len({a.id for a in actions}) == len(actions)
    assert_valid(scene_of(content, actions))


def test_quiz_and_interactive_scripts_keep_only_what_their_scene_can_play():
    quiz = read_quiz('[{"type": "single", "question": "?", "options": ["a", "b"], "answer": "A"}]')
    text = json.dumps([{"type": "action", "name": "spotlight", "params": {"elementId": "x"}},
                       {"type": "text", "content": "Take your time."},
                       {"type": "action", "name": "widget_setState", "params": {}}])
    assert [a.type for a in read_actions(text, scene_of(quiz), AGENTS)] == ["speech"]
    page = read_interactive("<html><body>x</body></html>", "simulation")
    kept = read_actions(text, scene_of(page), AGENTS)
    assert [a.type for a in kept] == ["speech", "widget_setState"] and kept[1].state == {}  # type: ignore[union-attr]


def test_a_script_with_no_speech_gets_a_default_in_the_course_language():
    content = slide()
    actions = read_actions("[]", scene_of(content), AGENTS, language="zh-CN")
    assert [a.type for a in actions] == ["spotlight", "speech"]
    quiz = read_quiz('[{"type": "single", "question": "?", "options": ["a", "b"], "answer": "A"}]')
    (speech,) = read_actions("garbage", scene_of(quiz), AGENTS, language="zh-CN")
    assert "题目" in speech.text  # type: ignore[union-attr]
