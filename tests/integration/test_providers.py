"""OpenAI and Anthropic providers against a fake provider over real sockets: streaming, tools, structured
outputs, retries, timeouts, and that the API key never leaks into errors or logs."""

from __future__ import annotations

import email.utils
import json
import logging
import time
import traceback
from typing import Annotated, Literal

import httpx
import msgspec
import pytest
import trio

from openmaic.config import Config, ProviderConfig, ProviderSpec, Secret
from openmaic.courses.schema import json_schema
from openmaic.models import (
    AssistantMessage,
    OutputInvalid,
    ProviderError,
    SystemMessage,
    ToolCall,
    ToolResultMessage,
    ToolSpec,
    UserMessage,
    build_provider,
    open_model_router,
)
from openmaic.models.retry import parse_retry_after
from tests.fakes.provider_server import (
    EndsEarly,
    FakeProviderServer,
    Json,
    Malformed,
    Stall,
    Status,
    Text,
    ToolCalls,
    open_fake_provider,
)

KEY = "sk-test-SECRET-xyz"

class OutlineItem(msgspec.Struct, frozen=True, kw_only=True):
    """One item of the structured output the drivers are asked for here (any Struct would do)."""

    title: str
    goal: str
    kind: Literal["slide", "quiz", "interactive"] = "slide"
    key_points: list[str] = []


class Outline(msgspec.Struct, frozen=True, kw_only=True):
    """A structured output with a list of objects, so that a driver's validation names a nested path."""

    title: str
    items: Annotated[list[OutlineItem], msgspec.Meta(min_length=1, max_length=30)]


OUTLINE = {
    "title": "Fractions",
    "items": [
        {"title": "What is a fraction", "goal": "Read fractions", "kind": "slide", "key_points": ["parts"]},
        {"title": "Adding fractions", "goal": "Add them", "kind": "slide", "key_points": []},
        {"title": "Check", "goal": "Test", "kind": "quiz", "key_points": []},
        {"title": "Summary", "goal": "Review", "kind": "slide", "key_points": []},
    ],
}

ADD_SCENE = ToolSpec(
    name="add_scene",
    description="Add a scene to the course.",
    parameters={
        "type": "object",
        "properties": {"title": {"type": "string"}, "kind": {"type": "string"}, "position": {"type": ["integer", "null"]}},
        "required": ["title"],
    },
)
READ_COURSE = ToolSpec(name="read_course", description="Read the course.", parameters={"type": "object", "properties": {}})


class Sleeps:
    """An injectable sleep that records the delays it was asked for and returns at once."""

    def __init__(self) -> None:
        self.calls: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.calls.append(seconds)
        await trio.lowlevel.checkpoint()


@pytest.fixture
async def fake():
    async with open_fake_provider() as server:
        yield server


@pytest.fixture
async def http():
    # trust_env=False: a proxy configured in the environment must not intercept 127.0.0.1.
    async with httpx.AsyncClient(trust_env=False) as client:
        yield client


@pytest.fixture(params=["openai", "anthropic"])
def kind(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def sleeps() -> Sleeps:
    return Sleeps()


@pytest.fixture
def make(kind: str, fake: FakeProviderServer, http: httpx.AsyncClient, sleeps: Sleeps):
    def make(**settings):
        base_url = fake.openai_url if kind == "openai" else fake.anthropic_url
        cfg = ProviderConfig(kind=kind, base_url=base_url, api_key=Secret(KEY), **{"timeout_s": 5.0, **settings})
        return build_provider(kind, cfg, http=http, sleep=sleeps)

    return make


def assert_key_free(exc: BaseException, caplog: pytest.LogCaptureFixture) -> None:
    texts = [str(exc), repr(exc), "".join(traceback.format_exception(exc)), repr(getattr(exc, "details", None))]
    cause = exc.__cause__
    while cause is not None:
        texts += [str(cause), repr(cause)]
        cause = cause.__cause__
    for text in texts:
        assert KEY not in text
    assert KEY not in caplog.text


def messages() -> list:
    return [SystemMessage("You are terse."), UserMessage("Say hello.")]


# --- streaming and tools -------------------------------------------------------------------------------------


async def test_streams_text_deltas_in_order(kind, fake, make):
    fake.push(Text("Hello, streaming world!", chunks=4))
    deltas: list[str] = []
    result = await make().stream_turn("m-1", messages(), [], on_delta=deltas.append)

    assert result.text == "Hello, streaming world!"
    assert len(deltas) == 4 and "".join(deltas) == result.text
    assert result.tool_calls == [] and result.stop_reason == "end_turn"
    assert result.usage["input_tokens"] == 11
    [req] = fake.requests
    assert req.body["model"] == "m-1" and req.body["stream"] is True
    if kind == "openai":
        assert req.path == "/v1/chat/completions"
        assert req.headers["authorization"] == f"Bearer {KEY}"
        assert req.body["messages"] == [
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": "Say hello."},
        ]
        assert "tools" not in req.body
    else:
        assert req.path == "/v1/messages"
        assert req.headers["x-api-key"] == KEY
        assert req.headers["anthropic-version"] == "2023-06-01"
        assert "authorization" not in req.headers
        assert req.body["system"] == "You are terse."
        assert req.body["messages"] == [{"role": "user", "content": [{"type": "text", "text": "Say hello."}]}]
        assert req.body["max_tokens"] > 0


async def test_tool_calls_assembled_from_fragments(kind, fake, make):
    args = '{"title": "Fractions", "kind": "slide", "position": null}'
    fake.push(ToolCalls([("call_a", "add_scene", args), ("call_b", "read_course", "")], chunks=7, text="On it."))
    deltas: list[str] = []
    result = await make().stream_turn("m", messages(), [ADD_SCENE, READ_COURSE], on_delta=deltas.append)

    assert result.tool_calls == [
        ToolCall("call_a", "add_scene", {"title": "Fractions", "kind": "slide", "position": None}),
        ToolCall("call_b", "read_course", {}),
    ]
    assert result.stop_reason == "tool_use"
    assert result.text == "On it." and "".join(deltas) == "On it."
    body = fake.requests[0].body
    if kind == "openai":
        assert body["tools"][0] == {
            "type": "function",
            "function": {"name": "add_scene", "description": ADD_SCENE.description, "parameters": ADD_SCENE.parameters},
        }
    else:
        assert body["tools"][0] == {
            "name": "add_scene",
            "description": ADD_SCENE.description,
            "input_schema": ADD_SCENE.parameters,
        }


async def test_transcript_with_tool_results_is_encoded(kind, fake, make):
    fake.push(Text("Done."))
    history = [
        SystemMessage("sys"),
        UserMessage("add a scene"),
        AssistantMessage(text="Reading.", tool_calls=[ToolCall("c1", "read_course", {})]),
        ToolResultMessage("c1", "read_course", '{"scenes": []}'),
        AssistantMessage(tool_calls=[ToolCall("c2", "add_scene", {"title": "X"})]),
        ToolResultMessage("c2", "add_scene", "title too short", is_error=True),
        UserMessage("thanks"),
    ]
    await make().stream_turn("m", history, [ADD_SCENE, READ_COURSE], on_delta=lambda _: None)
    sent = fake.requests[0].body
    if kind == "openai":
        assert sent["messages"][2] == {
            "role": "assistant",
            "content": "Reading.",
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "read_course", "arguments": "{}"}}],
        }
        assert sent["messages"][3] == {"role": "tool", "tool_call_id": "c1", "content": '{"scenes": []}'}
        assert sent["messages"][5]["content"].startswith("Error: ")
        assert [m["role"] for m in sent["messages"]] == ["system", "user", "assistant", "tool", "assistant", "tool", "user"]
    else:
        roles = [m["role"] for m in sent["messages"]]
        assert roles == ["user", "assistant", "user", "assistant", "user"]
        assert sent["messages"][1]["content"][1] == {"type": "tool_use", "id": "c1", "name": "read_course", "input": {}}
        last = sent["messages"][4]["content"]
        assert last[0] == {"type": "tool_result", "tool_use_id": "c2", "content": "title too short", "is_error": True}
        assert last[1] == {"type": "text", "text": "thanks"}


# --- structured outputs --------------------------------------------------------------------------------------


async def test_structured_output_valid(kind, fake, make):
    fake.push(Json(OUTLINE, chunks=6))
    deltas: list[str] = []
    outline = await make().complete("m", messages(), Outline, on_delta=deltas.append)

    assert outline == msgspec.convert(OUTLINE, Outline)
    assert len(deltas) == 6 and json.loads("".join(deltas)) == OUTLINE
    body = fake.requests[0].body
    if kind == "openai":
        fmt = body["response_format"]
        assert fmt["type"] == "json_schema"
        assert fmt["json_schema"] == {"name": "Outline", "schema": json_schema(Outline), "strict": True}
    else:
        assert body["tool_choice"] == {"type": "tool", "name": "Outline"}
        assert body["tools"][0]["name"] == "Outline"
        assert body["tools"][0]["input_schema"] == json_schema(Outline)


async def test_structured_output_invalid_then_valid_is_retried(kind, fake, make):
    fake.push(Json({"title": "only a title"}), Json(OUTLINE))
    retries: list[None] = []
    outline = await make().complete("m", messages(), Outline, on_retry=lambda: retries.append(None))

    assert outline.title == "Fractions" and len(retries) == 1
    assert len(fake.requests) == 2
    second = fake.requests[1].body["messages"]
    if kind == "openai":
        assert second[-2]["role"] == "assistant" and second[-1]["role"] == "user"
        assert "items" in second[-1]["content"]
    else:
        feedback = second[-1]["content"][0]
        assert feedback["type"] == "tool_result" and feedback["is_error"] is True
        assert "items" in feedback["content"]


async def test_structured_output_always_invalid_raises(kind, fake, make, caplog):
    bad = {"title": "T", "items": [{"title": 5, "goal": "g"}]}
    fake.push(Json(bad), Json(bad), Json(bad))
    with pytest.raises(OutputInvalid) as info:
        await make().complete("m", messages(), Outline)

    message = str(info.value)
    assert "Outline" in message and "after 3 attempts" in message and "$.items[0].title" in message
    assert info.value.code == "output_invalid" and isinstance(info.value, ProviderError)
    assert len(fake.requests) == 3
    assert_key_free(info.value, caplog)


async def test_structured_output_tolerates_code_fences(fake, http, sleeps):
    cfg = ProviderConfig(kind="openai", base_url=fake.openai_url)
    fake.push(Json("```json\n" + json.dumps(OUTLINE) + "\n```"))
    outline = await build_provider("local", cfg, http=http, sleep=sleeps).complete("m", messages(), Outline)
    assert len(outline.items) == 4
    assert "authorization" not in fake.requests[0].headers  # no key configured, none sent


# --- retries, timeouts, failures -----------------------------------------------------------------------------


async def test_429_honours_retry_after(kind, fake, make, sleeps):
    fake.push(Status(429, headers={"retry-after": "2"}), Text("ok"))
    result = await make().stream_turn("m", messages(), [], on_delta=lambda _: None)
    assert result.text == "ok"
    assert sleeps.calls == [2.0]
    assert len(fake.requests) == 2


def test_retry_after_http_date_and_cap():
    now = time.time()
    assert parse_retry_after(email.utils.formatdate(now + 30, usegmt=True), now=now) == pytest.approx(30, abs=1)
    assert parse_retry_after(email.utils.formatdate(now - 30, usegmt=True), now=now) == 0
    assert parse_retry_after("3600") == 60.0
    assert parse_retry_after("soon") is None and parse_retry_after(None) is None


async def test_500_then_success(kind, fake, make, sleeps):
    fake.push(Status(500), Text("recovered"))
    result = await make().stream_turn("m", messages(), [], on_delta=lambda _: None)
    assert result.text == "recovered"
    assert len(sleeps.calls) == 1 and 0 <= sleeps.calls[0] <= 0.5


async def test_5xx_until_max_retries_fails_with_fixed_message(kind, fake, make, sleeps, caplog):
    fake.push(*[Status(503, body={"error": {"message": f"overloaded, key {KEY}"}})] * 3)
    with pytest.raises(ProviderError) as info:
        await make(max_retries=2).stream_turn("m", messages(), [], on_delta=lambda _: None)
    assert str(info.value) == f"the model provider '{kind}' failed after 3 attempts (HTTP 503)"
    assert info.value.code == "provider_error"
    assert len(fake.requests) == 3 and len(sleeps.calls) == 2
    assert all(0 <= s <= 20 for s in sleeps.calls)
    assert_key_free(info.value, caplog)


async def test_400_is_not_retried(kind, fake, make, sleeps, caplog):
    body = {"error": {"message": f"Incorrect API key provided: {KEY}", "type": "invalid_request_error"}}
    fake.push(Status(400, body=body))
    with pytest.raises(ProviderError) as info:
        await make().stream_turn("m", messages(), [], on_delta=lambda _: None)
    assert str(info.value) == f"the model provider '{kind}' rejected the request (HTTP 400, invalid_request_error)"
    assert len(fake.requests) == 1 and sleeps.calls == []
    assert_key_free(info.value, caplog)


async def test_401_hints_at_the_key(kind, fake, make, caplog):
    fake.push(Status(401, body={"error": {"message": f"bad key {KEY}", "code": f"bad {KEY}"}}))
    with pytest.raises(ProviderError, match=r"rejected the request \(HTTP 401\); check its API key") as info:
        await make().stream_turn("m", messages(), [], on_delta=lambda _: None)
    assert_key_free(info.value, caplog)


async def test_stalled_stream_times_out_and_is_retried(kind, fake, make, sleeps):
    fake.push(Stall("half a"), Text("whole answer"))
    deltas: list[str] = []

    def reset() -> None:
        deltas.clear()

    with trio.fail_after(10):
        result = await make(timeout_s=0.3).stream_turn("m", messages(), [], on_delta=deltas.append, on_retry=reset)
    assert result.text == "whole answer" and "".join(deltas) == "whole answer"
    assert len(fake.requests) == 2 and len(sleeps.calls) == 1


async def test_stalled_stream_until_max_retries_fails(kind, fake, make, sleeps, caplog):
    caplog.set_level(logging.DEBUG)
    fake.push(Stall(), Stall())
    with trio.fail_after(10), pytest.raises(ProviderError) as info:
        await make(timeout_s=0.2, max_retries=1).stream_turn("m", messages(), [], on_delta=lambda _: None)
    assert str(info.value) == f"the model provider '{kind}' failed after 2 attempts (timed out)"
    assert isinstance(info.value.__cause__, httpx.ReadTimeout)
    assert len(fake.requests) == 2
    assert_key_free(info.value, caplog)


async def test_stream_that_ends_early_is_retried(kind, fake, make, sleeps):
    fake.push(EndsEarly(), Text("complete"))
    result = await make().stream_turn("m", messages(), [], on_delta=lambda _: None)
    assert result.text == "complete" and len(fake.requests) == 2


async def test_malformed_body_is_a_provider_error(kind, fake, make, sleeps, caplog):
    fake.push(Malformed())
    with pytest.raises(ProviderError) as info:
        await make().stream_turn("m", messages(), [], on_delta=lambda _: None)
    assert str(info.value) == f"the model provider '{kind}' sent a malformed response (not an event stream)"
    assert len(fake.requests) == 1 and sleeps.calls == []
    assert_key_free(info.value, caplog)


async def test_malformed_event_payload(kind, fake, make):
    fake.push(Malformed(b"data: {not json\n\n"))
    with pytest.raises(ProviderError, match="malformed response"):
        await make().stream_turn("m", messages(), [], on_delta=lambda _: None)


async def test_unreachable_provider(kind, http, sleeps, caplog):
    with trio.socket.socket() as s:  # a port nobody listens on
        await s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    base = f"http://127.0.0.1:{port}" + ("/v1" if kind == "openai" else "")
    cfg = ProviderConfig(kind=kind, base_url=base, api_key=Secret(KEY), max_retries=1)
    with pytest.raises(ProviderError) as info:
        await build_provider(kind, cfg, http=http, sleep=sleeps).stream_turn("m", messages(), [], on_delta=print)
    assert str(info.value) == f"the model provider '{kind}' failed after 2 attempts (could not connect)"
    assert_key_free(info.value, caplog)


async def test_key_is_sent_but_never_logged(kind, fake, make, caplog):
    caplog.set_level(logging.DEBUG)
    provider = make(max_retries=1)
    fake.push(Status(503), Text("fine"))
    await provider.stream_turn("m", messages(), [], on_delta=lambda _: None)
    sent = fake.requests[0].headers
    assert (sent["authorization"] == f"Bearer {KEY}") if kind == "openai" else (sent["x-api-key"] == KEY)
    assert caplog.records, "retries are logged"
    assert KEY not in caplog.text and KEY not in repr(provider)
    assert not fake.errors


async def test_router_shares_a_client(fake, sleeps):
    config = Config(
        providers={
            "oa": ProviderSpec(preset="openai-compatible", base_url=fake.openai_url, api_key=Secret(KEY)),
            "an": ProviderSpec(preset="anthropic", base_url=fake.anthropic_url, api_key=Secret(KEY)),
        },
        slots={"llm": "oa:gpt-x", "course.outline": "an:claude-y"},
    )
    fake.push(Text("a"), Json(OUTLINE))
    async with open_model_router(config, sleep=sleeps) as router:
        provider, model = router.for_slot("agent")
        assert model == "gpt-x" and router.for_slot("llm")[0].primary is provider.primary
        assert (await provider.stream_turn(model, messages(), [], on_delta=print)).text == "a"
        outline_provider, outline_model = router.for_slot("course.outline")
        outline = await outline_provider.complete(outline_model, messages(), Outline)
    assert outline.items[0] == OutlineItem(title="What is a fraction", goal="Read fractions", key_points=["parts"])
    assert [r.body["model"] for r in fake.requests] == ["gpt-x", "claude-y"]


async def test_large_error_body_is_read_only_in_part(kind, fake, make, caplog):
    fake.push(Status(422, body={"error": {"type": "too_big", "message": "x" * 200_000}}))
    with pytest.raises(ProviderError, match=r"HTTP 422"):
        await make().stream_turn("m", messages(), [], on_delta=lambda _: None)


async def test_without_a_shared_client_each_request_has_its_own(kind, fake, sleeps):
    base_url = fake.openai_url if kind == "openai" else fake.anthropic_url
    provider = build_provider(kind, ProviderConfig(kind=kind, base_url=base_url, api_key=Secret(KEY)), sleep=sleeps)
    fake.push(Status(502), Text("one"), Text("two"))
    assert (await provider.stream_turn("m", messages(), [], on_delta=lambda _: None)).text == "one"
    assert (await provider.stream_turn("m", messages(), [], on_delta=lambda _: None)).text == "two"
    assert len(sleeps.calls) == 1
