"""Per-owner limits on runs: at most N executing, at most M waiting to start.

The runtime's claim query knows nothing of owners, so the limit on *executing* runs is enforced by the kind:
the first decision of every claimed attempt is the ``admission`` step. It counts the owner's executing runs —
generation streams that are ``running`` under a live lease and whose current attempt holds a ``run.admitted``
event — and either appends ``run.admitted`` for its own attempt or records ``run.admission_deferred`` and gives
the stream back until about a second later (``Wait(wake_at=…)``), holding no worker meanwhile.

Race-freedom: two runs of one owner admitted at once on two workers could both count one executing run and both
go. So the count and the ``run.admitted`` append run in ONE transaction that first takes a transaction-scoped
advisory lock on the owner (``pg_try_advisory_xact_lock(namespace, hashtext(owner))``): admissions of one owner
are serialized, and each one's count (a fresh snapshot per statement under READ COMMITTED, taken after the lock
was granted) sees every admission committed before it. The lock is released by the commit itself, so a
crashed worker cannot leave it behind. It is polled with the ``try`` variant rather than waited for, because a
statement on a held connection cannot be cancelled midway (see ``Database.connection``); the wait is a few
milliseconds at most since the lock is only ever held for two statements. The ``run.admitted`` append is
fenced by the attempt like every worker write, so a worker that lost its lease admits nothing.

The same lock serializes ``create_run``'s count of the owner's waiting runs (never admitted, not terminal)
with the creation, so two concurrent creates cannot both take the last waiting place.
"""

from __future__ import annotations

import datetime as dt
import random
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import trio

from openmaic.events.log import EventLog, StreamAppend
from openmaic.runs.events import RunAdmitted
from openmaic.store.database import Connection, Database
from openmaic.store.queries import Q

LOCK_NAMESPACE = 0x6F6D7275
"""First key of the owner lock (two int4 keys: a separate space from the bigint keys of other locks)."""


@asynccontextmanager
async def owner_transaction(db: Database, owner: str) -> AsyncIterator[Connection]:
    """A transaction on a held connection that holds ``owner``'s run lock; committed when the block ends."""
    while True:
        async with db.connection() as conn, conn.transaction():
            if await conn.fetchval(Q.run_owner_try_lock, LOCK_NAMESPACE, owner):
                yield conn
                return
        # Jittered so that several waiters do not retry in lockstep.
        await trio.sleep(random.uniform(0.002, 0.02))


class Admission:
    """The outcome of one admission check: ``admitted``, else retry at ``now`` (database clock) + the poll."""

    def __init__(self, admitted: bool, active: int, now: dt.datetime) -> None:
        self.admitted = admitted
        self.active = active
        self.now = now


async def admit(log: EventLog, owner: str, stream_id: str, attempt: int, limit: int) -> Admission:
    """Append ``run.admitted`` for this attempt if ``owner`` has fewer than ``limit`` executing runs."""
    async with owner_transaction(log.db, owner) as conn:
        row = await conn.fetchrow(Q.runs_executing, owner, stream_id)
        assert row is not None
        active, now = int(row["active"]), row["now"]
        if active >= limit:
            return Admission(False, active, now)
        batch = StreamAppend(stream_id=stream_id, events=[RunAdmitted(attempt=attempt, active=active)],
                             attempt=attempt, progress=True)
        await conn.fetch(Q.append, *log.append_args([batch]))
    # Written outside the event log's append path, so its watchers are told here.
    log.hint([stream_id])
    return Admission(True, active, now)


async def waiting_runs(conn: Connection, owner: str) -> int:
    """How many of ``owner``'s runs wait to start (call it inside :func:`owner_transaction`)."""
    return int(await conn.fetchval(Q.runs_waiting, owner))
