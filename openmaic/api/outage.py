"""What a server-sent events client is told while the database is away (a restart, a failover).

A browser's ``EventSource`` reconnects by itself after a response that ends, but gives up for good after a
response that is not ``200 text/event-stream``: a 503 during a two-second failover would leave the page dead
until it is reloaded. So an SSE route never answers a non-200 because of the database:

* a request that meets the outage before its stream starts is answered ``200 text/event-stream`` with a
  ``retry:`` hint, kept open with pings until the database answers again, then ended
  (:func:`outage_response`): the client reconnects :data:`RETRY_MS` later and is served as usual, from its
  ``Last-Event-ID``;
* a stream that meets it once started waits the same way (:func:`until_database_answers`), then either goes on
  where it was (a stream's events, :mod:`openmaic.api.follow`) or ends, after a ``retry:`` hint, so that the
  client reconnects and reads the list afresh (the owners' lists).

While clients wait, one of them asks the database for all of them (one probe per process), 0.1 s doubling to
:data:`PROBE_CAP_S` apart: a client is served again within about half a second of the database coming back, and a
server that is down meets two queries a second from a process at most, however many clients wait.
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import AsyncIterator
from typing import Any

import trio
from quart import Response

from openmaic import metrics
from openmaic.api.services import ApiServices
from openmaic.errors import DatabaseUnavailable, OpenMaicError
from openmaic.store.backoff import Backoff
from openmaic.store.queries import Q

__all__ = ["RETRY", "RETRY_MS", "SSE_HEADERS", "database_outage", "outage_response", "until_database_answers"]

RETRY_MS = 500
"""The reconnect delay an SSE client is told to use after a response ended by an outage."""
RETRY = b"retry: %d\n\n" % RETRY_MS
PING = b": ping\n\n"
WAITING = b": the database is unavailable; waiting for it\n\n"

SSE_HEADERS = {
    "Content-Type": "text/event-stream; charset=utf-8",
    "Cache-Control": "no-cache, no-transform",
    "X-Accel-Buffering": "no",  # a proxy (nginx) must not hold frames back
}


def database_outage(exc: BaseException | None) -> bool:
    """Whether ``exc`` (or what it was raised from: a live feed ends its clients with the reason) is the database
    being away."""
    seen = 0
    while exc is not None and seen < 10:
        if isinstance(exc, DatabaseUnavailable):
            return True
        if isinstance(exc, BaseExceptionGroup):  # from a nursery: an outage if that is all it holds
            return all(database_outage(e) for e in exc.exceptions)
        exc, seen = exc.__cause__, seen + 1
    return False


async def until_database_answers(services: ApiServices) -> AsyncIterator[bytes]:
    """Pings (each ``server.sse_ping_s``) until the database answers a query again; then ends."""
    ping_s = services.config.server.sse_ping_s
    probe = _probe_of(services)
    yield WAITING
    while True:
        # No yield inside the cancel scope: an async generator must not suspend within one.
        with trio.move_on_after(ping_s):
            await probe.wait()
            return
        yield PING


PROBE_CAP_S = 0.5
"""The longest pause between two queries of a process's probe (one per process, however many clients wait)."""


class _Probe:
    """Whether the database answers again, asked by one of the waiting clients for all of them: a thousand clients
    waiting out an outage cost the server one query every :data:`PROBE_CAP_S`, not a thousand. Whichever waiter
    finds nobody asking does the asking; if it leaves (its client went away), the next one takes over."""

    def __init__(self, services: ApiServices) -> None:
        self.services = services
        self.back = trio.Event()
        self.asking = False

    async def wait(self) -> None:
        back = self.back
        while not back.is_set():
            if self.asking:
                with trio.move_on_after(PROBE_CAP_S):  # then look again: the one asking may have left
                    await back.wait()
                continue
            self.asking = True
            try:
                await self._ask(back)
            finally:
                self.asking = False

    async def _ask(self, back: trio.Event) -> None:
        pace = Backoff("an SSE client waiting for the database", cap=PROBE_CAP_S)
        while True:
            await trio.sleep(pace.pause())
            try:
                await self.services.db.fetchval(Q.ping)
            except OpenMaicError as exc:
                if not database_outage(exc):
                    raise
                continue
            # Back: every waiter goes on; the next outage's waiters wait on a new event.
            self.back = trio.Event()
            back.set()
            return


_probes: weakref.WeakKeyDictionary[Any, _Probe] = weakref.WeakKeyDictionary()


def _probe_of(services: ApiServices) -> _Probe:
    probe = _probes.get(services.db)
    if probe is None:
        probe = _probes[services.db] = _Probe(services)
    return probe


def outage_response(services: ApiServices) -> Response:
    """The answer to an SSE request that met the database's outage before its stream started (see the module doc)."""

    async def body() -> AsyncIterator[bytes]:
        metrics.SSE_CLIENTS.inc()
        try:
            yield RETRY
            async with contextlib.aclosing(until_database_answers(services)) as waiting:  # closed with the response
                async for chunk in waiting:
                    yield chunk
        finally:
            metrics.SSE_CLIENTS.dec()

    response = Response(body(), 200, dict(SSE_HEADERS))
    response.timeout = None  # as long as the outage lasts; quart would otherwise cut it after 60 s
    return response
