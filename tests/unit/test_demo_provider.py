"""The offline demo provider: a coherent, deterministic course, and a sensible workbench tool policy."""

from __future__ import annotations

import json
from typing import Literal

import msgspec
import pytest
import trio

from openmaic.config import ProviderConfig, default_config
from openmaic.courses.schema import json_schema
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


def brief_messages(step: str = "outline", requirement: str = REQUIREMENT) -> list[Message]:
    """A generation step's messages as the pipeline sends them (its brief after the marker line)."""
    brief = {"step": step, "requirement": requirement, "language": "en", "interactive": True,
             "imageGeneration": False, "videoGeneration": False, "learnerProfile": None, "research": [],
             "materials": False}
    return [SystemMessage("sys"), UserMessage(f"Plan the course.\n\nBrief (JSON):\n{json.dumps(brief)}")]


async def test_a_brief_is_answered_as_text_the_same_way_each_time():
    demo = DemoProvider()
    deltas: list[str] = []
    text = await demo.complete("any-model", brief_messages(), str, on_delta=deltas.append)
    assert "".join(deltas) == text and len(deltas) > 5
    outline = json.loads(text)
    assert 4 <= len(outline["outlines"]) <= 8 and "photosynthesis" in outline["courseTitle"].lower()
    assert await DemoProvider().complete("m", brief_messages(), str) == text
    turn = await demo.stream_turn("m", brief_messages(), [], on_delta=lambda _: None)
    assert turn.text == text and turn.tool_calls == []


async def test_text_streams_in_chunks_with_latency(autojump_clock):
    demo = DemoProvider(latency_ms=50)
    start = trio.current_time()
    streamed = await demo.complete("m", brief_messages(requirement="volcanoes"), str)
    chunks = -(-len(streamed) // max(demo.chunk_chars, len(streamed) // 80 + 1))
    assert chunks > 5
    assert trio.current_time() - start == pytest.approx((chunks - 1) * 0.05)


async def test_unsupported_output_type():
    class Other(msgspec.Struct):
        x: int

    with pytest.raises(OutputInvalid, match="cannot produce Other"):
        await DemoProvider().complete("m", [UserMessage("hi")], Other)


class _Item(msgspec.Struct, frozen=True, kw_only=True):
    title: str
    kind: Literal["slide", "quiz", "interactive"] = "slide"
    points: list[str] = []


class _Answer(msgspec.Struct, frozen=True, kw_only=True):
    title: str
    items: list[_Item]


def test_schemas_are_strict_and_self_contained():
    schema = json_schema(_Answer)
    text = json.dumps(schema)
    assert "$ref" not in text and "$defs" not in text and '"default"' not in text
    assert schema["type"] == "object" and schema["additionalProperties"] is False
    assert schema["required"] == list(schema["properties"])
    item = schema["properties"]["items"]["items"]
    assert item["required"] == ["title", "kind", "points"] and item["additionalProperties"] is False
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
    from openmaic.models.incremental import StreamedArray

    items = StreamedArray("outlines", dict)
    seen: list[tuple[int, dict]] = []
    deltas = 0

    def on_delta(text: str) -> None:
        nonlocal deltas
        deltas += 1
        seen.extend((deltas, item) for item in items.feed(text))

    text = await DemoProvider().complete("m", brief_messages(), str, on_delta=on_delta)
    assert [item for _, item in seen] == json.loads(text)["outlines"]
    assert seen[0][0] < deltas // 2 < seen[-1][0]  # the first item arrived long before the stream ended

    tricky = StreamedArray("items", _Item)
    text = '{"title": "a \\" items [", "items": [{"title": "x}", "points": ["[g]"]}, {"title": "y"}]}'
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
