"""Append throughput: our append path beside raw asyncpg INSERTs into the same ``events`` table, in one run.

    python -m benchmarks.append [--seconds 3] [--warmup 1] [--streams 1,8,32] [--read-seconds 30] [--quick]

What it measures, all against one database and one ``events`` table:

* appends of 1 event and of 100-event batches, at each concurrency in ``--streams``: one appender task per
  stream (each stream its own row in ``streams``), each with a pooled connection. Variants:

  - **raw** (the baseline, *b*): asyncpg INSERTs of the same rows (same type, version and JSON bytes) with no
    fence, no hash chain, no NOTIFY; the seq comes from a per-stream counter in Python and ``hash`` is a fixed
    32-byte value. Each stream's whole loop runs inside ONE asyncio coroutine on a connection it holds for the
    window: asyncpg at full speed, with no trio→asyncio crossing and no pool traffic per insert. One event is
    ``conn.execute(INSERT …)``; a batch is ``conn.executemany(INSERT …)`` (atomic: one implicit transaction,
    pipelined, one round trip).
  - **ours** (*a*): ``EventLog.append_one`` as the product calls it from trio (control-plane write, no fence),
    one task per stream: encode the events, queue the request; the log's group commit sends what is queued
    as one statement (a lone request as the one-statement ``append_one``, from its caller's task when no call is
    in flight; several as one ``openmaic_append_group`` call: row locks, seq allocation, hash chain, insert), one
    trio→asyncio crossing per call on the spare connection the last call gave back (no pool acquire and
    release), up to four calls in flight; then a coalesced NOTIFY hint. The report gives the requests each call
    carried.
  - **ours, attempt fence**: the same with ``attempt=`` (a worker's write).
  - diagnostic rows that split the gap: ``EventLog.append_one`` with group commit off (every append its own
    call from its caller's task, as before group commit); ``openmaic_append()`` and the ``append_one``
    statement called from inside asyncio on a held connection with pre-encoded arguments (the SQL's own cost,
    no Python-side overhead); the same statement called from trio, one ``Database.fetchrow`` per append (the
    crossing and the spare connection, nothing of the log: the floor of any append path called from trio); and,
    for batches, a one-statement ``INSERT … SELECT FROM unnest(…)`` (another way to drive raw asyncpg); and the
    floor's statement through a prototype crossing that hosts asyncpg on an asyncio loop in a thread of its own
    instead of trio-asyncio's (``benchmarks/_thread_loop.py``; not the product).

  Every variant writes to fresh streams of its own. Each runs for a fixed window (``--seconds``) after a
  warm-up (``--warmup``) that is not counted; before each variant the tables are vacuumed and a checkpoint is
  forced, so no variant inherits the previous one's background writes. Figures are events/s; the ratio is a/b
  for the same cell. The client's own CPU time per append is printed too: on a small machine the client and
  the server share the cores.
* ``EventLog.read_all`` over the log in pages of 1000 (up to ``--read-seconds``) beside raw asyncpg paging the
  same rows (same columns and predicate, keyset order on the ``(tx, position)`` index) in one coroutine, plus a
  diagnostic: read_all's own path (pooled fetch, RecordedEvent per row) driven with the baseline's query.
* decoding stored events with ``registry.decode`` and folding them with a pure count-per-type fold, beside
  ``json.loads`` with the same fold (in memory, no database).

The database is ``DATABASE_URL`` (a fresh database is created on that server and dropped afterwards) or a
throwaway cluster with fsync and synchronous commit on.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import sys
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import asyncpg
import msgspec
import trio
import trio_asyncio

from benchmarks._cluster import run_on_fresh_database
from benchmarks._thread_loop import ThreadPool
from openmaic import errors
from openmaic.events.core import (
    ModelOutputDelta,
    ModelTurnCompleted,
    SessionMessagePosted,
    ToolCalled,
    ToolResult,
)
from openmaic.events.group_commit import GroupCommit, group_commit
from openmaic.events.log import START, EventLog, RecordedEvent, recorded
from openmaic.events.types import Event, registry
from openmaic.store.database import DEFAULT_SERVER_SETTINGS, Database, open_database, open_loop
from openmaic.store.migrations import migrate
from openmaic.store.queries import Q

now = time.perf_counter

ATTEMPT = 1
"""The lease attempt every benchmark stream carries (the fenced variant writes under it)."""

FAKE_HASH = bytes(range(32))
"""The raw baseline's ``hash`` value: the column is NOT NULL, the baseline computes no chain."""

INSERT_ONE = "INSERT INTO events (stream_id, seq, type, v, data, hash) VALUES ($1, $2, $3, $4, $5, $6)"
INSERT_UNNEST = (
    "INSERT INTO events (stream_id, seq, type, v, data, hash) "
    "SELECT $1, u.s, u.t, u.v, u.d::json, $6 FROM unnest($2::bigint[], $3::text[], $4::int[], $5::text[]) "
    "AS u(s, t, v, d)"
)


# -- payload -------------------------------------------------------------------------------------------------------


def make_payload(n: int = 100) -> list[Event]:
    """A realistic mix: mostly model output deltas, some tool calls and results, turns and messages."""
    out: list[Event] = []
    for i in range(n):
        r = i % 10
        if r < 6:
            out.append(ModelOutputDelta(text=f"chunk {i}: the lesson continues with an example of recursion, "))
        elif r == 6:
            out.append(ToolCalled(call_id=f"call-{i}", name="search_notes", arguments={"query": "recursion", "k": 5}))
        elif r == 7:
            out.append(
                ToolResult(call_id=f"call-{i - 1}", name="search_notes", result={"hits": ["note-1", "note-7"]})
            )
        elif r == 8:
            out.append(ModelTurnCompleted(text="Here is the outline of section 2.", delivered=[i]))
        else:
            out.append(SessionMessagePosted(text=f"question {i}: can you add an exercise?"))
    return out


@dataclass(frozen=True)
class Group:
    """One append's events, with their stored form precomputed for the raw rows."""

    events: list[Event]
    types: list[str]
    versions: list[int]
    datas: list[str]
    encoded: list[tuple[str, int, str]]


def make_groups(payload: Sequence[Event], batch: int) -> list[Group]:
    """Successive appends of ``batch`` events cycling through the payload."""
    n = len(payload)
    starts = range(0, n, batch) if batch < n else [0]
    groups = []
    for s in starts:
        events = [payload[(s + j) % n] for j in range(batch)]
        enc = [(t, v, d.decode()) for t, v, d in map(registry.encode, events)]
        groups.append(Group(events, [t for t, _, _ in enc], [v for _, v, _ in enc], [d for _, _, d in enc], enc))
    return groups


# -- timing harness ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Window:
    """Appends completing in ``[measure_from, until)`` count; the ones before are warm-up."""

    measure_from: float
    until: float


Worker = Callable[[str, list[Group], Window], Awaitable[int]]


@dataclass(frozen=True)
class Measured:
    rate: float
    """events/s over the window"""
    client_cpu_us: float
    """this process's CPU time per append over the window (µs): the trio/asyncio/driver side of the cost"""
    per_call: float | None = None
    """appends per database call over the window (group commit), when the variant groups"""


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


async def run_window(
    worker: Worker,
    stream_ids: Sequence[str],
    groups: list[Group],
    warmup: float,
    seconds: float,
    calls: Callable[[], tuple[int, int]] | None = None,
) -> Measured:
    """Run one worker per stream concurrently; events/s over the measured window.

    ``calls`` returns (database calls, appends they carried) so far, for a variant that groups appends.
    """
    counts: list[int] = [0] * len(stream_ids)
    start = now()
    window = Window(start + warmup, start + warmup + seconds)
    cpu: list[float] = []
    grouped: list[tuple[int, int]] = []

    async def one(i: int, sid: str) -> None:
        counts[i] = await worker(sid, groups, window)

    async def sample_cpu() -> None:
        for at in (window.measure_from, window.until):
            await trio.sleep(max(0.0, at - now()))
            cpu.append(_cpu())
            if calls is not None:
                grouped.append(calls())

    async with trio.open_nursery() as nursery:
        nursery.start_soon(sample_cpu)
        for i, sid in enumerate(stream_ids):
            nursery.start_soon(one, i, sid)
    events = sum(counts)
    appends = events / len(groups[0].types)
    per_call = None
    if len(grouped) == 2 and grouped[1][0] > grouped[0][0]:
        per_call = (grouped[1][1] - grouped[0][1]) / (grouped[1][0] - grouped[0][0])
    return Measured(events / seconds, (cpu[1] - cpu[0]) / appends * 1e6 if appends else float("nan"), per_call)


def trio_worker(append: Callable[[str, Group], Awaitable[object]]) -> Worker:
    """One ``append(sid, group)`` per append, from trio, for the window."""

    async def work(sid: str, groups: list[Group], w: Window) -> int:
        counted, k, ng = 0, 0, len(groups)
        while True:
            g = groups[k % ng]
            k += 1
            await append(sid, g)
            t = now()
            if t >= w.until:
                return counted
            if t >= w.measure_from:
                counted += len(g.types)

    return work


def ours_worker(log: EventLog, fenced: bool) -> Worker:
    """The product path: one ``append_one`` per append, from trio."""
    fences: dict[str, Any] = {"attempt": ATTEMPT} if fenced else {}
    return trio_worker(lambda sid, g: log.append_one(sid, g.events, **fences))


def thread_worker(tp: ThreadPool) -> Worker:
    """The floor's statement through a prototype crossing: asyncpg on an asyncio loop in a thread of its own
    (``benchmarks/_thread_loop.py``), one call per append, the connection the last call gave back."""
    return trio_worker(lambda sid, g: tp.fetchrow(Q.append_one, sid, None, None, None, None, False, None, False,
                                                  False, g.types, g.versions, g.datas))


def statement_worker(db: Database) -> Worker:
    """The floor of any path from trio: the ``append_one`` statement with pre-encoded arguments, one
    ``Database.fetchrow`` (one trio→asyncio crossing, a spare connection) per append, and nothing else: no
    encoding, no group commit, no hint."""
    return trio_worker(lambda sid, g: db.fetchrow(Q.append_one, sid, None, None, None, None, False, None, False,
                                                   False, g.types, g.versions, g.datas))


async def _raw_loop(pool: asyncpg.Pool, mode: str, sid: str, groups: list[Group], w: Window) -> int:
    """A whole window of inserts for one stream, run as one asyncio coroutine on one held connection."""
    counted, k, seq, ng = 0, 0, 0, len(groups)
    async with pool.acquire() as conn:
        while True:
            g = groups[k % ng]
            k += 1
            n = len(g.types)
            if mode == "raw":
                if n == 1:
                    await conn.execute(INSERT_ONE, sid, seq + 1, g.types[0], g.versions[0], g.datas[0], FAKE_HASH)
                else:
                    await conn.executemany(
                        INSERT_ONE, [(sid, seq + j + 1, t, v, d, FAKE_HASH) for j, (t, v, d) in enumerate(g.encoded)]
                    )
            elif mode == "unnest":
                await conn.execute(
                    INSERT_UNNEST, sid, list(range(seq + 1, seq + n + 1)), g.types, g.versions, g.datas, FAKE_HASH
                )
            elif mode == "onestmt":
                await conn.fetchrow(Q.append_one, sid, None, None, None, None, False, None, False, False, g.types,
                                    g.versions, g.datas)
            elif mode == "function":
                await conn.fetch(
                    Q.append, [sid], [None], [None], [None], [None], [None], [None], [False], [None], [False],
                    [False], [n], g.types, g.versions, g.datas,
                )
            else:  # pragma: no cover - programming error
                raise ValueError(mode)
            seq += n
            t = now()
            if t >= w.until:
                return counted
            if t >= w.measure_from:
                counted += n


def asyncio_worker(pool: asyncpg.Pool, mode: str) -> Worker:
    async def work(sid: str, groups: list[Group], w: Window) -> int:
        # One crossing for the whole window: the loop itself never leaves asyncio.
        return await trio_asyncio.aio_as_trio(_raw_loop)(pool, mode, sid, groups, w)

    return work


# -- variants and cells --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Variant:
    key: str
    label: str
    batches_only: bool = False


VARIANTS = [
    Variant("raw", "(b) raw asyncpg INSERT, 1 coroutine/stream"),
    Variant("ours", "(a) EventLog.append_one, no fence"),
    Variant("fenced", "    EventLog.append_one, attempt fence"),
    Variant("alone", "    EventLog.append_one, no group commit *"),
    Variant("function", "    openmaic_append() from asyncio *"),
    Variant("onestmt", "    append_one statement from asyncio *"),
    Variant("crossing", "    append_one statement from trio *"),
    Variant("thread", "    same, asyncio loop on a thread *"),
    Variant("unnest", "    raw INSERT…SELECT unnest (1 stmt) *", batches_only=True),
]


@dataclass
class Results:
    appends: dict[tuple[int, int, str], Measured] = field(default_factory=dict)
    """(batch, streams, variant) → events/s and client CPU per append"""
    notes: list[str] = field(default_factory=list)
    ratios: dict[tuple[int, int, str], list[float]] = field(default_factory=dict)
    """(batch, streams, variant) → a/b of each round, each against the baseline of its own round"""
    rates: dict[tuple[int, int, str], list[Measured]] = field(default_factory=dict)
    eventsourcing: list[str] = field(default_factory=list)
    """the eventsourcing recorder's lines, one per round, when it ran (``--eventsourcing``)"""

    def record(self, key: tuple[int, int, str], m: Measured, base: Measured | None) -> None:
        """One round's window: ``appends`` keeps the round with the median rate, ``ratios`` every round's a/b."""
        self.rates.setdefault(key, []).append(m)
        if base is not None:
            self.ratios.setdefault(key, []).append(m.rate / base.rate)
        ms = sorted(self.rates[key], key=lambda x: x.rate)
        self.appends[key] = ms[(len(ms) - 1) // 2]

    def ratio(self, key: tuple[int, int, str]) -> tuple[float, float, float] | None:
        """Median, lowest and highest a/b over the rounds."""
        rs = sorted(self.ratios.get(key, []))
        if not rs:
            return None
        return rs[(len(rs) - 1) // 2] if len(rs) % 2 else (rs[len(rs) // 2 - 1] + rs[len(rs) // 2]) / 2, rs[0], rs[-1]


async def settle(db: Database, results: Results) -> None:
    """Vacuum and checkpoint between variants so background writes land outside every window."""
    for sql in ("VACUUM (ANALYZE) events, streams", "CHECKPOINT"):
        try:
            await db.execute(sql)
        except errors.DatabaseError as exc:
            note = f"could not run {sql.split()[0]} between variants ({exc}); figures may include background writes"
            if note not in results.notes:
                results.notes.append(note)


async def create_streams(db: Database, prefix: str, n: int) -> list[str]:
    ids = [f"{prefix}-{i}" for i in range(n)]
    await db.execute(
        "INSERT INTO streams (id, kind, owner_id, attempt) SELECT unnest($1::text[]), 'bench', 'bench', $2",
        ids, ATTEMPT,
    )
    return ids


async def bench_appends(
    db: Database, log: EventLog, pool: asyncpg.Pool, args: argparse.Namespace, results: Results,
    tp: ThreadPool,
) -> None:
    payload = make_payload()
    gc = group_commit(db)
    workers: dict[str, Worker] = {
        "raw": asyncio_worker(pool, "raw"),
        "ours": ours_worker(log, fenced=False),
        "fenced": ours_worker(log, fenced=True),
        "alone": ours_worker(log, fenced=False),
        "function": asyncio_worker(pool, "function"),
        "onestmt": asyncio_worker(pool, "onestmt"),
        "crossing": statement_worker(db),
        "thread": thread_worker(tp),
        "unnest": asyncio_worker(pool, "unnest"),
    }
    for batch in args.batches:
        groups = make_groups(payload, batch)
        for streams, r in [(s, r) for s in args.streams for r in range(args.rounds)]:
            base: Measured | None = None  # this round's raw window: every ratio of the round is against it
            for v in VARIANTS:
                if v.batches_only and batch == 1:
                    continue
                ids = await create_streams(db, f"{v.key}-b{batch}-s{streams}-r{r}", streams)
                await settle(db, results)
                grouping = v.key in ("ours", "fenced")
                saved = gc.max_calls
                if v.key == "alone":
                    gc.max_calls = 0  # every append its own call, from its caller's task
                try:
                    m = await run_window(
                        workers[v.key], ids, groups, args.warmup, args.seconds,
                        calls=(lambda: (gc.calls, gc.requests)) if grouping else None,
                    )
                finally:
                    gc.max_calls = saved
                if v.key == "raw":
                    base = m
                results.record((batch, streams, v.key), m, base)
                ratio = f"  a/b {m.rate / base.rate:.2f}" if base and v.key != "raw" else ""
                per_call = f"  {m.per_call:.1f} appends/call" if m.per_call else ""
                print(f"  {batch:>3} ev/append  {streams:>2} streams  {v.key:<9} {m.rate:>12,.0f} events/s"
                      f"  client CPU {m.client_cpu_us:6.0f} µs/append{ratio}{per_call}", file=sys.stderr, flush=True)
            if batch == 1 and streams == 1 and args.eventsourcing:
                await settle(db, results)
                es = await run_eventsourcing(args)
                results.eventsourcing.append(es)
                print(f"    1 ev/append   1 streams  eventsourcing: {es}", file=sys.stderr, flush=True)


async def run_eventsourcing(args: argparse.Namespace) -> str:
    """``benchmarks/_eventsourcing_recorder.py`` with the interpreter ``--eventsourcing`` names, against this run's
    server, right after our one-stream single-event cells: its two lines (its own raw INSERT, the recorder)."""
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_eventsourcing_recorder.py")
    done = await trio.run_process(
        [args.eventsourcing, script, "--seconds", str(args.seconds), "--warmup", str(args.warmup)],
        env={**os.environ, "DATABASE_URL": args.url}, capture_stdout=True, capture_stderr=True, check=False,
    )
    if done.returncode != 0:
        return f"failed ({done.returncode}): {done.stderr.decode(errors='replace').strip().splitlines()[-1:]}"
    lines = [line.strip() for line in done.stdout.decode().splitlines() if line.startswith("(")]
    return "; ".join(" ".join(line.split()) for line in lines)


# -- reads and decoding --------------------------------------------------------------------------------------------


READ_ALL_BASELINE = """
SELECT position, epoch, tx::text AS tx, stream_id, seq, type, v, data::text AS data, attempt, command_id, recorded_at, hash
  FROM events
 WHERE (events.epoch, events.tx, events.position) > ($1::integer, $2::text::xid8, $3::bigint)
   AND events.tx < pg_snapshot_xmin(pg_current_snapshot())
 ORDER BY events.epoch, events.tx, events.position
 LIMIT $4"""
"""The baseline's page query: the global log's columns and a plain xmin predicate (one epoch, no horizon function),
keyset-paged in index order."""


async def plan_chain(db: Database, sql: str, *args: object) -> str:
    """The node types of a page query's plan, outermost first (e.g. ``Limit → Index Scan``)."""
    (plan,) = json.loads(await db.fetchval("EXPLAIN (FORMAT JSON) " + sql, *args))
    chain, node = [], plan["Plan"]
    while node is not None:
        chain.append(node["Node Type"])
        node = (node.get("Plans") or [None])[0]
    return " → ".join(chain)


async def _raw_read_all(pool: asyncpg.Pool, page: int) -> int:
    n, epoch, tx, pos = 0, 0, "0", 0
    async with pool.acquire() as conn:
        while True:
            rows = await conn.fetch(READ_ALL_BASELINE, epoch, tx, pos, page)
            if not rows:
                return n
            n += len(rows)
            epoch, tx, pos = rows[-1]["epoch"], rows[-1]["tx"], rows[-1]["position"]


@dataclass
class ReadResult:
    total: int
    raw_rate: float
    ours_rate: float
    ours_events: int
    ours_complete: bool
    ours_seconds: float
    index_order_rate: float
    plan: str
    baseline_plan: str


async def bench_read_all(db: Database, log: EventLog, pool: asyncpg.Pool, budget: float) -> ReadResult:
    """events/s for the baseline query and for ``read_all`` (stopped after ``budget`` seconds)."""
    total = await db.fetchval("SELECT count(*) FROM events")
    t = now()
    n_raw = await trio_asyncio.aio_as_trio(_raw_read_all)(pool, 1000)
    raw_rate = n_raw / (now() - t)
    if n_raw != total:
        raise AssertionError(f"the baseline read {n_raw} events of {total}")

    n, after, complete = 0, START, False
    t = now()
    with trio.move_on_after(budget):
        while True:
            page = await log.read_all(after, 1000)
            if not page:
                complete = True
                break
            n += len(page)
            after = page[-1].cursor
    elapsed = now() - t

    # Diagnostic: read_all's path (pooled fetch from trio, RecordedEvent per row) with the baseline's query.
    n_fixed, cursor = 0, (0, "0", 0)
    t = now()
    with trio.move_on_after(budget):
        while True:
            rows = await db.fetch(READ_ALL_BASELINE, *cursor, 1000)
            if not rows:
                break
            page = [recorded(r) for r in rows]
            n_fixed += len(page)
            cursor = (page[-1].epoch, str(page[-1].tx), page[-1].position)
    fixed_rate = n_fixed / (now() - t)
    return ReadResult(
        total, raw_rate, n / elapsed, n, complete, elapsed, fixed_rate,
        await plan_chain(db, Q.read_all, 0, "0", 0, 1000), await plan_chain(db, READ_ALL_BASELINE, 0, "0", 0, 1000),
    )


async def decode_sample(db: Database, log: EventLog, n: int) -> list[RecordedEvent]:
    """Up to ``n`` stored events of the mixed payload, read stream by stream (batch streams first)."""
    rows = await db.fetch("SELECT id FROM streams WHERE kind = 'bench' ORDER BY head_seq DESC, id")
    sample: list[RecordedEvent] = []
    for r in rows:
        after = 0
        while len(sample) < n:
            page = await log.read_stream(r["id"], after, min(1000, n - len(sample)))
            if not page:
                break
            sample.extend(page)
            after = page[-1].seq
        if len(sample) >= n:
            break
    return sample


def count_per_type(state: Mapping[Any, int], key: Any) -> dict[Any, int]:
    """A pure fold: a new state from the old one and an event's type."""
    return {**state, key: state.get(key, 0) + 1}


def bench_decode(sample: Sequence[RecordedEvent], repeats: int = 3) -> tuple[float, float, dict[str, int]]:
    """events/s (best of ``repeats``) for json.loads + fold and for registry.decode + fold."""
    decode = registry.decode
    raw_bytes = [(e.type, bytes(e.data)) for e in sample]
    best_base = best_ours = float("inf")
    ours_state: Mapping[Any, int] = {}
    for _ in range(repeats):
        t = now()
        state: Mapping[Any, int] = {}
        for tag, b in raw_bytes:
            json.loads(b)
            state = count_per_type(state, tag)
        best_base = min(best_base, now() - t)

        t = now()
        ours_state = {}
        for e in sample:
            ev = decode(e.type, e.v, e.data)
            ours_state = count_per_type(ours_state, type(ev))
        best_ours = min(best_ours, now() - t)
        if sum(ours_state.values()) != len(sample):
            raise AssertionError("the fold lost events")
    n = len(sample)
    counts = {cls.__struct_config__.tag: c for cls, c in ours_state.items()}
    return n / best_base, n / best_ours, counts


# -- per-call overheads --------------------------------------------------------------------------------------------


async def _noop() -> None:
    return None


async def _held_select_1(pool: asyncpg.Pool, n: int) -> float:
    async with pool.acquire() as conn:
        t = now()
        for _ in range(n):
            await conn.fetchval("SELECT 1")
        return (now() - t) / n


async def bench_overheads(db: Database, pool: asyncpg.Pool, n: int) -> dict[str, float]:
    """Seconds per call: an empty crossing, a pooled SELECT 1 from trio, a held-connection SELECT 1 in asyncio."""
    noop = trio_asyncio.aio_as_trio(_noop)
    for _ in range(100):
        await noop()
    t = now()
    for _ in range(n):
        await noop()
    crossing = (now() - t) / n

    for _ in range(100):
        await db.fetchval("SELECT 1")
    t = now()
    for _ in range(n):
        await db.fetchval("SELECT 1")
    pooled = (now() - t) / n

    held = await trio_asyncio.aio_as_trio(_held_select_1)(pool, n)
    return {"crossing": crossing, "pooled": pooled, "held": held}


# -- report --------------------------------------------------------------------------------------------------------


def _cell(m: Measured | None, ratio: tuple[float, float, float] | None, is_base: bool) -> str:
    if m is None:
        return "–"
    if is_base or ratio is None:
        return f"{m.rate:,.0f}"
    med, lo, hi = ratio
    return f"{m.rate:,.0f} ({med:.2f})" if lo == hi else f"{m.rate:,.0f} ({med:.2f}: {lo:.2f}–{hi:.2f})"


def _table(heads: Sequence[str], rows: Sequence[tuple[str, Sequence[str]]], width: int = 44) -> None:
    cw = max([18, *(len(c) for _, cells in rows for c in cells)])
    print(f"| {'variant':<{width}} | " + " | ".join(f"{h:>{cw}}" for h in heads) + " |")
    print(f"|{'-' * (width + 2)}|" + "|".join("-" * (cw + 2) for _ in heads) + "|")
    for label, cells in rows:
        print(f"| {label:<{width}} | " + " | ".join(f"{c:>{cw}}" for c in cells) + " |")


TARGETS = {1: 0.75, 100: 1.0}
"""Target a/b for our append path, by events per append, at every concurrency."""


def print_append_tables(args: argparse.Namespace, results: Results) -> None:
    heads = [f"{s} stream{'s' if s != 1 else ''}" for s in args.streams]
    for batch in args.batches:
        title = "1 event per append (events/s = appends/s)" if batch == 1 else (
            f"{batch}-event batches (events/s; appends/s = events/s ÷ {batch})"
        )
        print(f"\n{title}, ratio a/b to the baseline in the same column:")
        es = results.eventsourcing if batch == 1 else None
        if args.rounds > 1:
            print(f"(each cell: the round with the median rate; in brackets a/b as median: lowest–highest over "
                  f"{args.rounds} rounds, each round against its own baseline)")
        variants = [v for v in VARIANTS if not (v.batches_only and batch == 1)]
        _table(heads, [
            (v.label, [_cell(results.appends.get((batch, s, v.key)), results.ratio((batch, s, v.key)),
                             v.key == "raw") for s in args.streams])
            for v in variants
        ])
        target = TARGETS.get(batch)
        if target is not None:
            verdicts = []
            for s in args.streams:
                r = results.ratio((batch, s, "ours"))
                if r is not None:
                    verdicts.append(f"{s} streams {r[1]:.2f} {'met' if r[1] >= target else 'BELOW'}")
            rounds = f" in every round of {args.rounds}" if args.rounds > 1 else ""
            print(f"target for (a): a/b >= {target:.2f}{rounds}, lowest round — " + "; ".join(verdicts))
        for st in args.streams:
            floor = results.rates.get((batch, st, "crossing"))
            if not floor:
                continue
            parts = []
            for key in ("ours", "fenced", "thread"):
                own = results.rates.get((batch, st, key))
                if own:
                    rs = sorted(o.rate / f.rate for o, f in zip(own, floor))
                    parts.append(f"{key} {rs[len(rs) // 2]:.2f} ({rs[0]:.2f}–{rs[-1]:.2f})")
            print(f"against the floor (the statement from trio), {st} stream{'s' if st != 1 else ''}, each round against"
                  f" its own: " + "; ".join(parts))
        for line in es or []:
            print(f"eventsourcing's PostgreSQL recorder, 1 stream, same server, after our 1-stream cells: {line}")
    print("\n(a) group commit: appends per database call (calls made by the group commit over the window):")
    rows = []
    for batch in args.batches:
        for key in ("ours", "fenced"):
            cells = []
            for s in args.streams:
                m = results.appends.get((batch, s, key))
                cells.append("–" if m is None or m.per_call is None else f"{m.per_call:.1f}")
            label = next(v.label for v in VARIANTS if v.key == key)
            rows.append((f"{batch:>3} ev  {label.strip()}", cells))
    _table(heads, rows, width=52)
    print("\nclient (this process) CPU per append, µs — the trio/asyncio/driver side of each variant:")
    rows = []
    for batch in args.batches:
        for v in VARIANTS:
            if v.batches_only and batch == 1:
                continue
            cells = []
            for s in args.streams:
                m = results.appends.get((batch, s, v.key))
                cells.append("–" if m is None else f"{m.client_cpu_us:,.0f}")
            rows.append((f"{batch:>3} ev  {v.label.strip()}", cells))
    _table(heads, rows, width=52)


async def amain(args: argparse.Namespace, url: str) -> None:
    results = Results()
    args.url = url
    load_before = os.getloadavg()
    pool_size = max(args.streams) + 4
    async with open_loop():
        async with open_database(url, min_size=2, max_size=pool_size) as db:
            await migrate(db)
        async with open_database(url, min_size=pool_size, max_size=pool_size) as db:
            settings = {
                k: await db.fetchval(f"SHOW {k}")
                for k in ("server_version", "fsync", "synchronous_commit", "full_page_writes", "wal_sync_method",
                          "shared_buffers")
            }
            pool = await trio_asyncio.aio_as_trio(_create_raw_pool)(url, pool_size)
            tp = await ThreadPool.open(url, pool_size, dict(DEFAULT_SERVER_SETTINGS))
            try:
                log = EventLog(db)
                overheads = await bench_overheads(db, pool, 2000 if not args.quick else 300)
                print("appending…", file=sys.stderr, flush=True)
                await bench_appends(db, log, pool, args, results, tp)
                await settle(db, results)
                print("reading…", file=sys.stderr, flush=True)
                read = await bench_read_all(db, log, pool, args.read_seconds)
                sample = await decode_sample(db, log, args.decode_events)
            finally:
                await tp.aclose()
                await trio_asyncio.aio_as_trio(pool.close)()

    base_dec, ours_dec, type_counts = bench_decode(sample)
    load_after = os.getloadavg()
    avg_bytes = sum(len(e.data) for e in sample) / max(1, len(sample))

    print("\n== openmaic append benchmark ==")
    print(f"command: {' '.join(['python -m benchmarks.append', *sys.argv[1:]])}")
    print(f"machine: {os.cpu_count()} CPUs, {platform.python_implementation()} {platform.python_version()}, "
          f"asyncpg {asyncpg.__version__}, msgspec {msgspec.__version__}, trio {trio.__version__}, "
          f"trio-asyncio {trio_asyncio.__version__}; 1-min load average {load_before[0]:.2f} before, "
          f"{load_after[0]:.2f} after")
    print("postgres: " + ", ".join(f"{k}={v}" for k, v in settings.items()))
    print(f"database: {'DATABASE_URL' if os.environ.get('DATABASE_URL') else 'throwaway cluster (durable)'}; "
          f"windows {args.seconds:g} s after {args.warmup:g} s warm-up; payload: mixed event types, "
          f"avg {avg_bytes:.0f} B of JSON per event")
    print(
        f"per call: empty trio→asyncio crossing {overheads['crossing'] * 1e6:.0f} µs; "
        f"SELECT 1 on a held connection inside asyncio {overheads['held'] * 1e6:.0f} µs; "
        f"Database.fetchval('SELECT 1') from trio {overheads['pooled'] * 1e6:.0f} µs "
        f"(crossing + pool acquire + query + pool release)"
    )
    print_append_tables(args, results)
    print(
        "\n(a) is the product path: concurrent appends queue and share database calls (group commit: one crossing,"
        f"\n    one connection the worker holds, one transaction per call; up to {GroupCommit.max_calls} calls in flight;"
        "\n    a lone append goes at once, as the one-statement append_one);"
        "\n(b) runs its whole window inside one asyncio coroutine per stream on a held connection, no crossing."
        "\n* diagnostic rows: 'no group commit' is (a) with every append its own call (one crossing and one pooled"
        "\n  connection per append); openmaic_append() and append_one driven like (b) (held connection, pre-encoded"
        "\n  arguments) isolate the SQL's cost from the client side; INSERT…SELECT unnest is a one-statement raw batch."
    )
    state = "the whole log" if read.ours_complete else f"stopped after {read.ours_seconds:.0f} s (--read-seconds)"
    print(f"\nread_all in pages of 1000 over the log ({read.total:,} events):")
    _table(["events/s"], [
        ("(b) raw asyncpg, same predicate, index order", [f"{read.raw_rate:,.0f}"]),
        ("(a) EventLog.read_all → RecordedEvent", [f"{read.ours_rate:,.0f} ({read.ours_rate / read.raw_rate:.2f})"]),
        ("    read_all's path, baseline's query *",
         [f"{read.index_order_rate:,.0f} ({read.index_order_rate / read.raw_rate:.2f})"]),
    ])
    print(f"  (a) read {read.ours_events:,} events: {state}")
    if read.ours_complete and read.ours_events != read.total:
        print(f"  WARNING: read_all returned {read.ours_events:,} events but the log holds {read.total:,}")
    print(f"  page plans: read_all {read.plan}; baseline {read.baseline_plan}")
    print(f"\ndecode + fold (count per type) of {len(sample):,} stored events, in memory, best of 3:")
    _table(["events/s"], [
        ("(b) json.loads + fold", [f"{base_dec:,.0f}"]),
        ("(a) registry.decode → Struct + fold", [f"{ours_dec:,.0f} ({ours_dec / base_dec:.2f})"]),
    ])
    print("  folded: " + ", ".join(f"{k} {v:,}" for k, v in sorted(type_counts.items())))
    for note in results.notes:
        print(f"note: {note}")


async def _create_raw_pool(url: str, size: int) -> asyncpg.Pool:
    return await asyncpg.create_pool(url, min_size=size, max_size=size, server_settings=dict(DEFAULT_SERVER_SETTINGS))


# -- database lifecycle --------------------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks.append", description=__doc__.split("\n\n")[0])
    p.add_argument("--seconds", type=float, default=3.0, help="measured window per variant (default 3)")
    p.add_argument("--warmup", type=float, default=1.0, help="uncounted warm-up before each window (default 1)")
    p.add_argument("--streams", default="1,8,32", help="concurrent streams, comma-separated (default 1,8,32)")
    p.add_argument("--batches", default="1,100", help="events per append, comma-separated (default 1,100)")
    p.add_argument("--read-seconds", type=float, default=30.0, help="time limit for read_all over the log (default 30)")
    p.add_argument("--decode-events", type=int, default=200_000, help="stored events to decode (default 200000)")
    p.add_argument("--quick", action="store_true", help="short windows: a smoke run, not a measurement")
    p.add_argument("--rounds", type=int, default=1,
                   help="windows per cell, every variant once per round, interleaved (default 1): on a machine whose "
                        "load moves, each round's ratio is against a baseline measured seconds before")
    p.add_argument("--eventsourcing", metavar="PYTHON", default="",
                   help="also run benchmarks/_eventsourcing_recorder.py with this interpreter (an environment holding "
                        "eventsourcing[postgres] and asyncpg) at one stream, in this run")
    args = p.parse_args(argv)
    args.streams = [int(s) for s in args.streams.split(",") if s]
    args.batches = [int(s) for s in args.batches.split(",") if s]
    if args.quick:
        args.seconds = min(args.seconds, 0.5)
        args.warmup = min(args.warmup, 0.2)
        args.decode_events = min(args.decode_events, 20_000)
        args.read_seconds = min(args.read_seconds, 5.0)
    return args


def main(argv: Sequence[str] | None = None) -> None:
    run_on_fresh_database(amain, parse_args(argv), "openmaic_bench")


if __name__ == "__main__":
    main()
