"""The database interrupting a step (its connection ended, a new one refused with 53300, a lock timeout, a cancelled
statement) never settles, fails or charges the step: the actor hands the stream back and the stream resumes from its
last checkpoint under a new attempt, claimed at once as a queued stream (not an orphan takeover)."""

from __future__ import annotations

import pytest
import trio

from openmaic.events.core import DATABASE_TROUBLE
from openmaic.events.log import EventLog
from openmaic.store.database import open_database
from openmaic.store.migrations import migrate
from openmaic.store.postgres import ThrowawayCluster
from tests.faults.blocking import held
from tests.faults.refusals import server_full
from tests.runtime import ended, new_stream, open_worker, settings, wait_for

RT = settings(lease_ttl_s=5.0, heartbeat_s=0.3, claim_poll_s=0.2)


def lock_row(sid: str) -> str:
    return f"SELECT 1 FROM streams WHERE id = '{sid}' FOR UPDATE"


async def decoded(log: EventLog, sid: str, type_: str) -> list:
    return [log.decode(e) for e in await log.read_stream(sid, limit=100_000) if e.type == type_]


async def has(log: EventLog, sid: str, type_: str) -> bool:
    return bool(await decoded(log, sid, type_))


async def assert_resumed_uncharged(log: EventLog, sid: str) -> None:
    """Completed, after one interruption by the database and a prompt, uncharged claim (not an orphan's)."""
    await wait_for(lambda: _is(ended(log, sid), "completed"), timeout=30)
    ends = await decoded(log, sid, "session.ended")
    assert [e.status for e in ends] == ["completed"], ends
    interrupted = await decoded(log, sid, "session.interrupted")
    assert [i.reason for i in interrupted] == [DATABASE_TROUBLE], interrupted
    claims = await decoded(log, sid, "lease.claimed")
    assert len(claims) == 2 and claims[1].reason == "queued", claims
    released = await decoded(log, sid, "lease.released")
    assert released[0].reason == DATABASE_TROUBLE and released[0].attempt == claims[0].attempt
    (done,) = await decoded(log, sid, "test.step_done")
    assert done.attempt == claims[1].attempt  # the step ran again under the new attempt, and committed once


async def _is(aw, value) -> bool:
    return await aw == value


@pytest.mark.parametrize("cancel", [False, True], ids=["terminated", "cancelled"])
async def test_a_step_whose_commit_is_cut_off_resumes_uncharged(db_url, db, cancel):
    """The step's outcome waits on the stream's row (held by another transaction); its backend is ended
    (``pg_terminate_backend``) or its statement cancelled (``pg_cancel_backend``, 57014)."""
    log = EventLog(db)
    async with open_worker(db_url, RT):
        await new_stream(log, "s", steps=1, emit=1, sleep=1.0)
        await wait_for(lambda: has(log, "s", "test.emitted"))
        async with held(db_url, lock_row("s")) as blocker:
            await blocker.terminate_blocked(cancel=cancel)
        await assert_resumed_uncharged(log, "s")
        assert await decoded(log, "s", "session.interrupted") and \
            (await decoded(log, "s", "session.interrupted"))[0].step == "step:1"


async def test_a_step_whose_own_emit_is_cut_off_resumes_uncharged(db_url, db):
    """Inside the step: its ``ctx.emit`` waits on the row and its backend is ended. The old runner failed the
    step (the session ended ``failed`` with the driver's text)."""
    log = EventLog(db)
    async with open_worker(db_url, RT):
        await new_stream(log, "s", steps=1, emit=1, before=1.0)
        await wait_for(lambda: has(log, "s", "lease.claimed"))
        async with held(db_url, lock_row("s")) as blocker:
            await blocker.terminate_blocked()
        await assert_resumed_uncharged(log, "s")


async def test_a_lock_timeout_inside_a_step_resumes_uncharged(db_url, db, caplog):
    """A ``lock_timeout`` (55P03) on the step's emit; the stream is handed back once the lock is free."""
    log = EventLog(db)
    name = await db.fetchval("SELECT current_database()")
    await db.execute(f'ALTER DATABASE "{name}" SET lock_timeout = 300')
    async with open_worker(db_url, RT):
        await new_stream(log, "s", steps=1, emit=1, before=1.0)
        await wait_for(lambda: has(log, "s", "lease.claimed"))
        async with held(db_url, lock_row("s")) as blocker:
            async def interrupted() -> bool:
                return any("interrupted step step:1" in r.getMessage() and "55P03" in r.getMessage()
                           for r in caplog.records)
            await wait_for(interrupted, timeout=10)
            assert not blocker.ended
        await assert_resumed_uncharged(log, "s")


@pytest.fixture
def small_cluster():
    cluster = ThrowawayCluster(max_connections=40).start()
    try:
        yield cluster
    finally:
        cluster.stop()


async def test_a_server_refusing_connections_during_a_step_resumes_it_uncharged(small_cluster):
    """Every connection of the worker is ended and every new one refused (53300) while its step runs, for a
    second: the step's emit fails on it, and once the refusal is over the stream is handed back and resumed."""
    url = small_cluster.url()
    async with open_database(url) as admin:
        await migrate(admin)
        log = EventLog(admin)
        async with open_worker(url, RT):
            await new_stream(log, "s", steps=1, emit=1, before=1.5)
            await wait_for(lambda: has(log, "s", "lease.claimed"))
            async with server_full(url) as full:
                with trio.fail_after(10):
                    while full.evicted == 0:
                        await trio.sleep(0.05)
                await trio.sleep(1.5)  # the step's emit comes in this second and is refused
            await wait_for(lambda: _is(ended(log, "s"), "completed"), timeout=30)
            assert [e.status for e in await decoded(log, "s", "session.ended")] == ["completed"]
            assert [i.reason for i in await decoded(log, "s", "session.interrupted")] == [DATABASE_TROUBLE]
            claims = await decoded(log, "s", "lease.claimed")
            assert len(claims) == 2 and claims[1].reason == "queued", claims


async def test_steps_whose_grouped_commit_is_cut_off_all_resume_uncharged(db_url, db):
    """Eight steps commit at once (the group commit sends them together); their rows are held and the backends
    waiting on them ended: every step resumes and completes once, none is failed or charged."""
    log = EventLog(db)
    sids = [f"g{i}" for i in range(8)]
    async with open_worker(db_url, RT):
        for sid in sids:
            await new_stream(log, sid, steps=1, emit=1, sleep=1.0)

        async def all_emitted() -> bool:
            return all([await has(log, sid, "test.emitted") for sid in sids])

        await wait_for(all_emitted)
        async with held(db_url, "SELECT 1 FROM streams WHERE id LIKE 'g%' ORDER BY id FOR UPDATE") as blocker:
            await blocker.terminate_blocked()
            await trio.sleep(0.5)  # commits that came after the first ones
            for pid in await blocker.blocked():
                await blocker.db.fetchval("SELECT pg_terminate_backend($1)", pid)
        for sid in sids:
            await wait_for(lambda: _is(ended(log, sid), "completed"), timeout=30)
        interrupted = 0
        for sid in sids:
            assert [e.status for e in await decoded(log, sid, "session.ended")] == ["completed"]
            claims = await decoded(log, sid, "lease.claimed")
            assert all(c.reason == "queued" for c in claims), (sid, claims)
            assert len(await decoded(log, sid, "test.step_done")) == 1
            interrupted += len(await decoded(log, sid, "session.interrupted"))
        assert interrupted >= 2


async def test_a_step_the_database_interrupts_every_time_fails_past_the_cap(db_url, db):
    """A statement of the step's own that times out every time is not retried forever: past
    ``max_unattended_attempts`` interruptions in a row the step fails, in words that say why."""
    log = EventLog(db)
    async with open_worker(db_url, settings(lease_ttl_s=5.0, heartbeat_s=0.3, claim_poll_s=0.2,
                                            max_unattended_attempts=2)):
        await new_stream(log, "s", steps=1, timeout_at=1)
        await wait_for(lambda: _is(ended(log, "s"), "failed"), timeout=30)
    (end,) = await decoded(log, "s", "session.ended")
    assert end.error.startswith("the database interrupted step step:1 3 times in a row (PostgreSQL refused")
    assert [(i.reason, i.step) for i in await decoded(log, "s", "session.interrupted")] == \
        [(DATABASE_TROUBLE, "step:1")] * 2
    assert all(c.reason == "queued" for c in await decoded(log, "s", "lease.claimed"))
