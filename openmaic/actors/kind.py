"""What a session kind plugs into the runtime: a pure fold, a pure decision, and async step handlers.

The runtime owns everything durable (claiming, leases, fencing, cancellation, follow-up delivery, shutdown);
a kind owns what its session *means*. ``evolve`` and ``decide`` are pure so both can be tested without a
database and replayed by operators (``openmaic replay``) exactly as the actor saw them.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Generic, Literal, Protocol, TypeVar

import msgspec

from openmaic.events.core import (
    DATABASE_TROUBLE,
    LeaseClaimed,
    LeaseReleased,
    ModelTurnCompleted,
    SessionCancelRequested,
    SessionCreated,
    SessionEnded,
    SessionInterrupted,
    SessionMessagePosted,
    StreamOwnerChanged,
)
from openmaic.events.log import StreamAppend
from openmaic.events.types import Event

S = TypeVar("S")


class Message(msgspec.Struct, frozen=True):
    seq: int
    text: str
    delivery: str


class Core(msgspec.Struct, frozen=True, kw_only=True):
    """What every session has, folded by the runtime from the shared event types."""

    seq: int = 0
    owner_id: str = ""
    attempt: int = 0
    cancel_requested: bool = False
    """A cancel arrived after the session last ended (a later follow-up may revive a workbench session)."""
    ended: str | None = None
    """The status of the last ``session.ended``, or None while the session is live."""
    pending: tuple[Message, ...] = ()
    """Follow-ups posted and not yet delivered to a committed turn (the delivery cursor's complement)."""
    held: bool = False
    """Some attempt holds the lease (claimed, and not yet released or ended)."""
    interrupted_step: str | None = None
    interruptions: int = 0
    """How many times in a row the database interrupted ``interrupted_step`` (step names are not reused once a
    step completes, so a count for another step starts afresh)."""


def evolve_core(core: Core, event: Event, seq: int) -> Core:
    r = msgspec.structs.replace
    match event:
        case SessionCreated(owner_id=owner) | StreamOwnerChanged(to_owner_id=owner):
            return r(core, seq=seq, owner_id=owner)
        case LeaseClaimed(attempt=attempt):
            return r(core, seq=seq, attempt=attempt, held=True)
        case LeaseReleased():
            return r(core, seq=seq, held=False)
        case SessionInterrupted(reason=reason, step=step) if reason == DATABASE_TROUBLE and step is not None:
            count = core.interruptions + 1 if step == core.interrupted_step else 1
            return r(core, seq=seq, interrupted_step=step, interruptions=count)
        case SessionCancelRequested():
            return r(core, seq=seq, cancel_requested=core.ended is None)
        case SessionMessagePosted(text=text, delivery=delivery):
            # A follow-up revives an ended session: it is live again until it ends anew.
            return r(core, seq=seq, ended=None, cancel_requested=False,
                     pending=(*core.pending, Message(seq, text, delivery)))
        case ModelTurnCompleted(delivered=delivered) if delivered:
            done = set(delivered)
            return r(core, seq=seq, pending=tuple(m for m in core.pending if m.seq not in done))
        case SessionEnded(status=status):
            return r(core, seq=seq, ended=status, cancel_requested=False, held=False)
        case _:
            return r(core, seq=seq)


class Outcome(msgspec.Struct, frozen=True, kw_only=True):
    """What a step (or a failure) commits, in one append fenced by the attempt."""

    events: Sequence[Event] = ()
    also: Sequence[StreamAppend] = ()
    """Appends to other streams in the same transaction (a run step and its course together)."""
    status: Literal["queued", "running", "waiting", "terminal"] | None = None
    progress: bool = True
    """A checkpoint: resets the unattended-attempt counter."""


class Step(msgspec.Struct, frozen=True, kw_only=True):
    """Run ``handler`` under a cancel scope with a deadline, then commit its outcome."""

    name: str
    handler: Callable[[StepContext], Awaitable[Outcome]]
    deadline: float


class Wait(msgspec.Struct, frozen=True, kw_only=True):
    """Give the lease back and hold no worker until a command (or ``wake_at``) makes the stream runnable."""

    events: Sequence[Event] = ()
    also: Sequence[StreamAppend] = ()
    wake_at: dt.datetime | None = None
    reason: str = "waiting"


class Finish(msgspec.Struct, frozen=True, kw_only=True):
    """Settle the session: append ``events`` (ending with ``session.ended``) and make the stream terminal."""

    events: Sequence[Event]
    also: Sequence[StreamAppend] = ()


Decision = Step | Wait | Finish


class StepContext(Protocol):
    """Given to a step handler: who it is, and how to commit intermediate output (fenced by the attempt)."""

    stream_id: str
    attempt: int
    owner_id: str
    services: Any

    async def emit(self, events: Sequence[Event], also: Sequence[StreamAppend] = ()) -> int:
        """Commit events now (e.g. streamed outline items, coalesced output deltas); returns the last seq."""
        ...


class Kind(Protocol, Generic[S]):
    name: str

    def initial(self) -> S: ...

    def evolve(self, state: S, event: Event, seq: int) -> S: ...

    def decide(self, state: S, core: Core) -> Decision: ...

    def step_failed(self, state: S, core: Core, step: str, error: str) -> Outcome | Wait | Finish:
        """A step raised or passed its deadline: what to commit instead of its outcome."""
        ...

    def over_cap(self, state: S, core: Core) -> Wait | Finish:
        """Taken over too often without progress (a crash loop): how the kind gives up."""
        ...

    def cancelled(self, state: S, core: Core) -> Finish:
        """A cancel request arrived: how the session settles."""
        ...


def settle(status: str, error: str | None = None, *events: Event) -> Finish:
    return Finish(events=[*events, SessionEnded(status=status, error=error)])
