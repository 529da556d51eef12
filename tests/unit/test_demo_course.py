"""Whole demo courses, built from the demo model's answers the way generation asks for them, checked end to end.

Fifty requirements (English and Chinese; with and without an interactive scene; with and without generated
media): every answer parses; slides carry the canvas fields and stay inside the canvas; actions name elements of
their slide; discussions come last, at most one in the course; the language is the requirement's everywhere; and
every scene, built around the answers as the pipeline builds it, passes the course format's validators.
"""

from __future__ import annotations

import json
import random
import re
import shutil
import subprocess
from typing import Any

import pytest

from openmaic.courses.format import (
    DEFAULT_THEME,
    decode_scene,
    normalize_elements,
    parse_json_response,
    render_latex,
    scene_element_ids,
    to_json,
    validate_action,
    validate_scene,
)
from tests.demo_courses import HAN, Course, build_course, plain, random_requirements

REQUIREMENTS = random_requirements(50, random.Random(20261202))
CANVAS = (50.0, 50.0, 950.0, 512.5)
BASE = ("id", "type", "left", "top", "width", "height", "rotate")
TYPE_FIELDS = {
    "text": ("content", "defaultFontName", "defaultColor"),
    "image": ("src", "fixedRatio"),
    "shape": ("viewBox", "path", "fixedRatio", "fill"),
    "chart": ("chartType", "data", "themeColors"),
    "table": ("outline", "colWidths", "cellMinHeight", "data"),
    "latex": ("latex",),
    "video": ("autoplay",),
}
SLIDE_ACTIONS = {"spotlight", "laser", "play_video", "discussion", "wb_open", "wb_draw_text", "wb_draw_latex",
                 "wb_draw_line", "wb_draw_shape", "wb_close"}  # fmt: skip
WIDGET_ACTIONS = {"widget_highlight", "widget_setState", "widget_annotation", "widget_reveal"}

_COURSES: dict[tuple[str, bool, bool, bool], Course] = {}


def course_for(case: tuple[str, bool, bool, bool]) -> Course:
    if case not in _COURSES:
        requirement, interactive, image, video = case
        _COURSES[case] = build_course(requirement, interactive=interactive, image=image, video=video)
    return _COURSES[case]


def ids(case: tuple[str, bool, bool, bool]) -> str:
    return f"{case[0][:40]}|i{int(case[1])}m{int(case[2])}v{int(case[3])}"


def is_chinese(case: tuple[str, bool, bool, bool]) -> bool:
    return bool(HAN.search(case[0]))


def box(el: dict[str, Any]) -> tuple[float, float, float, float]:
    if el["type"] == "line":
        xs = [el["left"] + el["start"][0], el["left"] + el["end"][0]]
        ys = [el["top"] + el["start"][1], el["top"] + el["end"][1]]
        return min(xs), min(ys), max(xs), max(ys)
    return el["left"], el["top"], el["left"] + el["width"], el["top"] + el["height"]


def needed_height(content: str, width: float) -> float:
    """A lower bound on what the canvas needs for a text box: no word-wrap waste, a CJK character one em wide,
    anything else 0.5 em; line-height 1.5 and 10 px padding on each side."""
    lines = 0
    size = 16.0
    for m in re.finditer(r'<p style="font-size: (\d+)px;[^"]*">(.*?)</p>', content):
        size = float(m.group(1))
        text = plain(m.group(2))
        drawn = sum(size if HAN.match(ch) else size * 0.5 for ch in text)
        lines += max(1, -(-drawn // (width - 20)))
    return 1.5 * size * lines + 20


def slide_scene(s: Any, order: int, stage: str) -> dict[str, Any]:
    """The slide scene as generation assembles it: elements normalized (none dropped, their HTML unchanged by
    the sanitizer beyond how styles are spelled), formulas rendered, the canvas of the default theme around them."""
    elements, problems = normalize_elements(s.content["elements"])
    assert problems == [] and len(elements) == len(s.content["elements"])
    out = []
    for written, typed in zip(s.content["elements"], elements, strict=True):
        el = to_json(typed)
        for key in ("content", "text"):  # the sanitizer may respell styles, never drop text or sizes
            before = written.get(key) if key == "content" else (written.get("text") or {}).get("content")
            after = el.get(key) if key == "content" else (el.get("text") or {}).get("content")
            if before is not None:
                sizes = re.compile(r"font-size:\s*(\d+)px")
                assert plain(after) == plain(before) and sizes.findall(after) == sizes.findall(before)
        if el["type"] == "latex":
            el["html"] = render_latex(el["latex"])
        out.append(el)
    return {
        "id": f"scene_{order}", "stageId": stage, "type": "slide", "title": s.outline["title"], "order": order,
        "content": {"type": "slide", "canvas": {
            "id": f"canvas_{order}", "viewportSize": 1000, "viewportRatio": 0.5625, "theme": to_json(DEFAULT_THEME),
            "elements": out, "background": s.content["background"]}},
    }  # fmt: skip


def as_actions(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Action items as scene actions, as generation turns them (text → speech, action → its params)."""
    out = []
    for i, item in enumerate(items):
        if item["type"] == "text":
            out.append({"id": f"action_{i}", "type": "speech", "text": item["content"]})
        else:
            out.append({"id": f"action_{i}", "type": item["name"], **item["params"]})
    return out


@pytest.mark.parametrize("case", REQUIREMENTS, ids=ids)
def test_the_outline_plans_a_teaching_sequence(case):
    course = course_for(case)
    outline = course.outline
    assert set(outline) == {"languageDirective", "courseTitle", "outlines"}
    assert 0 < len(outline["courseTitle"]) <= 30 and outline["languageDirective"].count(".") + \
        outline["languageDirective"].count("。") >= 2  # fmt: skip
    scenes = outline["outlines"]
    assert 5 <= len(scenes) <= 8
    assert [s["order"] for s in scenes] == list(range(1, len(scenes) + 1))
    assert scenes[0]["type"] == "slide" and scenes[-1]["type"] == "slide"
    titles = [s["title"] for s in scenes]
    assert len(set(titles)) == len(titles)
    for s in scenes:
        assert s["title"].strip() and s["description"].strip()
        assert 3 <= len(s["keyPoints"]) <= 5 and len(set(s["keyPoints"])) == len(s["keyPoints"])
    quizzes = [s for s in scenes if s["type"] == "quiz"]
    assert quizzes
    for q in quizzes:
        assert set(q["quizConfig"]["questionTypes"]) == {"single", "multiple", "short_answer"}
        assert q["quizConfig"]["difficulty"] in ("easy", "medium", "hard") and q["quizConfig"]["questionCount"] >= 3
    interactive = [s for s in scenes if s["type"] == "interactive"]
    asks = case[1] or bool(re.search(r"interactive|hands-on|互动", case[0], re.I))
    assert len(interactive) == (1 if asks else 0)
    for s in interactive:
        assert s["widgetType"] in ("simulation", "diagram", "game") and isinstance(s["widgetOutline"], dict)
    media = [(s, m) for s in scenes for m in s.get("mediaGenerations", [])]
    if case[2] or case[3]:
        assert 1 <= len({s["id"] for s, _ in media}) <= 2
        assert all(s["type"] == "slide" for s, _ in media)
        assert {m["type"] for _, m in media} == ({"image"} if case[2] else set()) | ({"video"} if case[3] else set())
        for _, m in media:
            assert set(m) == {"type", "prompt", "elementId", "aspectRatio"} and m["aspectRatio"] == "16:9"
    else:
        assert media == []


@pytest.mark.parametrize("case", REQUIREMENTS, ids=ids)
def test_every_slide_element_is_complete_and_inside_the_canvas(case):
    course = course_for(case)
    layouts = set()
    for s in course.scenes:
        if s.outline["type"] != "slide":
            continue
        slide = s.content
        assert set(slide) <= {"background", "elements", "remark"}
        assert slide["background"]["type"] in ("solid", "gradient")
        elements = slide["elements"]
        assert elements and len({e["id"] for e in elements}) == len(elements)
        for el in elements:
            if el["type"] == "line":
                assert "height" not in el and "rotate" not in el
                assert {"start", "end", "style", "color", "points"} <= set(el) and 2 <= el["width"] <= 6
            else:
                assert all(k in el for k in BASE), el
                assert el["width"] > 0 and el["height"] > 0
            for k in TYPE_FIELDS.get(el["type"], ()):
                assert k in el, (k, el)
            left, top, right, bottom = box(el)
            assert left >= CANVAS[0] and top >= CANVAS[1] and right <= CANVAS[2] + 0.01 and bottom <= CANVAS[3] + 0.01, el
            if el["type"] == "text":
                assert re.fullmatch(r'(<p style="font-size: \d+px;[^"]*">.*?</p>)+', el["content"]), el["content"]
                assert el["height"] >= needed_height(el["content"], el["width"]), el
            if el["type"] == "latex":
                assert el["latex"] and "html" not in el and "path" not in el
            if el["type"] == "chart":
                data = el["data"]
                assert len(data["series"]) == len(data["legends"])
                assert all(len(row) == len(data["labels"]) for row in data["series"])
            if el["type"] == "table":
                assert abs(sum(el["colWidths"]) - 1) < 1e-9
        refs = {m["ref"]: m["type"] for m in s.media}
        for m in s.media:
            placed = [e for e in elements if e.get("src") == m["ref"] or e.get("mediaRef") == m["ref"]]
            assert placed and placed[0]["type"] == m["type"]
        for el in elements:
            if el["type"] == "image":
                assert refs.get(el["src"]) == "image"
            if el["type"] == "video":
                assert refs.get(el["mediaRef"]) == "video"
        layouts.add(frozenset(re.sub(r"_\d+$", "", i) for i in s.written_ids))
    assert len(layouts) >= 4  # several layouts, not one template


@pytest.mark.parametrize("case", REQUIREMENTS, ids=ids)
def test_actions_name_real_elements_and_keep_the_discussion_last(case):
    course = course_for(case)
    student_ids = {a["id"] for a in course.roster if a["role"] == "student"}
    discussions = 0
    for n, s in enumerate(course.scenes):
        items = s.actions
        assert items and all(i["type"] in ("text", "action") for i in items)
        names = [i["name"] for i in items if i["type"] == "action"]
        speech = [i["content"] for i in items if i["type"] == "text"]
        assert all(t.strip() and "<" not in t for t in speech)
        kind = s.outline["type"]
        if kind == "quiz":
            assert names == [] and len(speech) == 1
            assert not any(o["label"] in speech[0] for q in s.content for o in q.get("options", []))
            continue
        if kind == "interactive":
            assert set(names) <= WIDGET_ACTIONS and len(set(names)) >= 3
            inventory = set(s.actions_brief["widget"]["selectors"])
            for i in items:
                if i["type"] == "action" and "target" in i["params"]:
                    assert i["params"]["target"] in inventory
                if i["type"] == "action" and i["name"] == "widget_setState":
                    assert isinstance(i["params"]["state"], dict) and i["params"]["state"]
            continue
        assert set(names) <= SLIDE_ACTIONS, names
        by_id = {e["id"]: e for e in s.actions_brief["elements"]}
        for k, i in enumerate(items):
            if i["type"] != "action":
                continue
            p = i["params"]
            if i["name"] in ("spotlight", "laser", "play_video"):
                assert p["elementId"] in by_id
                # the effect comes before the speech about its element
                assert k + 1 < len(items) or i["name"] == "play_video"
            if i["name"] == "laser":
                assert by_id[p["elementId"]]["type"] != "line"
            if i["name"] == "play_video":
                assert by_id[p["elementId"]]["type"] == "video" and items[k - 1]["type"] == "text"
            if i["name"] == "discussion":
                assert k == len(items) - 1 and p["agentId"] in student_ids and p["topic"].strip()
                assert 0 < n < len(course.scenes) - 1
                discussions += 1
        videos = [e["id"] for e in s.actions_brief["elements"] if e["type"] == "video"]
        assert sorted(videos) == sorted(i["params"]["elementId"] for i in items
                                        if i["type"] == "action" and i["name"] == "play_video")  # fmt: skip
        wb = [x for x in names if x.startswith("wb_")]
        if wb:
            assert wb[0] == "wb_open" and wb[-1] == "wb_close" and wb.count("wb_open") == 1
        greets = bool(re.search(r"\bwelcome\b|欢迎|同学们好", speech[0], re.I))
        assert greets == (n == 0)
    assert discussions <= 1


@pytest.mark.parametrize("case", REQUIREMENTS, ids=ids)
def test_quizzes_and_pages_meet_the_format(case):
    course = course_for(case)
    for s in course.scenes:
        if s.outline["type"] == "quiz":
            cfg = s.outline["quizConfig"]
            questions = s.content
            assert isinstance(questions, list) and len(questions) == cfg["questionCount"]
            assert {q["type"] for q in questions} <= set(cfg["questionTypes"])
            assert {q["type"] for q in questions} == {"single", "multiple", "short_answer"}
            letters = []
            for q in questions:
                assert q["question"].strip() and q["analysis"].strip() and q["points"] > 0
                if q["type"] == "short_answer":
                    assert q["commentPrompt"].strip() and "options" not in q and "answer" not in q
                    continue
                values = [o["value"] for o in q["options"]]
                assert values == ["A", "B", "C", "D"] and len({o["label"] for o in q["options"]}) == 4
                assert q["answer"] and set(q["answer"]) <= set(values)
                assert len(q["answer"]) == 1 if q["type"] == "single" else len(q["answer"]) >= 2
                letters.append(tuple(q["answer"]))
            singles = [a for (a, *rest) in letters if not rest]
            assert len(singles) < 2 or len(set(singles)) > 1  # the correct option moves
        if s.outline["type"] == "interactive":
            page = s.content
            assert page.startswith("<!DOCTYPE html>") and page.count("<!DOCTYPE") == 1 and page.rstrip().endswith("</html>")
            assert re.search(r"https?:|//cdn|<link\b|@import|\burl\(|<iframe|\bsrc=", page) is None
            config = json.loads(re.search(r'id="widget-config">(.*?)</script>', page, re.S).group(1))
            assert config["type"] == s.outline["widgetType"]
            for message in ("SET_WIDGET_STATE", "HIGHLIGHT_ELEMENT", "ANNOTATE_ELEMENT", "REVEAL_ELEMENT"):
                assert message in page
            assert 'id="reset-btn"' in page and 'id="result-display"' in page and 'name="viewport"' in page
            for v in config.get("variables", []):
                assert f'id="{v["name"]}-slider"' in page
            assert f'<html lang="{"zh-CN" if is_chinese(case) else "en"}">' in page


@pytest.mark.parametrize("case", REQUIREMENTS, ids=ids)
def test_the_course_speaks_the_requirement_language(case):
    course = course_for(case)
    if not is_chinese(case):
        for text in course.answers():
            assert HAN.search(text) is None, HAN.search(text)
        return
    o = course.outline
    texts = [o["courseTitle"], o["languageDirective"]]
    for s in o["outlines"]:
        texts += [s["title"], s["description"], *s["keyPoints"]]
        texts += [m["prompt"] for m in s.get("mediaGenerations", [])]
    texts += [a[k] for a in course.agents for k in ("name", "persona")]
    for s in course.scenes:
        texts += [i["content"] for i in s.actions if i["type"] == "text"]
        texts += [i["params"]["topic"] for i in s.actions if i["type"] == "action" and i["name"] == "discussion"]
        if s.outline["type"] == "slide":
            for el in s.content["elements"]:
                shown = plain(el.get("content") or (el.get("text") or {}).get("content", ""))
                if re.search(r"[^\d\s.·●•]", shown):
                    texts.append(shown)
                if el["type"] == "table":
                    texts += [plain(c["text"]) for row in el["data"] for c in row]
        elif s.outline["type"] == "quiz":
            for q in s.content:
                texts += [q["question"], q["analysis"], *[x["label"] for x in q.get("options", [])]]
                texts += [q["commentPrompt"]] if "commentPrompt" in q else []
        else:
            texts.append(re.search(r"<title>(.*?)</title>", s.content).group(1))
    missing = [t for t in texts if not HAN.search(t)]
    assert missing == []


@pytest.mark.parametrize("case", REQUIREMENTS, ids=ids)
def test_scenes_pass_the_course_format_validators(case):
    course = course_for(case)
    stage = "stage_demo"
    for raw in (course.raw_outline, course.raw_agents):
        assert parse_json_response(raw) == json.loads(raw)
    for order, s in enumerate(course.scenes, 1):
        assert parse_json_response(s.raw_actions) == s.actions
        if s.outline["type"] != "interactive":
            assert parse_json_response(s.raw_content) == json.loads(s.raw_content)
        kind = s.outline["type"]
        if kind == "slide":
            scene = slide_scene(s, order, stage)
        elif kind == "quiz":
            questions = [{**q, "hasAnswer": q["type"] != "short_answer"} for q in s.content]
            scene = {"id": f"scene_{order}", "stageId": stage, "type": "quiz", "title": s.outline["title"],
                     "order": order, "content": {"type": "quiz", "questions": questions}}  # fmt: skip
        else:
            config = json.loads(re.search(r'id="widget-config">(.*?)</script>', s.content, re.S).group(1))
            scene = {"id": f"scene_{order}", "stageId": stage, "type": "interactive", "title": s.outline["title"],
                     "order": order, "content": {"type": "interactive", "html": s.content, "url": "",
                                                 "widgetType": s.outline["widgetType"], "widgetConfig": config}}  # fmt: skip
        actions = as_actions(s.actions)
        for a in actions:
            assert validate_action(a) == [], a
        scene["actions"] = actions
        assert validate_scene(scene, stage_id=stage) == []
        decoded = decode_scene(scene, stage_id=stage)
        assert decoded.title == s.outline["title"]
        named = {a["elementId"] for a in actions if a["type"] in ("spotlight", "laser", "play_video")}
        assert named <= scene_element_ids(scene)


def test_correct_options_use_every_letter():
    letters = set()
    for case in REQUIREMENTS:
        for s in course_for(case).scenes:
            if s.outline["type"] == "quiz":
                letters |= {q["answer"][0] for q in s.content if q["type"] == "single"}
    assert letters == {"A", "B", "C", "D"}


def test_most_courses_hold_one_discussion_and_some_whiteboard_work():
    names = [
        {i["name"] for s in course_for(case).scenes for i in s.actions if i["type"] == "action"}
        for case in REQUIREMENTS
    ]
    assert sum("discussion" in n for n in names) >= 40
    assert sum("wb_open" in n for n in names) >= 20


def test_the_same_requirement_gives_the_same_course():
    case = ("Teach 8th graders about photosynthesis, with an interactive exercise", True, True, True)
    first = build_course(*case[:1], interactive=True, image=True, video=True)
    second = build_course(*case[:1], interactive=True, image=True, video=True)
    # Element ids and media refs are the pipeline's (random); everything the demo writes is identical.
    assert first.raw_outline.count('"') == second.raw_outline.count('"')
    strip = re.compile(r"(gen_(?:img|vid)|[a-z]+)_[A-Za-z0-9]{8}\b")
    assert [strip.sub("ID", t) for t in first.answers()] == [strip.sub("ID", t) for t in second.answers()]
    other = build_course("An introduction to the French Revolution")
    assert other.outline != first.outline


@pytest.mark.skipif(shutil.which("node") is None, reason="no node to parse the page's script")
@pytest.mark.parametrize("widget", ["Ohm's law for university students", "The French Revolution for 8th graders",
                                    "English verb tenses for beginners", "给小学生讲解光合作用"])  # fmt: skip
def test_interactive_scripts_parse(widget, tmp_path):
    course = build_course(widget, interactive=True)
    page = next(s.content for s in course.scenes if s.outline["type"] == "interactive")
    script = re.findall(r"<script>(.*?)</script>", page, re.S)
    assert len(script) == 1
    path = tmp_path / "widget.js"
    path.write_text(script[0])
    result = subprocess.run(["node", "--check", str(path)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
