"""Event types shared by every session kind: leases, lifecycle, messages, model turns, tools."""

from __future__ import annotations

from typing import Any, Literal

from openmaic.events.types import Event, register


@register
class LeaseClaimed(Event, tag="lease.claimed"):
    attempt: int
    worker: str
    reason: Literal["queued", "orphaned"]


@register
class LeaseReleased(Event, tag="lease.released"):
    """The holder gave the stream back cleanly (a wait, or a graceful shutdown)."""

    attempt: int
    reason: str


@register
class SessionCreated(Event, tag="session.created"):
    kind: str
    owner_id: str
    input: dict[str, Any] = {}


@register
class SessionInterrupted(Event, tag="session.interrupted"):
    reason: str
    step: str | None = None
    """The step that was in flight, when the database interrupted it (``reason`` :data:`DATABASE_TROUBLE`)."""


DATABASE_TROUBLE = "database unavailable"
"""The reason of a release made because the database interrupted a step (lost connection, refused connection,
statement or lock timeout): the stream is queued at once and resumes from its last checkpoint, charged nothing."""

REQUEUED = frozenset({"shutdown", DATABASE_TROUBLE, "lease presumed lost"})
"""Release reasons after which the stream is queued for the next worker, not waiting for anyone."""


@register
class SessionCancelRequested(Event, tag="session.cancel_requested"):
    reason: str = ""


@register
class SessionMessagePosted(Event, tag="session.message_posted"):
    text: str
    delivery: Literal["steer", "queued"] = "queued"


@register
class SessionEnded(Event, tag="session.ended"):
    status: str
    error: str | None = None


@register
class ModelOutputDelta(Event, tag="model.output_delta"):
    text: str


@register
class ModelTurnCompleted(Event, tag="model.turn_completed"):
    text: str = ""
    tool_calls: list[dict[str, Any]] = []
    delivered: list[int] = []


@register
class ToolCalled(Event, tag="tool.called"):
    call_id: str
    name: str
    arguments: dict[str, Any] = {}


@register
class ToolResult(Event, tag="tool.result"):
    call_id: str
    name: str
    ok: bool = True
    result: Any = None
    error: str | None = None
    interrupted: bool = False


@register
class StreamOwnerChanged(Event, tag="stream.owner_changed"):
    """From this seq on the stream belongs to ``to_owner_id``: the anonymous owner it was written for was claimed
    into an account (``POST /api/identity/claim``). Folds that know a stream's owner follow it."""

    from_owner_id: str
    to_owner_id: str


@register
class OwnerClaimed(Event, tag="owner.claimed"):
    """An anonymous owner's work moved to an account, on the claim's own stream (kind ``owner_claim``).
    ``moved`` counts what moved by kind (``runs``, ``courses``, ``sessions``, ``materials``, ``assets``, …)."""

    from_owner_id: str
    to_owner_id: str
    moved: dict[str, int] = {}
