"""Server-sent events from a streaming httpx response, with JSON payloads.

``read_events`` never just breaks out of httpx's body iterator (see ``retry.unwind``): after the final event
it drains the (by then finished) body, and on an error it unwinds the iterator by cancellation.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any, NamedTuple

import httpx
import msgspec

from openmaic.models.retry import MalformedResponse, unwind
from openmaic.text import clean_value, json_has_nul

_FIELDS = frozenset({"data", "event", "id", "retry"})


class ServerSentEvent(NamedTuple):
    """One dispatched event: its ``event`` name (``message`` when unnamed) and its joined ``data``."""

    event: str
    data: str


async def read_events(response: httpx.Response, handle: Callable[[ServerSentEvent], bool]) -> None:
    """Call ``handle`` with each event of ``response``'s body as it arrives, until it returns True or the body ends.

    A line that is not an SSE field raises ``MalformedResponse``: the spec would skip it, but a body of such
    lines is an error page or a non-streaming reply, and saying so beats a confusing "no output". Exceptions
    from ``handle`` propagate (after the body iterator has been unwound).
    """
    lines = response.aiter_lines()
    try:
        finished = await _dispatch(lines, handle)
    except Exception:
        await unwind(lines, cancel_now=True)
        raise
    if finished:
        await unwind(lines, cancel_now=False)


async def _dispatch(lines: AsyncIterator[str], handle: Callable[[ServerSentEvent], bool]) -> bool:
    event = ""
    data: list[str] = []
    async for line in lines:
        if line == "":
            if data and handle(ServerSentEvent(event or "message", "\n".join(data))):
                return True
            event, data = "", []
            continue
        if line.startswith(":"):
            continue
        field, sep, value = line.partition(":")
        if field not in _FIELDS:
            raise MalformedResponse("not an event stream")
        if sep and value.startswith(" "):
            value = value[1:]
        if field == "data":
            data.append(value)
        elif field == "event":
            event = value
    return bool(data) and handle(ServerSentEvent(event or "message", "\n".join(data)))


def json_payload(ev: ServerSentEvent) -> dict[str, Any]:
    """The event's data decoded as a JSON object; text PostgreSQL cannot store (a NUL) is dropped from its
    strings, since what a model streams is appended to the log and projected."""
    try:
        doc = msgspec.json.decode(ev.data)
    except msgspec.DecodeError:
        raise MalformedResponse("an event is not JSON") from None
    if not isinstance(doc, dict):
        raise MalformedResponse("an event is not a JSON object")
    return clean_value(doc) if json_has_nul(ev.data) else doc
