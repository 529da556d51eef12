"""The commands a client sends to one of its streams, as one table per stream kind: one road per command.

A command is a body type and a handler ``(services, owner, stream_id, body) -> answer``. The HTTP route of a
command (``POST /api/generation-runs/{id}/confirm-outline``) and the same command sent on the stream's WebSocket
(``{"type": "confirm_outline", …}``) decode the same body type and call the same handler, which calls the
service: a message is checked, refused or accepted the same way whichever road it takes, and answers with the
same body (an HTTP response, or the ``result`` of an ``ack`` frame).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from openmaic.api.services import ApiServices

__all__ = ["CommandTable", "StreamCommand"]

Handler = Callable[[ApiServices, str, str, Any], Awaitable[Any]]


@dataclass(frozen=True)
class StreamCommand:
    name: str
    body: type
    handler: Handler


class CommandTable:
    """The commands of one stream kind, by the ``type`` a WebSocket message names them with."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.commands: dict[str, StreamCommand] = {}

    def command(self, name: str, body: type) -> Callable[[Handler], Handler]:
        def register(fn: Handler) -> Handler:
            self.commands[name] = StreamCommand(name, body, fn)
            return fn

        return register

    def get(self, name: str) -> StreamCommand | None:
        return self.commands.get(name)

    def names(self) -> list[str]:
        return sorted(self.commands)
