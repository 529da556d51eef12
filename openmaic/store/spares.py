"""Spare connections: pooled connections that no unit of work holds, kept at hand for the next one.

Under trio-asyncio every asyncio callback is a turn of trio's scheduler, and asyncpg's pool costs several per call:
its release runs as a shielded task of its own, its acquire waits on a queue. A unit of work that takes the
connection the last one gave back, from this list, and gives it back here, pays none of that: a database call is
then one crossing and its statement (``benchmarks/append_steps.py`` counts the turns).

They are the pool's own connections, idle; the pool opens a new one only when every spare is taken too, so a
process opens as many connections as with the pool alone (the server's connection limit and the readiness check
see what they saw before). Most recently used first, so a burst's extra connections go cold and, once unused for
:data:`SPARE_IDLE_S`, back to the pool, whose idle timeout closes them. Connections the server closed meanwhile are
dropped when met (``usable``), never handed out; one that failed at the driver, was cancelled or was left inside a
transaction never comes here: the pool decides what becomes of it.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

SPARE_IDLE_S = 60.0
"""A spare unused this long goes back to the pool."""


class Spares:
    """The spares of one pool. ``take`` and ``give`` are plain calls; ``settle`` and ``release_all`` are asyncio
    coroutines (they give connections back with the pool's ``release``)."""

    def __init__(self, idle_s: float = SPARE_IDLE_S) -> None:
        self._idle_s = idle_s
        self._items: list[tuple[Any, float]] = []
        """(connection, when it was given back), most recently given back last"""
        self._waiting = 0
        """units waiting in the pool's ``acquire`` (see :meth:`get`)"""

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[Any]:
        return (raw for raw, _ in self._items)

    def take(self) -> Any:
        """The most recently given back connection that the server has not closed, as far as the driver knows
        (None: there is none; ask the pool)."""
        items = self._items
        while items:
            raw, _ = items.pop()
            try:
                closed = raw.is_closed()
            except Exception:  # the driver took it back already (the server closed it): the pool replaces it
                continue
            if closed:
                raw.terminate()  # finishes the driver's cleanup: the pool replaces it
                continue
            return raw
        return None

    async def get(self, acquire: Callable[[], Awaitable[Any]]) -> Any:
        """A spare, else the pool's ``acquire()``; an asyncio coroutine. While a unit waits in the pool's queue,
        every unit that ends gives its connection to the pool, not to the spares: the pool hands connections
        only to its own waiters, so a spare kept then would leave them waiting for one (until a spare goes cold,
        :data:`SPARE_IDLE_S`) whenever more units run than the pool has connections. The look at the spares and
        the count are one step of the event loop, so no unit can give a spare back between them unseen."""
        raw = self.take()
        if raw is not None:
            return raw
        self._waiting += 1
        try:
            return await acquire()
        finally:
            self._waiting -= 1

    def give(self, raw: Any) -> list[Any]:
        """Keep ``raw`` for the next unit; returns the spares unused for too long, for the pool to have back."""
        now = time.monotonic()
        items = self._items
        items.append((raw, now))
        cutoff = now - self._idle_s
        if items[0][1] >= cutoff:
            return []
        stale = [r for r, since in items if since < cutoff]
        items[:] = [(r, since) for r, since in items if since >= cutoff]
        return stale

    async def settle(self, raw: Any, clean: bool, release: Callable[[Any], Awaitable[Any]]) -> None:
        """After a unit: ``raw`` is kept if the unit ended ``clean`` (its statements done, the server still answering)
        and it is open and outside any transaction; else the pool decides (it waits for a cancel to be answered,
        rolls back, or replaces a closed connection); while a unit waits for the pool, the pool has it (:meth:`get`)."""
        if clean and not self._waiting and not raw.is_closed() and not raw.is_in_transaction():
            for stale in self.give(raw):
                await release(stale)
        else:
            await release(raw)

    async def release_all(self, release: Callable[[Any], Awaitable[Any]]) -> None:
        """Give every spare back to the pool (before it closes: closing waits for every connection taken from it;
        one the driver took back already is a no-op)."""
        items, self._items = self._items, []
        for raw, _ in items:
            await release(raw)
