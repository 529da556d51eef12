"""A hot standby for catch-up reads (``DATABASE_REPLICA_URL``), never behind what its reader must see.

A streaming standby replays the primary's WAL a little later than the primary commits it. A catch-up read (an SSE
or WebSocket backlog, a classroom, a fold of a stream to the head its row gave) may be served by it only if it
already holds what the reader must see. The reader says what that is, as a predicate over the answer
(``complete``: for the event log, "the page reaches the stream's head as the primary's row gave it, or the seq the
client resumes from"), and :meth:`Replica.read` keeps to it:

1. read on the replica; an answer that is complete is served (the usual case: replay trails by milliseconds);
2. one that is not means the replica is behind: ask the primary where its WAL is flushed now
   (``pg_current_wal_flush_lsn()``, past every durable commit the reader can have seen) and wait, at most
   ``database.replica_wait_ms``, for the replica to replay that far (``pg_last_wal_replay_lsn()``), then read it
   again; complete, it is served. Still short (what the reader saw was committed asynchronously, and not flushed
   when the primary was asked), it asks the primary again and waits on, within the same bound;
3. otherwise, and whenever the replica cannot be reached or refuses the read (a query cancelled for a conflict
   with recovery), the primary answers.

So what a reader gets from the replica is always exactly what the primary would have given it for the same
range: a standby's tables are a prefix of the primary's history, and the predicate asks for everything up to the
seq the reader must see. The LSN only says when reading again is worth it; the predicate is the guarantee (it
also holds for a "replica" that is not a standby of this primary at all, which then simply never answers).

A replica that cannot be reached is left alone for :data:`DOWN_RETRY_S` (every read goes to the primary at once;
then reads try it again, a connection attempt bounded by :data:`CONNECT_TIMEOUT_S`), and one whose wait ran out is
not waited for again for :data:`LAG_RETRY_S`: a lagging replica costs each read one short replica query, not the
whole wait. Each change of state is logged once, and reads the replica refuses the first time and then as a count
at most every :data:`REFUSED_LOG_S`; ``openmaic_replica_reads{outcome}`` counts where each read went, and
:meth:`Replica.check` is the ``replica`` entry of ``/readyz``, which warns and never fails readiness (the primary
serves every read meanwhile).

Everything else stays on the primary: live tails (the feeds read right behind the newest commit, which a replica
would only delay), the horizon (``openmaic_horizon`` calls ``nextval``), claims, appends and every write.
"""

from __future__ import annotations

import contextlib
import logging
import urllib.parse
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TypeVar

import trio

from openmaic import errors, metrics
from openmaic.store.database import Database, open_database
from openmaic.store.gateway import Gateway
from openmaic.store.queries import Q

__all__ = ["APPLICATION_NAME", "DOWN_RETRY_S", "LAG_RETRY_S", "Replica", "open_replica"]

log = logging.getLogger("openmaic.store.replica")

T = TypeVar("T")

URL_SETTING = "DATABASE_REPLICA_URL"
"""Where the replica's URL comes from, as its errors name it."""
APPLICATION_NAME = "openmaic replica reads"
"""The replica pool's connections' ``application_name`` (what ``pg_stat_activity`` on the standby shows)."""
CONNECT_TIMEOUT_S = 2.0
"""A replica that does not accept a connection this fast is unreachable, for now: the primary answers instead."""
DOWN_RETRY_S = 5.0
"""After the replica could not be reached, every read goes to the primary this long before it is tried again."""
LAG_RETRY_S = 1.0
"""After a wait for the replica ran out, reads it cannot answer go to the primary at once this long."""
REFUSED_LOG_S = 60.0
"""Reads the replica refuses are logged the first time, then as a count at most this often (a standby busy with
recovery conflicts may refuse many reads a second; ``openmaic_replica_reads{outcome="failed"}`` counts each)."""
POLL_S = (0.002, 0.025)
"""The first and the longest pause between two looks at the replica's replay position while waiting."""


class Replica:
    """The replica's pool and where it stands. Open it with :func:`open_replica`."""

    def __init__(self, db: Database, name: str, wait_s: float, *, refused_log_s: float = REFUSED_LOG_S) -> None:
        self.db = db
        self.name = name
        """Host, port and database, for logs (never the credentials)."""
        self.wait_s = wait_s
        self.refused_log_s = refused_log_s
        self._refused = 0
        """Reads refused since the last line that said so."""
        self._refused_logged = float("-inf")
        self.state = "ok"
        """``ok``, ``lagging`` (the last wait ran out) or ``unreachable`` (the last attempt failed)."""
        self.problem = ""
        """Why it is not ``ok``."""
        self._down_until = float("-inf")
        self._lagging_until = float("-inf")
        self._lag_target = "0/0"
        """The WAL position the last wait that ran out was for."""

    async def read(self, primary: Gateway, read: Callable[[Gateway], Awaitable[T]],
                   complete: Callable[[T], bool] | None) -> T:
        """``read(replica)`` if its answer is ``complete`` (waiting for the replica, within the bound, when it is
        not yet), else ``read(primary)``; see the module's doc. ``complete`` None: any answer will do (the reader
        needs nothing it does not have), so the replica answers whenever it can be reached."""
        if trio.current_time() < self._down_until:
            return await self._on_primary(primary, read, "unreachable")
        try:
            answer = await read(self.db)
            if complete is None:
                return self._served(answer, "replica", checked=False)
            if complete(answer):
                return self._served(answer, "replica")
        except errors.OpenMaicError as exc:
            return await self._failed(exc, primary, read)
        if trio.current_time() < self._lagging_until:  # a wait ran out a moment ago: do not wait on every read
            return await self._on_primary(primary, read, "lagging")
        try:
            answer, target = await self._wait_complete(primary, read, complete)
        except errors.OpenMaicError as exc:
            return await self._failed(exc, primary, read)
        if target is None:
            return self._served(answer, "waited")
        self._lagging_until = trio.current_time() + LAG_RETRY_S
        self._lag_target = target
        self._change("lagging", f"it had not replayed the primary's WAL up to {target} within "
                                f"{self.wait_s * 1000:.0f} ms")
        return await self._on_primary(primary, read, "lagging")

    async def _wait_complete(self, primary: Gateway, read: Callable[[Gateway], Awaitable[T]],
                             complete: Callable[[T], bool]) -> tuple[T, None] | tuple[None, str]:
        """``(answer, None)``: the replica's complete answer, once it has replayed far enough, within the wait;
        ``(None, lsn)``: the wait ran out with the replica short of the primary's WAL position ``lsn``. Never cancels
        a statement (a connection cancelled mid-statement is closed): the deadline is checked between looks."""
        deadline = trio.current_time() + self.wait_s
        pause, longest = POLL_S
        # Where the primary's WAL is flushed now: past the commit of everything durable this reader can have seen.
        target = await primary.fetchval(Q.replica_primary_lsn)
        while True:
            if await self.db.fetchval(Q.replica_replayed, target):
                answer = await read(self.db)
                if complete(answer):
                    return answer, None
                # Replayed that far and still short: what the reader saw was committed asynchronously and was not
                # flushed yet (a walsender sends only flushed WAL). Where the flush is now says when to look again.
                target = await primary.fetchval(Q.replica_primary_lsn)
            left = deadline - trio.current_time()
            if left <= 0:
                return None, target
            await trio.sleep(min(pause, left))
            pause = min(pause * 2, longest)

    def _served(self, answer: T, outcome: str, *, checked: bool = True) -> T:
        metrics.REPLICA_READS.labels(outcome).inc()
        # An answer that was checked against a floor says the replica keeps up; any answer says it is reachable.
        if checked or self.state == "unreachable":
            self._change("ok", "")
        return answer

    async def _failed(self, exc: errors.OpenMaicError, primary: Gateway,
                      read: Callable[[Gateway], Awaitable[T]]) -> T:
        if isinstance(exc, errors.DatabaseUnavailable):
            self._down_until = trio.current_time() + DOWN_RETRY_S
            self._change("unreachable", exc.message)
            return await self._on_primary(primary, read, "unreachable")
        # A server that answers refused this one read (a query cancelled for a conflict with recovery, a statement
        # timeout): the primary answers it; the replica stays in use.
        self._note_refused(exc)
        return await self._on_primary(primary, read, "failed")

    def _note_refused(self, exc: errors.OpenMaicError) -> None:
        """Log a refused read: the first at once, then how many at most every :attr:`refused_log_s` seconds (the
        metric counts each), so that a standby refusing every read does not flood the log."""
        self._refused += 1
        now = trio.current_time()
        if now - self._refused_logged < self.refused_log_s:
            return
        if self._refused == 1:
            log.warning("a catch-up read on the replica %s failed (%s); the primary answers it", self.name, exc)
        else:
            log.warning("%d catch-up reads on the replica %s failed in the last %.0f s (the last: %s); the primary "
                        "answered them", self._refused, self.name, now - self._refused_logged, exc)
        self._refused, self._refused_logged = 0, now

    async def _on_primary(self, primary: Gateway, read: Callable[[Gateway], Awaitable[T]], outcome: str) -> T:
        answer = await read(primary)
        metrics.REPLICA_READS.labels(outcome).inc()
        return answer

    def _change(self, state: str, problem: str) -> None:
        if state == self.state:
            return
        self.state, self.problem = state, problem
        if state == "ok":
            log.info("the replica %s serves catch-up reads again", self.name)
        else:
            log.warning("the replica %s is %s (%s): catch-up reads go to the primary", self.name, state, problem)

    async def check(self, primary: Gateway) -> str:
        """``/readyz``'s ``replica`` entry: ``ok``, or ``lagging: why`` (a warning: the primary serves meanwhile).
        Sets ``openmaic_replica_lag_bytes``."""
        try:
            target = await primary.fetchval(Q.replica_primary_lsn)
            row = await self.db.fetchrow(Q.replica_status, target)
            # Past the position a wait ran out for: it keeps up again (reads would find out at their next wait).
            if self.state == "lagging" and await self.db.fetchval(Q.replica_replayed, self._lag_target):
                self._lagging_until = float("-inf")
                self._change("ok", "")
        except errors.DatabaseUnavailable as exc:
            return f"lagging: the replica {self.name} is unreachable ({exc.message}); catch-up reads go to the primary"
        assert row is not None
        if self.state == "unreachable":  # it answered this probe: reads may try it again at once
            self._down_until = float("-inf")
            self._change("ok", "")
        metrics.REPLICA_LAG_BYTES.set(max(int(row["behind"]), 0))
        if not row["standby"]:
            return (f"lagging: {self.name} is not a standby (pg_is_in_recovery() is false): name a streaming "
                    "standby of the primary in DATABASE_REPLICA_URL")
        if row["pause"] not in (None, "not paused"):
            return (f"lagging: WAL replay on the replica {self.name} is {row['pause']} ({row['behind']} bytes "
                    "behind the primary); catch-up reads go to the primary")
        if self.state != "ok":
            return (f"lagging: the replica {self.name} is {row['behind']} bytes behind the primary ({self.problem}); "
                    "catch-up reads it cannot answer go to the primary")
        return "ok"


def _name(url: str) -> str:
    """Where the URL points, without credentials or options."""
    parts = urllib.parse.urlsplit(url)
    return f"{parts.netloc.rsplit('@', 1)[-1]}{parts.path}" if parts.netloc else "(a local socket)"


@contextlib.asynccontextmanager
async def open_replica(url: str | None, *, wait_s: float, pool_size: int) -> AsyncIterator[Replica | None]:
    """The replica at ``url`` for the block's lifetime, or None when there is none. Opening connects to nothing
    (the pool connects as reads come), so a replica that is down when the server starts delays nothing."""
    if not url:
        yield None
        return
    async with open_database(url, min_size=0, max_size=pool_size, connect_timeout=CONNECT_TIMEOUT_S,
                             server_settings={"application_name": APPLICATION_NAME}, setting=URL_SETTING) as db:
        replica = Replica(db, _name(url), wait_s)
        log.info("catch-up reads: the replica %s (waited for up to %.0f ms, else the primary)", replica.name,
                 wait_s * 1000)
        yield replica
