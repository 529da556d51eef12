"""What the probes answer, for the API and the admin listener alike: readiness, and the metrics scrape.

Both listeners (``openmaic.api`` on the API port, :mod:`openmaic.admin` on ``--admin-port``) call these, so a
worker's ``/readyz`` means what the API's does.

Readiness checks, each bounded by :data:`CHECK_TIMEOUT_S` (a probe that hangs is a failed probe):

* ``database``: a query answers;
* ``migrations``: none is pending;
* ``connections``: PostgreSQL has not refused this process a new connection at its connection limit in the last
  few seconds (the pool's open connections still answer a ping meanwhile, but requests needing another one get
  503);
* ``listener``: the LISTEN connection is up (it reconnects by itself);
* ``horizon``: the oldest open transaction of the cluster has held the global log's tail back for less than
  ``runtime.horizon_age_threshold_s``. Projectors and live feeds read only below that horizon, so one long
  transaction, in *any* database of the cluster (transaction ids are cluster-wide), stalls every read model.
  This check warns and never fails readiness: this process serves as well as before, and taking every API pod
  out of its load balancer would turn a lag into an outage. ``openmaic_horizon_age_seconds`` and its alert
  carry it to the operator.
* ``replica`` (only with ``DATABASE_REPLICA_URL``): the replica answers, is a standby whose replay runs, and serves
  catch-up reads (:meth:`openmaic.store.replica.Replica.check`). It warns and never fails readiness: the primary
  answers every read the replica cannot.

A failed check makes the process not ready (503); its value says why (``failed: …``); a warning starts with
``lagging:``.

The metrics scrape runs the samplers first: gauges read from the database (projection lag, horizon age), the
same from every process, so they are reported also where projectors run alone. A sampler that fails or hangs
leaves its gauges as they were; the rest of the metrics are served regardless.
"""

from __future__ import annotations

import datetime as dt
import functools
import logging
from collections.abc import Awaitable, Callable, Sequence

import msgspec
import trio

from openmaic import metrics
from openmaic.errors import OpenMaicError
from openmaic.events.log import HorizonRow
from openmaic.kinds import SESSION_KINDS
from openmaic.projections import default_projections, record_projection_lag
from openmaic.store.database import Database
from openmaic.store.migrations import pending
from openmaic.store.queries import Q
from openmaic.store.replica import Replica

__all__ = ["CHECK_TIMEOUT_S", "STUCK_REASONS", "Horizon", "Readiness", "Sampler", "read_horizon", "readiness", "samplers", "scrape"]

log = logging.getLogger("openmaic.probes")

CHECK_TIMEOUT_S = 2.0
"""Each readiness check, and each metrics sampler, gets this long."""

Sampler = Callable[[], Awaitable[None]]
"""Sets gauges from the database; run before each scrape."""


class Horizon(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """The transaction holding back the global log's readable tail."""

    age_s: float
    """How long it has been open (0 when none holds the tail back)."""
    threshold_s: float
    """``runtime.horizon_age_threshold_s``: older than this, the ``horizon`` check warns."""
    pid: int | None = None
    """Its server process (None for a prepared transaction, or when none holds the tail back)."""
    database: str | None = None
    state: str | None = None
    """``active``, ``idle in transaction``, ``prepared`` …"""


class Readiness(msgspec.Struct, frozen=True, kw_only=True):
    ready: bool
    checks: dict[str, str]
    """Each check's result: ``ok``, ``failed: why`` (not ready) or ``lagging: why`` (a warning)."""
    horizon: Horizon | None = None
    """None when the database could not be asked."""

    @property
    def failed(self) -> list[str]:
        return [name for name, result in self.checks.items() if result.startswith("failed")]


async def read_horizon(db: Database, threshold_s: float) -> Horizon:
    row = await db.fetchrow_as(HorizonRow, Q.horizon)
    if row is None or row.age_s is None:  # nothing holds the log's tail back
        return Horizon(age_s=0.0, threshold_s=threshold_s)
    return Horizon(age_s=max(float(row.age_s or 0.0), 0.0), threshold_s=threshold_s, pid=row.pid,
                   database=row.database, state=row.state)  # fmt: skip


def _describe(h: Horizon) -> str:
    if h.age_s < h.threshold_s:
        return "ok"
    who = f"backend {h.pid}" if h.pid is not None else "a prepared transaction"
    return (f"lagging: a transaction of {who} (database {h.database}, {h.state}) has held back the log's tail "
            f"for {h.age_s:.0f} s (threshold {h.threshold_s:g} s); read models and live feeds wait for it")


async def readiness(db: Database, *, horizon_threshold_s: float, replica: Replica | None = None) -> Readiness:
    """Run every check (see the module's doc)."""
    checks: dict[str, str] = {}
    horizon: Horizon | None = None
    try:
        with trio.fail_after(CHECK_TIMEOUT_S):
            await db.fetchval(Q.ping)
        checks["database"] = "ok"
    except (OpenMaicError, trio.TooSlowError) as exc:
        log.warning("readiness: database check failed: %s", exc)
        checks["database"] = "failed: unreachable"
    if checks["database"] == "ok":
        try:
            with trio.fail_after(CHECK_TIMEOUT_S):
                missing = await pending(db)
            checks["migrations"] = (
                "ok" if not missing else "failed: pending " + ", ".join(f"{m.version:04d}_{m.name}" for m in missing)
            )
        except (OpenMaicError, trio.TooSlowError) as exc:
            log.warning("readiness: migration check failed: %s", exc)
            checks["migrations"] = "failed: could not read the applied migrations"
    else:
        checks["migrations"] = "failed: database unreachable"
    refused = db.refused_recently()
    checks["connections"] = "ok" if refused is None else (
        f"failed: PostgreSQL refused a new connection {refused:.1f} s ago: it is at its connection limit "
        "(max_connections, or the role's or database's CONNECTION LIMIT)"
    )  # fmt: skip
    checks["listener"] = "ok" if db.listener_connected else "failed: the LISTEN connection is down"
    if checks["database"] == "ok":
        try:
            with trio.fail_after(CHECK_TIMEOUT_S):
                horizon = await read_horizon(db, horizon_threshold_s)
            metrics.HORIZON_AGE.set(horizon.age_s)
            checks["horizon"] = _describe(horizon)
        except (OpenMaicError, trio.TooSlowError) as exc:
            log.warning("readiness: horizon check failed: %s", exc)
            checks["horizon"] = "lagging: could not read the open transactions"
    if replica is not None:
        checks["replica"] = await _check_replica(db, replica)
    ready = not any(result.startswith("failed") for result in checks.values())
    return Readiness(ready=ready, checks=checks, horizon=horizon)


async def _check_replica(db: Database, replica: Replica) -> str:
    try:
        with trio.fail_after(CHECK_TIMEOUT_S):
            return await replica.check(db)
    except (OpenMaicError, trio.TooSlowError) as exc:
        # Only a warning, like every answer of this check: the primary serves the reads the replica cannot.
        return f"lagging: the replica {replica.name} could not be asked ({exc or 'no answer in time'})"


async def _sample_horizon(db: Database) -> None:
    metrics.HORIZON_AGE.set((await read_horizon(db, float("inf"))).age_s)


STUCK_REASONS = {
    "lease_expired": "running, its lease expired and no worker claimed it again",
    "queued_too_long": "queued and due for longer than runtime.stuck_queued_s",
    "paused": "paused after a failure: it waits for a retry",
}
"""Why a session is stuck (``Q.sessions_list`` decides), and what it means; the keys label the stuck gauge."""


class SessionRow(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """A row of the operators' session list (``Q.sessions_list``, read here and by :mod:`openmaic.tools.sessions`):
    the stream, what its user sees, its lease, how long it has been idle, and why it is stuck, if it is."""

    id: str
    kind: str
    owner: str
    state: str
    """What the user sees (``paused``, ``idle`` …), from the session list; the scheduling status until then."""
    status: str
    """Scheduling: ``queued``, ``running``, ``waiting`` or ``terminal``."""
    attempt: int
    lease_worker: str | None
    lease_left_s: float | None
    """Seconds until the lease expires (negative: expired); None when nobody holds it."""
    idle_s: float | None
    """Seconds since the last event."""
    title: str
    stuck: str | None = None
    """Why it counts as stuck (a key of :data:`STUCK_REASONS`), or None."""
    last_at: dt.datetime | None = None
    """When its last event was recorded (the list's order: newest first)."""


async def _sample_stuck(db: Database, stuck_queued_s: float) -> None:
    # The operators' list itself (`openmaic sessions list --stuck`), counted: one definition of "stuck".
    rows = await db.fetch_as(SessionRow, Q.sessions_list, list(SESSION_KINDS), None, None, None, True,
                             stuck_queued_s, 100_000, None, False, None, None)  # fmt: skip
    counts = dict.fromkeys(STUCK_REASONS, 0)
    for r in rows:
        if r.stuck is not None:
            counts[r.stuck] = counts.get(r.stuck, 0) + 1
    for reason, n in counts.items():
        metrics.SESSIONS_STUCK.labels(reason=reason).set(n)


def samplers(db: Database, *, stuck_queued_s: float = 300.0) -> list[Sampler]:
    """The samplers every process runs before a scrape: projection lag, horizon age, stuck sessions."""
    return [functools.partial(record_projection_lag, db, default_projections()),
            functools.partial(_sample_horizon, db),
            functools.partial(_sample_stuck, db, stuck_queued_s)]  # fmt: skip


async def scrape(run_first: Sequence[Sampler]) -> bytes:
    """Run each sampler (bounded, failures logged), then render every metric."""
    for sample in run_first:
        with trio.move_on_after(CHECK_TIMEOUT_S) as scope:
            try:
                await sample()
            except OpenMaicError as exc:
                log.warning("metrics: %s", exc)
        if scope.cancelled_caught:
            log.warning("metrics: a sampler took longer than %.0f s; its gauges are stale", CHECK_TIMEOUT_S)
    return metrics.render()
