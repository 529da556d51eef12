"""Per-owner transaction locks: serialize one owner's check-then-write decisions across every process.

A limit such as "at most N executing runs" or "at most M materials" is a count followed by a write; two
requests of one owner at once would both count N - 1 and both write. :func:`owner_lock` runs the count and the
write in ONE transaction that first takes a transaction-scoped advisory lock on ``(namespace, owner)``: the
lock is granted to one transaction at a time, and each statement after it reads a fresh snapshot (READ
COMMITTED), so it sees every write committed before it. The commit releases the lock, so a crashed process
cannot leave it behind.

The lock is the owner's the id stands for now (``openmaic_owner``, see migration 0020), since the counts made
under it read through it too: work that folded an anonymous owner before a claim queues with the account's own.

The lock is polled with ``pg_try_advisory_xact_lock`` rather than waited for: a statement on a held connection
cannot be cancelled midway (see ``Database.connection``), and the wait is a few milliseconds at most since each
holder runs only a few statements.
"""

from __future__ import annotations

import random
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import trio

from openmaic.store.database import Connection, Database
from openmaic.store.queries import Q

__all__ = ["owner_lock"]


@asynccontextmanager
async def owner_lock(db: Database, owner: str, namespace: int) -> AsyncIterator[Connection]:
    """A transaction on a held connection that holds ``owner``'s lock in ``namespace`` (an int4: each kind of
    decision has its own); committed when the block ends, rolled back when it raises."""
    while True:
        async with db.connection() as conn, conn.transaction():
            if await conn.fetchval(Q.owner_try_lock, namespace, owner):
                yield conn
                return
        # Jittered so that several waiters do not retry in lockstep.
        await trio.sleep(random.uniform(0.002, 0.02))
