"""The demo model's wording: topics without template slips, the requirement's language and audience, text measured
the way the canvas draws it, briefs read from the messages, and the provider answering briefs."""

from __future__ import annotations

import json
import re

import pytest

from openmaic.models.demo import DemoProvider
from openmaic.models.demo_course import answer, has_brief, read_brief
from openmaic.models.demo_course.language import (
    audience,
    course_language,
    is_chinese_text,
    text_height,
    text_width,
    wrap,
)
from openmaic.models.demo_course.outline import outline
from openmaic.models.demo_course.topic import topic_of
from openmaic.models.types import AssistantMessage, SystemMessage, UserMessage
from tests.demo_courses import HAN, ask, build_course, plain


@pytest.mark.parametrize(
    ("requirement", "topic"),
    [
        ("A hands-on introduction to binary search", "binary search"),
        ("hands-on Introduction to binary search", "binary search"),
        ("Introduction to Introduction to Binary Search", "Binary Search"),
        ("Teach 8th graders about photosynthesis, with an interactive exercise", "photosynthesis"),
        ("Binary numbers for kids", "binary numbers"),
        ("binary numbers", "binary numbers"),
        ("Explain how photosynthesis works", "photosynthesis"),
        ("Create a short course on the French Revolution for high school students", "French Revolution"),
        ("An introduction to the French Revolution", "French Revolution"),
        ("lesson 3 on SQL joins", "SQL joins"),
        ("Make a hands-on lesson about compound interest for professionals", "compound interest"),
        ("Machine learning fundamentals for engineers", "machine learning"),
        ("Python programming basics", "Python programming"),
        ("给高中生讲解光合作用，包含互动练习", "光合作用"),
        ("请为小学生设计一门关于分数加法的互动课程", "分数加法"),
        ("二分查找入门", "二分查找"),
        ("我想学习机器学习的基础知识", "机器学习"),
        ("请设计一节课，主题是欧姆定律", "欧姆定律"),
        ("面向大学生的线性代数课程", "线性代数"),
        ("讲讲法国大革命", "法国大革命"),
    ],
)
def test_topic_extraction(requirement, topic):
    assert topic_of(requirement) == topic


def all_text(course) -> str:
    return "\n".join(course.answers())


def test_no_verb_is_conjugated_with_the_topic_as_subject():
    # "See what binary numbers is": the topic never stands before a verb it would have to agree with.
    for requirement in ("Binary numbers for kids", "Teach SQL joins to developers", "supply and demand"):
        course = build_course(requirement, interactive=True, image=True)
        text = all_text(course)
        topic = topic_of(requirement)
        assert topic.lower() in text.lower()
        slip = re.compile(rf"\b{re.escape(topic)}\s+(?:is|are|was|were|has|have|does|do|means|mean|shows|show|"
                          r"works|work|appears|appear|matters|matter)\b", re.I)  # fmt: skip
        assert slip.search(text) is None, slip.search(text)


@pytest.mark.parametrize("requirement", ["A hands-on introduction to binary search",
                                         "hands-on Introduction to binary search"])  # fmt: skip
def test_hands_on_is_not_a_topic_marker(requirement):
    course = build_course(requirement)
    text = all_text(course)
    assert "Introduction to Introduction" not in text and "Introduction to Binary" not in text
    assert course.outline["courseTitle"] == "Binary Search: The Essentials"
    slides = [s["title"] for s in course.outline["outlines"] if s["type"] == "slide"]
    assert all("Binary Search" in t for t in slides), slides


def test_a_topic_keeps_its_article_inside_a_phrase():
    o = outline({"step": "outline", "requirement": "An introduction to the French Revolution", "interactive": True})
    titles = [s["title"] for s in o["outlines"]]
    assert "Key Ideas of the French Revolution" in titles and "French Revolution: An Overview" in titles
    text = json.dumps(o)
    assert re.search(r"(?:of|about|behind|Explore) French Revolution", text, re.I) is None


def test_a_chinese_requirement_is_not_dropped_into_english_templates():
    requirement = "给高中生讲解光合作用，包含互动练习"
    course = build_course(requirement, image=True)
    o = course.outline
    assert o["courseTitle"] == "光合作用入门"
    for s in o["outlines"]:
        assert re.search(r"[A-Za-z]{3,}", s["title"] + s["description"] + "".join(s["keyPoints"])) is None, s
        assert "光合作用" in s["title"]
    # The whole request never stands in for the topic.
    assert "给高中生讲解光合作用" not in all_text(course) and "包含互动练习" not in all_text(course)
    assert any(s["type"] == "interactive" for s in o["outlines"])  # 互动 asks for an interactive scene


def test_language_detection():
    assert is_chinese_text("给高中生讲解光合作用")
    assert is_chinese_text("用Python写一个排序算法")  # a product name inside Chinese stays Chinese
    assert not is_chinese_text("Teach 光合作用 to kids in English please")
    assert not is_chinese_text("photosynthesis")
    assert course_language({"requirement": "光合作用", "language": "en-US"}) == "zh"
    assert course_language({"requirement": "Photosynthesis", "language": "zh-CN"}) == "en"
    assert course_language({"requirement": "", "language": "zh-CN"}) == "zh"
    assert course_language({}) == "en"


@pytest.mark.parametrize(
    ("requirement", "who"),
    [
        ("Fractions for kids", "children"),
        ("Teach 3rd graders about plants", "children"),
        ("Photosynthesis for 9-year-olds", "children"),
        ("Teach 8th graders about photosynthesis", "school"),
        ("Calculus for high school students", "school"),
        ("Linear algebra for university students", "university"),
        ("Kubernetes for software engineers", "professional"),
        ("The French Revolution", "general"),
        ("给小学生讲分数", "children"),
        ("给高中生讲解光合作用", "school"),
        ("面向大学生的线性代数课程", "university"),
        ("面向软件工程师的机器学习课程", "professional"),
    ],
)
def test_audience_detection(requirement, who):
    assert audience(requirement) == who


def test_the_audience_sets_length_quiz_and_directive():
    kids = outline({"step": "outline", "requirement": "Fractions for kids"})
    pros = outline({"step": "outline", "requirement": "Compound interest for financial analysts"})
    assert 5 <= len(kids["outlines"]) <= 6 and 6 <= len(pros["outlines"]) <= 8
    quiz = {o["type"]: o for o in kids["outlines"]}["quiz"]["quizConfig"]
    assert quiz["difficulty"] == "easy" and quiz["questionCount"] == 3
    assert {o["type"]: o for o in pros["outlines"]}["quiz"]["quizConfig"]["difficulty"] == "hard"
    assert "young learners" in kids["languageDirective"] and "professionals" in pros["languageDirective"]
    assert kids["outlines"][0]["title"] == "Meet Fractions!"
    zh = outline({"step": "outline", "requirement": "给小学生讲分数"})
    assert zh["outlines"][0]["title"] == "一起来认识分数"
    assert "小学生" in zh["languageDirective"] and "简体中文" in zh["languageDirective"]


def test_cjk_text_is_measured_one_em_per_character():
    assert text_width("光合作用", 20) == 80
    assert text_width("abcd", 20) < 50
    assert wrap("光合作用是植物利用光能制造有机物的过程", 20, 200) == ["光合作用是植物利用光", "能制造有机物的过程"]
    assert wrap("the quick brown fox jumps", 20, 120) == ["the quick", "brown fox", "jumps"]
    assert text_height(1, 32) == 70 and text_height(3, 16) == 94  # the heights of COURSE-FORMAT §3.3


def test_a_long_chinese_text_gets_a_taller_box_than_the_same_count_of_latin():
    def slide_for(point: str) -> dict:
        scene = {"id": "scene_2", "type": "slide", "title": "T", "description": "", "order": 2,
                 "keyPoints": [point]}  # fmt: skip
        brief = {"step": "slide", "requirement": "x", "scene": scene, "outlines": [{"title": "A"}, scene, {"title": "Z"}],
                 "media": []}  # fmt: skip
        return json.loads(ask(brief))

    zh = slide_for("光" * 120)
    en = slide_for("a" * 120)
    box = {e["id"]: e for e in zh["elements"]}
    latin = {e["id"]: e for e in en["elements"]}
    key = next(i for i in box if plain(box[i].get("content", "")).strip("•● ").startswith("光"))
    assert box[key]["height"] > latin[key]["height"]


def test_reading_the_brief():
    brief = {"step": "quiz", "requirement": "x"}
    text = f"Instructions mention Brief (JSON): inline, which is not a marker line.\nBrief (JSON):\n{json.dumps(brief, indent=2)}"
    assert read_brief([SystemMessage("s"), UserMessage(text)]) == brief
    # The last marker of the last user message counts.
    two = "Brief (JSON): {\"step\": \"outline\"}\nmore\nBrief (JSON): {\"step\": \"agents\"}"
    assert read_brief([UserMessage(two)]) == {"step": "agents"}
    assert read_brief([UserMessage("Brief (JSON): {\"step\": \"outline\"}"), AssistantMessage("ok"), UserMessage("hi")]) is None
    assert read_brief([{"role": "user", "content": "Brief (JSON): {\"step\": \"agents\"}"}]) == {"step": "agents"}
    assert read_brief([UserMessage("Brief (JSON): not json")]) is None
    assert read_brief([UserMessage("Brief (JSON): [1, 2]")]) is None
    assert not has_brief([UserMessage("just chatting")])


def test_an_unknown_step_is_a_clear_error():
    with pytest.raises(ValueError, match="'lecture' is not one the demo answers"):
        answer([UserMessage('Brief (JSON): {"step": "lecture"}')])
    with pytest.raises(ValueError, match="no 'Brief \\(JSON\\):' line"):
        answer([UserMessage("no brief here")])


def test_agents_are_a_teacher_an_assistant_and_two_students_in_the_course_language():
    en = json.loads(ask({"step": "agents", "requirement": "Photosynthesis for kids", "outlines": []}))["agents"]
    zh = json.loads(ask({"step": "agents", "requirement": "给小学生讲光合作用", "outlines": []}))["agents"]
    for roster in (en, zh):
        assert [a["role"] for a in roster] == ["teacher", "assistant", "student", "student"]
        assert len({a["name"] for a in roster}) == 4 and all(a["persona"] for a in roster)
    assert not any(HAN.search(a["name"] + a["persona"]) for a in en)
    assert all(HAN.search(a["name"]) and HAN.search(a["persona"]) for a in zh)


@pytest.mark.parametrize(
    ("requirement", "widget"),
    [("Ohm's law for university students", "simulation"), ("The French Revolution", "diagram"),
     ("English verb tenses for beginners", "game"), ("给初中生讲解勾股定理", "simulation")],
)  # fmt: skip
def test_the_widget_suits_the_subject(requirement, widget):
    o = outline({"step": "outline", "requirement": requirement, "interactive": True})
    scene = next(s for s in o["outlines"] if s["type"] == "interactive")
    assert scene["widgetType"] == widget


async def test_the_provider_answers_a_brief_in_a_text_turn():
    demo = DemoProvider()
    brief = {"step": "outline", "requirement": "Binary numbers for kids", "language": "en-US", "interactive": True}
    messages = [SystemMessage("sys"), UserMessage("Write the outline.\nBrief (JSON): " + json.dumps(brief))]
    deltas: list[str] = []
    turn = await demo.stream_turn("any", messages, [], on_delta=deltas.append)
    assert turn.tool_calls == [] and turn.text == "".join(deltas) == answer(messages)
    assert json.loads(turn.text)["courseTitle"] == "Binary Numbers: The Essentials"
    text = await demo.complete("any", messages, str)
    assert text == answer(messages)
    # Without a brief a text turn is still the chat echo.
    plain_turn = await demo.stream_turn("any", [UserMessage("hello")], [], on_delta=lambda _: None)
    assert plain_turn.text == "(demo) You said: hello"


def test_the_discussion_goes_to_a_middle_slide_even_when_outlines_are_titles():
    from openmaic.models.demo_course.actions import discussion_order

    titles = ["Fractions: An Overview", "Key Ideas of Fractions", "Quiz: Fractions", "Fractions in Everyday Life",
              "Fractions: Summary and Next Steps"]  # fmt: skip
    assert discussion_order({"outlines": titles}) == 2
    typed = [{"title": t, "type": "quiz" if i == 1 else "slide"} for i, t in enumerate(titles)]
    assert discussion_order({"outlines": typed}) == 3
    assert discussion_order({"outlines": titles[:2]}) == 0
