"""A client connection's send queue, bounded by frames and by bytes.

A live feed offers each new event to every subscriber's queue without waiting (:mod:`openmaic.feeds.live`); a
queue bounded only by frames lets a client that stops reading hold ``frames × event size`` in the server's
memory — 1000 events of 16 MB are 16 GB. This queue also counts the bytes it holds (an event by its stored
data, a pre-encoded frame by its length) and refuses the offer that would take it past ``max_bytes``: to the
feed that is the same ``trio.WouldBlock`` as a full queue, so the subscriber is dropped alone and resumes from
its last seq, as before.

An item is always taken into an empty queue, however large, so one event larger than the bound still reaches
the client (it was stored; the client must be able to read past it); the queue then holds at most the bound
plus that one event. The paced senders (a catch-up's backlog, command answers) wait for room by bytes too.

The send side has the part of ``trio.MemorySendChannel`` the feed and the connections use (``send``,
``send_nowait``, ``clone``, ``close``, ``async with``); the receive side the part the writers use.
"""

from __future__ import annotations

from typing import Any

import trio

__all__ = ["ITEM_OVERHEAD", "QueueReceive", "QueueSend", "open_send_queue", "size_of"]

ITEM_OVERHEAD = 256
"""Bytes counted per queued item besides its data: its envelope and bookkeeping."""


def size_of(item: Any) -> int:
    """What an item holds in memory, near enough: a frame's bytes, or an event's stored data."""
    if isinstance(item, bytes | bytearray | memoryview):
        return len(item) + ITEM_OVERHEAD
    event = getattr(item, "event", None)
    data = getattr(event, "data", None)
    return (len(data) if data is not None else 0) + ITEM_OVERHEAD


class _Budget:
    __slots__ = ("held", "max_bytes", "room")

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.held = 0
        self.room = trio.Event()

    def fits(self, n: int) -> bool:
        return self.held == 0 or self.held + n <= self.max_bytes


class QueueSend:
    def __init__(self, send: trio.MemorySendChannel[Any], budget: _Budget) -> None:
        self._send = send
        self._budget = budget

    def send_nowait(self, item: Any) -> None:
        """Queue ``item`` or raise ``trio.WouldBlock``: the queue is full by frames or by bytes."""
        n = size_of(item)
        if not self._budget.fits(n):
            raise trio.WouldBlock
        self._send.send_nowait(item)
        self._budget.held += n

    async def send(self, item: Any) -> None:
        """Queue ``item``, waiting for room by bytes, then by frames."""
        n, budget = size_of(item), self._budget
        while not budget.fits(n):
            await budget.room.wait()
        # No await between the check and the count: the room we saw is still ours when the frame slot opens
        # (a frame slot can make us wait, but the receiver only lowers ``held`` meanwhile).
        budget.held += n
        try:
            await self._send.send(item)
        except BaseException:
            budget.held -= n
            raise

    def clone(self) -> QueueSend:
        return QueueSend(self._send.clone(), self._budget)

    def close(self) -> None:
        self._send.close()

    async def __aenter__(self) -> QueueSend:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()


class QueueReceive:
    def __init__(self, receive: trio.MemoryReceiveChannel[Any], budget: _Budget) -> None:
        self._receive = receive
        self._budget = budget

    def _taken(self, item: Any) -> Any:
        budget = self._budget
        budget.held = max(0, budget.held - size_of(item))
        budget.room.set()  # wake paced senders; each checks again
        budget.room = trio.Event()
        return item

    async def receive(self) -> Any:
        return self._taken(await self._receive.receive())

    def receive_nowait(self) -> Any:
        return self._taken(self._receive.receive_nowait())

    @property
    def empty(self) -> bool:
        """Nothing is queued, or being queued by a paced sender (every item counts at least its overhead)."""
        return self._budget.held == 0

    def __aiter__(self) -> QueueReceive:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self.receive()
        except trio.EndOfChannel:
            raise StopAsyncIteration from None

    def close(self) -> None:
        self._receive.close()

    async def __aenter__(self) -> QueueReceive:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()


def open_send_queue(max_frames: int, max_bytes: int) -> tuple[QueueSend, QueueReceive]:
    """A connection's send queue: at most ``max_frames`` items and ``max_bytes`` bytes (see the module doc)."""
    send, receive = trio.open_memory_channel[Any](max_frames)
    budget = _Budget(max_bytes)
    return QueueSend(send, budget), QueueReceive(receive, budget)
