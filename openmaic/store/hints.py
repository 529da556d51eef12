"""The NOTIFY side of wake-ups: hints queued by committers, coalesced, and sent from one task.

NOTIFY takes a global lock at commit, so one NOTIFY per event would serialize every committing transaction. A
committer queues its hint instead (:meth:`HintSender.queue`), after its commit; identical hints queued before the
next flush are sent once, and one task sends each flush as one statement per payload chunk (PostgreSQL caps a
payload at 8000 bytes). A hint is never the carrier — every waiter also polls — so a flush the database refuses is
dropped and the sender backs off. No driver here: the statement runs through whatever ``execute`` the database
hands :meth:`HintSender.run`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import trio

from openmaic import errors
from openmaic.store.backoff import Backoff
from openmaic.store.queries import Q
from openmaic.store.subscriptions import chunk_payloads


class HintSender:
    """Pending NOTIFY hints, by channel, and the loop that sends them."""

    def __init__(self) -> None:
        self._pending: dict[str, set[str]] = {}
        self._wakeup = trio.Event()

    def queue(self, channel: str, payload: str) -> None:
        self._pending.setdefault(channel, set()).add(payload)
        self._wakeup.set()

    async def run(self, execute: Callable[..., Awaitable[Any]], min_interval: float = 0.005) -> None:
        retry = Backoff("NOTIFY sender", "hints are dropped meanwhile; waiters find the work by polling")
        while True:
            # The pause lets a burst of appends share one NOTIFY; local watchers were poked already.
            await trio.sleep(min_interval)
            await self._wakeup.wait()
            self._wakeup = trio.Event()
            pending, self._pending = self._pending, {}
            try:
                for channel, payloads in pending.items():
                    for chunk in chunk_payloads(sorted(payloads)):
                        await execute(Q.notify_many, channel, chunk)
            except (errors.DatabaseUnavailable, errors.DatabaseError) as exc:
                # A hint is never the carrier (every waiter also polls), so the rest of this flush is dropped,
                # and the sender backs off rather than retrying every few milliseconds while the server refuses.
                await retry.failed(exc)
            else:
                retry.succeeded()
