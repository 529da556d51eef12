"""A prototype for the append benchmark, not the product: asyncpg on an asyncio loop in a thread of its own.

The product hosts asyncpg on trio-asyncio's loop, which runs every asyncio callback as a step of a trio task on
trio's own thread (a *crossing* per call: ``aio_as_trio``). The alternative measured here runs a plain asyncio
loop in a second thread and crosses by the thread-safe doors of both libraries: the call is handed to the loop
with ``asyncio.run_coroutine_threadsafe``; its completion wakes the trio task with ``TrioToken.run_sync_soon``
(one write to trio's wake-up socket). The driver's callbacks then run on asyncio's own (C-accelerated) loop, in
parallel with trio's scheduler except where the two threads meet at the GIL. Cancelling the trio caller is not
supported (the benchmark never cancels); that, the GIL's hand-offs, and two event loops per process are what the
product would have to take on with it.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from concurrent.futures import Future
from typing import Any

import asyncpg
import outcome
import trio


class ThreadLoop:
    """An asyncio loop running in a daemon thread, and a way to await coroutines on it from trio."""

    def __init__(self) -> None:
        # Not asyncio.new_event_loop(): trio-asyncio installs its own policy, which refuses inside trio.
        self.loop = asyncio.SelectorEventLoop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="asyncio loop", daemon=True)
        self._thread.start()

    async def call(self, fn: Callable[..., Awaitable[Any]], *args: Any) -> Any:
        """``await fn(*args)`` on the thread's loop, from trio; the trio task sleeps until it is done."""
        token = trio.lowlevel.current_trio_token()
        task = trio.lowlevel.current_task()

        def done(fut: Future[Any]) -> None:  # runs on the loop's thread
            token.run_sync_soon(trio.lowlevel.reschedule, task, outcome.capture(fut.result))

        asyncio.run_coroutine_threadsafe(fn(*args), self.loop).add_done_callback(done)
        return await trio.lowlevel.wait_task_rescheduled(lambda _: trio.lowlevel.Abort.FAILED)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(5)


class ThreadPool:
    """A pool on a :class:`ThreadLoop` with spare connections in front, as ``Database`` keeps them (a call takes
    the connection the last call gave back, with no pool acquire or release), so a call costs a crossing and its
    statement."""

    def __init__(self, tl: ThreadLoop, pool: asyncpg.Pool) -> None:
        self.tl = tl
        self.pool = pool
        self.spares: list[asyncpg.Connection] = []

    @classmethod
    async def open(cls, url: str, size: int, server_settings: dict[str, str]) -> ThreadPool:
        tl = ThreadLoop()
        async def create() -> asyncpg.Pool:
            return await asyncpg.create_pool(url, min_size=size, max_size=size, server_settings=server_settings)

        pool = await tl.call(create)
        return cls(tl, pool)

    async def _fetchrow(self, sql: str, args: tuple[Any, ...]) -> Any:
        conn = self.spares.pop() if self.spares else await self.pool.acquire()
        try:
            return await conn.fetchrow(sql, *args)
        finally:
            self.spares.append(conn)

    async def fetchrow(self, sql: str, *args: Any) -> Any:
        return await self.tl.call(self._fetchrow, sql, args)

    async def aclose(self) -> None:
        async def close() -> None:
            for conn in self.spares:
                await self.pool.release(conn)
            await self.pool.close()

        await self.tl.call(close)
        self.tl.close()
