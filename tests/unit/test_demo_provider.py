"""The offline demo provider: a coherent, deterministic course, and a sensible workbench tool policy."""

from __future__ import annotations

import json

import msgspec
import pytest
import trio

from openmaic.config import ProviderConfig, default_config
from openmaic.courses.schema import (
    AgentRoster,
    Interactive,
    Outline,
    Quiz,
    SceneActions,
    SceneContent,
    Slide,
    json_schema,
)
from openmaic.models import (
    Message,
    ModelRouter,
    OutputInvalid,
    SystemMessage,
    ToolResultMessage,
    ToolSpec,
    UserMessage,
    build_provider,
)
from openmaic.models.demo import DemoProvider
from openmaic.models.demo_course import read_prompt, topic_of

REQUIREMENT = "Teach 8th graders about photosynthesis, with an interactive exercise"


def tool(name: str) -> ToolSpec:
    return ToolSpec(name=name, description=name, parameters={"type": "object", "properties": {}})


WORKBENCH_TOOLS = [
    tool(n)
    for n in ("read_course", "read_outline", "add_scene", "update_scene", "delete_scene", "reorder_scenes",
              "retitle_course", "generate_scene", "ask_user")
]  # fmt: skip

COURSE = json.dumps(
    {
        "title": "Fractions",
        "scenes": [
            {"id": "sc_1", "title": "What is a fraction", "kind": "slide"},
            {"id": "sc_2", "title": "Adding fractions", "kind": "slide"},
            {"id": "sc_3", "title": "Check", "kind": "quiz"},
        ],
    }
)


async def complete(provider: DemoProvider, prompt: str, tp: type) -> tuple[object, str]:
    deltas: list[str] = []
    out = await provider.complete("any-model", [SystemMessage("sys"), UserMessage(prompt)], tp, on_delta=deltas.append)
    return out, "".join(deltas)


async def build_course(requirement: str) -> dict:
    demo = DemoProvider()
    outline, streamed = await complete(demo, f"Language: en\nRequirement: {requirement}\n", Outline)
    assert isinstance(outline, Outline)
    assert msgspec.json.decode(streamed, type=Outline) == outline
    roster, _ = await complete(demo, f"Requirement: {requirement}", AgentRoster)
    scenes = []
    for item in outline.items:
        prompt = f"Requirement: {requirement}\nScene:\n{msgspec.json.encode({'scene': item}).decode()}"
        content, _ = await complete(demo, prompt, SceneContent)
        actions_prompt = f"{prompt}\nContent: {msgspec.json.encode(content).decode()}\n{msgspec.json.encode(roster).decode()}"
        actions, _ = await complete(demo, actions_prompt, SceneActions)
        scenes.append((item, content, actions))
    return {"outline": outline, "roster": roster, "scenes": scenes}


async def test_full_course_for_a_requirement():
    course = await build_course(REQUIREMENT)
    outline: Outline = course["outline"]
    assert 4 <= len(outline.items) <= 8
    assert "Photosynthesis" in outline.title
    assert all(item.title.strip() and item.goal.strip() and item.key_points for item in outline.items)
    kinds = [item.kind for item in outline.items]
    assert "quiz" in kinds and "interactive" in kinds and kinds[-1] == "slide"

    roster: AgentRoster = course["roster"]
    roles = [a.role for a in roster.agents]
    assert roles.count("teacher") == 1 and "assistant" in roles and 1 <= roles.count("classmate") <= 2
    ids = {a.id for a in roster.agents}

    for item, content, actions in course["scenes"]:
        assert isinstance(content, SceneContent) and content.kind == item.kind
        # Every output round-trips through its schema type (what a real model's JSON would have to do).
        assert msgspec.convert(msgspec.to_builtins(content), SceneContent) == content
        if item.kind == "slide":
            assert isinstance(content.slide, Slide) and content.quiz is None and content.interactive is None
            assert 3 <= len(content.slide.bullets) <= 5 and content.slide.title == item.title
            assert len(set(content.slide.bullets)) == len(content.slide.bullets)
        elif item.kind == "quiz":
            assert isinstance(content.quiz, Quiz)
            assert len(content.quiz.questions) == 3
            for q in content.quiz.questions:
                assert len(q.options) == 4 and 0 <= q.answer < 4 and q.explanation
                assert len(set(q.options)) == 4
        else:
            assert isinstance(content.interactive, Interactive)
            page = content.interactive.html
            assert page.startswith("<!doctype html>") and "</html>" in page
            assert "http" not in page and "src=" not in page  # self-contained
            assert content.interactive.instructions
        assert actions.actions and {a.agent_id for a in actions.actions} <= ids
        assert actions.actions[0].kind == "speech" and actions.actions[0].agent_id == "teacher"
        assert any(a.kind == "ask" for a in actions.actions)


async def test_same_requirement_same_course():
    first = await build_course(REQUIREMENT)
    second = await build_course(REQUIREMENT)
    assert msgspec.json.encode(first) == msgspec.json.encode(second)
    other = await build_course("An introduction to the French Revolution")
    assert other["outline"] != first["outline"]


async def test_outline_size_varies_with_the_requirement_within_bounds():
    demo = DemoProvider()
    sizes = set()
    for i in range(20):
        outline, _ = await complete(demo, f"Requirement: lesson {i} on SQL joins", Outline)
        assert 4 <= len(outline.items) <= 8
        assert outline.items[0].title == "Introduction to SQL Joins"
        assert outline.items[-1].title == "Summary"
        sizes.add(len(outline.items))
    assert len(sizes) > 1


def test_requirement_and_topic_extraction():
    fields = read_prompt('Some context\nRequirement: Teach me about the water cycle.\n{"language": "en"}')
    assert fields["requirement"] == "Teach me about the water cycle."
    assert fields["language"] == "en"
    assert read_prompt("just this text")["requirement"] == "just this text"
    assert read_prompt('{"requirement": "from json", "scene": {"title": "T", "kind": "quiz"}}')["kind"] == "quiz"
    scene = read_prompt(
        'Requirement: fractions\nTitle: Adding fractions\nKind: quiz\nKey points: common denominators; simplify\n'
        'Outline: {"title": "Course title", "items": [{"title": "Other"}]}'
    )
    assert (scene["title"], scene["kind"], scene["key_points"]) == ("Adding fractions", "quiz", "common denominators; simplify")
    assert read_prompt('{"scene": {"title": "S"}} {"title": "Course", "items": []}')["title"] == "S"
    assert topic_of("Teach me about the water cycle.") == "water cycle"
    assert topic_of("An introduction to SQL joins for analysts") == "SQL joins"
    assert topic_of("make a short course on linear algebra") == "linear algebra"
    assert topic_of("Photosynthesis") == "Photosynthesis"
    assert topic_of("") == "the topic"


async def test_structured_outputs_stream_in_chunks_with_latency(autojump_clock):
    demo = DemoProvider(latency_ms=50)
    start = trio.current_time()
    outline, streamed = await complete(demo, "Requirement: volcanoes", Outline)
    chunks = -(-len(streamed) // demo.chunk_chars)
    assert chunks > 5
    assert trio.current_time() - start == pytest.approx((chunks - 1) * 0.05)


async def test_unsupported_output_type():
    class Other(msgspec.Struct):
        x: int

    with pytest.raises(OutputInvalid, match="cannot produce Other"):
        await DemoProvider().complete("m", [UserMessage("hi")], Other)


def test_schemas_are_strict_and_self_contained():
    for tp in (Outline, SceneContent, SceneActions, AgentRoster):
        schema = json_schema(tp)
        text = json.dumps(schema)
        assert "$ref" not in text and "$defs" not in text and '"default"' not in text
        assert schema["type"] == "object" and schema["additionalProperties"] is False
        assert schema["required"] == list(schema["properties"])
    item = json_schema(Outline)["properties"]["items"]["items"]
    assert item["required"] == ["title", "goal", "kind", "key_points", "media"]
    assert item["properties"]["kind"] == {"enum": ["interactive", "quiz", "slide"], "type": "string"}


# --- the workbench policy ------------------------------------------------------------------------------------


async def turn(demo: DemoProvider, history: list[Message], tools=WORKBENCH_TOOLS):
    deltas: list[str] = []
    result = await demo.stream_turn("m", history, tools, on_delta=deltas.append)
    assert "".join(deltas) == result.text
    return result


async def test_workbench_add_scene_sequence():
    demo = DemoProvider()
    history: list[Message] = [SystemMessage("You edit courses."), UserMessage("add a scene about fractions")]

    first = await turn(demo, history)
    assert [(c.id, c.name, c.arguments) for c in first.tool_calls] == [("call_1", "read_course", {})]
    assert first.text == "" and first.stop_reason == "tool_use"
    history += [first.as_message(), ToolResultMessage("call_1", "read_course", COURSE)]

    second = await turn(demo, history)
    [call] = second.tool_calls
    assert call.id == "call_2" and call.name == "add_scene"
    assert call.arguments == {"title": "Fractions", "goal": "Understand fractions.", "kind": "slide", "position": None}
    history += [second.as_message(), ToolResultMessage("call_2", "add_scene", '{"scene_id": "sc_4"}')]

    third = await turn(demo, history)
    assert third.tool_calls == [] and third.stop_reason == "end_turn"
    assert "Fractions" in third.text

    # Determinism: replaying the same history gives the same turns.
    again = await turn(DemoProvider(), history[:2])
    assert again == first

    # A follow-up starts a new round: the course is read again, with fresh call ids.
    history += [third.as_message(), UserMessage('rename the course to "Fractions for beginners"')]
    fourth = await turn(demo, history)
    assert [(c.id, c.name) for c in fourth.tool_calls] == [("call_3", "read_course")]
    history += [fourth.as_message(), ToolResultMessage("call_3", "read_course", COURSE)]
    fifth = await turn(demo, history)
    assert [(c.name, c.arguments) for c in fifth.tool_calls] == [("retitle_course", {"title": "Fractions for beginners"})]


@pytest.mark.parametrize(
    ("request_text", "expected"),
    [
        ("delete the last scene", ("delete_scene", {"scene_id": "sc_3"})),
        ("remove it please", ("delete_scene", {"scene_id": "sc_3"})),
        ("reorder the scenes", ("reorder_scenes", {"scene_ids": ["sc_3", "sc_2", "sc_1"]})),
        ("add a quiz on adding fractions", ("add_scene", {"title": "Adding fractions", "goal": "Check understanding: Adding fractions.", "kind": "quiz", "position": None})),
        ("change the title to Fun with fractions", ("retitle_course", {"title": "Fun with fractions"})),
        ("hmm, which one?", ("ask_user", None)),
        ("regenerate the last scene", ("generate_scene", {"scene_id": "sc_3"})),
    ],
)  # fmt: skip
async def test_workbench_actions(request_text, expected):
    history: list[Message] = [UserMessage(request_text)]
    first = await turn(DemoProvider(), history)
    history += [first.as_message(), ToolResultMessage(first.tool_calls[0].id, "read_course", COURSE)]
    second = await turn(DemoProvider(), history)
    [call] = second.tool_calls
    assert call.name == expected[0]
    if expected[1] is not None:
        assert call.arguments == expected[1]
    else:
        assert call.arguments["question"].endswith("?")


async def test_workbench_reports_a_failed_tool():
    history: list[Message] = [UserMessage("delete the last scene")]
    first = await turn(DemoProvider(), history)
    history += [first.as_message(), ToolResultMessage("call_1", "read_course", COURSE)]
    second = await turn(DemoProvider(), history)
    history += [second.as_message(), ToolResultMessage("call_2", "delete_scene", "scene is locked", is_error=True)]
    third = await turn(DemoProvider(), history)
    assert third.tool_calls == [] and "failed" in third.text and "scene is locked" in third.text


async def test_workbench_without_a_matching_action_describes_the_course():
    history: list[Message] = [UserMessage("hello there")]
    first = await turn(DemoProvider(), history)
    history += [first.as_message(), ToolResultMessage("call_1", "read_course", COURSE)]
    second = await turn(DemoProvider(), history)
    assert second.tool_calls == [] and '"Fractions"' in second.text and "3 scenes" in second.text


async def test_workbench_only_calls_offered_tools():
    result = await turn(DemoProvider(), [UserMessage("delete the last scene")], tools=[tool("ask_user")])
    assert result.tool_calls == [] and result.text
    plain = await turn(DemoProvider(), [UserMessage("hi")], tools=[])
    assert plain.tool_calls == [] and "hi" in plain.text


def test_router_builds_demo_providers_once():
    router = ModelRouter(default_config())
    provider, model = router.for_slot("course.outline")
    assert isinstance(provider.primary, DemoProvider) and model == "course" and provider.fallback is None
    assert router.for_slot("course.content.quiz")[0].primary is provider.primary
    agent, model = router.for_slot("agent")
    assert agent.primary is provider.primary and model == "agent"
    assert isinstance(build_provider("d", ProviderConfig(kind="demo", latency_ms=5)), DemoProvider)


async def test_outline_items_can_be_picked_out_while_streaming():
    from openmaic.courses.schema import OutlineItem
    from openmaic.models.incremental import StreamedArray

    items = StreamedArray("items", OutlineItem)
    seen: list[tuple[int, OutlineItem]] = []
    deltas = 0

    def on_delta(text: str) -> None:
        nonlocal deltas
        deltas += 1
        seen.extend((deltas, item) for item in items.feed(text))

    outline = await DemoProvider().complete("m", [UserMessage(f"Requirement: {REQUIREMENT}")], Outline, on_delta=on_delta)
    assert [item for _, item in seen] == outline.items
    assert seen[0][0] < deltas // 2 < seen[-1][0]  # the first item arrived long before the stream ended

    tricky = StreamedArray("items", OutlineItem)
    text = '{"title": "a \\" items [", "items": [{"title": "x}", "goal": "[g]"}, {"title": "y", "goal": "z"}]}'
    got = [it for ch in text for it in tricky.feed(ch)]
    assert [it.title for it in got] == ["x}", "y"]
    tricky.reset()
    assert tricky.feed(text) == got


async def test_workbench_stops_when_the_course_cannot_be_read():
    history: list[Message] = [UserMessage("add a scene about fractions")]
    first = await turn(DemoProvider(), history)
    history += [first.as_message(), ToolResultMessage("call_1", "read_course", "course not found", is_error=True)]
    second = await turn(DemoProvider(), history)
    assert second.tool_calls == [] and "could not read the course" in second.text
