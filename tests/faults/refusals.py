"""A PostgreSQL that refuses new connections (``53300 too many clients``) for as long as a test wants.

:func:`server_full` takes every free connection slot and keeps taking any slot that frees up, so every new
connection meets ``53300`` until the block ends; :func:`terminate_others` then ends the connections that
processes under test already hold, so that they have to reconnect (and are refused) too.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import trio

from openmaic import errors
from openmaic.store.database import CONNECTION_LIMIT, Database, open_database

FILLER = "openmaic test: server full"
"""The application_name of the filler's connections, which :func:`terminate_others` spares. (By name, not by the
pids it has seen: a connection the filler has just been given has no pid on record yet, and ending it would refuse
the filler itself.)"""


class ServerFull:
    def __init__(self, db: Database) -> None:
        self.db = db
        self.held = 0
        self.refused = 0
        self.evicted = 0
        self.release = trio.Event()
        self.admin = None
        """One held connection, to act on the server while it is full (it counts as taken)."""

    async def _hold(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with self.db.connection() as conn:
            self.held += 1
            if self.admin is None:
                self.admin = conn
            task_status.started()
            await self.release.wait()

    async def _fill(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            started = False
            while not self.release.is_set():
                try:
                    await nursery.start(self._hold)
                except errors.DatabaseUnavailable as exc:
                    assert exc.details.get("reason") == CONNECTION_LIMIT, exc
                    self.refused += 1
                    if not started:
                        started = True
                        task_status.started()
                    # A tight retry: a slot that frees up is ours before the processes under test back off and
                    # try again.
                    await trio.sleep(0.002)


    async def _evict(self, interval: float) -> None:
        """End every other client connection, again and again: a process that wins a slot back loses it soon."""
        while not self.release.is_set():
            self.evicted += await terminate_others(self)
            with trio.move_on_after(interval):
                await self.release.wait()


@contextlib.asynccontextmanager
async def server_full(url: str, *, evict: bool = True, evict_every: float = 0.05) -> AsyncIterator[ServerFull]:
    """Every connection slot of the server is taken for the block's duration (the filler is refused once before
    the block starts). With ``evict``, every other client connection is ended, and ended again whenever one is
    made, so that every process keeps meeting the refusal until the block ends."""
    async with open_database(url, min_size=1, max_size=1000, server_settings={"application_name": FILLER}) as db:
        full = ServerFull(db)
        async with trio.open_nursery() as nursery:
            await nursery.start(full._fill)
            if evict:
                nursery.start_soon(full._evict, evict_every)
            try:
                yield full
            finally:
                full.release.set()


async def terminate_others(full: ServerFull) -> int:
    """End every client connection to the server except the filler's own; returns how many were ended."""
    assert full.admin is not None
    rows = await full.admin.fetch(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
        "WHERE backend_type = 'client backend' AND application_name IS DISTINCT FROM $1",
        FILLER,
    )
    return len(rows)
