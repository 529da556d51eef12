"""The projector: tails the global log and applies it to each projection, exactly once.

Each batch is one transaction that writes the projection's rows *and* moves its checkpoint, fenced: the
checkpoint only moves from the value this projector read (``openmaic_projection_advance``), so a batch is
applied once or not at all, whatever crashes, and a second writer — a projector that lost its lock without
noticing, or a rebuild's swap — makes the batch roll back instead of applying it twice. The fence includes the
checkpoint's *generation*, new for every checkpoint row: a batch reads the log and its tables before its
transaction, and a rebuild may swap its copy in between; the rebuilt checkpoint can equal the cursor the batch
started from, but never its generation, so rows derived from the old tables never reach the new ones.

Several projector processes may run. Each projection is processed by one of them at a time: the one holding the
projection's *own* advisory lock (session level, on one dedicated connection per process, taken with
``pg_try_advisory_lock`` and retried every second, so the connection never blocks). When the holder dies, its
connection and lock go with it and another process takes over from the checkpoint.

A rebuild pauses the live projector by holding the projection's *apply* lock: every batch transaction takes it
shared (``pg_try_advisory_xact_lock_shared``) and fails fast while a rebuild holds it exclusively.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import trio

from openmaic import errors, metrics
from openmaic.concurrency import collapse_groups
from openmaic.events.log import Cursor, EventLog, RecordedEvent
from openmaic.events.wakeups import Wakeups
from openmaic.projections.base import (
    CheckpointMoved,
    CheckpointRow,
    Context,
    Projection,
    ProjectionPaused,
    StreamSeq,
    Tables,
    lock_key,
)
from openmaic.projections.ordering import Plan, StreamOrder
from openmaic.projections.shared_reads import SharedReads
from openmaic.store.backoff import FIRST_S
from openmaic.store.database import Backoff, Database, Op
from openmaic.store.queries import Q
from openmaic.text import clean_value

log = logging.getLogger(__name__)

#: Batch size of the live projector: small enough to keep transactions short, large enough to amortise them.
LIVE_BATCH = 500


def storable(ops: list[Op]) -> list[Op]:
    """A projection's statements with every text argument cleaned of what PostgreSQL cannot store (NUL).

    The API and the log refuse such text now, but a log written before they did may hold it (its ``json`` keeps
    ``\\u0000``), and one such event copied into a ``text`` column would fail its batch on every retry and stop
    the read model for every owner. Cleaning here is the read model's own defence: the log is never edited."""
    return [(sql, tuple(clean_value(a) if isinstance(a, str | list) else a for a in args)) for sql, args in ops]


def _own_error(exc: errors.OpenMaicError) -> errors.OpenMaicError:
    """The projection's own SQLSTATEs (raised by openmaic_projection_advance) as their exceptions."""
    state = exc.details.get("sqlstate") if isinstance(exc, errors.DatabaseError) else None
    if state == "OM020":
        return ProjectionPaused(str(exc))
    if state == "OM021":
        return CheckpointMoved(str(exc))
    return exc


#: SQLSTATE classes of failures that are not the batch's fault and pass by themselves (connection, transaction
#: rollback such as serialization failures and deadlocks, insufficient resources, lock not available, operator
#: intervention such as a statement timeout or a shutdown, system errors): retried, never bisected.
_TRANSIENT_CLASSES = ("08", "40", "53", "55", "57", "58")


def _transient(exc: BaseException) -> bool:
    if isinstance(exc, errors.DatabaseUnavailable):
        return True
    if isinstance(exc, errors.DatabaseError):
        state = exc.details.get("sqlstate") or ""
        return state.startswith(_TRANSIENT_CLASSES) or state in ("OM020", "OM021")
    return False


class _Refused(Exception):
    """A batch of ``size`` log events the projection could not apply (``cause``); internal to :meth:`Applier.step`."""

    def __init__(self, size: int, cause: BaseException) -> None:
        super().__init__(size, cause)
        self.size = size
        self.cause = cause


def _reason(exc: BaseException) -> str:
    """The failure's text, bounded (a refused statement's message can quote a whole row)."""
    text = str(exc) or type(exc).__name__
    return text if len(text) <= 1000 else text[:1000] + "…"


def _dead_letter(projection: str, e: RecordedEvent, exc: BaseException) -> Op:
    state = exc.details.get("sqlstate") if isinstance(exc, errors.DatabaseError) else None
    return (Q.projection_dead_letter, (
        projection, e.stream_id, e.seq, e.epoch, str(e.tx), e.position, e.type,
        clean_value(f"{type(exc).__name__}: {_reason(exc)}"), state,
    ))


class Applier:
    """Applies the global log to one set of physical tables under one checkpoint name.

    The live projector uses the projection's live tables and name; a rebuild uses fresh tables and a
    checkpoint of its own. Not safe for concurrent use: one task drives it.
    """

    def __init__(
        self,
        db: Database,
        log_: EventLog,
        projection: Projection,
        *,
        checkpoint: str,
        tables: Tables,
        pause_key: int | None,
        batch_size: int = LIVE_BATCH,
        defer_s: float | None = None,
        read_all: Callable[[Cursor, int], Awaitable[list[RecordedEvent]]] | None = None,
    ) -> None:
        self.db = db
        self.log = log_
        self._read_all = read_all or log_.read_all
        """The log's ``read_all``, or the live projectors' shared one (see :mod:`.shared_reads`)."""
        self.projection = projection
        self.checkpoint = checkpoint
        self.ctx = Context(db, tables, log_.types)
        self.pause_key = pause_key
        self.batch_size = batch_size
        self.order = StreamOrder()
        self.cursor: Cursor | None = None
        self.generation = 0
        """The generation of the checkpoint row the cursor was read from (see the module doc)."""
        self.defer_s = defer_s
        """With a value, a batch none of whose events the projection wants moves only the in-memory cursor, and
        its checkpoint write is put off for up to this many seconds (see :meth:`_deferrable`); None: every batch
        writes its checkpoint."""
        self.written: Cursor | None = None
        """The checkpoint as the database holds it: the fence of the next write (the cursor may be ahead)."""
        self.unwritten = 0
        """Events between ``written`` and the cursor (none of them wanted), to be counted by the next write."""
        self._unwritten_since = 0.0
        self.events_applied = 0
        self.batches = 0

    async def load(self) -> None:
        """(Re)read the checkpoint and the early set; forget everything in memory."""
        await self.db.execute(Q.projection_checkpoint_init, self.checkpoint)
        row = await self.db.fetchrow_as(CheckpointRow, Q.projection_checkpoint, self.checkpoint)
        assert row is not None
        early = await self.db.fetch_as(StreamSeq, Q.projection_early, self.checkpoint)
        self.order.reset({(r.stream_id, r.seq) for r in early})
        self.cursor = (row.epoch, int(row.tx), row.position)
        self.ctx.forget()
        self.written = self.cursor
        self.unwritten = 0
        self.generation = row.generation

    def _advance(self, to: Cursor, events: int) -> Op:
        """The checkpoint fence of a write that moves the checkpoint to ``to`` over ``events`` more events, from
        where the database holds it (with the batches whose write was put off)."""
        frm = self.written
        assert frm is not None
        return (Q.projection_advance, (
            self.checkpoint, self.generation, frm[0], str(frm[1]), frm[2], to[0], str(to[1]), to[2],
            events + self.unwritten, self.pause_key,
        ))

    def _deferrable(self, plan: Plan) -> bool:
        """May this batch, none of whose events the projection wants, leave its checkpoint write to a later one?

        Writing it would be a transaction (and a WAL flush) that changes nothing but the checkpoint; most batches
        of a projection are such when it wants few of the log's types. Putting it off is safe: the batch wrote
        nothing, so a restart that re-reads it from the older checkpoint writes nothing either, and the next
        write carries the move through the same fence. Not when the batch changes the early set, which must move
        with the checkpoint; and for at most ``defer_s`` seconds, so that the checkpoint (the projection's lag
        in ``projection_status``) is never that much behind a projection that keeps up."""
        if self.defer_s is None or plan.early_added or plan.early_reached:
            return False
        return not self.unwritten or trio.current_time() - self._unwritten_since < self.defer_s

    async def _write_deferred(self) -> None:
        """Write the checkpoint move put off by the last batches (the log had nothing new to read)."""
        assert self.cursor is not None
        await self.db.transaction([self._advance(self.cursor, 0)])
        self.written, self.unwritten = self.cursor, 0

    async def step(self) -> int:
        """Apply the next batch. Returns the number of log events it covered (0: caught up).

        A batch the projection cannot apply — its ``apply`` raises, or PostgreSQL refuses its statements for a
        reason other than a transient one — is bisected: its first half is tried, and so on down to one event.
        An event that fails alone is a dead letter: it is recorded in ``projection_dead_letters`` in the same
        fenced transaction that moves the checkpoint past it (so it is recorded once, like any batch), counted
        (``openmaic_projection_dead_letters_total``) and logged, and the projection goes on. One bad event can
        no longer stop a read model for every owner; what it would have written is missing until a rebuild. The
        predecessors delivered with it out of log order (pulled forward, see :mod:`.ordering`) are not its fault:
        they are applied (or, failing alone too, are dead letters of their own).

        On any other failure the in-memory state is dropped and reloaded on the next call, and the exception
        (translated: :class:`ProjectionPaused`, :class:`CheckpointMoved`, …) propagates.
        """
        limit = self.batch_size
        while True:
            try:
                return await self._batch(limit)
            except _Refused as refused:
                if refused.size > 1:
                    limit = refused.size // 2
                    log.debug("projection %s: a batch of %d events failed (%s); trying %d",
                              self.projection.name, refused.size, refused.cause, limit)
                    continue
                cause = refused.cause
                break
        # One log event fails. Delivered with it are the predecessors pulled forward out of log order (see
        # projections.ordering): they are applied, and it alone is the dead letter. When they cannot be applied
        # together, the first goes alone (applied, or a dead letter of its own) until the rest can.
        while True:
            try:
                return await self._batch(1, dead=cause)
            except _Refused:
                await self._first_predecessor()

    async def _batch(self, limit: int, dead: BaseException | None = None) -> int:
        """Read and apply up to ``limit`` events; with ``dead``, record the (one) event instead of applying it."""
        if self.cursor is None:
            await self.load()
        assert self.cursor is not None
        try:
            page = await self._read_all(self.cursor, limit)
            if not page:
                if self.unwritten and trio.current_time() - self._unwritten_since >= (self.defer_s or 0.0):
                    await self._write_deferred()
                return 0
            plan = await self.order.arrange(self.log.events, page)
            wants = self.projection.wants
            relevant = [e for e in plan.events if wants(e.type)]
            last = page[-1]
            deferred = False
            ops: list[Op] = [self._advance(last.cursor, len(plan.events))]
            if plan.early_added:
                ops.append((Q.projection_early_add, (
                    self.checkpoint, [k[0] for k in plan.early_added], [k[1] for k in plan.early_added],
                )))
            if plan.early_reached:
                ops.append((Q.projection_early_remove, (
                    self.checkpoint, [k[0] for k in plan.early_reached], [k[1] for k in plan.early_reached],
                )))
            if dead is not None:
                # The page is the one event that failed; the plan's others are its pulled-forward predecessors.
                bad = [e for e in relevant if e is last]
                before = [e for e in relevant if e is not last]
                try:
                    if before:
                        ops += storable(await self.projection.apply(self.ctx, before))
                    await self.db.transaction(ops + [_dead_letter(self.projection.name, e, dead) for e in bad])
                except Exception as exc:
                    if not before or _transient(exc):
                        raise
                    raise _Refused(len(before), exc) from exc
                relevant = bad
            elif relevant:
                try:
                    ops += storable(await self.projection.apply(self.ctx, relevant))
                    await self.db.transaction(ops)
                except Exception as exc:
                    if _transient(exc):
                        raise
                    raise _Refused(len(page), exc) from exc
            elif self._deferrable(plan):
                deferred = True
            else:
                await self.db.transaction(ops)
        except errors.OpenMaicError as exc:
            self.cursor = None
            own = _own_error(exc)
            if own is exc:
                raise
            raise own from exc
        except BaseException:
            # Cancelled or failed mid-batch: the transaction rolled back (or never started); start over from the
            # checkpoint in the database.
            self.cursor = None
            raise
        self.cursor = page[-1].cursor
        self.ctx.committed()
        if deferred:
            if not self.unwritten:
                self._unwritten_since = trio.current_time()
            self.unwritten += len(plan.events)
        else:
            self.written, self.unwritten = self.cursor, 0
        self.order.commit(plan)
        self.events_applied += len(plan.events)
        self.batches += 1
        if dead is not None and relevant:
            self._dead_lettered(relevant, dead)
        return len(page)

    def _dead_lettered(self, events: Sequence[RecordedEvent], cause: BaseException) -> None:
        metrics.PROJECTION_DEAD_LETTERS.labels(projection=self.projection.name).inc(len(events))
        for e in events:
            log.error("projection %s: %s %s#%d cannot be applied (%s: %s); recorded in projection_dead_letters "
                      "and skipped", self.projection.name, e.type, e.stream_id, e.seq, type(cause).__name__,
                      _reason(cause))

    async def _first_predecessor(self) -> None:
        """Deliver only the first event of the next one-event page's plan: a predecessor pulled forward out of log
        order, applied, or a dead letter if it fails alone. The checkpoint stays (its fence is taken all the same);
        the event is recorded early, as any pulled-forward event, so the tail skips it."""
        if self.cursor is None:
            await self.load()
        assert self.cursor is not None
        cursor = self.cursor
        try:
            page = await self._read_all(cursor, 1)
            plan = await self.order.arrange(self.log.events, page)
            first = plan.events[0]
            key = (first.stream_id, first.seq)
            assert key in plan.early_added, key
            one = Plan(events=[first], early_added=[key], last={first.stream_id: first.seq})
            ops: list[Op] = [
                self._advance(cursor, 1),
                (Q.projection_early_add, (self.checkpoint, [first.stream_id], [first.seq])),
            ]
            failed: BaseException | None = None
            if self.projection.wants(first.type):
                try:
                    await self.db.transaction(ops + storable(await self.projection.apply(self.ctx, [first])))
                except Exception as exc:
                    if _transient(exc):
                        raise
                    failed = exc
                if failed is not None:
                    self.ctx.discard()
                    await self.db.transaction(ops + [_dead_letter(self.projection.name, first, failed)])
            else:
                await self.db.transaction(ops)
        except errors.OpenMaicError as exc:
            self.cursor = None
            own = _own_error(exc)
            if own is exc:
                raise
            raise own from exc
        except BaseException:
            self.cursor = None
            raise
        self.written, self.unwritten = cursor, 0
        self.ctx.committed()
        self.order.commit(one)
        self.events_applied += 1
        if failed is not None:
            self._dead_lettered([first], failed)

    async def catch_up(self, progress: Any = None) -> int:
        """Apply batches until the readable log is exhausted; returns the events covered."""
        total = 0
        while n := await self.step():
            total += n
            if progress is not None:
                progress(n)
        return total

    def statistics(self) -> dict[str, Any]:
        return {"events_applied": self.events_applied, "batches": self.batches,
                "cursor": self.cursor, "unwritten": self.unwritten, **self.order.statistics()}


class Projector:
    """The live projector of one projection, driven by :func:`run_projectors` while it holds the own lock."""

    def __init__(self, db: Database, log_: EventLog, projection: Projection, *, batch_size: int = LIVE_BATCH,
                 poll_s: float = 1.0, reads: SharedReads | None = None) -> None:
        self.projection = projection
        self.applier = Applier(
            db, log_, projection, checkpoint=projection.name, tables=Tables({t: t for t in projection.tables}),
            pause_key=lock_key("apply", projection.name), batch_size=batch_size, defer_s=poll_s,
            read_all=reads.read_all if reads is not None else None,
        )
        self.db = db
        self.poll_s = poll_s
        self.holding = False
        self.failures = 0
        self.pauses = 0

    async def ensure_tables(self) -> None:
        """Create the live tables if they are missing (a projection newer than the schema's migrations)."""
        missing = [t for t in self.projection.tables
                   if not await self.db.fetchval(Q.table_exists, t)]
        if missing:
            tables = Tables({t: t for t in self.projection.tables})
            await self.db.transaction(
                [(tables.sql(stmt), ()) for t in missing for stmt in self.projection.tables[t]]
            )

    async def run(self, watch: Any) -> None:
        """Apply the log until cancelled: batches back to back while there is work, else wait for a hint or the
        poll interval. Failures are logged and retried with backoff; they never end the task."""
        # Another process may have moved the checkpoint while we did not hold the lock: start from the database.
        self.applier.cursor = None
        ensured = False
        backoff = self.poll_s
        name = self.projection.name
        # Unavailability (a restart, a failover) is paced like every serving loop (0.1 s doubling to 1 s), so the
        # read model resumes within a second or so of the primary taking writes; a failing batch backs off longer.
        unavailable = Backoff(f"projection {name}", first=min(self.poll_s, FIRST_S))
        while True:
            try:
                if not ensured:
                    await self.ensure_tables()
                    ensured = True
                n = await self.applier.step()
            except ProjectionPaused:
                # A rebuild holds the apply lock while it catches up and swaps: wait, then reload (the swap
                # replaces the checkpoint).
                self.pauses += 1
                await trio.sleep(self.poll_s)
                continue
            except CheckpointMoved:
                log.info("projection %s: checkpoint moved (rebuilt?); reloading it", name)
                continue
            except errors.DatabaseUnavailable as exc:
                # Not the projection's fault: the server went away or refuses connections for now.
                self.failures += 1
                await unavailable.failed(exc)
                continue
            except Exception:
                # A projection that fails must not take the process (and its other roles) down with it.
                self.failures += 1
                log.exception("projection %s: batch failed; retrying in %.1f s", name, backoff)
                await trio.sleep(backoff)
                backoff = min(backoff * 2, 30.0)
                continue
            backoff = self.poll_s
            unavailable.succeeded()
            if n < self.applier.batch_size:
                metrics.PROJECTION_LAG.labels(projection=name).set(0)
                metrics.PROJECTION_LAG_SECONDS.labels(projection=name).set(0)
                await watch.wait(self.poll_s)

    def statistics(self) -> dict[str, Any]:
        return {"holding": self.holding, "failures": self.failures, "pauses": self.pauses,
                **self.applier.statistics()}


async def run_projectors(
    db: Database,
    log_: EventLog,
    wakeups: Wakeups,
    projections: Sequence[Projection],
    *,
    lock_retry_s: float = 1.0,
    poll_s: float = 1.0,
    batch_size: int = LIVE_BATCH,
    projectors: dict[str, Projector] | None = None,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """The projector role: keep every projection this process can lock up to date, until cancelled.

    One held connection carries the session advisory locks (one per projection); the projections whose lock it
    holds are applied by one task each. Every ``lock_retry_s`` the others are tried again and the connection
    is pinged: if it is lost, so are its locks, and every apply task stops before another process can take
    over. ``projectors`` (optional) receives the :class:`Projector` objects, for statistics.
    """
    found = projectors if projectors is not None else {}
    # The projections of this process wake on the same hints and tail the log together: one read serves them.
    reads = SharedReads(log_)
    for p in projections:
        found[p.name] = Projector(db, log_, p, batch_size=batch_size, poll_s=poll_s, reads=reads)
    keys = {p.name: lock_key("own", p.name) for p in projections}
    # Paced like every serving loop (0.1 s doubling to 1 s), not by lock_retry_s: while this connection is away no
    # projection is applied by this process, so after a failover it must be back as soon as the workers are.
    retry = Backoff("projector lock connection", "no projection is applied by this process meanwhile")
    # One watch per projection (each apply task consumes its own hints), registered before any read, so that an
    # append landing between a read and the wait still wakes the task.
    with contextlib.ExitStack() as stack:
        watches = {name: stack.enter_context(wakeups.watch()) for name in found}
        # Ready once watching: whether this process or another one holds a projection's lock is not our
        # caller's concern.
        task_status.started()
        while True:
            try:
                # A session of its own: the locks are the session's (behind a transaction-mode pooler, a connection
                # to PostgreSQL itself, see Database.session).
                async with db.session() as conn:
                    retry.succeeded()
                    try:
                        with collapse_groups():
                            async with trio.open_nursery() as nursery:
                                await _hold_locks(conn, found, keys, watches, nursery, lock_retry_s)
                    finally:
                        # The apply tasks have ended (the nursery waited for them), so no batch of ours is in
                        # flight once the locks are given back. Shielded: they must be released before the
                        # connection returns to the pool, even while we are being cancelled.
                        for p in found.values():
                            p.holding = False
                        if not conn.broken:
                            with trio.CancelScope(shield=True), trio.move_on_after(5):
                                try:
                                    await conn.execute(Q.advisory_unlock_all)
                                except errors.OpenMaicError:
                                    pass
            except (errors.DatabaseUnavailable, errors.DatabaseError) as exc:
                # The server went away or refused us (too many clients, a statement refused): our locks went with
                # the connection, so every apply task has stopped; connect again and take the locks anew. Only a
                # programming error ends the role.
                await retry.failed(exc)


async def _hold_locks(conn: Any, found: dict[str, Projector], keys: dict[str, int], watches: dict[str, Any],
                      nursery: trio.Nursery, lock_retry_s: float) -> None:
    while True:
        for name, projector in found.items():
            if projector.holding:
                continue
            # Non-blocking: a statement on a held connection is shielded and must stay short.
            if await conn.fetchval(Q.projection_try_lock, keys[name]):
                projector.holding = True
                log.info("projector holds %s", name)
                nursery.start_soon(projector.run, watches[name])
        await trio.sleep(lock_retry_s)
        # Liveness: a lost connection has lost its locks; raising here stops every apply task at once.
        await conn.fetchval(Q.ping)
