"""The generation pipeline's own prompts and readers, fed by the offline demo model: whole courses, pure.

For 50 random requirements (English and Chinese, with and without interactive scenes, media and preset agents) the
steps run as a run runs them — the outline's messages, the demo's answer, the outline read and made valid; then per
scene the content's messages, answer and reader; then the script's — and every scene must pass the course format's
validator, every action's element id must exist on its slide, and every member of every generated value must be one
the format defines (compared field by field with the format's structs, as golden documents are).
"""

from __future__ import annotations

import random
import typing
from typing import Any

import msgspec
import pytest

from openmaic.courses import format as fmt
from openmaic.models import demo_course
from openmaic.steps import prompts
from openmaic.steps.brief import AgentsChoice, RunInput
from openmaic.steps.contents import read_interactive, read_quiz, read_slide
from openmaic.steps.outputs import preset_roster, read_actions, read_agents, read_outline
from openmaic.steps.scenes import media_of, summarize

TOPICS_EN = ["photosynthesis", "Ohm's law", "binary search", "the French Revolution", "compound interest",
             "the water cycle", "SQL joins", "plate tectonics", "fractions", "how vaccines work"]
TOPICS_ZH = ["光合作用", "欧姆定律", "二分查找", "法国大革命", "复利", "水循环", "分数", "板块构造"]
AUDIENCES_EN = ["for 10-year-olds", "for high school students", "for university students", "for nurses", ""]
AUDIENCES_ZH = ["给小学生讲解", "给高中生讲解", "面向大学生", ""]


def requirement(rng: random.Random) -> tuple[str, str]:
    if rng.random() < 0.4:
        return f"{rng.choice(TOPICS_ZH)}入门，{rng.choice(AUDIENCES_ZH)}".rstrip("，"), "zh-CN"
    hands_on = rng.choice(["", ", hands-on", ", with pictures"])
    return f"{rng.choice(TOPICS_EN)} {rng.choice(AUDIENCES_EN)}{hands_on}".strip(), "en"


def struct_members(tp: Any, value: Any, path: str) -> list[str]:
    """Every member of ``value`` (the JSON of a struct of type ``tp``) that ``tp`` does not define, recursively."""
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in struct_members(tp, v, f"{path}/{i}")]
    if not isinstance(value, dict):
        return []
    if hasattr(tp, "__args__") and not isinstance(tp, type):  # a union: the member whose tag matches
        options = [t for t in tp.__args__ if isinstance(t, type) and issubclass(t, msgspec.Struct)]
        tagged = [t for t in options if t.__struct_config__.tag == value.get("type")]
        tp = tagged[0] if tagged else (options[0] if len(options) == 1 else None)
    if not (isinstance(tp, type) and issubclass(tp, msgspec.Struct)):
        return []
    fields = {f.encode_name: f for f in msgspec.structs.fields(tp)}
    tag = tp.__struct_config__.tag_field
    out = []
    for key, member in value.items():
        if key == tag:
            continue
        if key not in fields:
            out.append(f"{path}/{key}")
            continue
        field_type = next(f.type for f in msgspec.structs.fields(tp) if f.encode_name == key)
        out += struct_members(_unwrap(field_type), member, f"{path}/{key}")
    return out


def _unwrap(tp: Any) -> Any:
    """A field's struct type (or union of them), through ``Opt[…]`` and ``list[…]``."""
    args = getattr(tp, "__args__", None)
    if args is None:
        return tp
    origin = getattr(tp, "__origin__", None)
    if origin in (list, tuple):
        return _unwrap(args[0])
    structs = [a for a in args if isinstance(a, type) and issubclass(a, msgspec.Struct)]
    if len(structs) == 1:
        return structs[0]
    if structs:
        return typing.Union[tuple(structs)]  # noqa: UP007 - a union built at run time
    lists = [a for a in args if getattr(a, "__origin__", None) in (list, tuple)]
    return _unwrap(lists[0]) if lists else tp


def build(seed: int) -> tuple[list[fmt.Scene], dict[str, Any]]:
    rng = random.Random(seed)
    text, language = requirement(rng)
    interactive = rng.random() < 0.5
    presets = rng.random() < 0.3
    inp = RunInput(requirement=text, language=language, interactive=interactive,
                   agents=AgentsChoice(mode="preset", agent_ids=["default-1", "default-3"]) if presets else
                   AgentsChoice())
    media_on = rng.random() < 0.7
    outline = read_outline(demo_course.answer(prompts.outline_messages(
        inp, "", image_generation=media_on, video_generation=media_on)), salt=f"run-{seed}",
        image_generation=media_on, video_generation=media_on)
    course = prompts.CourseBrief(title=outline.course_title, language_directive=outline.language_directive,
                                 outlines=tuple(outline.outlines))
    agents = preset_roster(["default-1", "default-3"]) if presets else \
        read_agents(demo_course.answer(prompts.agents_messages(inp, course))) or preset_roster()
    scenes = []
    for i, o in enumerate(course.outlines):
        messages = prompts.content_messages(inp, course, i, "", media=media_of(o), teacher=agents[0])
        reply = demo_course.answer(messages)
        if o.type == "quiz":
            content: fmt.SceneContent = read_quiz(reply)
        elif o.type == "interactive":
            content = read_interactive(reply, o.widgetType if isinstance(o.widgetType, str) else None)
        else:
            content = read_slide(reply, {m["ref"]: m["type"] for m in media_of(o)})
        scene = fmt.Scene(id=f"s{i}", stageId="c", type=content.type, title=o.title, order=i + 1,  # type: ignore[arg-type]
                          content=content)
        script = demo_course.answer(prompts.actions_messages(inp, course, i, agents=agents, **summarize(content)))
        actions = read_actions(script, scene, agents, outline=o, language=language)
        scenes.append(msgspec.structs.replace(scene, actions=actions))
    return scenes, {"language": language, "interactive": interactive, "media": media_on, "outline": outline}


@pytest.mark.parametrize("seed", range(50))
def test_a_course_the_pipeline_makes_of_the_demos_answers_is_valid_and_only_in_the_format(seed):
    scenes, facts = build(seed)
    assert 4 <= len(scenes) <= 8
    types = {s.type for s in scenes}
    assert "quiz" in types and ("interactive" in types or not facts["interactive"])
    stage = fmt.Stage(id="c", name=facts["outline"].course_title, createdAt=1, updatedAt=1)
    document = fmt.to_json(fmt.Document(stage=stage, scenes=scenes))
    assert fmt.validate_document(document) == []
    for scene, value in zip(scenes, document["scenes"], strict=True):
        assert struct_members(fmt.Scene, value, f"/{scene.id}") == []  # field by field: nothing outside the format
        elements = {e.id for e in scene.content.canvas.elements} if scene.type == "slide" else set()  # type: ignore[union-attr]
        for a in scene.actions or []:
            if a.type in ("spotlight", "laser", "play_video"):  # (a whiteboard drawing's elementId is its own)
                assert a.elementId in elements, (scene.id, a)
        discussions = [i for i, a in enumerate(scene.actions or []) if a.type == "discussion"]
        assert discussions in ([], [len(scene.actions or []) - 1])
        if facts["language"] == "zh-CN":
            assert any("\u4e00" <= ch <= "\u9fff" for a in scene.actions or [] if a.type == "speech" for ch in a.text)
    refs = {m.elementId for o in facts["outline"].outlines for m in o.mediaGenerations or []}
    placed = {e.src if e.type == "image" else e.mediaRef for s in scenes if s.type == "slide"
              for e in s.content.canvas.elements if e.type in ("image", "video")}  # type: ignore[union-attr]
    assert placed <= refs and (bool(refs) or not placed)
    if not facts["media"]:
        assert not refs


def test_the_struct_check_can_fail():
    scene = fmt.to_json(build(0)[0][0])
    scene["content"]["canvas"]["elements"][0]["sparkle"] = True
    scene["surprise"] = 1
    assert sorted(struct_members(fmt.Scene, scene, "")) == ["/content/canvas/elements/0/sparkle", "/surprise"]
