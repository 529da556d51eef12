"""Creates made safe to repeat: the ``Idempotency-Key`` of ``POST /api/generation-runs``, ``POST
/api/generate-classroom`` and ``POST /api/agent/sessions`` (this server's addition; OpenMAIC's creates take no
command id).

A create whose answer was lost (a timeout, a failover between its commit and its answer) cannot be told apart from
one that never happened, so a client retries it; without a key each retry is another course. With one, the stream
the create makes is named after ``(owner, key)``, the key is the command id of its first event, and the digest of
the request (its route and decoded body) is recorded in that event's input: a repeat from the same owner finds the
stream and is answered from it as the first request was (the resource as its creation left it, however far it has
moved on since); the same key with another request is refused (:class:`IdempotencyKeyReused`, 409); the same key
of another owner names another stream.

The first answer itself is built from what was committed, never left to a read that a failover can fail after the
commit (:func:`read_committed` retries such a read where one is needed).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

import msgspec
import trio

from openmaic import errors
from openmaic.events.core import SessionCreated
from openmaic.events.log import EventLog, StreamRow
from openmaic.store.backoff import Backoff

__all__ = ["IdempotencyKey", "IdempotencyKeyReused", "REQUEST", "as_created", "created_under", "read_committed"]

REQUEST = "request"
"""The key of the request's digest in the ``input`` of a keyed create's ``session.created``."""

COMMITTED_READ_S = 20.0
"""How long :func:`read_committed` keeps trying a read after a commit (a failover takes seconds)."""

T = TypeVar("T")


class IdempotencyKeyReused(errors.Conflict):
    """This Idempotency-Key was already used for a different request."""

    code = "idempotency_key_reused"
    error_code = "IDEMPOTENCY_KEY_REUSED"


class IdempotencyKey(msgspec.Struct, frozen=True):
    """A create request's ``Idempotency-Key`` (the client's) and the digest of the request it came with."""

    key: str
    digest: str

    @property
    def command_id(self) -> str:
        """The command id of the create's first event (and what the created ids derive from)."""
        return f"idempotency-key:{self.key}"


async def created_under(log: EventLog, stream_id: str, keyed: IdempotencyKey) -> int | None:
    """The last seq the create keyed by ``keyed`` wrote on ``stream_id`` (what it answered is the stream at that
    seq); None when no create has used the key there. :class:`IdempotencyKeyReused` when it came with another
    request."""
    first = await log.command_event(stream_id, keyed.command_id)
    if first is None:
        return None
    (event,) = await log.read_stream(stream_id, first.seq - 1, 1)
    created = log.decode(event)
    if not isinstance(created, SessionCreated) or created.input.get(REQUEST) != keyed.digest:
        raise IdempotencyKeyReused(
            f"Idempotency-Key {keyed.key!r} was already used for a different request; send a new key with each "
            "new request, and the same key only to repeat the same request", path="Idempotency-Key")
    return first.last_seq


def as_created(row: StreamRow, last_seq: int) -> StreamRow:
    """``row`` as the create that wrote up to ``last_seq`` left it: nothing claimed, updated when created."""
    return msgspec.structs.replace(
        row, head_seq=last_seq, attempt=0, lease_worker=None, lease_expires_at=None, wake_at=None,
        unattended_attempts=0, updated_at=row.created_at, deleted_at=None,
    )  # fmt: skip


async def read_committed(read: Callable[[], Awaitable[T]], budget_s: float = COMMITTED_READ_S) -> T:
    """``await read()`` of what a commit just wrote, tried again while the database is out of reach (within
    ``budget_s``): the write is done, so the request it answers must not be answered as a failure."""
    backoff = Backoff("a read after a commit", "the request is answered once it succeeds", cap=2.0)
    with trio.move_on_after(budget_s):
        while True:
            try:
                return await read()
            except errors.DatabaseUnavailable as exc:
                await backoff.failed(exc)
    return await read()  # the budget is spent: this last try's failure is the answer
