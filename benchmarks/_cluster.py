"""A database for a benchmark run: DATABASE_URL, or a throwaway durable cluster, migrated."""

from __future__ import annotations

import contextlib
import os
import sys
import urllib.parse
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

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


def run_on_fresh_database(amain: Callable[[Any, str], Awaitable[None]], args: Any, prefix: str) -> None:
    """``trio.run(amain, args, url)`` on a database created for this run (on DATABASE_URL's server, or on a
    throwaway durable cluster) and dropped afterwards."""
    cluster = None
    admin_url = os.environ.get("DATABASE_URL")
    if not admin_url:
        print("starting a throwaway PostgreSQL cluster (fsync on, synchronous_commit on)…", file=sys.stderr)
        cluster = ThrowawayCluster(durable=True).start()
        admin_url = cluster.url()
    name = f"{prefix}_{os.getpid()}"
    url = urllib.parse.urlunsplit(urllib.parse.urlsplit(admin_url)._replace(path="/" + name))
    try:
        trio.run(_admin, admin_url, f"CREATE DATABASE {name}")
        try:
            trio.run(amain, args, url)
        finally:
            trio.run(_admin, admin_url, f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
    finally:
        if cluster is not None:
            cluster.stop()


async def _admin(url: str, sql: str) -> None:
    async with open_database(url, min_size=1, max_size=1) as db:
        await db.execute(sql)
