"""Anthropic messages API, streaming.

Requests go to ``{base_url}/v1/messages`` (``base_url`` defaults to ``https://api.anthropic.com``; one that
already ends in ``/v1`` is used as is) with ``x-api-key`` and ``anthropic-version: 2023-06-01``. System
messages become the top-level ``system``; tool results become ``tool_result`` blocks of a user turn; adjacent
turns of one role are merged, as the API wants them to alternate. Structured outputs are a forced tool call
whose ``input_schema`` is the output type's schema; its streamed JSON goes to ``on_delta``.
"""

from __future__ import annotations

import base64
import random
from collections.abc import Callable
from typing import Any, TypeVar

import httpx

from openmaic.courses.schema import json_schema
from openmaic.models.openai import decode_arguments
from openmaic.models.chat_driver import ChatDriver
from openmaic.models.retry import RetryableFailure, Sleep, Transport
from openmaic.models.sse import ServerSentEvent, json_payload, read_events
from openmaic.models.structured import complete_structured, output_name
from openmaic.models.types import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolCall,
    ToolResultMessage,
    ToolSpec,
    TurnResult,
    UserMessage,
)

T = TypeVar("T")

DEFAULT_BASE_URL = "https://api.anthropic.com"
API_VERSION = "2023-06-01"
DEFAULT_MAX_TOKENS = 8192

_STOP_REASONS = {"end_turn": "end_turn", "stop_sequence": "end_turn", "tool_use": "tool_use", "max_tokens": "max_tokens"}


def encode_messages(messages: list[Message]) -> tuple[str, list[dict[str, Any]]]:
    """``(system, messages)`` for the messages API."""
    system: list[str] = []
    out: list[dict[str, Any]] = []

    def add(role: str, blocks: list[dict[str, Any]]) -> None:
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": role, "content": blocks})

    for m in messages:
        match m:
            case SystemMessage():
                system.append(m.text)
            case UserMessage():
                # Images first, as the API's guide advises; the API refuses empty text blocks.
                images = [{"type": "image", "source": {"type": "base64", "media_type": i.media_type,
                                                       "data": base64.b64encode(i.data).decode()}}
                          for i in m.images]  # fmt: skip
                add("user", [*images, {"type": "text", "text": m.text or "(empty message)"}])
            case AssistantMessage():
                blocks: list[dict[str, Any]] = []
                if m.text:
                    blocks.append({"type": "text", "text": m.text})
                blocks.extend({"type": "tool_use", "id": c.id, "name": c.name, "input": c.arguments} for c in m.tool_calls)
                if blocks:
                    add("assistant", blocks)
            case ToolResultMessage():
                add(
                    "user",
                    [{"type": "tool_result", "tool_use_id": m.call_id, "content": m.content, "is_error": m.is_error}],
                )
    return "\n\n".join(system), out


def encode_tools(tools: list[ToolSpec]) -> list[dict[str, Any]]:
    """Tool specs as messages-API tools."""
    return [{"name": t.name, "description": t.description, "input_schema": t.parameters} for t in tools]


class _Block:
    __slots__ = ("type", "id", "name", "json")

    def __init__(self, type_: str, id_: str, name: str) -> None:
        self.type = type_
        self.id = id_
        self.name = name
        self.json: list[str] = []


class _Turn:
    """The state of one streamed message, fed event by event."""

    def __init__(self, on_delta: Callable[[str], None] | None, json_deltas: bool) -> None:
        self.on_delta = on_delta
        self.json_deltas = json_deltas
        self.text: list[str] = []
        self.blocks: dict[int, _Block] = {}
        self.usage: dict[str, int] = {}
        self.stop: str | None = None
        self.done = False

    def _emit(self, text: str) -> None:
        if self.on_delta is not None and text:
            self.on_delta(text)

    def feed(self, ev: ServerSentEvent) -> bool:
        data = json_payload(ev)
        kind = data.get("type") or ev.event
        if kind == "message_start":
            u = (data.get("message") or {}).get("usage") or {}
            self.usage["input_tokens"] = int(u.get("input_tokens") or 0)
            self.usage["output_tokens"] = int(u.get("output_tokens") or 0)
        elif kind == "content_block_start":
            cb = data.get("content_block") or {}
            block = _Block(cb.get("type", ""), cb.get("id", ""), cb.get("name", ""))
            self.blocks[int(data.get("index", len(self.blocks)))] = block
            if block.type == "text" and cb.get("text"):
                self.text.append(cb["text"])
                self._emit(cb["text"])
        elif kind == "content_block_delta":
            delta = data.get("delta") or {}
            block = self.blocks.get(int(data.get("index", -1)))
            if delta.get("type") == "text_delta" and delta.get("text"):
                self.text.append(delta["text"])
                self._emit(delta["text"])
            elif delta.get("type") == "input_json_delta" and block is not None:
                part = delta.get("partial_json") or ""
                block.json.append(part)
                if self.json_deltas:
                    self._emit(part)
        elif kind == "message_delta":
            self.stop = (data.get("delta") or {}).get("stop_reason") or self.stop
            u = data.get("usage") or {}
            if "output_tokens" in u:
                self.usage["output_tokens"] = int(u["output_tokens"] or 0)
        elif kind == "message_stop":
            self.done = True
            return True
        elif kind == "error":
            # overloaded_error and api_error arrive this way mid-stream; another attempt usually succeeds.
            raise RetryableFailure("the stream reported an error")
        return False

    def result(self) -> TurnResult:
        if not self.done and self.stop is None:
            raise RetryableFailure("the stream ended early")
        tool_calls = [
            ToolCall(id=b.id or f"call_{i}", name=b.name, arguments=decode_arguments("".join(b.json)))
            for i, b in sorted(self.blocks.items())
            if b.type == "tool_use"
        ]
        reason = _STOP_REASONS.get(self.stop or "end_turn", self.stop or "end_turn")
        return TurnResult(text="".join(self.text), tool_calls=tool_calls, stop_reason=reason, usage=self.usage)


async def read_stream(
    response: httpx.Response,
    on_delta: Callable[[str], None] | None,
    *,
    json_deltas: bool = False,
) -> TurnResult:
    """Read one streamed message into a ``TurnResult``; with ``json_deltas`` tool-input JSON goes to on_delta."""
    turn = _Turn(on_delta, json_deltas)
    await read_events(response, turn.feed)
    return turn.result()


class AnthropicProvider(ChatDriver):
    """A provider of kind ``anthropic``."""

    def __init__(
        self,
        name: str,
        cfg: Any,
        *,
        http: httpx.AsyncClient | None = None,
        sleep: Sleep | None = None,
        rng: random.Random | None = None,
        max_tokens: int | None = None,
    ) -> None:
        self.name = name
        self.base_url = (cfg.base_url or DEFAULT_BASE_URL).rstrip("/")
        self._url = self.base_url + ("/messages" if self.base_url.endswith("/v1") else "/v1/messages")
        self.max_tokens = max_tokens or getattr(cfg, "max_tokens", None) or DEFAULT_MAX_TOKENS
        self._transport = Transport(name, cfg, http=http, sleep=sleep, rng=rng)

    def _headers(self) -> dict[str, str]:
        headers = {"content-type": "application/json", "accept": "text/event-stream", "anthropic-version": API_VERSION}
        key = self._transport.key()
        if key:
            headers["x-api-key"] = key
        headers.update(self._transport.extra_headers())
        return headers

    def _body(self, model: str, messages: list[Message]) -> dict[str, Any]:
        system, encoded = encode_messages(messages)
        body: dict[str, Any] = {"model": model, "max_tokens": self.max_tokens, "messages": encoded, "stream": True}
        if system:
            body["system"] = system
        return body

    async def _turn(
        self,
        body: dict[str, Any],
        on_delta: Callable[[str], None] | None,
        on_retry: Callable[[], None] | None,
        *,
        json_deltas: bool = False,
    ) -> TurnResult:
        async def consume(response: httpx.Response) -> TurnResult:
            return await read_stream(response, on_delta, json_deltas=json_deltas)

        return await self._transport.stream(self._url, self._headers(), body, consume, on_retry=on_retry)

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
        name = output_name(output_type)
        tool = {
            "name": name,
            "description": f"Record the {name}. Call this tool exactly once with the complete {name}.",
            "input_schema": json_schema(output_type),
        }

        async def once(history: list[Message]) -> tuple[str | dict[str, Any], AssistantMessage]:
            body = self._body(model, history)
            body["tools"] = [tool]
            body["tool_choice"] = {"type": "tool", "name": name}
            result = await self._turn(body, on_delta, on_retry, json_deltas=True)
            for call in result.tool_calls:
                if call.name == name:
                    return call.arguments, AssistantMessage(text=result.text, tool_calls=[call])
            # Forced tool use should make this unreachable; a text reply is still worth a try.
            return result.text, AssistantMessage(text=result.text or "(no reply)")

        return await complete_structured(self.name, messages, output_type, once, on_retry=on_retry)
