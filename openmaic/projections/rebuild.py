"""Rebuild a projection from position zero beside the live copy, then swap it in; report every checkpoint.

A rebuild never writes the live tables. It creates fresh ones (``<table>__rb<hex>``), applies the whole log to
them under a checkpoint of its own (``<name>@rebuild``) while the live projector keeps serving the old copy,
then takes the projection's *apply* lock — every live batch takes it shared, so the live projector pauses —
catches up to the head and, in one transaction, drops the old tables, renames the new ones (and their indexes)
into place and replaces the checkpoint. Readers see the old copy until that transaction commits, then the new.
"""

from __future__ import annotations

import datetime as dt
import logging
import secrets
import time
from collections.abc import Awaitable, Callable, Sequence
from decimal import Decimal
from typing import Any

import msgspec
import trio

from openmaic import errors, metrics
from openmaic.events.log import EventLog
from openmaic.projections.base import CheckpointRow, Projection, RebuildRunning, Tables, lock_key
from openmaic.projections.projector import Applier
from openmaic.store.database import Database
from openmaic.store.queries import Q

log = logging.getLogger(__name__)

#: Rebuild batches are larger than live ones: nobody waits on them, and fewer transactions go faster.
REBUILD_BATCH = 20_000

#: How long the swap waits for readers of the old tables before giving up (it then fails cleanly).
SWAP_LOCK_TIMEOUT = "30s"


class RebuildResult(msgspec.Struct, frozen=True):
    name: str
    events: int
    """Events of the log the rebuilt copy covers."""
    seconds: float
    paused_s: float
    """How long the live projector was paused (catch-up to the head and swap)."""


def rebuild_checkpoint(name: str) -> str:
    return f"{name}@rebuild"


async def rebuild(
    db: Database,
    log_: EventLog,
    projection: Projection,
    *,
    batch_size: int = REBUILD_BATCH,
    lock_retry_s: float = 0.1,
    progress: Callable[[int], None] | None = None,
    before_swap: Callable[[], Awaitable[None]] | None = None,
) -> RebuildResult:
    """Build a fresh copy of ``projection`` from position zero and swap it in atomically.

    ``progress(n)`` is called after each batch with the number of log events it covered; ``before_swap`` (tests)
    runs once the copy has caught up, before the live projector is paused. Raises :class:`RebuildRunning` when
    another rebuild of the same projection holds its rebuild lock.
    """
    name = projection.name
    started = time.perf_counter()
    async with db.session() as conn:  # the locks below are the session's
        rebuild_key, apply_key = lock_key("rebuild", name), lock_key("apply", name)
        # One rebuild per projection at a time (non-blocking: a held connection never waits on a lock).
        if not await conn.fetchval(Q.projection_try_lock, rebuild_key):
            raise RebuildRunning(f"a rebuild of {name} is already running; wait for it to finish")
        suffix = "__rb" + secrets.token_hex(3)
        new = Tables({t: t + suffix for t in projection.tables})
        cp = rebuild_checkpoint(name)
        try:
            await _drop_leftovers(db, projection, cp)
            await db.transaction([(stmt, ()) for stmt in projection.ddl(new)])
            applier = Applier(db, log_, projection, checkpoint=cp, tables=new, pause_key=None,
                              batch_size=batch_size)
            events = await applier.catch_up(progress)
            if before_swap is not None:
                await before_swap()
            # Pause the live projector: its batches take this lock shared and fail fast while we hold it.
            while not await conn.fetchval(Q.projection_try_lock, apply_key):
                await trio.sleep(lock_retry_s)
            paused_at = time.perf_counter()
            try:
                events += await applier.catch_up(progress)
                await _swap(db, projection, new, cp)
            finally:
                # Shielded: the live projector stays paused until this runs.
                with trio.CancelScope(shield=True):
                    await _unlock(conn, apply_key)
            paused = time.perf_counter() - paused_at
        except BaseException:
            # Shielded and bounded: leave no half-built copy behind, even when cancelled.
            with trio.CancelScope(shield=True), trio.move_on_after(30):
                try:
                    await _drop_leftovers(db, projection, cp)
                except errors.OpenMaicError:
                    log.warning("could not drop the partial rebuild of %s", name, exc_info=True)
            raise
        finally:
            # Shielded: a rebuild lock left on a pooled connection would refuse every later rebuild of this
            # projection until that connection closed.
            with trio.CancelScope(shield=True):
                await _unlock(conn, rebuild_key)
    row = await db.fetchrow_as(CheckpointRow, Q.projection_checkpoint, name)
    total = row.events_applied if row else events
    return RebuildResult(name, total, time.perf_counter() - started, paused)


async def _unlock(conn: Any, key: int) -> None:
    if not conn.broken:
        try:
            await conn.fetchval(Q.projection_unlock, key)
        except errors.OpenMaicError:
            # A broken connection is terminated on release, which ends its session and its locks.
            conn.broken = True


async def _drop_leftovers(db: Database, projection: Projection, cp: str) -> None:
    """Drop the copies (and checkpoint) of an earlier rebuild that did not finish. Safe: we hold the rebuild
    lock, so no other rebuild of this projection is writing them."""
    ops: list[tuple[str, Sequence[Any]]] = []
    for t in projection.tables:
        names = await db.fetch_values(Q.rebuild_leftover_tables, t.replace("_", r"\_") + r"\_\_rb%")
        ops += [(Q.drop_table.format(table=f'"{table}"'), ()) for table in names]
    ops.append((Q.projection_checkpoint_delete, (cp,)))
    ops.append((Q.projection_early_delete, (cp,)))
    await db.transaction(ops)


async def _swap(db: Database, projection: Projection, new: Tables, cp: str) -> None:
    name = projection.name
    ops: list[tuple[str, Sequence[Any]]] = [(Q.swap_lock_timeout.format(timeout=SWAP_LOCK_TIMEOUT), ())]
    ops += [(Q.drop_table.format(table=t), ()) for t in projection.tables]
    for t, physical in new.items():
        ops.append((Q.rename_table.format(table=physical, new_name=t), ()))
        for index in await db.fetch_values(Q.table_indexes, physical):
            if index.startswith(physical):
                ops.append((Q.rename_index.format(index=index, new_name=t + index[len(physical):]), ()))
    ops += [
        (Q.projection_checkpoint_delete, (name,)),
        (Q.projection_checkpoint_rename, (name, cp)),
        (Q.projection_early_delete, (name,)),
        (Q.projection_early_rename, (name, cp)),
    ]
    await db.transaction(ops)


class ProjectionStatus(msgspec.Struct, frozen=True):
    """One projection's checkpoint and lag, as ``openmaic projections status`` prints it."""

    name: str
    epoch: int | None
    tx: int | None
    position: int | None
    events_applied: int
    updated_at: dt.datetime | None
    lag_events: int
    lag_s: float | None
    """now − recorded_at of the oldest event not applied yet; None when there is none."""
    holder_pid: int | None
    """The backend holding the projection's lock: a live projector serves it (None: nobody does)."""
    rebuilding: bool


class _StatusRow(msgspec.Struct, frozen=True):
    """A row of ``projection_status``."""

    name: str
    epoch: int | None
    tx: str | None
    position: int | None
    events_applied: int | None
    updated_at: dt.datetime | None
    lag_events: int
    lag_s: Decimal | float | None
    holder_pid: int | None
    rebuild_pid: int | None


async def record_projection_lag(db: Database, projections: Sequence[Projection]) -> None:
    """Set the projection-lag gauges from the database: the lag is a fact of the log and the checkpoints, the same
    from every process, and must be visible where projectors serve no HTTP (``--role projector``)."""
    for s in await projection_status(db, projections):
        metrics.PROJECTION_LAG.labels(projection=s.name).set(s.lag_events or 0)
        metrics.PROJECTION_LAG_SECONDS.labels(projection=s.name).set(s.lag_s or 0.0)


async def projection_status(db: Database, projections: Sequence[Projection]) -> list[ProjectionStatus]:
    names = [p.name for p in projections]
    rows = await db.fetch_as(
        _StatusRow, Q.projection_status, names, [lock_key("own", n) for n in names],
        [lock_key("rebuild", n) for n in names],
    )
    by_name = {r.name: r for r in rows}
    out = []
    for n in names:
        r = by_name[n]
        out.append(ProjectionStatus(
            n, r.epoch, int(r.tx) if r.tx is not None else None, r.position, r.events_applied or 0,
            r.updated_at, r.lag_events, float(r.lag_s) if r.lag_s is not None else None,
            r.holder_pid, r.rebuild_pid is not None,
        ))
    return out
