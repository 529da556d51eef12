"""Where a lone append's client time goes: scheduler work per call, by layer, from the product path down.

    python -m benchmarks.append_steps [--appends 1000]

One stream, one event per append, appends one after another (the one-stream cell of ``benchmarks.append``), on a
throwaway cluster with fsync off so that the client's own work is what the loop waits on. For each layer, from
``EventLog.append_one`` as the product calls it down to an empty trio→asyncio crossing, it counts per call: trio's
I/O waits (each a turn of the scheduler: an epoll call), trio task steps, wall time and this process's CPU time.
The difference between two rows is what the layer between them costs: the hint, the group commit's hop to its
worker, the pool's acquire and release, the crossing. A last row runs the statement through the prototype of
``benchmarks/_thread_loop.py`` (asyncpg on an asyncio loop in a thread of its own; its CPU column counts both
threads, its io-waits only trio's).
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Awaitable, Callable, Sequence

import trio
import trio_asyncio

from benchmarks._thread_loop import ThreadPool
from openmaic.events.core import ModelOutputDelta
from openmaic.events.log import EventLog
from openmaic.store.database import DEFAULT_SERVER_SETTINGS, open_database
from openmaic.store.migrations import migrate
from openmaic.store.postgres import ThrowawayCluster
from openmaic.store.queries import Q


class Count(trio.abc.Instrument):
    def __init__(self) -> None:
        self.io = 0
        self.steps = 0

    def before_io_wait(self, timeout: float) -> None:
        self.io += 1

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        self.steps += 1


async def measure(name: str, fn: Callable[[], Awaitable[object]], n: int) -> None:
    for _ in range(100):  # warm: prepared statements, a held connection
        await fn()
    await trio.sleep(0.05)
    c = Count()
    trio.lowlevel.add_instrument(c)
    t0, c0 = time.perf_counter(), time.process_time()
    for _ in range(n):
        await fn()
    t1, c1 = time.perf_counter(), time.process_time()
    trio.lowlevel.remove_instrument(c)
    print(f"| {name:<44} | {n / (t1 - t0):>8,.0f} | {(c1 - c0) / n * 1e6:>8,.0f} | {c.io / n:>8.1f} | {c.steps / n:>8.1f} |")


async def amain(url: str, n: int) -> None:
    async with open_database(url) as db:
        await migrate(db)
    async with open_database(url, min_size=4, max_size=10) as db:
        await db.execute("INSERT INTO streams (id, kind, owner_id, attempt) VALUES ('s', 'bench', 'bench', 1)")
        log = EventLog(db)
        events = [ModelOutputDelta(text="chunk 1: the lesson continues with an example of recursion, ")]
        t, v, data = log.types.encode(events[0])
        args = ("s", 1, None, None, None, False, None, False, False, [t], [v], [data.decode()])
        print(f"1-min load average {os.getloadavg()[0]:.2f}; {n:,} calls per row, one after another\n")
        print(f"| {'layer':<44} | {'calls/s':>8} | {'CPU µs':>8} | {'io-waits':>8} | {'steps':>8} |")
        print(f"|{'-' * 46}|----------|----------|----------|----------|")
        hints = db.notify_soon
        await measure("EventLog.append_one (attempt fence)", lambda: log.append_one("s", events, attempt=1), n)
        db.notify_soon = lambda channel, payload: None  # type: ignore[method-assign]
        await measure("  … without the NOTIFY hint", lambda: log.append_one("s", events, attempt=1), n)
        db.notify_soon = hints  # type: ignore[method-assign]
        await measure("Database.fetchrow(append_one) (pooled)", lambda: db.fetchrow(Q.append_one, *args), n)
        async with db.connection() as conn:
            await measure("Connection.fetchrow(append_one) (held)", lambda: conn.fetchrow(Q.append_one, *args), n)
        tp = await ThreadPool.open(url, 2, dict(DEFAULT_SERVER_SETTINGS))
        try:
            await measure("the same, asyncio loop on a thread *", lambda: tp.fetchrow(Q.append_one, *args), n)
        finally:
            await tp.aclose()

        async def noop() -> None:
            pass

        await measure("an empty trio→asyncio crossing", lambda: trio_asyncio.aio_as_trio(noop)(), n)


def main(argv: Sequence[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m benchmarks.append_steps", description=__doc__.split("\n\n")[0])
    p.add_argument("--appends", type=int, default=1000, help="calls per row (default 1000)")
    args = p.parse_args(argv)
    cluster = ThrowawayCluster(durable=False).start()
    try:
        trio.run(amain, cluster.url(), args.appends)
    finally:
        cluster.stop()


if __name__ == "__main__":
    main()
