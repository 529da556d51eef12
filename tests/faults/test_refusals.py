"""A server that refuses new connections (``53300 too many clients``) for a while: every loop survives and resumes."""

from __future__ import annotations

import logging

import pytest
import trio

from openmaic.events.log import EventLog
from openmaic.events.wakeups import CHANNEL
from openmaic.projections import default_projections, run_projectors
from openmaic.store.database import CONNECTION_LIMIT_MESSAGE, open_database
from openmaic.store.migrations import migrate
from openmaic.store.postgres import ThrowawayCluster
from tests.faults.refusals import server_full
from tests.runtime import ended, new_stream, open_worker, settings, wait_for


@pytest.fixture
def small_cluster():
    cluster = ThrowawayCluster(max_connections=40).start()
    try:
        yield cluster
    finally:
        cluster.stop()


async def test_every_loop_outlives_a_server_that_refuses_connections(small_cluster, caplog):
    caplog.set_level(logging.INFO)
    url = small_cluster.url()
    async with open_database(url) as admin:
        await migrate(admin)
    rt = settings(lease_ttl_s=2.0, heartbeat_s=0.3, claim_poll_s=0.2)
    async with open_worker(url, rt) as worker, trio.open_nursery() as nursery:
        db, log = worker.db, worker.log
        await nursery.start(lambda task_status: run_projectors(
            db, log, worker.wakeups, default_projections(), lock_retry_s=0.2, poll_s=0.2, task_status=task_status))
        await new_stream(log, "before", steps=2)
        await wait_for(lambda: _eq(ended(log, "before"), "completed"))

        async with server_full(url) as full:
            # Every loop of the process meets the refusal: the claim loop and the heartbeat poll, the listener
            # reconnects, the projector supervisor re-takes its locks, and the NOTIFY sender flushes a hint.
            async def refused_everywhere() -> bool:
                db.notify_soon(CHANNEL, "hint while the server is full")  # keeps the NOTIFY sender trying
                return await _refused_everywhere(caplog)

            await wait_for(refused_everywhere, timeout=30)
            assert full.evicted > 0

        # The refusal is over: the same process serves again, without a restart.
        await new_stream(log, "after", steps=2)
        await wait_for(lambda: _eq(ended(log, "after"), "completed"), timeout=30)
        await wait_for(lambda: _listed(db, "after", "completed"), timeout=30)
        await wait_for(lambda: _true(db.listener_connected), timeout=30)
        # Hints flow between processes again: a NOTIFY from another connection reaches this process's listener.
        sub = db.subscribe()
        try:
            async with open_database(url) as other:
                await other.execute("SELECT pg_notify($1, 'after the refusal')", CHANNEL)
            with trio.fail_after(10):
                while (CHANNEL, "after the refusal") not in (await sub.wait())[0]:
                    pass
        finally:
            db.unsubscribe(sub)
        nursery.cancel_scope.cancel()


async def _refused_everywhere(caplog) -> bool:
    text = "\n".join(r.getMessage() for r in caplog.records)
    refused = CONNECTION_LIMIT_MESSAGE
    loops = ["NOTIFY sender", "LISTEN connection", "projector lock connection", ": claiming"]
    return all(any(loop in line and refused in line for line in text.splitlines()) for loop in loops)


async def _eq(aw, value) -> bool:
    return await aw == value


async def _true(value) -> bool:
    return bool(value)


async def _listed(db, sid: str, status: str) -> bool:
    return await db.fetchval("SELECT status FROM session_list WHERE session_id = $1", sid) == status
