"""One actor: the task that owns a claimed stream for one attempt.

Loop: fold → decide → act under a cancel scope → append the outcome fenced by the attempt → fold again.
Every write carries the attempt, so a writer that lost its lease (a zombie after SIGSTOP, a worker cut off
from the database) is refused by PostgreSQL; the first refusal stops the actor. Decisions that give the lease
up (wait, finish) are additionally fenced by the folded head seq: if a follow-up or a cancel landed after the
fold, the release is refused and the actor re-reads and decides again, so no command is left unheard.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import trio

from openmaic import errors, logs, metrics
from openmaic.actors.failures import database_trouble, is_bug, only_cancelled, stale_attempt, step_error
from openmaic.actors.kind import Core, Finish, Kind, Outcome, Step, Wait, evolve_core
from openmaic.concurrency import collapse_groups
from openmaic.events.core import DATABASE_TROUBLE, LeaseReleased, SessionInterrupted
from openmaic.events.log import EventLog, StreamAppend
from openmaic.events.types import Event
from openmaic.events.wakeups import cancel_hint
from openmaic.store.queries import Q

if TYPE_CHECKING:
    from openmaic.actors.worker import Claim
    from openmaic.config import RuntimeConfig
    from openmaic.events.wakeups import Wakeups

log = logging.getLogger(__name__)

RELEASE_S = 1.0
"""How long a stopping actor tries to give its lease back. One append takes milliseconds; one that cannot be made
within a second (the database out of reach) will not be made, and the lease expires instead."""


RESUME_BACKOFF_S = (0.1, 2.0)
"""First and longest pause between tries to hand a stream back after the database interrupted its step."""


class LeaseLost(Exception):
    """This attempt no longer owns the stream."""


class Interrupted(Exception):
    """The database interrupted the actor (a lost or refused connection, a statement or lock timeout): nothing is
    the step's fault, so the actor stops and the stream resumes from its last checkpoint (:meth:`Actor._resume`).

    ``step`` is the step in flight (its run or the commit of its outcome), None between steps."""

    def __init__(self, cause: BaseException, step: str | None) -> None:
        super().__init__(str(cause))
        self.cause = cause
        self.step = step


@dataclass(frozen=True)
class ActorContext:
    """What an actor needs from the process that runs it, handed in whole: the actor never reaches into its worker.

    ``lost_lease(kind)`` counts a lease this process lost (the worker's statistics and the metric).
    """

    log: EventLog
    wakeups: Wakeups
    settings: RuntimeConfig
    services: Any
    lost_lease: Callable[[str], None]


class _Context:
    """The StepContext handed to step handlers."""

    def __init__(self, actor: Actor) -> None:
        self._actor = actor
        self.stream_id = actor.stream_id
        self.attempt = actor.attempt
        self.owner_id = actor.core.owner_id
        self.services = actor.context.services

    async def emit(self, events: Sequence[Event], also: Sequence[StreamAppend] = ()) -> int:
        return await self._actor._append(Outcome(events=events, also=also, progress=False))


class Actor:
    def __init__(self, context: ActorContext, kind: Kind[Any], claim: Claim) -> None:
        self.context = context
        self.kind = kind
        self.stream_id = claim.stream_id
        self.attempt = claim.attempt
        self.claim = claim
        self.log: EventLog = context.log
        self.state: Any = kind.initial()
        self.core = Core()
        self.cancel_scope = trio.CancelScope()
        """The whole actor: cancelled when the lease is lost (it then writes nothing more)."""
        self._step_scope: trio.CancelScope | None = None
        self._step_started = trio.Event()
        """Set (and replaced) whenever a step starts: a cancel check owed while no step ran is made then."""
        self._cancelled_step: trio.CancelScope | None = None
        """The step a cancel request aborted (a later step is watched afresh)."""
        self.draining = False
        self.lease_lost = False
        self._presumed_lost = False
        self.renewed_at = trio.current_time()
        """When the statement that last renewed this attempt's lease (the claim, then each heartbeat) was *sent*:
        the database dated the lease no earlier, so it surely lasts until ``renewed_at + lease_ttl_s``."""
        self.done = trio.Event()
        """Set when :meth:`run` has returned: the attempt writes nothing more."""
        self.steps_started = 0
        self.cancel_checks = 0
        """Queries the cancel watcher has made (diagnostics: it should query on cancel hints and polls only)."""
        self.steps_run = 0

    # -- signals from the worker ------------------------------------------------------------------------------

    def lose_lease(self, *, presumed: bool = False) -> None:
        """Stop now: another attempt owns the stream (or, ``presumed``, may own it: no heartbeat got through for a
        lease TTL). A presumed loss hands the stream back if it is still ours, see :meth:`_hand_back`."""
        self.lease_lost = True
        self._presumed_lost = presumed and not self.cancel_scope.cancel_called
        self.cancel_scope.cancel()

    def drain(self, *, interrupt: bool) -> None:
        """Release at the next boundary; with ``interrupt`` abort the step in flight now."""
        self.draining = True
        if interrupt and self._step_scope is not None:
            self._step_scope.cancel()

    # -- the loop ---------------------------------------------------------------------------------------------

    async def run(self) -> None:
        try:
            await self._run()
        finally:
            self.done.set()

    async def _run(self) -> None:
        with self.cancel_scope:
            interrupted: Interrupted | None = None
            try:
                with collapse_groups():
                    async with trio.open_nursery() as nursery:
                        nursery.start_soon(self._watch_for_cancel)
                        await self._main()
                        nursery.cancel_scope.cancel()
            except LeaseLost:
                self.lease_lost = True
            except Interrupted as exc:
                interrupted = exc
            except Exception as exc:
                # Between steps (a fold, a settle): the database's trouble stops the actor the same way.
                cause = database_trouble(exc)
                if cause is None:
                    raise
                interrupted = Interrupted(cause, None)
            if interrupted is not None:
                await self._resume(interrupted)
        if self.lease_lost:
            self.context.lost_lease(self.kind.name)
            log.warning("stream %s: attempt %d lost its lease; stopped", self.stream_id, self.attempt)
            if self._presumed_lost:
                await self._hand_back()

    async def _hand_back(self) -> None:
        """Release a lease presumed lost, if it is still ours (the attempt fences it): a heartbeat that was merely
        slow (an overloaded host, a slow server) then costs the stream a prompt claim by any worker, not an orphan
        takeover charged against its unattended-attempt cap once the lease expires. Cut off from the database, the
        release cannot be made either; the lease expires and the stream is taken over, as it should be."""
        # Shielded and bounded: the actor is stopping (or the process is) and this is its last word.
        with trio.CancelScope(shield=True), trio.move_on_after(RELEASE_S):
            try:
                await self.log.append(StreamAppend(
                    stream_id=self.stream_id,
                    events=[SessionInterrupted(reason="lease presumed lost"),
                            LeaseReleased(attempt=self.attempt, reason="lease presumed lost")],
                    # Fenced by the head we folded too: a stream that moved on since (we settled it, or committed
                    # output we have not folded) is left alone and its lease simply expires.
                    attempt=self.attempt, expected_seq=self.core.seq, status="queued", release=True,
                ))
                log.info("stream %s: attempt %d was still ours; released it", self.stream_id, self.attempt)
            except (errors.StaleAttempt, errors.WrongExpectedSeq):
                pass  # taken over, or moved on, meanwhile
            except (errors.DatabaseUnavailable, errors.DatabaseError) as exc:
                log.info("stream %s: could not release attempt %d (%s); its lease will expire", self.stream_id,
                         self.attempt, exc)

    async def _resume(self, interrupted: Interrupted) -> None:
        """Hand the stream back after the database interrupted it, so that it resumes from its last checkpoint under
        a new attempt at once, charged nothing (no step retry, no orphan takeover).

        Tried until it is made: the heartbeat keeps the lease meanwhile, and once no heartbeat has got through
        for a lease TTL the watchdog presumes it lost and cancels this (the lease then expires: one takeover for
        the whole outage). Each try folds first, fenced by that head: what the interrupted commit did is then
        known (a group commit may have committed before its connection was lost), and a stream that settled or
        gave its lease back meanwhile is left alone. A step the database interrupts too many times in a row (a
        statement of its own that times out every time) fails as any failing step does."""
        log.warning("stream %s: the database interrupted %s (%s); the stream resumes from its last checkpoint",
                    self.stream_id, f"step {interrupted.step}" if interrupted.step else "the actor", interrupted.cause)
        with trio.CancelScope() as scope:
            self._step_scope = scope  # a shutdown past its grace stops the tries (the lease then expires)
            try:
                await self._hand_back_interrupted(interrupted)
            finally:
                self._step_scope = None
        if scope.cancelled_caught and self.draining:
            await self._release_for_shutdown()

    async def _hand_back_interrupted(self, interrupted: Interrupted) -> None:
        step = interrupted.step
        delay, cap = RESUME_BACKOFF_S
        while True:
            try:
                await self._refold()
                if not self.core.held or self.core.attempt != self.attempt:
                    return  # settled or released by the commit that was interrupted, or taken over
                if step is not None and self._too_often(step):
                    out = self.kind.step_failed(
                        self.state, self.core, step,
                        f"the database interrupted step {step} {self.core.interruptions + 1} times in a row "
                        f"({interrupted.cause})")
                    if isinstance(out, Outcome):
                        # Recorded (a retry charged, say); then handed back like any interruption.
                        await self._append(out)
                        step = None
                        continue
                    if await self._settle(out):
                        return
                    continue
                await self.log.append(StreamAppend(
                    stream_id=self.stream_id,
                    events=[SessionInterrupted(reason=DATABASE_TROUBLE, step=step),
                            LeaseReleased(attempt=self.attempt, reason=DATABASE_TROUBLE)],
                    attempt=self.attempt, expected_seq=self.core.seq, status="queued", release=True,
                ))
                return
            except errors.WrongExpectedSeq:
                continue  # the stream moved on since the fold: fold again
            except (errors.StaleAttempt, LeaseLost):
                self.lease_lost = True
                return
            except (errors.DatabaseUnavailable, errors.DatabaseError) as exc:
                if self.draining or database_trouble(exc) is None:
                    log.warning("stream %s: could not hand the stream back (%s); its lease will expire",
                                self.stream_id, exc)
                    return
                log.info("stream %s: could not hand the stream back yet (%s)", self.stream_id, exc)
            await trio.sleep(delay)
            delay = min(delay * 2, cap)

    def _too_often(self, step: str) -> bool:
        """This interruption of ``step`` is one too many (counted in the log, so across attempts and processes)."""
        before = self.core.interruptions if self.core.interrupted_step == step else 0
        return before + 1 > self.context.settings.max_unattended_attempts

    async def _main(self) -> None:
        await self._refold()
        if self.claim.reason == "orphaned" and self.claim.unattended > self.context.settings.max_unattended_attempts:
            log.warning("stream %s: taken over %d times without progress", self.stream_id, self.claim.unattended)
            if await self._settle(self.kind.over_cap(self.state, self.core)):
                return
        while True:
            if self.draining:
                await self._release_for_shutdown()
                return
            if self.core.cancel_requested:
                if await self._settle(self.kind.cancelled(self.state, self.core)):
                    return
                continue
            decision = self.kind.decide(self.state, self.core)
            if isinstance(decision, Step):
                outcome = await self._run_step(decision)
                if isinstance(outcome, Outcome) and await self._stop_landed():
                    # A cancel or stop request landed while the step ran, after the watcher last looked: what the
                    # step returned is not committed; the fold sees the request and the kind settles.
                    log.info("stream %s: step %s returned after a cancel request; not committed", self.stream_id,
                             decision.name)
                elif isinstance(outcome, Outcome):
                    try:
                        await self._append(outcome)
                        self.steps_run += 1
                    except (errors.DatabaseUnavailable, errors.DatabaseError) as exc:
                        # The step's commit met the database's trouble: whether it committed is read back by the
                        # fold of the next attempt, which redoes the step if it did not.
                        if database_trouble(exc) is None:
                            raise
                        raise Interrupted(exc, decision.name) from exc
                    except errors.WrongExpectedSeq as exc:
                        # A fenced write to another stream (e.g. a course edited meanwhile) was refused: nothing
                        # was committed, so fold the news and decide again (the step runs again on fresh state).
                        log.info("stream %s: step %s lost a race (%s); deciding again", self.stream_id,
                                 decision.name, exc)
                elif outcome is not None and await self._settle(outcome):
                    return
                await self._refold()
            elif await self._settle(decision):
                return

    async def _run_step(self, step: Step) -> Outcome | Wait | Finish | None:
        """Run a step; None when it was aborted by a cancel request or shutdown (nothing is committed)."""
        with logs.bind(step=step.name):  # on every line the step writes, and on its failure's
            return await self._run_step_bound(step)

    async def _run_step_bound(self, step: Step) -> Outcome | Wait | Finish | None:
        error: str | None = None
        family = metrics.step_family(step.name)
        with metrics.timed(metrics.STEP_SECONDS, kind=self.kind.name, step=family) as seen:
            seen["outcome"] = "aborted"  # unless it completes or fails: cancelled, lease lost, shutting down
            with trio.CancelScope() as scope:
                self._step_scope = scope
                self.steps_started += 1
                started, self._step_started = self._step_started, trio.Event()
                started.set()
                try:
                    with trio.move_on_after(step.deadline) as deadline:
                        result = await step.handler(_Context(self))
                        seen["outcome"] = "completed"
                        return result
                except (LeaseLost, trio.Cancelled):
                    raise
                except BaseException as exc:  # a step's bug must fail the step, never the worker
                    # Read through the exception groups of the step's nurseries: what matters is their leaves.
                    if only_cancelled(exc):
                        raise
                    stale = stale_attempt(exc)
                    if stale is not None:
                        raise LeaseLost from stale
                    trouble = database_trouble(exc)
                    if trouble is not None:
                        # Not the step's fault: never settled as failed, no retry charged; it runs again.
                        raise Interrupted(trouble, step.name) from exc
                    if not isinstance(exc, Exception):
                        raise  # a group holding a cancellation beside failures: the step was aborted
                    if is_bug(exc):
                        log.error("stream %s: step %s raised", self.stream_id, step.name, exc_info=exc)
                    error = step_error(exc, step.name)
                finally:
                    self._step_scope = None
                if deadline.cancelled_caught:
                    error = f"step {step.name} exceeded its deadline of {step.deadline:g} s"
            if error is not None:
                seen["outcome"] = "failed"
        if scope.cancelled_caught and error is None:
            return None
        assert error is not None
        log.info("stream %s: step %s failed: %s", self.stream_id, step.name, error)
        # The step may have committed events (ctx.emit) before failing: fold them first, so the kind decides on
        # the real state and a release is fenced on the real head.
        await self._refold()
        return self.kind.step_failed(self.state, self.core, step.name, error)

    async def _stop_landed(self) -> bool:
        try:
            return bool(await self.log.db.fetchval(Q.cancel_requested_after, self.stream_id, self.core.seq))
        except (errors.DatabaseUnavailable, errors.DatabaseError):
            return False  # the commit that follows meets the same trouble and decides the actor's fate

    async def _watch_for_cancel(self) -> None:
        """Abort the step in flight when a cancel request lands (hinted by NOTIFY, found by polling).

        It waits on the stream's cancel hint, not on the stream: the actor's own appends (a streaming turn emits
        several a second) would otherwise wake it for a query each time. A hint (or poll) that comes while no step
        runs is not dropped: the check is owed and made as soon as the next step starts, since the request may
        have landed after the fold that step was decided on."""
        owed = False
        with self.context.wakeups.watch(cancel_hint(self.stream_id)) as w:
            while True:
                if not owed:
                    await w.wait(self.context.settings.wake_poll_s)
                    owed = True
                step = self._step_scope
                if step is None:
                    await self._step_started.wait()
                    continue
                owed = False
                if self._cancelled_step is step:
                    continue  # this step is being aborted already
                self.cancel_checks += 1
                try:
                    found = await self.log.db.fetchval(Q.cancel_requested_after, self.stream_id, self.core.seq)
                except (errors.DatabaseUnavailable, errors.DatabaseError) as exc:
                    # The step goes on; the next hint or poll asks again (its own writes will meet the same
                    # trouble and decide the actor's fate).
                    log.info("stream %s: could not check for a cancel request (%s)", self.stream_id, exc)
                    continue
                if found and self._step_scope is step:
                    # Only this step: a follow-up may supersede the request, and a later step is watched afresh.
                    self._cancelled_step = step
                    step.cancel()

    # -- writing ----------------------------------------------------------------------------------------------

    async def _append(self, outcome: Outcome, *, expected_seq: int | None = None, release: bool = False) -> int:
        main = StreamAppend(
            stream_id=self.stream_id,
            events=outcome.events,
            attempt=self.attempt,
            expected_seq=expected_seq,
            status=outcome.status,
            release=release,
            progress=outcome.progress,
        )
        try:
            results = await self.log.append(main, *outcome.also)
        except errors.StaleAttempt as exc:
            raise LeaseLost from exc
        return next(r.last_seq for r in results if r.stream_id == self.stream_id)

    async def _settle(self, decision: Outcome | Wait | Finish) -> bool:
        """Commit a decision that may give the lease up. False when the stream moved on (re-read, re-decide)."""
        if isinstance(decision, Outcome):
            await self._append(decision)
            await self._refold()
            return False
        if isinstance(decision, Wait):
            events = [*decision.events, LeaseReleased(attempt=self.attempt, reason=decision.reason)]
            status = "queued" if decision.wake_at is not None else "waiting"
        else:
            events, status = list(decision.events), "terminal"
        try:
            await self.log.append(
                StreamAppend(
                    stream_id=self.stream_id, events=events, attempt=self.attempt, expected_seq=self.core.seq,
                    status=status, release=True, progress=True,
                    wake_at=decision.wake_at if isinstance(decision, Wait) else None,
                ),
                *decision.also,
            )
        except errors.WrongExpectedSeq:
            await self._refold()
            return False
        except errors.StaleAttempt as exc:
            raise LeaseLost from exc
        return True

    async def _release_for_shutdown(self) -> None:
        # Shielded: this is the last thing a stopping worker does for the stream; if it were cancelled the
        # stream would wait for its lease to expire and be charged an orphan takeover it did not earn. Bounded by
        # RELEASE_S, so that a process cut off from the database still stops promptly (the lease then expires).
        with trio.CancelScope(shield=True), trio.move_on_after(RELEASE_S):
            try:
                await self.log.append(
                    StreamAppend(
                        stream_id=self.stream_id,
                        events=[SessionInterrupted(reason="shutdown"),
                                LeaseReleased(attempt=self.attempt, reason="shutdown")],
                        attempt=self.attempt, status="queued", release=True,
                    )
                )
            except errors.StaleAttempt:
                self.lease_lost = True
            except errors.DatabaseUnavailable:
                log.warning("stream %s: could not release on shutdown; its lease will expire", self.stream_id)

    # -- reading ----------------------------------------------------------------------------------------------

    async def _refold(self) -> None:
        kind_evolve = self.kind.evolve

        def both(folded: tuple[Core, Any], event: Event, seq: int) -> tuple[Core, Any]:
            # The generic core (lease, cancel, follow-ups, ended) and the kind's own state, from the same events.
            return evolve_core(folded[0], event, seq), kind_evolve(folded[1], event, seq)

        (self.core, self.state), _ = await self.log.fold(self.stream_id, (self.core, self.state), both,
                                                         after=self.core.seq)  # fmt: skip

