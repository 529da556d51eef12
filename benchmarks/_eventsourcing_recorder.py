"""The Python ``eventsourcing`` library's PostgreSQL recorder at one stream, beside raw asyncpg INSERTs in one run.

    DATABASE_URL=postgresql://… /path/to/other-venv/bin/python benchmarks/_eventsourcing_recorder.py [--seconds 3]

The reference point for our own one-stream append (``python -m benchmarks.append --streams 1 --batches 1`` against
the same server, right after). ``eventsourcing`` is not a dependency of ours: run this file with the interpreter of a
separate environment holding ``eventsourcing[postgres]`` (psycopg 3) and ``asyncpg``, e.g.
``python -m venv /tmp/esvenv && /tmp/esvenv/bin/pip install 'eventsourcing[postgres]==9.5.6' asyncpg==0.32.0``.
It imports nothing of openmaic, and its name starts with an underscore so that ``make bench`` (which runs every
other ``benchmarks/*.py`` with the project's interpreter) leaves it out.

One writer, one event per commit, for ``--seconds`` after a one-second warm-up, on a database of its own made on
that server (dropped afterwards): (b) raw asyncpg ``INSERT`` of the same row shape into a plain table, one held
connection, inside one asyncio coroutine; (e) ``PostgresApplicationRecorder.insert_events`` with one
``StoredEvent`` per call (its transaction takes a table lock for the global order, then inserts and notifies).
Both write 78 bytes of JSON per event, as ``benchmarks.append`` does on average.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
import urllib.parse
import uuid

import asyncpg
from eventsourcing.persistence import StoredEvent
from eventsourcing.postgres import PostgresApplicationRecorder, PostgresDatastore

STATE = b'{"text":"chunk 1: the lesson continues with an example of recursion, ","i":1}'.ljust(78)


class Window:
    """A measured window after a warm-up: ``more()`` before each step says whether to take it, and counts the steps
    that start inside the window."""

    def __init__(self, warmup: float, seconds: float) -> None:
        start = time.perf_counter()
        self.measure_from, self.until, self.seconds = start + warmup, start + warmup + seconds, seconds
        self.counted = 0

    def more(self) -> bool:
        t = time.perf_counter()
        if t >= self.until:
            return False
        if t >= self.measure_from:
            self.counted += 1
        return True

    def rate(self) -> float:
        return self.counted / self.seconds


async def raw(url: str, warmup: float, seconds: float) -> float:
    conn = await asyncpg.connect(url)
    try:
        await conn.execute(
            "CREATE TABLE raw_events (originator_id uuid, originator_version bigint, topic text, state bytea, "
            "notification_id bigserial PRIMARY KEY, UNIQUE (originator_id, originator_version))"
        )
        oid = uuid.uuid4()
        version = 0
        window = Window(warmup, seconds)
        while window.more():
            version += 1
            await conn.execute("INSERT INTO raw_events (originator_id, originator_version, topic, state) "
                               "VALUES ($1, $2, $3, $4)", oid, version, "bench:Delta", STATE)
        return window.rate()
    finally:
        await conn.close()


def recorder(url: str, warmup: float, seconds: float) -> float:
    u = urllib.parse.urlsplit(url)
    q = urllib.parse.parse_qs(u.query)
    host = q.get("host", [u.hostname or "localhost"])[0]
    datastore = PostgresDatastore(u.path.lstrip("/"), host, u.port or 5432, u.username or "postgres", u.password or "")
    rec = PostgresApplicationRecorder(datastore)
    rec.create_table()
    oid = uuid.uuid4()
    version = 0
    window = Window(warmup, seconds)
    while window.more():
        version += 1
        rec.insert_events([StoredEvent(originator_id=oid, originator_version=version, topic="bench:Delta",
                                       state=STATE)])
    datastore.close()
    return window.rate()


async def admin(url: str, sql: str) -> None:
    conn = await asyncpg.connect(url)
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seconds", type=float, default=3.0)
    p.add_argument("--warmup", type=float, default=1.0)
    args = p.parse_args()
    admin_url = os.environ["DATABASE_URL"]
    name = f"es_bench_{os.getpid()}"
    url = urllib.parse.urlunsplit(urllib.parse.urlsplit(admin_url)._replace(path="/" + name))
    asyncio.run(admin(admin_url, f"CREATE DATABASE {name}"))
    try:
        load = os.getloadavg()[0]
        b = asyncio.run(raw(url, args.warmup, args.seconds))
        e = recorder(url, args.warmup, args.seconds)
        print(f"1-min load average {load:.2f} before, {os.getloadavg()[0]:.2f} after; 1 stream, 1 event per commit")
        print(f"(b) raw asyncpg INSERT          {b:8,.0f} events/s")
        print(f"(e) eventsourcing recorder      {e:8,.0f} events/s  e/b {e / b:.2f}")
    finally:
        asyncio.run(admin(admin_url, f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"))


if __name__ == "__main__":
    main()
