"""Workers killed, frozen, cut off and restarted: nothing is lost, duplicated or falsely settled."""

from __future__ import annotations

import random
import signal
from dataclasses import dataclass

import pytest
import trio

from openmaic.actors.commands import Commands
from openmaic.events.log import EventLog
from openmaic.store.database import open_database
from openmaic.store.migrations import migrate
from openmaic.store.postgres import ThrowawayCluster
from tests.faults.workers import WorkerProcess, start_workers
from tests.pgbouncer import pooled_env, requires_pgbouncer, set_database_bounds
from tests.runtime import ended, new_stream, wait_for

TTL, HEARTBEAT, POLL = 2.0, 0.4, 0.25
SETTINGS = dict(lease_ttl_s=TTL, heartbeat_s=HEARTBEAT, claim_poll_s=POLL, wake_poll_s=0.5, shutdown_grace_s=1.0)


@pytest.fixture
def log(db):
    return EventLog(db)


@dataclass
class Route:
    url: str
    env: dict[str, str]


@pytest.fixture(params=["direct", pytest.param("pgbouncer", marks=requires_pgbouncer)])
async def route(request, db, db_url, bouncers):
    """How the worker processes reach the test's database: PostgreSQL itself, or a transaction-mode PgBouncer (their
    claims, leases and steps through it; their LISTEN connection and session locks to the direct URL). After ``db``:
    its asyncio loop is the one the bounds are set on (a loop a fixture opens and closes would end the test's)."""
    if request.param == "direct":
        return Route(db_url, {})
    env = pooled_env(bouncers("transaction"), db_url)
    await set_database_bounds(db_url)
    return Route(env["DATABASE_URL"], env)


@pytest.fixture
async def workers():
    procs: list[WorkerProcess] = []
    try:
        yield procs
    finally:
        for p in procs:
            p.close()


async def check_stream(log: EventLog, sid: str, steps: int) -> None:
    events = await log.read_stream(sid, limit=100_000)
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    done = [log.decode(e).n for e in events if e.type == "test.step_done"]
    assert sorted(done) == list(range(1, steps + 1)), f"{sid}: a step was committed twice or never: {done}"
    assert [e.type for e in events].count("session.ended") == 1


async def holders(db) -> dict[str, list[tuple[str, int]]]:
    """Each worker's running streams, with the attempt it holds each under."""
    rows = await db.fetch(
        "SELECT id, attempt, lease_worker FROM streams WHERE status = 'running' AND lease_worker IS NOT NULL"
    )
    out: dict[str, list[tuple[str, int]]] = {}
    for r in rows:
        out.setdefault(r["lease_worker"], []).append((r["id"], r["attempt"]))
    return out


async def test_sigkill_mid_step_twenty_times(db, db_url, log, workers):
    fast = dict(SETTINGS, lease_ttl_s=1.0, heartbeat_s=0.2)
    streams: list[str] = []

    async def keep_eight_in_flight() -> None:
        # However slowly a loaded machine starts the replacement workers, there is always work to kill mid-step:
        # a stream that completed is replaced by a new one.
        while len(streams) - await _completed(db, streams) < 8:
            streams.append(f"k{len(streams)}")
            await new_stream(log, streams[-1], steps=40, sleep=0.2)

    await keep_eight_in_flight()
    workers += await start_workers(db_url, 2, **fast)
    kills = []
    while len(kills) < 20:
        await keep_eight_in_flight()
        # Kill mid-step, after the holder made progress under its attempt: a crash loop is another test.
        await wait_for(lambda: _progressed_holders(db, workers), timeout=20)
        await trio.sleep(random.uniform(0.0, 0.2))
        candidates = await _progressed_holders(db, workers)
        if not candidates:
            continue
        victim = random.choice(candidates)
        # The clock starts before the streams the victim holds are read: on a loaded machine its lease on one of
        # them may lapse (and be taken over) between that read and the kill, which then counts from here.
        seen_at = await db.fetchval("SELECT now()")
        held = (await holders(db)).get(victim.id, [])
        victim.kill()
        kills.append((seen_at, victim.id, held))
        workers.append(await WorkerProcess(db_url, **fast).started())
    await wait_for(lambda: _all_completed(log, streams), timeout=120)
    for sid in streams:
        await check_stream(log, sid, 40)
    # every stream held by a killed worker was taken over within lease TTL + claim poll (+ scheduling slack)
    delays = []
    for seen_at, victim_id, held in kills:
        for sid, attempt in held:
            later = [e for e in await log.read_stream(sid, limit=100_000) if e.recorded_at > seen_at]
            claims = [e for e in later if e.type == "lease.claimed" and log.decode(e).worker != victim_id]
            if not claims:
                # Nothing was left to take over: the victim itself ended the stream after it was seen holding it.
                ends = [e.attempt for e in later if e.type == "session.ended"]
                assert ends == [attempt], f"{sid} was never taken over"
                continue
            delays.append((claims[0].recorded_at - seen_at).total_seconds())
    assert delays and max(delays) <= fast["lease_ttl_s"] + POLL + 1.0, f"slowest takeover {max(delays):.2f} s"


async def test_zombie_worker_writes_nothing_after_takeover(db, route, log, workers):
    await new_stream(log, "z", steps=6, sleep=0.5)
    zombie = await WorkerProcess(route.url, route.env, **SETTINGS).started()
    workers.append(zombie)
    await wait_for(lambda: _held_by(db, "z", zombie.id))
    zombie.signal(signal.SIGSTOP)
    stopped_attempt = (await log.stream_row("z")).attempt
    try:
        workers.append(await WorkerProcess(route.url, route.env, **SETTINGS).started())
        await wait_for(lambda: _attempt_above(log, "z", stopped_attempt), timeout=TTL + 10)
    finally:
        zombie.signal(signal.SIGCONT)
    await wait_for(lambda: _eq(ended(log, "z"), "completed"), timeout=60)
    await check_stream(log, "z", 6)
    events = await log.read_stream("z", limit=1000)
    # nothing written by the frozen attempt after the takeover
    takeover = next(e.seq for e in events if e.type == "lease.claimed" and e.attempt > stopped_attempt)
    assert all(e.attempt != stopped_attempt for e in events if e.seq > takeover)
    # and the zombie stopped that actor by itself: it holds no lease and keeps running (it is a healthy worker)
    assert zombie.proc.poll() is None


async def test_listener_connection_terminated_work_continues(db, route, log, workers):
    workers += await start_workers(route.url, 1, route.env, **SETTINGS)
    await new_stream(log, "a", steps=3, sleep=0.1)
    await wait_for(lambda: _eq(ended(log, "a"), "completed"))
    # kill every LISTEN connection of the worker process from the server side
    pids = await db.fetch("SELECT pid FROM pg_stat_activity WHERE query LIKE 'LISTEN%' OR query = 'SELECT 1'")
    assert pids
    for r in pids:
        await db.execute("SELECT pg_terminate_backend($1)", r["pid"])
    await new_stream(log, "b", steps=3, sleep=0.1)
    await wait_for(lambda: _eq(ended(log, "b"), "completed"), timeout=30)
    # the listener came back: a new LISTEN backend exists
    await wait_for(lambda: _listening(db), timeout=30)


async def test_postgresql_restart_mid_run(workers):
    cluster = ThrowawayCluster(durable=True).start()
    try:
        url = cluster.url()
        async with open_database(url) as db:
            await migrate(db)
            log = EventLog(db)
            streams = [f"p{i}" for i in range(4)]
            for sid in streams:
                await new_stream(log, sid, steps=20, sleep=0.2)
            workers += await start_workers(url, 2, **SETTINGS)
            await wait_for(lambda: _some_progress(log, streams))
            await trio.to_thread.run_sync(cluster.restart)
            await wait_for(lambda: _all_completed(log, streams), timeout=90, interval=0.2)
            for sid in streams:
                await check_stream(log, sid, 20)
    finally:
        cluster.stop()


async def test_cancel_and_follow_ups_posted_just_before_a_crash(db, route, log, workers):
    cmds = Commands(log, message_kinds=["test"])
    await new_stream(log, "m", steps=3, sleep=0.5, idle=True)
    await new_stream(log, "c", steps=3, sleep=5)
    w = await WorkerProcess(route.url, route.env, **SETTINGS).started()
    workers.append(w)
    await wait_for(lambda: _held_by(db, "m", w.id))
    await wait_for(lambda: _held_by(db, "c", w.id))
    seqs = [(await cmds.post_message("o", "m", f"m{i}", f"follow-up {i}")).seq for i in range(3)]
    await cmds.cancel("o", "c", "cancel-c")
    w.kill()
    workers.append(await WorkerProcess(route.url, route.env, **SETTINGS).started())
    await wait_for(lambda: _eq(ended(log, "c"), "cancelled"), timeout=30)
    await wait_for(lambda: _delivered(log, "m", seqs), timeout=30)
    await wait_for(lambda: _eq(_status(log, "m"), "waiting"), timeout=30)
    delivered = [s for e in await log.read_stream("m") if e.type == "model.turn_completed"
                 for s in log.decode(e).delivered]
    assert sorted(delivered) == seqs, "each follow-up is delivered exactly once"


async def test_graceful_shutdown_releases_leases_and_a_restart_resumes_at_once(db, db_url, log, workers):
    for i in range(3):
        await new_stream(log, f"g{i}", steps=4, sleep=10)
    w = await WorkerProcess(db_url, **dict(SETTINGS, shutdown_grace_s=0.5)).started()
    workers.append(w)
    await wait_for(lambda: _count_running(db, 3))
    w.signal(signal.SIGTERM)
    assert await w.wait(20) == 0
    rows = await db.fetch("SELECT status, lease_worker, unattended_attempts FROM streams WHERE id LIKE 'g%'")
    assert {(r["status"], r["lease_worker"], r["unattended_attempts"]) for r in rows} == {("queued", None, 0)}
    restart_at = trio.current_time()
    w2 = await WorkerProcess(db_url, **SETTINGS).started()
    workers.append(w2)
    await wait_for(lambda: _count_running(db, 3), timeout=10)
    # claimed as 'queued' (not orphaned, nothing charged), well before a lease TTL would have passed
    assert trio.current_time() - restart_at < 10
    for i in range(3):
        claims = [log.decode(e) for e in await log.read_stream(f"g{i}") if e.type == "lease.claimed"]
        assert [c.reason for c in claims] == ["queued", "queued"]


async def test_a_crash_loop_ends_in_the_kinds_over_cap_state(db, db_url, log, workers):
    await new_stream(log, "loop", steps=2, crash_at=2)
    for _ in range(8):
        if await ended(log, "loop"):
            break
        w = await WorkerProcess(db_url, **SETTINGS).started()
        workers.append(w)
        with trio.move_on_after(TTL + 8):
            await w.wait(TTL + 9)
        if w.proc.poll() is None:
            break  # this worker survived: the stream gave up instead of crashing it
    await wait_for(lambda: _eq(ended(log, "loop"), "failed"), timeout=30)
    events = await log.read_stream("loop", limit=1000)
    assert log.decode(events[-1]).error == "interrupted too many times"
    done = [log.decode(e).n for e in events if e.type == "test.step_done"]
    assert done == [1]


# -- conditions -----------------------------------------------------------------------------------------------


async def _progressed_holders(db, workers) -> list:
    """Live workers whose every held stream has committed a step under its current attempt."""
    rows = await db.fetch(
        "SELECT s.lease_worker, bool_and(EXISTS (SELECT 1 FROM events e WHERE e.stream_id = s.id "
        "AND e.attempt = s.attempt AND e.type = 'test.step_done')) AS progressed "
        "FROM streams s WHERE s.status = 'running' AND s.lease_worker IS NOT NULL GROUP BY 1"
    )
    ok = {r["lease_worker"] for r in rows if r["progressed"]}
    return [w for w in workers if w.proc.poll() is None and w.id in ok]


async def _eq(aw, value) -> bool:
    return await aw == value


async def _status(log, sid):
    return (await log.stream_row(sid)).status


async def _completed(db, sids) -> int:
    return await db.fetchval("SELECT count(*) FROM streams WHERE id = ANY($1::text[]) AND status = 'terminal'", sids)


async def _all_completed(log, sids) -> bool:
    for sid in sids:
        if await ended(log, sid) != "completed":
            return False
    return True


async def _some_progress(log, sids) -> bool:
    return sum([[e.type for e in await log.read_stream(s)].count("test.step_done") for s in sids]) >= 4


async def _held_by(db, sid, worker_id) -> bool:
    return await db.fetchval("SELECT lease_worker = $2 FROM streams WHERE id = $1", sid, worker_id) is True


async def _attempt_above(log, sid, attempt) -> bool:
    return (await log.stream_row(sid)).attempt > attempt


async def _listening(db) -> bool:
    return bool(await db.fetchval("SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'LISTEN%'"))


async def _count_running(db, n) -> bool:
    return await db.fetchval("SELECT count(*) FROM streams WHERE status = 'running' AND lease_worker IS NOT NULL") == n


async def _delivered(log, sid, seqs) -> bool:
    got = [s for e in await log.read_stream(sid) if e.type == "model.turn_completed" for s in log.decode(e).delivered]
    return sorted(got) == sorted(seqs)
