"""What every route on one of the owner's streams checks.

Streams are read through their resources' routes (a run's SSE, a session's SSE) and, as this project's addition,
through the WebSocket of :mod:`openmaic.api.stream_socket`, which carries the same client events.
"""

from __future__ import annotations

from openmaic.actors.commands import owned_stream
from openmaic.api.routing import Call
from openmaic.errors import InvalidInput
from openmaic.events.log import StreamRow

__all__ = ["check_cursor", "visible_stream"]


async def visible_stream(call: Call, stream_id: str) -> StreamRow:
    """The stream's row if it exists for the caller; otherwise the same 404 whether it is missing, deleted, or
    someone else's (the answer must not reveal which)."""
    return await owned_stream(call.services.log, call.owner, stream_id, live=True)


def check_cursor(value: int, head: int, name: str) -> int:
    """A resume cursor must not lie beyond the stream's head: no client can have seen such a seq."""
    if value > head:
        raise InvalidInput(
            f"{name}: {value} is beyond the stream's last seq ({head})", path=name, head_seq=head
        )
    return value
