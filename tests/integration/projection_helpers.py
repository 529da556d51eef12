"""Helpers for the projection tests, and the projector process they kill (``python -m`` this module).

``Counting`` is a projection that records how many times each event was applied and whether each stream's
events arrived in seq order, which is what exactly-once and ordering claims are checked against.
"""

from __future__ import annotations

import random
import sys
from collections.abc import Iterator, Sequence
from typing import Any

import msgspec
import trio

from benchmarks.workload import Step
from openmaic.events.log import EventLog, NewStream, RecordedEvent, StreamAppend
from openmaic.projections import Context, Projection, default_projections, run_projectors
from openmaic.store.database import Database, Op, open_database
from openmaic.store.queries import Q


class _Last(msgspec.Struct, frozen=True):
    stream_id: str
    seq: int


class Counting(Projection):
    """Every event, counted: ``applied`` per (stream, seq), ``in_order`` when its predecessor came first."""

    name = "test_counting"
    tables = {
        "test_counting": (
            """CREATE TABLE {test_counting} (
    stream_id text NOT NULL,
    seq       bigint NOT NULL,
    applied   integer NOT NULL,
    in_order  boolean NOT NULL,
    PRIMARY KEY (stream_id, seq)
)""",
        ),
    }
    types = frozenset()

    def __init__(self, sleep_s: float = 0.0) -> None:
        self.sleep_s = sleep_s

    def wants(self, type_: str) -> bool:
        return True

    async def apply(self, ctx: Context, events: Sequence[RecordedEvent]) -> list[Op]:
        ids = list(dict.fromkeys(e.stream_id for e in events))
        last = {r.stream_id: r.seq for r in await ctx.fetch(
            _Last, "SELECT stream_id, max(seq) AS seq FROM {test_counting} WHERE stream_id = ANY($1::text[]) "
            "GROUP BY stream_id", ids)}
        in_order = []
        for e in events:
            in_order.append(e.seq == last.get(e.stream_id, 0) + 1)
            last[e.stream_id] = max(last.get(e.stream_id, 0), e.seq)
        ops = [ctx.op(
            "INSERT INTO {test_counting} AS c (stream_id, seq, applied, in_order) "
            "SELECT s, q, 1, o FROM unnest($1::text[], $2::bigint[], $3::boolean[]) AS u(s, q, o) "
            "ON CONFLICT (stream_id, seq) DO UPDATE SET applied = c.applied + 1",
            [e.stream_id for e in events], [e.seq for e in events], in_order,
        )]
        if self.sleep_s:
            # Keeps each batch's transaction open a while, so that a kill lands in the middle of one.
            ops.append((f"SELECT pg_sleep({self.sleep_s})", ()))
        return ops


async def play(log: EventLog, steps: Iterator[Step], *, hold_s: float = 0.0, rng: random.Random | None = None,
               db: Database | None = None) -> int:
    """Append a scenario step by step; with ``hold_s``, each append's transaction stays open a random time up to
    ``hold_s`` before it commits (commits then land out of their transaction-id order)."""
    n = 0
    for step in steps:
        batches = [StreamAppend(stream_id=w.stream_id, events=w.events,
                                create=NewStream(*w.create) if w.create else None) for w in step]
        if hold_s and db is not None and rng is not None:
            async with db.connection() as conn, conn.transaction():
                await conn.fetch(Q.append, *log.append_args(batches))
                await trio.sleep(rng.uniform(0, hold_s))
        else:
            await log.append(*batches)
        n += sum(len(w.events) for w in step)
    return n


async def play_all(log: EventLog, scenarios: list[Iterator[Step]], *, concurrency: int = 8, hold_s: float = 0.0,
                   seed: int = 0, db: Database | None = None) -> int:
    """Play scenarios ``concurrency`` at a time; returns the events appended."""
    total = 0
    it = iter(scenarios)

    async def worker(i: int) -> None:
        nonlocal total
        rng = random.Random(seed * 1000 + i)
        for sc in it:
            n = await play(log, sc, hold_s=hold_s, rng=rng, db=db)
            total += n

    async with trio.open_nursery() as nursery:
        for i in range(concurrency):
            nursery.start_soon(worker, i)
    return total


async def snapshot(db: Database, projection: Projection) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of the projection's live tables, as text, in primary-key order."""
    out = {}
    for t in projection.tables:
        rows = await db.fetch(f"SELECT t::text AS r FROM {t} AS t ORDER BY 1")
        out[t] = [r["r"] for r in rows]
    return out


async def events_in_log(db: Database) -> int:
    return await db.fetchval("SELECT count(*) FROM events")


async def wait_caught_up(db: Database, names: Sequence[str], timeout: float = 60.0) -> None:
    """Until every named checkpoint has applied every event of the log."""
    with trio.fail_after(timeout):
        while True:
            total = await events_in_log(db)
            rows = await db.fetch(
                "SELECT name, events_applied FROM projection_checkpoints WHERE name = ANY($1::text[])", list(names))
            if len(rows) == len(names) and all(r["events_applied"] == total for r in rows):
                return
            await trio.sleep(0.05)


async def _child(url: str, batch_size: int, sleep_s: float) -> None:
    from openmaic.events.wakeups import Wakeups

    async with open_database(url, listen=["openmaic_events"],
                             server_settings={"application_name": "projector_child"}) as db:
        wakeups = Wakeups()
        log = EventLog(db, wakeups)
        async with trio.open_nursery() as nursery:
            await nursery.start(wakeups.run, db)
            await nursery.start(lambda task_status: run_projectors(
                db, log, wakeups, [Counting(sleep_s), *default_projections()], lock_retry_s=0.2, poll_s=0.2,
                batch_size=batch_size, task_status=task_status))
            print("started", flush=True)


if __name__ == "__main__":
    trio.run(_child, sys.argv[1], int(sys.argv[2]), float(sys.argv[3]))
