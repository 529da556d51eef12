"""Single-flight reads for live feeds: subscribers of one stream share one query and one encoding per page.

Every caught-up client of a stream is woken by the same hint and asks for the same page (the events after the
same seq). Without sharing, an append to a stream with N subscribers costs N identical queries and N encodings of
each event; with it, one query and one encoding, however many clients wait. A result is shared only while its
read is in flight, so nothing is cached and nothing can go stale.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Hashable
from typing import Any, TypeVar

import trio

T = TypeVar("T")


class _Flight:
    def __init__(self) -> None:
        self.done = trio.Event()
        self.ok = False
        self.value: Any = None


class SingleFlight:
    """``await flights.run(key, fn)``: concurrent callers with an equal key share one call of ``fn``."""

    def __init__(self) -> None:
        self._flights: dict[Hashable, _Flight] = {}

    async def run(self, key: Hashable, fn: Callable[[], Awaitable[T]]) -> T:
        while True:
            flight = self._flights.get(key)
            if flight is None:
                break
            await flight.done.wait()
            if flight.ok:
                return flight.value  # type: ignore[no-any-return]
            # The leader failed or was cancelled (its client left): try again, possibly as the new leader.
        flight = self._flights[key] = _Flight()
        try:
            flight.value = await fn()
            flight.ok = True
            return flight.value  # type: ignore[no-any-return]
        finally:
            del self._flights[key]
            flight.done.set()


live_pages = SingleFlight()
"""Shared by every live WebSocket and SSE feed of this process."""
