"""Structured outputs: validate a reply against a msgspec type, and ask again when it does not fit."""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import msgspec

from openmaic.models.errors import OutputInvalid
from openmaic.models.types import AssistantMessage, Message, ToolResultMessage, UserMessage
from openmaic.text import clean_value

log = logging.getLogger("openmaic.models")

T = TypeVar("T")

#: Attempts at a valid reply: the first and two more.
OUTPUT_ATTEMPTS = 3

_FENCE = re.compile(r"^\s*```[A-Za-z0-9_-]*\s*\n(.*?)\n?```\s*$", re.S)


def output_name(tp: Any) -> str:
    """The name the schema and tool go by (``Outline``)."""
    return getattr(tp, "__name__", "Output")


def extract_json_text(text: str) -> str:
    """The JSON object in a text reply, tolerating a code fence or prose around it (local models add them)."""
    m = _FENCE.match(text)
    if m:
        text = m.group(1)
    text = text.strip()
    if text.startswith("{"):
        return text
    start, end = text.find("{"), text.rfind("}")
    return text[start : end + 1] if 0 <= start < end else text


def decode_output(raw: str | dict[str, Any], tp: type[T]) -> T:
    """``raw`` (JSON text or an already-decoded object) as ``tp``; msgspec errors name the failing path."""
    if isinstance(raw, str):
        if not raw.strip():
            raise msgspec.ValidationError("the reply was empty")
        raw = msgspec.json.decode(extract_json_text(raw))
    # The model's output is kept (appended to the log, projected): text PostgreSQL cannot store goes first.
    return msgspec.convert(clean_value(raw), tp)


def feedback(reply: AssistantMessage, error: str, tp: Any) -> list[Message]:
    """The messages that show the model its invalid reply and ask for a corrected one."""
    name = output_name(tp)
    if reply.tool_calls:
        call = reply.tool_calls[0]
        note = f"Invalid input for {name}: {error}. Call {call.name} again with input that matches its schema."
        return [reply, ToolResultMessage(call_id=call.id, name=call.name, content=note, is_error=True)]
    note = f"That reply does not match the {name} schema: {error}. Reply again with only the corrected JSON object."
    return [reply, UserMessage(text=note)]


async def complete_structured(
    provider: str,
    messages: list[Message],
    tp: type[T],
    once: Callable[[list[Message]], Awaitable[tuple[str | dict[str, Any], AssistantMessage]]],
    *,
    on_retry: Callable[[], None] | None = None,
    attempts: int = OUTPUT_ATTEMPTS,
) -> T:
    """Call ``once(messages)`` until its raw output validates as ``tp``, at most ``attempts`` times.

    ``once`` returns the raw output and the assistant message that carried it (for the feedback turn).
    """
    history = list(messages)
    error = ""
    for n in range(1, attempts + 1):
        raw, reply = await once(history)
        try:
            return decode_output(raw, tp)
        except (msgspec.ValidationError, msgspec.DecodeError) as exc:
            error = str(exc)
        if n < attempts:
            log.warning("model provider %r: output is not a valid %s (%s); asking again", provider, output_name(tp), error)
            history = [*history, *feedback(reply, error, tp)]
            if on_retry is not None:
                on_retry()
    raise OutputInvalid(
        f"the model provider {provider!r} returned output that did not match {output_name(tp)} "
        f"after {attempts} attempts: {error}",
        provider=provider,
        output_type=output_name(tp),
        error=error,
    )
