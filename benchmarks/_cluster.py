"""A database for a benchmark run: DATABASE_URL, or a throwaway durable cluster, migrated."""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator

import trio

from openmaic.store.database import open_database
from openmaic.store.migrations import migrate
from openmaic.store.postgres import ThrowawayCluster


@contextlib.asynccontextmanager
async def benchmark_database() -> AsyncIterator[str]:
    url = os.environ.get("DATABASE_URL")
    cluster = None
    if not url:
        print("starting a throwaway PostgreSQL cluster (fsync on, synchronous_commit on)…", flush=True)
        cluster = await trio.to_thread.run_sync(lambda: ThrowawayCluster(durable=True, max_connections=400).start())
        url = cluster.url()
    try:
        async with open_database(url) as db:
            await migrate(db)
        yield url
    finally:
        if cluster is not None:
            cluster.stop()


def percentile(values: list[float], p: float) -> float:
    s = sorted(values)
    if not s:
        return float("nan")
    k = min(len(s) - 1, max(0, round(p / 100 * (len(s) - 1))))
    return s[k]
