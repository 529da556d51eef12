"""Projection rebuild, audit export and audit verify throughput over a large log, beside a raw read baseline.

    python -m benchmarks.replay [--events 1000000] [--keep-going]

1. Generates ``--events`` realistic events (the scenarios of :mod:`benchmarks.workload`: generation runs
   building courses, workbench sessions editing theirs; many sessions in flight at once, so streams interleave in
   the global log), hash-chains them in Python with :func:`openmaic.events.hashchain.event_hash`, and loads them
   with COPY (``db.copy_records``) into ``events`` — with ``streams`` rows whose heads match — in chunks of
   ``--chunk`` events, one transaction each. Then ``VACUUM ANALYZE``.
2. Baseline: the time to read the same events (the columns ``read_all`` reads, in ``(tx, position)`` order) with
   one asyncpg query inside asyncio: no paging, no trio, no decoding.
3. Rebuilds each projection from position zero (``openmaic.projections.rebuild``: fresh tables, batches of 20,000,
   swap), exports every stream (``openmaic.tools.audit.export``) and verifies the file (``audit.verify``).

Figures are events of the log per second; the ratio is to the baseline. The database is ``DATABASE_URL`` (a fresh
database is created on that server and dropped afterwards) or a throwaway cluster with fsync and synchronous
commit on.
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import asyncpg
import msgspec
import trio
import trio_asyncio

if not __package__:
    # Run as a script (``python benchmarks/replay.py``): make the repository root importable.
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.workload import Step, generation, workbench
from benchmarks._cluster import run_on_fresh_database
from openmaic.events.hashchain import GENESIS, event_hash
from openmaic.events.log import EventLog
from openmaic.events.types import registry
from openmaic.projections import default_projections, rebuild
from openmaic.store.database import DEFAULT_SERVER_SETTINGS, Database, open_database, open_loop
from openmaic.store.migrations import migrate
from openmaic.tools import audit

EVENT_COLUMNS = ("stream_id", "seq", "type", "v", "data", "attempt", "command_id", "recorded_at", "hash")
STREAM_COLUMNS = ("id", "kind", "owner_id", "status", "created_at", "updated_at")

#: Sessions in flight at once: each step appended comes from one of them, picked at random.
IN_FLIGHT = 300


def _scenario(rng: random.Random, i: int) -> Iterator[Step]:
    owner = f"owner-{i % 50}"
    if i % 2:
        return generation(rng, f"run-{i}", f"course-{i}", owner, scenes=rng.randint(3, 8),
                          fail_at=1 if i % 20 == 3 else None, delete_at=2 if i % 20 == 7 else None)
    return workbench(rng, f"wb-{i}", f"wbcourse-{i}", owner, turns=rng.randint(1, 4), deltas=rng.randint(6, 20),
                     interrupt_at=0 if i % 10 == 4 else None, end="cancelled" if i % 14 == 6 else None)


class Generator:
    """Steps of many concurrent sessions, interleaved, turned into COPY rows with seqs and hash chains."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.active: list[Iterator[Step]] = []
        self.started = 0
        self.heads: dict[str, tuple[int, bytes]] = {}
        self.kinds: dict[str, tuple[str, str]] = {}
        self.t0 = time.time() - 86_400
        self.tick = 0
        self.encode = registry.encode

    def chunk(self, n: int) -> tuple[list[tuple], list[tuple]]:
        """About ``n`` events (whole steps) and the streams they create."""
        import datetime as dt

        events: list[tuple] = []
        streams: list[tuple] = []
        while len(events) < n:
            while len(self.active) < IN_FLIGHT:
                self.active.append(_scenario(random.Random(self.rng.random()), self.started))
                self.started += 1
            k = self.rng.randrange(len(self.active))
            step = next(self.active[k], None)
            if step is None:
                self.active[k] = self.active[-1]
                self.active.pop()
                continue
            self.tick += 1
            at = dt.datetime.fromtimestamp(self.t0 + self.tick * 0.001, dt.UTC)
            for w in step:
                if w.create is not None:
                    self.kinds[w.stream_id] = w.create
                    streams.append((w.stream_id, w.create[0], w.create[1], "terminal", at, at))
                seq, prev = self.heads.get(w.stream_id, (0, GENESIS))
                for ev in w.events:
                    t, v, data = self.encode(ev)
                    seq += 1
                    prev = event_hash(prev, seq, t, data)
                    events.append((w.stream_id, seq, t, v, data.decode(), None, None, at, prev))
                self.heads[w.stream_id] = (seq, prev)
        return events, streams


async def load(db: Database, total: int, chunk: int, seed: int) -> tuple[int, float, float]:
    gen = Generator(seed)
    loaded = 0
    gen_s = copy_s = 0.0
    while loaded < total:
        t = time.perf_counter()
        events, streams = gen.chunk(min(chunk, total - loaded))
        gen_s += time.perf_counter() - t
        t = time.perf_counter()
        if streams:
            await db.copy_records("streams", streams, STREAM_COLUMNS)
        await db.copy_records("events", events, EVENT_COLUMNS)
        copy_s += time.perf_counter() - t
        loaded += len(events)
        if sys.stderr.isatty():
            print(f"\rloaded {loaded:,} events", end="", file=sys.stderr, flush=True)
    if sys.stderr.isatty():
        print(file=sys.stderr)
    ids = list(gen.heads)
    await db.execute(
        "UPDATE streams s SET head_seq = h.seq, head_hash = h.hash FROM unnest($1::text[], $2::bigint[], $3::bytea[]) "
        "AS h(id, seq, hash) WHERE s.id = h.id",
        ids, [gen.heads[i][0] for i in ids], [gen.heads[i][1] for i in ids],
    )
    await db.execute("VACUUM ANALYZE events")
    await db.execute("VACUUM ANALYZE streams")
    return loaded, gen_s, copy_s


async def _raw_read(url: str) -> tuple[int, float]:
    conn = await asyncpg.connect(url, server_settings=dict(DEFAULT_SERVER_SETTINGS))
    try:
        t = time.perf_counter()
        rows = await conn.fetch(
            "SELECT position, tx::text AS tx, stream_id, seq, type, v, data::text AS data, attempt, command_id, "
            "recorded_at, hash FROM events ORDER BY events.tx, events.position")
        return len(rows), time.perf_counter() - t
    finally:
        await conn.close()


async def amain(args: argparse.Namespace, url: str) -> None:
    load_before = os.getloadavg()
    async with open_loop(), open_database(url, min_size=2, max_size=6) as db:
        await migrate(db)
        settings = {k: await db.fetchval(f"SHOW {k}") for k in (
            "server_version", "fsync", "synchronous_commit", "shared_buffers", "work_mem")}
        t = time.perf_counter()
        total, gen_s, copy_s = await load(db, args.events, args.chunk, args.seed)
        load_s = time.perf_counter() - t
        count = await db.fetchval("SELECT count(*) FROM events")
        n_streams = await db.fetchval("SELECT count(*) FROM streams")
        avg_bytes = await db.fetchval("SELECT avg(octet_length(data::text)) FROM events")
        types = await db.fetch("SELECT type, count(*) AS n FROM events GROUP BY type ORDER BY n DESC LIMIT 6")

        print("reading (baseline)…", file=sys.stderr, flush=True)
        raw_n, raw_s = await trio_asyncio.aio_as_trio(_raw_read)(url)
        assert raw_n == count
        baseline = raw_n / raw_s

        log = EventLog(db)
        results: list[tuple[str, float, int]] = []
        for p in default_projections():
            print(f"rebuilding {p.name}…", file=sys.stderr, flush=True)
            r = await rebuild(db, log, p)
            assert r.events == count, (p.name, r.events, count)
            results.append((f"rebuild {p.name}", r.seconds, r.events))
            sizes = await db.fetchval(
                "SELECT sum(pg_total_relation_size(c.oid)) FROM pg_class c WHERE c.relname = ANY($1::text[])",
                list(p.tables))
            results[-1] = (results[-1][0] + f" ({sizes / 2**20:,.0f} MiB)", r.seconds, r.events)

        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "export.jsonl"
            print("exporting…", file=sys.stderr, flush=True)
            t = time.perf_counter()
            ids = [r["id"] for r in await db.fetch("SELECT id FROM streams ORDER BY id")]
            ranges = await audit.plan_export(db, ids)
            exp = await audit.export(db, path, ranges)
            export_s = time.perf_counter() - t
            size = path.stat().st_size
            print("verifying…", file=sys.stderr, flush=True)
            t = time.perf_counter()
            report = await trio.to_thread.run_sync(audit.verify, path)
            verify_s = time.perf_counter() - t
            assert report.ok and report.events == count, report.describe()
        results.append((f"audit export ({exp.streams:,} streams, {size / 2**20:,.0f} MiB)", export_s, exp.events))
        results.append(("audit verify (offline, one thread)", verify_s, report.events))

    load_after = os.getloadavg()
    print("\n== openmaic projections, export and verify benchmark ==")
    print(f"command: {' '.join(['python -m benchmarks.replay', *sys.argv[1:]])}")
    print(f"machine: {os.cpu_count()} CPUs, {platform.python_implementation()} {platform.python_version()}, "
          f"asyncpg {asyncpg.__version__}, msgspec {msgspec.__version__}, trio {trio.__version__}; "
          f"1-min load average {load_before[0]:.2f} before, {load_after[0]:.2f} after")
    print("postgres: " + ", ".join(f"{k}={v}" for k, v in settings.items()))
    print(f"database: {'DATABASE_URL' if os.environ.get('DATABASE_URL') else 'throwaway cluster (durable)'}")
    print(f"log: {count:,} events in {n_streams:,} streams, avg {avg_bytes:.0f} B of JSON per event; most common: "
          + ", ".join(f"{r['type']} {r['n'] / count:.0%}" for r in types))
    print(f"load: {load_s:.1f} s ({gen_s:.1f} s generating and hashing in Python, {copy_s:.1f} s COPY)")
    print()
    base_name = "baseline: one asyncpg query, all events"
    width = max(len(name) for name, _, _ in [*results, (base_name, 0, 0)]) + 2
    print(f"| {'what':<{width}}| {'seconds':>8} | {'events/s':>10} | {'vs baseline':>11} |")
    print(f"|{'-' * (width + 1)}|{'-' * 10}|{'-' * 12}|{'-' * 13}|")
    print(f"| {base_name:<{width}}| {raw_s:>8.1f} | {baseline:>10,.0f} | "
          f"{'1.00':>11} |")
    for name, seconds, n in results:
        rate = n / seconds
        print(f"| {name:<{width}}| {seconds:>8.1f} | {rate:>10,.0f} | {rate / baseline:>11.2f} |")
    print("\ntargets: rebuild >= 50,000 events/s; export and verify >= 100,000 events/s")
    for name, seconds, n in results:
        target = 50_000 if name.startswith("rebuild") else 100_000
        rate = n / seconds
        print(f"  {name.split(' (')[0]:<30} {rate:>10,.0f} events/s  {'ok' if rate >= target else 'BELOW TARGET'}")


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks.replay", description=__doc__.split("\n\n")[0])
    p.add_argument("--events", type=int, default=1_000_000, help="events to generate (default 1000000)")
    p.add_argument("--chunk", type=int, default=50_000, help="events per COPY (default 50000)")
    p.add_argument("--seed", type=int, default=1, help="workload seed (default 1)")
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> None:
    run_on_fresh_database(amain, parse_args(argv), "openmaic_replay")


if __name__ == "__main__":
    main()
