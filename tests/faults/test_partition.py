"""The network between a worker and PostgreSQL goes silent (no FIN, no RST), for a moment or for good.

A TCP proxy (:mod:`tests.faults.proxy`) sits between the worker and the server and stops forwarding on demand.
"""

from __future__ import annotations

import urllib.parse

import pytest
import trio
import trio.testing

from openmaic.events.log import EventLog
from openmaic.events.wakeups import RUNNABLE
from tests.faults.proxy import DOWN, open_proxy
from tests.runtime import new_stream, open_worker, settings, wait_for


@pytest.fixture
def log(db):
    return EventLog(db)


def through(proxy, db_url: str) -> str:
    """``db_url`` with the proxy's address instead of the server's."""
    parts = urllib.parse.urlsplit(db_url)
    return urllib.parse.urlunsplit(parts._replace(netloc=f"{parts.username}@127.0.0.1:{proxy.port}"))


def server_port(db_url: str) -> int:
    return urllib.parse.urlsplit(db_url).port


async def test_a_claim_in_flight_at_shutdown_is_released_uncharged(db, db_url, log):
    """The claim committed, but its reply is still on the wire when the shutdown begins: the streams it took are
    released with the others, uncharged, instead of being left leased by nobody until their lease expires."""
    async with open_proxy(server_port(db_url)) as proxy:
        # No claim poll within the test: the worker claims when it is told to.
        async with open_worker(through(proxy, db_url), settings(lease_ttl_s=3.0, claim_poll_s=60)) as worker:
            await trio.testing.wait_all_tasks_blocked(0.05)  # the first claim is done; the loop waits for a hint
            proxy.hold(DOWN)  # the server's replies stop here; requests still get through
            await new_stream(log, "s1", steps=1, sleep=30)
            worker.wakeups.poke([RUNNABLE])
            await wait_for(lambda: _leased_to(db, "s1", worker.id), timeout=10)  # the claim has committed
            worker.shutdown()
            await trio.testing.wait_all_tasks_blocked(0.05)
            proxy.heal()
            with trio.fail_after(10):
                while worker.actors or not await _status_is(db, "s1", "queued"):
                    await trio.sleep(0.02)
    row = await db.fetchrow("SELECT status, lease_worker, unattended_attempts FROM streams WHERE id = 's1'")
    assert (row["status"], row["lease_worker"], row["unattended_attempts"]) == ("queued", None, 0)
    types = [e.type for e in await log.read_stream("s1")]
    assert types[-3:] == ["lease.claimed", "session.interrupted", "lease.released"]


async def _leased_to(db, sid: str, worker_id: str) -> bool:
    return await db.fetchval("SELECT lease_worker = $2 FROM streams WHERE id = $1", sid, worker_id) is True


async def _status_is(db, sid: str, status: str) -> bool:
    return await db.fetchval("SELECT status FROM streams WHERE id = $1", sid) == status
