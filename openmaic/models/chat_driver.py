"""What the HTTP chat drivers (``openai``, ``anthropic``) share: one turn is a request body, the tools in the
provider's own encoding, and one streamed exchange through the retrying ``Transport``.

A driver gives ``_body`` (the provider's request without tools), ``_encode_tools`` and ``_turn`` (one streamed
exchange, retried by the transport); ``stream_turn`` is then the same for every provider, so a change to how a
turn is put together (a new field every provider takes, say) is made once.
"""

from __future__ import annotations

from collections.abc import Callable

from openmaic.models.types import Message, ToolSpec, TurnResult


class ChatDriver:
    """The part of ``Provider`` every HTTP chat driver answers the same way; see ``models.provider.Provider``."""

    # Given by each driver: ``_body(model, messages) -> dict`` (the request without tools),
    # ``_encode_tools(tools) -> list`` and ``async _turn(body, on_delta, on_retry) -> TurnResult``.
    name: str
    base_url: str

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r} {self.base_url}>"

    async def stream_turn(
        self,
        model: str,
        messages: list[Message],
        tools: list[ToolSpec],
        *,
        on_delta: Callable[[str], None],
        on_retry: Callable[[], None] | None = None,
    ) -> TurnResult:
        """One streamed turn; see ``Provider.stream_turn``."""
        body = self._body(model, messages)
        if tools:
            body["tools"] = self._encode_tools(tools)
        return await self._turn(body, on_delta, on_retry)
