"""Wire-neutral chat types: what a provider is given and what a turn returns.

Messages form a tagged union on ``role`` so a transcript round-trips through msgspec as ``list[Message]``
(the model history stores them this way). Each provider maps them onto its own wire format.
"""

from __future__ import annotations

from typing import Any

import msgspec


#: When the model's tool-call arguments are not a JSON object, ``ToolCall.arguments`` is
#: ``{INVALID_ARGUMENTS_KEY: <the raw text>}``, so the caller can answer with a tool error.
INVALID_ARGUMENTS_KEY = "_invalid_json"


class ToolCall(msgspec.Struct, frozen=True):
    """A tool call made by the model; ``arguments`` is the decoded JSON object (not yet validated)."""

    id: str
    name: str
    arguments: dict[str, Any]


class SystemMessage(msgspec.Struct, frozen=True, tag_field="role", tag="system"):
    """Instructions for the model."""

    text: str


class Image(msgspec.Struct, frozen=True):
    """An image shown to the model with a user message (PNG, JPEG, GIF or WebP: what every provider takes)."""

    media_type: str
    data: bytes


class UserMessage(msgspec.Struct, frozen=True, tag_field="role", tag="user"):
    """A message from the user, with any images it shows."""

    text: str
    images: tuple[Image, ...] = ()


class AssistantMessage(msgspec.Struct, frozen=True, tag_field="role", tag="assistant"):
    """A previous model turn: its text and the tool calls it made."""

    text: str = ""
    tool_calls: list[ToolCall] = []


class ToolResultMessage(msgspec.Struct, frozen=True, tag_field="role", tag="tool"):
    """The result of one tool call (``call_id`` is the ``ToolCall.id``); ``is_error`` marks a failure."""

    call_id: str
    name: str
    content: str
    is_error: bool = False


Message = SystemMessage | UserMessage | AssistantMessage | ToolResultMessage


class ToolSpec(msgspec.Struct, frozen=True):
    """A tool the model may call; ``parameters`` is the JSON Schema of its arguments (an object)."""

    name: str
    description: str
    parameters: dict[str, Any]


class TurnResult(msgspec.Struct, frozen=True):
    """One model turn.

    ``stop_reason`` is normalised: ``end_turn``, ``tool_use``, ``max_tokens``, ``refusal``, or the provider's
    own word for anything else. Decide on ``tool_calls`` (empty means the model is done), not on the reason.
    ``usage`` holds ``input_tokens`` and ``output_tokens`` when the provider reports them.
    """

    text: str
    tool_calls: list[ToolCall]
    stop_reason: str
    usage: dict[str, int] = {}

    def as_message(self) -> AssistantMessage:
        """This turn as a transcript entry."""
        return AssistantMessage(text=self.text, tool_calls=list(self.tool_calls))
