"""The commands a client sends to one of its streams, as one table per stream kind: one road per command.

A command is a body type and a handler ``(services, owner, stream_id, body) -> answer``. The HTTP route of a
command (``POST /api/generation-runs/{id}/confirm-outline``) and the same command sent on the stream's WebSocket
(``{"type": "confirm_outline", …}``) decode the same body type and call the same handler, which calls the
service: a message is checked, refused or accepted the same way whichever road it takes, and answers with the
same body (an HTTP response, or the ``result`` of an ``ack`` frame). A refusal is the same too: the table holds the
codes its routes give a status of their own (``error_codes``, as :func:`~openmaic.api.routing.api_route` takes
them), and an ``error`` frame carries the code the route would have answered.
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

    def __init__(self, kind: str, error_codes: dict[int, str] | None = None) -> None:
        self.kind = kind
        self.error_codes = dict(error_codes or {})
        """The code each status gets on these commands' routes, and so on the WebSocket."""
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
