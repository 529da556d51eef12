"""A failover: the primary stops dead under a running `openmaic serve`, and its streaming standby is promoted.

The test starts both servers from the PostgreSQL binaries (the standby by ``pg_basebackup -R``, replicating
synchronously, so that what the primary acknowledged is on the standby when it dies), and the server is given both
in one URL that asks for the primary: ``postgresql://…@127.0.0.1:P,127.0.0.1:S/postgres?target_session_attrs=
read-write``. Runs (the demo provider) are in flight and followed by ``EventSource`` clients, and creates keep
coming, when the primary is stopped in immediate mode (a crash, as far as its clients can tell). While no server
takes writes, the SSE routes still answer ``200 text/event-stream`` (a browser's ``EventSource`` gives up after
any other answer). Then the standby is promoted, and:

* every run completes, its log gap-free, no step committed twice, no step failure committed;
* every serving loop is back within :data:`BACK_WITHIN_S` of the promotion: an append (the actors), a heartbeat,
  a claim (a run created after the promotion), a projection batch (the projector's lock connection and apply
  task), the LISTEN connection, and a frame to each SSE client;
* every SSE client has every frame exactly once, in order (what a fresh reader of the whole run gets);
* a create that raced the switch was answered truthfully: a 202 names a run that exists; any other answer is a
  503 ("unavailable, retry"), never a 500.
"""

from __future__ import annotations

import datetime
import json
import re
import time
from pathlib import Path

import h11
import httpx
import pytest
import trio

from openmaic.events.log import EventLog
from openmaic.store.database import open_database
from openmaic.store.migrations import migrate
from openmaic.store.postgres import ThrowawayCluster, free_port
from tests.eventsource import EventSource, open_sse
from tests.serving import serve_processes, stderr_of, wait_ready
from tests.standby import Standby

pytestmark = pytest.mark.filterwarnings(
    r"ignore:Async generator 'http(x|core)\._[^']*' was garbage collected:ResourceWarning"
)

BACK_WITHIN_S = 2.0
TTL = 3.0
CONFIG = (
    f"runtime: {{lease_ttl_s: {TTL}, heartbeat_s: 0.5, claim_poll_s: 0.2, wake_poll_s: 1}}\n"
    "providers: {demo: {preset: demo, options: {latencyMs: 10}}}\nslots: {llm: demo:course, agent: demo:agent}\n"
    "limits: {active_runs_per_owner: 20, waiting_runs_per_owner: 40}\n"
)
RUNS = 3
OUTAGE_S = 4.5
"""From the primary's stop to the standby's promotion."""


class Primary(ThrowawayCluster):
    """A throwaway cluster whose commits wait for the standby once :meth:`replicate_synchronously` is called
    (fsync stays off: the machine does not crash, only the server)."""

    @property
    def options(self) -> str:
        return super().options.replace("-c synchronous_commit=off", "")

    def stop_immediately(self) -> None:
        """``pg_ctl stop -m immediate``: every backend ends at once, nothing is flushed or said goodbye to."""
        self._pg_ctl("-m", "immediate", "-w", "stop")


async def replicate_synchronously(primary: ThrowawayCluster) -> None:
    # After the base backup: postgresql.auto.conf is a file, not WAL, so the standby does not inherit it — once
    # promoted, it must not wait for a standby of its own.
    async with open_database(primary.url(), min_size=1, max_size=1) as db:
        await db.execute("ALTER SYSTEM SET synchronous_standby_names = '*'")
        await db.execute("SELECT pg_reload_conf()")
        with trio.fail_after(30):
            while await db.fetchval("SELECT count(*) FROM pg_stat_replication WHERE sync_state = 'sync'") != 1:
                await trio.sleep(0.05)


class Follower:
    """An EventSource on one run's events, reconnecting as a browser does (``retry:`` is 0.5 s)."""

    def __init__(self, base: str, run: str) -> None:
        self.run = run
        self.source = EventSource(f"{base}/api/generation-runs/{run}/events")
        self.seen: list[tuple[int, float]] = []  # (seq, trio time) of each run frame

    async def follow(self) -> None:
        while True:
            try:
                async with self.source.connect() as messages:  # asserts a 200 text/event-stream answer
                    async for m in messages:
                        if m.type != "caught_up":
                            self.seen.append((int(m.last_event_id), trio.current_time()))
            except (OSError, h11.RemoteProtocolError):
                pass  # a network error: a browser reconnects after it, as after a response that ended
            await trio.sleep(0.5)

    @property
    def seqs(self) -> list[int]:
        return [s for s, _ in self.seen]


async def all_frames(base: str, run: str) -> list[int]:
    """The seqs of every frame of the run, read afresh from the start."""
    source = EventSource(f"{base}/api/generation-runs/{run}/events")
    seqs = []
    async with source.connect() as messages:
        async for m in messages:
            if m.type == "caught_up":
                return seqs
            seqs.append(int(m.last_event_id))
    raise AssertionError("the stream ended before caught_up")


async def answered(client: httpx.AsyncClient, method: str, path: str, **kw) -> httpx.Response:
    """The answer, retried while the server says it cannot serve now (503) or cannot be reached."""
    with trio.fail_after(30):
        while True:
            try:
                r = await client.request(method, path, **kw)
                if r.status_code != 503:
                    return r
            except httpx.TransportError:
                pass
            await trio.sleep(0.1)


async def start_run(client: httpx.AsyncClient, requirement: str) -> str:
    r = await answered(client, "POST", "/api/generation-runs", json={"requirement": requirement,
                                                                      "outlineReview": "auto"})
    assert r.status_code == 202, r.text
    return r.json()["run"]["id"]


async def completed(client: httpx.AsyncClient, run: str) -> None:
    with trio.fail_after(90):
        while (state := (await answered(client, "GET", f"/api/generation-runs/{run}")).json()["run"]["state"]) \
                != "completed":
            assert state != "paused", f"{run} paused"
            await trio.sleep(0.2)


class Racer:
    """Creates runs back to back across the switch, keeping every answer."""

    def __init__(self, client: httpx.AsyncClient) -> None:
        self.client = client
        self.answers: list[tuple[str, int | None, str, float, float]] = []
        """(requirement, status or None, run id or text, sent, answered)"""
        self.stop = trio.Event()

    async def run(self) -> None:
        i = 0
        while not self.stop.is_set():
            requirement = f"Raced create {i}."
            sent = trio.current_time()
            try:
                r = await self.client.post("/api/generation-runs", json={"requirement": requirement,
                                                                          "outlineReview": "auto"})
                self.answers.append((requirement, r.status_code,
                                     r.json()["run"]["id"] if r.status_code == 202 else r.text, sent,
                                     trio.current_time()))
            except httpx.TransportError as exc:
                self.answers.append((requirement, None, repr(exc), sent, trio.current_time()))
            i += 1
            await trio.sleep(0.25)


async def test_a_failover_loses_nothing_and_every_loop_is_back_within_two_seconds(tmp_path: Path):
    primary = Primary()
    standby = Standby(primary)
    try:
        await trio.to_thread.run_sync(primary.start)
        await trio.to_thread.run_sync(standby.start)
        await replicate_synchronously(primary)
        url = (f"postgresql://postgres@127.0.0.1:{primary.port},127.0.0.1:{standby.port}/postgres"
               "?target_session_attrs=read-write")
        async with open_database(primary.url(), min_size=1, max_size=1) as db:
            await migrate(db)
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        with serve_processes(url, tmp_path, [(None, port)], CONFIG) as procs, \
                trio.fail_after(120):
            async with httpx.AsyncClient(base_url=base, trust_env=False, timeout=10) as client:
                await wait_ready(client, procs, tmp_path)
                runs = [await start_run(client, f"Failover, part {i}") for i in range(RUNS)]
                followers = [Follower(base, run) for run in runs]
                racer = Racer(client)
                async with trio.open_nursery() as nursery:
                    for f in followers:
                        nursery.start_soon(f.follow)
                    # Mid-run: every run has made progress its follower has seen.
                    with trio.fail_after(30):
                        while not all(len(f.seen) >= 5 for f in followers):
                            await trio.sleep(0.05)
                    nursery.start_soon(racer.run)
                    await trio.sleep(0.3)

                    await trio.to_thread.run_sync(primary.stop_immediately)
                    stopped = trio.current_time()
                    stopped_at = datetime.datetime.now(datetime.timezone.utc)
                    # No server takes writes now. The SSE routes still answer 200 text/event-stream, telling the
                    # client when to come back, whether the outage is met before the stream starts (a run's
                    # events: its row is read first) or inside it (the owner's lists).
                    for path in (f"/api/generation-runs/{runs[0]}/events", "/api/generation-runs/events",
                                 "/api/classrooms/events", "/api/agent/owner-events"):
                        with trio.fail_after(10):
                            async with open_sse(base + path) as r:
                                assert (r.status, r.headers["content-type"]) == \
                                    (200, "text/event-stream; charset=utf-8"), (path, r.status)
                                lines = [line async for line in _until_retry(r.lines)]
                                assert lines[-1:] == ["retry: 500"], (path, lines)

                    # As long as a failover manager takes to decide: every loop's retries have backed off by then.
                    await trio.sleep_until(stopped + OUTAGE_S)
                    await trio.to_thread.run_sync(standby.promote)
                    promoted = trio.current_time()
                    promoted_at = datetime.datetime.now(datetime.timezone.utc)
                    racer.stop.set()
                    async with open_database(standby.url(), min_size=1, max_size=2) as new:
                        try:
                            after = await _loops_back(new, client, followers, promoted, promoted_at, stopped_at)
                        except AssertionError as exc:
                            said = (tmp_path / "0-all.stderr").read_text().splitlines()
                            raise AssertionError("\n".join([str(exc), *(line for line in said if " INFO " in line
                                                                          or " WARNING " in line)][-80:])) from None
                    for run in [*runs, after]:
                        await completed(client, run)
                    raced = racer.answers
                    created = [out for _, status, out, _, _ in raced if status == 202]
                    for run in created:
                        await completed(client, run)
                    # Every frame of each run reached its follower once, in order.
                    for f in followers:
                        expected = await all_frames(base, f.run)
                        with trio.fail_after(10):
                            while not f.seqs or f.seqs[-1] < expected[-1]:
                                await trio.sleep(0.05)
                        assert f.seqs == expected, f"{f.run}: the follower's frames differ from the log's"
                        # Its response stayed open through the outage (it waited, pinging): no reconnect was needed.
                        assert f.source.connections == 1, f"{f.run}: {f.source.connections} connections"
                    nursery.cancel_scope.cancel()

                async with open_database(standby.url(), min_size=1, max_size=2) as new:
                    log = EventLog(new)
                    for run in [*runs, after, *created]:
                        await check_run(log, run)
                    # The raced creates, some answered before the switch and some during it: a 202 names a run that
                    # exists (it completed, above); any other answer is a 503, and made no run — unless the create
                    # was in flight when the primary died (then its commit may have reached the standby unanswered:
                    # a 503 says "not known to be done", which is the truth).
                    refused = [(req, status, out, sent, got) for req, status, out, sent, got in raced if status != 202]
                    assert created and refused, f"the creates did not race the switch: {raced}"
                    assert all(status == 503 for _, status, *_ in refused), refused
                    made = {req: sid for sid, req in await _raced_in_log(new)}
                    assert {made[req] for req, status, *_ in raced if status == 202} == set(created)
                    for req, _, out, sent, got in refused:
                        assert req not in made or sent <= stopped <= got, f"{req}: answered {out}, but made"
                    assert all(p.poll() is None for p in procs), stderr_of(tmp_path)
        # What the operator reads: the outage names both hosts and what each said, and the driver's own warning is
        # one line (asyncpg's pool used to print a traceback at every retry).
        lines = (tmp_path / "0-all.stderr").read_text().splitlines()
        hosts = f"127.0.0.1:{primary.port}: ", f"127.0.0.1:{standby.port}: answered, but is not the primary"
        assert any(all(h in line for h in hosts) for line in lines), "no outage line names both hosts"
        driver = [i for i, line in enumerate(lines) if " asyncpg.pool: " in line]
        assert len(driver) <= 2, [lines[i] for i in driver]
        assert not [i for i in driver if i + 1 < len(lines) and lines[i + 1].startswith("Traceback")], "a traceback"
    finally:
        await trio.to_thread.run_sync(standby.stop)
        await trio.to_thread.run_sync(primary.stop)


async def _raced_in_log(db) -> list[tuple[str, str]]:
    """(run id, requirement) of every raced create the log holds."""
    rows = await db.fetch("SELECT stream_id, data::text AS data FROM events WHERE type = 'session.created' "
                          "AND data::text LIKE '%Raced create %'")
    return [(r["stream_id"], re.search(r"Raced create \d+\.", r["data"]).group(0)) for r in rows]


async def _until_retry(lines):
    """The lines of an SSE body up to its ``retry:`` hint (or its end)."""
    async for line in lines:
        if line:
            yield line
            if line.startswith("retry:"):
                return


async def check_run(log: EventLog, run: str) -> None:
    """The run's log is gap-free, commits each step once, commits no step failure and ends once."""
    events = await log.read_stream(run, limit=100_000)
    assert [e.seq for e in events] == list(range(1, len(events) + 1)), f"{run}: a gap in the log"
    steps = [json.loads(bytes(e.data))["step"] for e in events if e.type == "run.step_completed"]
    assert len(steps) == len(set(steps)), f"{run}: a step was committed twice: {steps}"
    types = [e.type for e in events]
    assert "run.step_failed" not in types, f"{run}: a step failure was committed"
    assert types.count("session.ended") == 1


async def _loops_back(db, client: httpx.AsyncClient, followers: list[Follower], promoted: float,
                      promoted_at: datetime.datetime, stopped_at: datetime.datetime) -> str:
    """Every serving loop has done its work on the new primary within BACK_WITHIN_S of the promotion, as the new
    primary's own clock records it (the SSE clients: as they received it); returns the run created meanwhile."""
    created: list[str] = []
    checks = {
        # The actors (an append that is not a create) and the heartbeat (a lease renewed for TTL from then).
        "append": "SELECT min(recorded_at) FROM events WHERE recorded_at > $1 AND type <> 'session.created'",
        "heartbeat": f"SELECT min(lease_expires_at - interval '{TTL} seconds') FROM streams "
                     f"WHERE lease_expires_at - interval '{TTL} seconds' > $1",
        # The claim loop (and the API, which created the run).
        "claim": "SELECT min(recorded_at) FROM events WHERE type = 'lease.claimed' AND recorded_at > $1",
        # The projector: its lock connection took the locks again and an apply task applied a batch.
        "projection batch": "SELECT min(updated_at) FROM projection_checkpoints WHERE updated_at > $1",
        # The LISTEN connection: when it was opened (it listens at once). Any opened since the old primary died is
        # on the new one, and may have been opened in the moment between the promotion and pg_ctl's seeing it.
        "LISTEN connection": "SELECT greatest(min(backend_start), $1) FROM pg_stat_activity "
                             "WHERE query LIKE 'LISTEN%' AND backend_start > $2",
    }
    seen: dict[str, float] = {}
    deadline = promoted + TTL + BACK_WITHIN_S + 3.0  # longer than a lease, and to report how late a late loop was
    async with trio.open_nursery() as nursery:
        nursery.start_soon(lambda: _append_to(created, start_run(client, "Created after the failover")))
        while trio.current_time() < deadline and len(seen) < len(checks) + len(followers):
            for name, sql in checks.items():
                args = (promoted_at, stopped_at) if "$2" in sql else (promoted_at,)
                if name not in seen and (at := await db.fetchval(sql, *args)) is not None:
                    seen[name] = (at - promoted_at).total_seconds()
            for f in followers:
                # The first frame the client had not had at the promotion: how long after the promotion (or after
                # its event was appended, if later) it arrived. (When a run appends is the actor's business: one
                # that stopped while the database was away goes on once its lease expires.)
                before = max([seq for seq, t in f.seen if t <= promoted], default=0)
                arrived = [(seq, t) for seq, t in f.seen if seq > before]
                if f"SSE {f.run}" not in seen and arrived:
                    seq, t = arrived[0]
                    at = await db.fetchval("SELECT recorded_at FROM events WHERE stream_id = $1 AND seq = $2", f.run,
                                           seq)
                    seen[f"SSE {f.run}"] = t - max(promoted, promoted + (at - promoted_at).total_seconds())
            await trio.sleep(0.05)
    late = {name: round(s, 2) for name, s in seen.items() if s > BACK_WITHIN_S}
    missing = [name for name in [*checks, *(f"SSE {f.run}" for f in followers)] if name not in seen]
    connections = {f.run: f.source.connections for f in followers}
    assert not late and not missing, f"late: {late}, never back: {missing} (all: {seen}; SSE connections: {connections})"
    return created[0]


async def _append_to(found: list, aw) -> None:
    found.append(await aw)
