"""The worker role: claims runnable streams, runs one actor per claimed stream, heartbeats, shuts down cleanly.

A worker is an incarnation: a fresh id at every process start, so a restarted process never mistakes an old
lease for its own. Leases are judged by the database clock (``now()`` in SQL); this process only measures its
own intervals with trio's clock and never compares clocks across processes.
"""

from __future__ import annotations

import logging
import math
import os
import socket
import uuid
from collections.abc import Mapping
from typing import Any

import msgspec
import trio

from openmaic import errors, logs, metrics
from openmaic.actors.actor import Actor, ActorContext
from openmaic.actors.kind import Kind
from openmaic.config import RuntimeConfig
from openmaic.events.log import EventLog
from openmaic.events.wakeups import RUNNABLE, Wakeups
from openmaic.store.database import CANCEL_GRACE_S, Backoff
from openmaic.store.queries import Q

log = logging.getLogger(__name__)

DUE_MARGIN_S = 0.05
"""How long past a stream's due moment (by the database's clock) the claim loop wakes to claim it."""


class Claim(msgspec.Struct, frozen=True):
    stream_id: str
    kind: str
    attempt: int
    reason: str
    unattended: int
    claimed_seq: int


class WorkerStats:
    """This worker's own counts (``statistics()``, for tests and benchmarks that run several workers in one
    process). Each is bumped by the method that also moves the process-wide metric, so the two cannot drift."""

    def __init__(self) -> None:
        self.claims = 0
        self.takeovers = 0
        self.lease_losses = 0
        self.heartbeats = 0
        self.heartbeat_lateness: list[float] = []

    def claimed(self, claim: Claim) -> None:
        self.claims += 1
        metrics.APPENDS.inc()  # the claim appended lease.claimed (in SQL, beside the lease)
        metrics.CLAIMS.labels(kind=claim.kind, reason=claim.reason).inc()
        if claim.reason == "orphaned":
            self.takeovers += 1
            metrics.TAKEOVERS.labels(kind=claim.kind).inc()

    def lost_lease(self, kind: str) -> None:
        self.lease_losses += 1
        metrics.LEASE_LOSSES.labels(kind=kind).inc()


def new_worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:12]}"


class Worker:
    def __init__(
        self,
        log_: EventLog,
        wakeups: Wakeups,
        kinds: Mapping[str, Kind[Any]],
        settings: RuntimeConfig,
        *,
        services: Any = None,
        worker_id: str | None = None,
        record_lateness: bool = False,
    ) -> None:
        self.log = log_
        self.db = log_.db
        self.wakeups = wakeups
        self.kinds = dict(kinds)
        self.settings = settings
        self.services = services
        self.id = worker_id or new_worker_id()
        self.actors: dict[str, Actor] = {}
        self.stats = WorkerStats()
        self._beat_trouble = Backoff(f"worker {self.id}: heartbeat", "leases count down from the last one renewed",
                                     cap=settings.heartbeat_s)
        self.actor_context = ActorContext(log=log_, wakeups=wakeups, settings=settings, services=services,
                                          lost_lease=self.stats.lost_lease)
        self._record_lateness = record_lateness
        self._stop = trio.Event()
        self._slot_freed = trio.Event()
        self._claim_shield: trio.CancelScope | None = None
        self._claim_deadline = math.inf

    def statistics(self) -> dict[str, Any]:
        by_kind: dict[str, int] = {}
        for a in self.actors.values():
            by_kind[a.kind.name] = by_kind.get(a.kind.name, 0) + 1
        return {"worker": self.id, "active_actors": len(self.actors), "by_kind": by_kind,
                "claims": self.stats.claims, "takeovers": self.stats.takeovers,
                "lease_losses": self.stats.lease_losses}

    def shutdown(self) -> None:
        """Begin a graceful shutdown: stop claiming, let actors reach a boundary, then release what is left."""
        self._stop.set()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        with logs.bind(worker=self.id):  # on every line this worker's tasks (and its actors') write
            await self._run(task_status)

    async def _run(self, task_status: trio.TaskStatus[None]) -> None:
        async with trio.open_nursery() as outer:
            outer.start_soon(self._heartbeat_loop)
            outer.start_soon(self._watchdog_loop)
            async with trio.open_nursery() as actors:
                claiming = trio.CancelScope()
                claimed = trio.Event()
                outer.start_soon(self._claim_until_stopped, actors, claiming, claimed)
                task_status.started()
                await self._stop.wait()
                grace_ends = trio.current_time() + self.settings.shutdown_grace_s
                claiming.cancel()
                # A claim in flight is not cancelled (it may have committed): wait for it, so that the streams it
                # took get their actors, and are drained and released with every other one. Within the grace only:
                # a claim that cannot come back (the database out of reach) is abandoned, its streams to expire.
                # Abandoned early enough that its connection, terminated CANCEL_GRACE_S after the cancel, is gone
                # by the end of the grace.
                self._claim_deadline = grace_ends - CANCEL_GRACE_S
                if self._claim_shield is not None:
                    self._claim_shield.deadline = self._claim_deadline
                await claimed.wait()
                await self._drain(grace_ends)
            # Heartbeats stop only after every actor has released or finished, so no lease expires meanwhile.
            outer.cancel_scope.cancel()

    async def _claim_until_stopped(self, actors: trio.Nursery, claiming: trio.CancelScope, claimed: trio.Event) -> None:
        try:
            with claiming:
                await self._claim_loop(actors)
        finally:
            claimed.set()

    async def _drain(self, grace_ends: float) -> None:
        for a in list(self.actors.values()):
            a.drain(interrupt=False)
        with trio.move_on_at(grace_ends):
            while self.actors:
                await self._wait_slot()
        for a in list(self.actors.values()):
            # Past the grace period: abort steps in flight; each actor then releases its lease (shielded).
            a.drain(interrupt=True)

    async def _wait_slot(self) -> None:
        await self._slot_freed.wait()

    def _free_slot(self) -> None:
        self._slot_freed.set()
        self._slot_freed = trio.Event()
        self.wakeups.poke([RUNNABLE])

    # -- claiming ---------------------------------------------------------------------------------------------

    async def _claim_loop(self, actors: trio.Nursery) -> None:
        kinds = sorted(self.kinds)
        ttl_ms = int(self.settings.lease_ttl_s * 1000)
        trouble = Backoff(f"worker {self.id}: claiming", "paced by the claim poll")
        # Registered before the first claim, so a stream queued between a claim and the wait still wakes us.
        with self.wakeups.watch(RUNNABLE) as w:
            while True:
                limits = [self.settings.max_actors - self._active(k) for k in kinds]
                if any(n > 0 for n in limits) and not self._stop.is_set():
                    sent = trio.current_time()
                    # Shielded: a claim cancelled in flight (by a shutdown) may have committed, and its streams
                    # would stay leased by nobody until the lease expired, then be charged an orphan takeover.
                    # A shutdown gives it until the end of its grace (see run).
                    rows: list[Claim] = []
                    # At most max_actors_per_owner of one owner's share, every share's first before any share's
                    # second (openmaic_claim): a few owners' steps stuck on silent endpoints cannot hold every slot.
                    with trio.CancelScope(shield=True, deadline=self._claim_deadline) as self._claim_shield:
                        try:
                            with metrics.timed(metrics.CLAIM_SECONDS):
                                rows = await self.db.fetch_as(Claim, Q.claim, self.id, kinds, limits, ttl_ms,
                                                              self.settings.max_actors_per_owner)
                        except (errors.DatabaseError, errors.DatabaseUnavailable) as exc:
                            trouble.note(exc)
                            rows = []
                        else:
                            trouble.succeeded()
                    self._claim_shield = None
                    for c in rows:
                        self.stats.claimed(c)
                        self._start_actor(actors, Actor(self.actor_context, self.kinds[c.kind], c), sent)
                    if len(rows) == sum(max(n, 0) for n in limits) and rows:
                        continue  # took all we could: there may be more, and slots may have freed meanwhile
                    # A refused claim is paced by the poll (trouble's promise), not by what falls due: a database
                    # that answers reads but refuses claims (a standby) would otherwise be asked at every due moment.
                    wait = self.settings.claim_poll_s if trouble.failures else await self._until_due(kinds)
                else:
                    wait = self.settings.claim_poll_s  # no free slot: an actor that ends pokes us
                # A hint (a stream became runnable, or one of our actors ended), the next stream due, or the poll.
                await w.wait(wait)

    async def _until_due(self, kinds: list[str]) -> float:
        """How long the claim loop may wait: the claim poll, or less when a stream becomes claimable sooner with
        no hint to say so (a queued stream's ``wake_at``; a lease that expires because its holder stopped renewing
        it, or gave it up without handing the stream back). Without this, such a stream waited for the next poll
        after it fell due: a takeover a lease TTL plus a poll after the holder stopped."""
        poll = self.settings.claim_poll_s
        try:
            due = await self.db.fetchval(Q.next_claim_due, kinds)
        except (errors.DatabaseError, errors.DatabaseUnavailable):
            return poll  # the next claim reports the trouble; the poll paces it
        # A little past the moment: the claim compares with the database's clock (lease_expires_at < now()).
        return poll if due is None else min(poll, due + DUE_MARGIN_S)

    def _active(self, kind: str) -> int:
        return sum(1 for a in self.actors.values() if a.kind.name == kind)

    def _start_actor(self, actors: trio.Nursery, actor: Actor, sent: float) -> None:
        actor.renewed_at = sent
        if self._stop.is_set():
            # Claimed by the claim that was in flight when the shutdown began: release it at once, uncharged.
            actor.drain(interrupt=False)
        old = self.actors.get(actor.stream_id)
        if old is not None:
            # We claimed our own stream again: its lease expired under the old actor (heartbeats failed, or came
            # too late). That attempt is over; stop it before the new one starts, so that one process never runs
            # two actors of a stream at once.
            old.lose_lease()
        self.actors[actor.stream_id] = actor
        actors.start_soon(self._run_actor, actor, old)

    async def _run_actor(self, actor: Actor, previous: Actor | None = None) -> None:
        with logs.bind(stream_id=actor.stream_id, attempt=actor.attempt, kind=actor.kind.name):
            await self._run_actor_bound(actor, previous)

    async def _run_actor_bound(self, actor: Actor, previous: Actor | None) -> None:
        active = metrics.ACTIVE_ACTORS.labels(kind=actor.kind.name)
        active.inc()
        try:
            if previous is not None:
                await previous.done.wait()
            await actor.run()
        except errors.DatabaseUnavailable:
            # The database went away mid-step: stop this actor; its lease expires and a worker (maybe this
            # one, once the database is back) takes the stream over from its last checkpoint.
            log.warning("stream %s: database unavailable; the actor stops and the stream will be resumed",
                        actor.stream_id)
        except Exception:
            # One stream's trouble (a refused statement, a bug in a kind's fold or decision) must not take the
            # worker and every other stream down: stop this actor; the stream is resumed after its lease expires,
            # and the unattended-attempt cap ends a stream that fails this way every time.
            log.exception("stream %s: the actor failed; the stream will be resumed by a later attempt",
                          actor.stream_id)
        finally:
            active.dec()
            if self.actors.get(actor.stream_id) is actor:
                del self.actors[actor.stream_id]
            self._free_slot()

    # -- heartbeats -------------------------------------------------------------------------------------------

    async def _heartbeat_loop(self) -> None:
        interval = self.settings.heartbeat_s
        next_at = trio.current_time() + interval
        while True:
            await trio.sleep_until(next_at)
            now = trio.current_time()
            if self._record_lateness:
                self.stats.heartbeat_lateness.append(now - next_at)
            next_at = now + interval
            if not await self.heartbeat_once():
                # Tried again sooner than the interval (0.1 s doubling, at most the interval): after a failover the
                # leases are renewed as soon as the new primary takes writes, before the watchdog gives them up.
                next_at = min(next_at, now + self._beat_trouble.pause())

    async def heartbeat_once(self) -> bool:
        """Renew the leases of every actor that holds one; False when the database refused (logged once per outage)."""
        held = [(sid, a.attempt) for sid, a in self.actors.items() if not a.lease_lost]
        if not held:
            return True
        sent = trio.current_time()
        try:
            renewed = set(await self.db.fetch_values(
                Q.heartbeat, [h[0] for h in held], [h[1] for h in held], int(self.settings.lease_ttl_s * 1000),
                self.id,
            ))
        except (errors.DatabaseError, errors.DatabaseUnavailable) as exc:
            # Retried soon (see _heartbeat_loop); until a heartbeat gets through, the watchdog counts each lease
            # down from the last one that did.
            self._beat_trouble.note(exc)
            return False
        self._beat_trouble.succeeded()
        self.stats.heartbeats += 1
        for sid, attempt in held:
            a = self.actors.get(sid)
            if a is None or a.attempt != attempt:
                continue
            if sid in renewed:
                # Dated from the send: the database set the new expiry at or after this moment, never before.
                a.renewed_at = sent
            else:
                a.lose_lease()
        return True

    async def _watchdog_loop(self) -> None:
        """Presume a lease lost once a TTL has passed since the statement that last renewed it was sent.

        Separate from the heartbeat: a heartbeat stuck in a call that never returns (a silent partition) must not
        keep its actors going. Another worker may claim the stream from then on; fencing would refuse our writes
        anyway, and stopping at once also stops the duplicate provider calls."""
        ttl = self.settings.lease_ttl_s
        while True:
            now = trio.current_time()
            next_check = now + max(min(self.settings.heartbeat_s, ttl) / 4, 0.01)
            for a in list(self.actors.values()):
                if a.lease_lost:
                    continue
                expires = a.renewed_at + ttl
                if now >= expires:
                    log.warning("stream %s: no heartbeat got through for %.1f s; presuming the lease of attempt %d "
                                "lost", a.stream_id, now - a.renewed_at, a.attempt)
                    a.lose_lease(presumed=True)
                else:
                    next_check = min(next_check, expires)
            await trio.sleep_until(next_check)
