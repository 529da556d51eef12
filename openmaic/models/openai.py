"""OpenAI chat completions (and compatible servers: Ollama, vLLM, LM Studio …), streaming.

``base_url`` includes the version (``https://api.openai.com/v1``); requests go to ``{base_url}/chat/completions``
with ``stream: true``. Text deltas go to ``on_delta`` as they arrive; tool calls are assembled by index from
fragmented argument deltas. Structured outputs use ``response_format`` ``json_schema`` in strict mode.
"""

from __future__ import annotations

import base64
import random
from collections.abc import Callable
from typing import Any, TypeVar

import httpx
import msgspec

from openmaic.courses.schema import json_schema
from openmaic.models.chat_driver import ChatDriver
from openmaic.models.retry import RetryableFailure, Sleep, Transport
from openmaic.models.sse import ServerSentEvent, json_payload, read_events
from openmaic.models.structured import complete_structured, output_name
from openmaic.models.types import (
    INVALID_ARGUMENTS_KEY,
    AssistantMessage,
    Image,
    Message,
    SystemMessage,
    ToolCall,
    ToolResultMessage,
    ToolSpec,
    TurnResult,
    UserMessage,
)
from openmaic.text import clean, clean_value

T = TypeVar("T")

DEFAULT_BASE_URL = "https://api.openai.com/v1"

_STOP_REASONS = {
    "stop": "end_turn",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "length": "max_tokens",
    "content_filter": "refusal",
}


def _data_url(image: Image) -> str:
    return f"data:{image.media_type};base64,{base64.b64encode(image.data).decode()}"


def encode_messages(messages: list[Message]) -> list[dict[str, Any]]:
    """Wire-neutral messages as chat-completions messages."""
    out: list[dict[str, Any]] = []
    for m in messages:
        match m:
            case SystemMessage():
                out.append({"role": "system", "content": m.text})
            case UserMessage(images=()):
                out.append({"role": "user", "content": m.text})
            case UserMessage():
                parts: list[dict[str, Any]] = [{"type": "text", "text": m.text}]
                parts += [{"type": "image_url", "image_url": {"url": _data_url(i)}} for i in m.images]
                out.append({"role": "user", "content": parts})
            case AssistantMessage():
                msg: dict[str, Any] = {"role": "assistant", "content": m.text or None}
                if m.tool_calls:
                    msg["tool_calls"] = [
                        {
                            "id": c.id,
                            "type": "function",
                            "function": {"name": c.name, "arguments": msgspec.json.encode(c.arguments).decode()},
                        }
                        for c in m.tool_calls
                    ]
                elif not m.text:
                    msg["content"] = ""
                out.append(msg)
            case ToolResultMessage():
                # Chat completions has no error flag on tool results; say it in the content.
                content = f"Error: {m.content}" if m.is_error else m.content
                out.append({"role": "tool", "tool_call_id": m.call_id, "content": content})
    return out


def encode_tools(tools: list[ToolSpec]) -> list[dict[str, Any]]:
    """Tool specs as chat-completions function tools."""
    return [
        {"type": "function", "function": {"name": t.name, "description": t.description, "parameters": t.parameters}}
        for t in tools
    ]


def decode_arguments(text: str) -> dict[str, Any]:
    """Tool-call arguments from their JSON text; ``{INVALID_ARGUMENTS_KEY: text}`` when not a JSON object."""
    if not text.strip():
        return {}
    try:
        value = clean_value(msgspec.json.decode(text))  # kept in the log: no text PostgreSQL cannot store
    except msgspec.DecodeError:
        return {INVALID_ARGUMENTS_KEY: clean(text)}
    return value if isinstance(value, dict) else {INVALID_ARGUMENTS_KEY: clean(text)}


class _Call:
    __slots__ = ("id", "name", "args")

    def __init__(self) -> None:
        self.id = ""
        self.name = ""
        self.args: list[str] = []


class _Turn:
    """The state of one streamed chat completion, fed event by event."""

    def __init__(self, on_delta: Callable[[str], None] | None) -> None:
        self.on_delta = on_delta
        self.text: list[str] = []
        self.calls: dict[int, _Call] = {}
        self.finish: str | None = None
        self.usage: dict[str, int] = {}
        self.done = False

    def feed(self, ev: ServerSentEvent) -> bool:
        if ev.data.strip() == "[DONE]":
            self.done = True
            return True
        chunk = json_payload(ev)
        if chunk.get("error"):
            # An error inside a 200 stream is the server giving up mid-way: worth another attempt.
            raise RetryableFailure("the stream reported an error")
        u = chunk.get("usage")
        if isinstance(u, dict):
            self.usage = {
                "input_tokens": int(u.get("prompt_tokens") or 0),
                "output_tokens": int(u.get("completion_tokens") or 0),
            }
        for choice in chunk.get("choices") or ():
            delta = choice.get("delta") or {}
            content = delta.get("content")
            if isinstance(content, str) and content:
                self.text.append(content)
                if self.on_delta is not None:
                    self.on_delta(content)
            for tc in delta.get("tool_calls") or ():
                index = tc.get("index")
                call = self.calls.setdefault(index if isinstance(index, int) else len(self.calls), _Call())
                if tc.get("id"):
                    call.id = tc["id"]
                fn = tc.get("function") or {}
                if fn.get("name") and not call.name:
                    call.name = fn["name"]
                if isinstance(fn.get("arguments"), str):
                    call.args.append(fn["arguments"])
            if choice.get("finish_reason"):
                self.finish = choice["finish_reason"]
        return False

    def result(self) -> TurnResult:
        if not self.done and self.finish is None:
            raise RetryableFailure("the stream ended early")
        tool_calls = [
            ToolCall(id=c.id or f"call_{i}", name=c.name, arguments=decode_arguments("".join(c.args)))
            for i, c in sorted(self.calls.items())
        ]
        reason = _STOP_REASONS.get(self.finish or "stop", self.finish or "end_turn")
        return TurnResult(text="".join(self.text), tool_calls=tool_calls, stop_reason=reason, usage=self.usage)


async def read_stream(response: httpx.Response, on_delta: Callable[[str], None] | None) -> TurnResult:
    """Read one streamed chat completion into a ``TurnResult``."""
    turn = _Turn(on_delta)
    await read_events(response, turn.feed)
    return turn.result()


class OpenAIProvider(ChatDriver):
    """A provider of kind ``openai``."""

    def __init__(
        self,
        name: str,
        cfg: Any,
        *,
        http: httpx.AsyncClient | None = None,
        sleep: Sleep | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self.name = name
        self.base_url = (cfg.base_url or DEFAULT_BASE_URL).rstrip("/")
        self._url = self.base_url + "/chat/completions"
        self._transport = Transport(name, cfg, http=http, sleep=sleep, rng=rng)

    def _headers(self) -> dict[str, str]:
        return self._transport.bearer_headers(**{"content-type": "application/json", "accept": "text/event-stream"})

    async def _turn(
        self,
        body: dict[str, Any],
        on_delta: Callable[[str], None] | None,
        on_retry: Callable[[], None] | None,
    ) -> TurnResult:
        async def consume(response: httpx.Response) -> TurnResult:
            return await read_stream(response, on_delta)

        return await self._transport.stream(self._url, self._headers(), body, consume, on_retry=on_retry)

    def _body(self, model: str, messages: list[Message]) -> dict[str, Any]:
        return {
            "model": model,
            "messages": encode_messages(messages),
            "stream": True,
            "stream_options": {"include_usage": True},
        }

    def _encode_tools(self, tools: list[ToolSpec]) -> list[dict[str, Any]]:
        return encode_tools(tools)

    async def complete(
        self,
        model: str,
        messages: list[Message],
        output_type: type[T],
        *,
        on_delta: Callable[[str], None] | None = None,
        on_retry: Callable[[], None] | None = None,
    ) -> T:
        """A validated structured output; see ``Provider.complete``."""
        response_format = {
            "type": "json_schema",
            "json_schema": {"name": output_name(output_type), "schema": json_schema(output_type), "strict": True},
        }

        async def once(history: list[Message]) -> tuple[str, AssistantMessage]:
            body = self._body(model, history)
            body["response_format"] = response_format
            result = await self._turn(body, on_delta, on_retry)
            return result.text, AssistantMessage(text=result.text)

        return await complete_structured(self.name, messages, output_type, once, on_retry=on_retry)
