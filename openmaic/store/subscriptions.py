"""What a NOTIFY delivers to the process, and how hints are packed for it: a consumer's coalesced, bounded set of
payloads (:class:`Subscription`), and payload chunks under PostgreSQL's limit. No driver here: the LISTEN and
NOTIFY connections are :mod:`openmaic.store.database`'s."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import trio


class Subscription:
    """Notifications for one consumer, coalesced: a set of payloads plus a 'resync' flag.

    The set is bounded: past ``max_pending`` payloads it collapses into ``resync`` (re-read everything), so a
    slow consumer costs bounded memory and never misses a wake-up, only its precision.
    """

    def __init__(self, max_pending: int = 10_000) -> None:
        self._pending: set[tuple[str, str]] = set()
        self._resync = False
        self._max = max_pending
        self._wakeup = trio.Event()

    def _push(self, channel: str, payload: str) -> None:
        if not self._resync:
            self._pending.add((channel, payload))
            if len(self._pending) > self._max:
                self._pending.clear()
                self._resync = True
        self._wakeup.set()

    def _push_resync(self) -> None:
        self._pending.clear()
        self._resync = True
        self._wakeup.set()

    async def wait(self) -> tuple[set[tuple[str, str]], bool]:
        """Wait for notifications; returns ``(channel, payload)`` pairs and whether to re-read everything."""
        await self._wakeup.wait()
        pending, resync = self._pending, self._resync
        self._pending, self._resync = set(), False
        self._wakeup = trio.Event()
        return pending, resync


def chunk_payloads(payloads: Sequence[str], limit: int = 7900) -> Iterator[list[str]]:
    """Group payloads so each NOTIFY stays under PostgreSQL's 8000-byte payload limit."""
    chunk: list[str] = []
    size = 0
    for p in payloads:
        n = len(p.encode()) + 1
        if chunk and size + n > limit:
            yield chunk
            chunk, size = [], 0
        chunk.append(p)
        size += n
    if chunk:
        yield chunk
