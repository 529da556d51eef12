"""The LISTEN side of wake-ups: who is subscribed, and the listener connection's reconnect policy.

One dedicated connection LISTENs on every channel the process cares about and fans each notification out to the
subscriptions (:class:`~openmaic.store.subscriptions.Subscription`, coalesced and bounded per consumer). The
connection is a hint source, never the carrier: when it is lost, every waiter polls meanwhile, and it is
re-established with backoff for as long as the process runs. Notifications sent while it was away are gone, so
after a reconnect every subscriber is told to re-read everything (``resync``). Only the first connection's
failure is raised (a process that cannot LISTEN at start-up does not start); later refusals are retried.

No driver here: :class:`Listener` is handed the three driver steps (connect, watch until lost, close) by
:mod:`openmaic.store.database`, which owns the connection itself.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

import trio

from openmaic import errors
from openmaic.store.backoff import Backoff
from openmaic.store.subscriptions import Subscription

log = logging.getLogger("openmaic.store.database")  # where these lines have always been logged

C = TypeVar("C")


class Listener(Generic[C]):
    """The subscriptions, whether the listener connection is up, and how often it came back."""

    def __init__(self) -> None:
        self.subscriptions: set[Subscription] = set()
        self.connected = False
        self.reconnects = 0

    def subscribe(self, max_pending: int = 10_000) -> Subscription:
        sub = Subscription(max_pending)
        self.subscriptions.add(sub)
        return sub

    def unsubscribe(self, sub: Subscription) -> None:
        self.subscriptions.discard(sub)

    def deliver(self, channel: str, payload: str) -> None:
        """One notification to every subscriber. Called from the driver's callback: non-blocking only."""
        for sub in self.subscriptions:
            sub._push(channel, payload)

    async def run(
        self,
        connect: Callable[[], Awaitable[C]],
        watch: Callable[[C], Awaitable[None]],
        close: Callable[[C], None],
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Keep a listener connection up forever: ``connect()`` one, ``watch(conn)`` until it is lost, ``close``
        it, and again. ``task_status.started()`` once the first connection is up."""
        retry = Backoff("LISTEN connection", "every waiter polls meanwhile")
        started = False
        while True:
            try:
                conn = await connect()
            except (errors.DatabaseUnavailable, errors.DatabaseError) as exc:
                # Once running, any refusal (server starting up, too many connections …) is retried: the
                # listener is a hint source, and every waiter polls meanwhile.
                if not started:
                    raise
                await retry.failed(exc)
                continue
            self.connected = True
            retry.succeeded()
            if started:
                # Notifications sent while we were away are gone: tell every subscriber to re-read.
                self.reconnects += 1
                for sub in self.subscriptions:
                    sub._push_resync()
                log.info("LISTEN connection re-established")
            else:
                started = True
                task_status.started()
            try:
                await watch(conn)
            finally:
                self.connected = False
                # Shielded: closing must finish even while we are being cancelled.
                with trio.CancelScope(shield=True):
                    close(conn)
            log.warning("LISTEN connection lost; reconnecting")
