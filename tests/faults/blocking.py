"""Make a commit block, then end the backend it blocks in, as a lost connection would.

A second connection takes a lock (a stream's row, an owner's asset lock) in an open transaction; a process under
test that needs the same lock waits in its statement. :meth:`Blocker.terminate_blocked` finds that backend
(``pg_blocking_pids``) and ends it with ``pg_terminate_backend`` (or only cancels its statement with
``pg_cancel_backend``), which the process sees as a lost connection (a cancelled statement) in the middle of its
commit; the transaction it was in never committed.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import trio

from openmaic.store.database import Connection, Database, open_database


class Blocker:
    def __init__(self, db: Database, conn: Connection) -> None:
        self.db = db
        self.conn = conn
        self.pid = conn.backend_pid
        self.ended: list[int] = []

    async def blocked(self, like: str = "%") -> list[int]:
        """Backends waiting on a lock, whose statement is LIKE ``like``: behind ours, directly or behind another
        waiter (an append queues behind a heartbeat that waits on the same row). Heartbeats are spared."""
        rows = await self.db.fetch(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' "
            "AND pid <> $1 "
            "AND cardinality(pg_blocking_pids(pid)) > 0 AND query LIKE $2 "
            "AND query NOT LIKE '%SET lease_expires_at = now()%' ORDER BY pid",
            self.pid, like)
        return [r[0] for r in rows]

    async def terminate_blocked(self, like: str = "%", *, timeout: float = 20.0, cancel: bool = False) -> int:
        """Wait until some backend blocks on our lock with a statement LIKE ``like``, then end it (or, with
        ``cancel``, cancel its statement); returns its pid."""
        with trio.fail_after(timeout):
            while True:
                pids = await self.blocked(like)
                if pids:
                    break
                await trio.sleep(0.01)
        fn = "pg_cancel_backend" if cancel else "pg_terminate_backend"
        for pid in pids:
            await self.db.fetchval(f"SELECT {fn}($1)", pid)
        self.ended += pids
        return pids[0]


@contextlib.asynccontextmanager
async def held(url: str, *statements: str) -> AsyncIterator[Blocker]:
    """Run ``statements`` in a transaction on a connection of its own and keep it open for the block (its locks
    held); rolled back at the end, which releases them."""
    # A long idle-in-transaction timeout: the test decides when the lock goes.
    settings = {"idle_in_transaction_session_timeout": "60000"}
    async with open_database(url, min_size=1, max_size=3, server_settings=settings) as db, db.connection() as conn:
        await conn.execute("BEGIN")
        try:
            for sql in statements:
                await conn.execute(sql)
            yield Blocker(db, conn)
        finally:
            with trio.CancelScope(shield=True):
                await conn.execute("ROLLBACK")
