"""Per-owner limits on runs: at most N executing, at most M waiting to start.

The runtime's claim query knows nothing of owners, so the limit on *executing* runs is enforced by the kind:
the first decision of every claimed attempt is the ``admission`` step. It counts the owner's executing runs —
generation streams that are ``running`` under a live lease and whose current attempt holds a ``run.admitted``
event — and either appends ``run.admitted`` for its own attempt or records ``run.admission_deferred`` and gives
the stream back until about a second later (``Wait(wake_at=…)``), holding no worker meanwhile.

Race-freedom: two runs of one owner admitted at once on two workers could both count one executing run and both
go. So the count and the ``run.admitted`` append run in ONE transaction under the owner's run lock
(:func:`openmaic.store.locks.owner_lock`): admissions of one owner are serialized, and each one's count sees
every admission committed before it. The ``run.admitted`` append is fenced by the attempt like every worker
write, so a worker that lost its lease admits nothing. The lock and the count are both the owner's the id stands
for *now* (``openmaic_owner``): a run whose fold still names an anonymous owner claimed into an account since and a
run of that account queue on one lock and count the same runs.

The same lock serializes the start of a run (its count of the owner's active and waiting runs) and the commands
that make a run count again (confirm-outline, retry), so two requests at once cannot both take the last place.
"""

from __future__ import annotations

import datetime as dt
from contextlib import AbstractAsyncContextManager

import msgspec

from openmaic.events.log import EventLog, StreamAppend
from openmaic.runs.events import RunAdmitted
from openmaic.store.database import Connection, Database
from openmaic.store.locks import owner_lock
from openmaic.store.queries import Q

LOCK_NAMESPACE = 0x6F6D7275
"""First key of the owner's run lock (two int4 keys: a separate space from the bigint keys of other locks)."""


def owner_transaction(db: Database, owner: str) -> AbstractAsyncContextManager[Connection]:
    """A transaction on a held connection that holds ``owner``'s run lock; committed when the block ends."""
    return owner_lock(db, owner, LOCK_NAMESPACE)


class Admission:
    """The outcome of one admission check: ``admitted``, else retry at ``now`` (database clock) + the poll."""

    def __init__(self, admitted: bool, active: int, now: dt.datetime) -> None:
        self.admitted = admitted
        self.active = active
        self.now = now


class _Executing(msgspec.Struct, frozen=True):
    active: int
    now: dt.datetime


class _Counted(msgspec.Struct, frozen=True):
    active: int
    waiting: int


async def admit(log: EventLog, owner: str, stream_id: str, attempt: int, limit: int) -> Admission:
    """Append ``run.admitted`` for this attempt if ``owner`` has fewer than ``limit`` executing runs."""
    async with log.appending(owner_transaction(log.db, owner)) as tx:
        row = await tx.conn.fetchrow_as(_Executing, Q.runs_executing, owner, stream_id)
        assert row is not None  # an aggregate always answers one row
        active, now = int(row.active), row.now
        if active >= limit:
            return Admission(False, active, now)
        batch = StreamAppend(stream_id=stream_id, events=[RunAdmitted(attempt=attempt, active=active)],
                             attempt=attempt, progress=True)
        await tx.append(batch)
    return Admission(True, active, now)


class RunCounts:
    """An owner's runs that count against its limits."""

    def __init__(self, active: int, waiting: int) -> None:
        self.active = active
        """Preparing, outlining or generating (not paused, not awaiting confirmation, not ended)."""
        self.waiting = waiting
        """Awaiting their outline's confirmation, or paused."""


async def run_counts(conn: Connection, owner: str, exclude: str = "") -> RunCounts:
    """``owner``'s active and waiting runs other than ``exclude`` (call it inside :func:`owner_transaction`)."""
    row = await conn.fetchrow_as(_Counted, Q.runs_of_owner_by_status, owner, exclude)
    assert row is not None  # an aggregate always answers one row
    return RunCounts(row.active, row.waiting)
