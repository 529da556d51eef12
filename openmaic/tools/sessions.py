"""The operators' view of sessions and runs: list (with "stuck"), show (history and lease timeline), cancel, retry.

Its types are what both ``openmaic sessions … --json`` and the operators' HTTP API (:mod:`openmaic.api.operators`)
answer, in the API's camelCase.

Reads come from the scheduling rows (``streams``: status, attempt, lease), the ``session_list`` read model (the
state a user sees, and the title) and the log itself (history, leases). Commands are the users' commands, made
on the owner's behalf: :func:`cancel` and :func:`retry` look the owner up and call the very service methods the
HTTP API calls (``actors.commands.Commands.cancel``, ``runs.service.RunService.retry``), so an operator's command
is an event in the log with its ``command_id``, idempotent like any other: the same id again answers the original
seq and writes nothing.

"Stuck" (``--stuck``): running with an expired lease that no worker has claimed since (no worker serves the kind,
or every one is full or cut off), queued and due for longer than ``runtime.stuck_queued_s``, or paused after a
failure (it waits for a retry).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

import msgspec

from openmaic import errors
from openmaic.actors.commands import CommandResult
from openmaic.actors.commands import Commands as SessionCommands
from openmaic.config import Config
from openmaic.events.log import EventLog, RecordedEvent
from openmaic.kinds import SESSION_KINDS
from openmaic.probes import STUCK_REASONS, SessionRow
from openmaic.runs.service import RunService
from openmaic.store.queries import Q

__all__ = ["Lease", "SessionRow", "SessionView", "cancel", "list_sessions", "retry", "show", "SESSION_KINDS",
           "STUCK_REASONS"]


HISTORY_LIMIT = 10_000
"""Events ``show`` reads at most (a longer history is cut, and says so)."""


class Lease(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """One attempt's hold on the stream."""

    attempt: int
    worker: str
    reason: str
    """Why it was claimed: ``queued`` or ``orphaned`` (a takeover)."""
    claimed_at: dt.datetime
    claimed_seq: int
    ended: str
    """``released (wait)``, ``released (shutdown)``, ``taken over``, ``ended (completed)`` or ``held``."""
    ended_at: dt.datetime | None = None


class Event(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    seq: int
    type: str
    recorded_at: dt.datetime
    attempt: int | None
    command_id: str | None
    data: msgspec.Raw


class SessionView(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    session: SessionRow
    leases: list[Lease]
    events: list[Event]
    truncated: bool = False


async def list_sessions(
    log: EventLog,
    *,
    owner: str | None = None,
    kind: str | None = None,
    state: str | None = None,
    stuck: bool = False,
    stuck_queued_s: float = 300.0,
    limit: int = 100,
    after: Sequence[Any] | None = None,
) -> list[SessionRow]:
    """Newest activity first, at most ``limit``, after the row whose ``(last_at, id)`` is ``after`` (a page:
    the ``(last_at, id)`` of the last row given)."""
    start = (False, None, None) if after is None else (True, *after)
    return await log.db.fetch_as(SessionRow, Q.sessions_list, list(SESSION_KINDS), owner, kind, state, stuck,
                                 stuck_queued_s, limit, None, *start)  # fmt: skip


async def _session(log: EventLog, session_id: str, stuck_queued_s: float) -> SessionRow:
    # The list's own query, narrowed to the one stream: show and list never disagree about a session.
    rows = await log.db.fetch_as(SessionRow, Q.sessions_list, list(SESSION_KINDS), None, None, None, False,
                                 stuck_queued_s, 1, session_id, False, None, None)  # fmt: skip
    if rows:
        return rows[0]
    row = await log.stream_row(session_id)
    if row is not None:
        raise errors.NotFound(f"{session_id!r} is a {row.kind} stream, not a session or run (see `openmaic replay`)")
    raise errors.NotFound(f"no session or run has the id {session_id!r} (`openmaic sessions list` shows them)")


def lease_timeline(events: Sequence[RecordedEvent]) -> list[Lease]:
    """Each attempt's lease, from the log: when it was claimed and how it ended."""
    leases: list[Lease] = []
    current: dict[str, object] | None = None

    def close(how: str, at: dt.datetime | None) -> None:
        nonlocal current
        if current is not None:
            leases.append(Lease(ended=how, ended_at=at, **current))  # type: ignore[arg-type]
            current = None

    for e in events:
        if e.type == "lease.claimed":
            data = msgspec.json.decode(e.data)
            close("taken over", e.recorded_at)  # a new claim without a release: the last holder's lease expired
            current = {"attempt": data["attempt"], "worker": data["worker"], "reason": data["reason"],
                       "claimed_at": e.recorded_at, "claimed_seq": e.seq}  # fmt: skip
        elif e.type == "lease.released":
            close(f"released ({msgspec.json.decode(e.data).get('reason', '')})", e.recorded_at)
        elif e.type == "session.ended":
            close(f"ended ({msgspec.json.decode(e.data).get('status', '')})", e.recorded_at)
    close("held", None)
    return leases


async def show(log: EventLog, session_id: str, *, stuck_queued_s: float = 300.0) -> SessionView:
    session = await _session(log, session_id, stuck_queued_s)
    events: list[RecordedEvent] = []
    while len(events) < HISTORY_LIMIT:
        page = await log.read_stream(session_id, events[-1].seq if events else 0, 1000)
        events += page
        if len(page) < 1000:
            break
    truncated = len(events) >= HISTORY_LIMIT
    shown = [Event(seq=e.seq, type=e.type, recorded_at=e.recorded_at, attempt=e.attempt, command_id=e.command_id,
                   data=e.data) for e in events[:HISTORY_LIMIT]]  # fmt: skip
    return SessionView(session=session, leases=lease_timeline(events), events=shown, truncated=truncated)


async def _owner_of(log: EventLog, session_id: str, kinds: Sequence[str]) -> tuple[str, str]:
    row = await log.stream_row(session_id)
    if row is None or row.kind not in SESSION_KINDS:
        raise errors.NotFound(f"no session or run has the id {session_id!r} (`openmaic sessions list` shows them)")
    if row.kind not in kinds:
        raise errors.Conflict(f"{session_id!r} is a {row.kind} session; only {' or '.join(kinds)} runs take this "
                              "command")  # fmt: skip
    return row.owner_id, row.kind


async def cancel(log: EventLog, session_id: str, command_id: str) -> CommandResult:
    """Cancel a session or run on its owner's behalf (the HTTP API's cancel)."""
    owner, _ = await _owner_of(log, session_id, SESSION_KINDS)
    return await SessionCommands(log, message_kinds=["workbench"]).cancel(owner, session_id, command_id)


async def retry(log: EventLog, config: Config, run_id: str, command_id: str) -> CommandResult:
    """Re-run the step a paused run failed on, on its owner's behalf (the HTTP API's retry)."""
    owner, _ = await _owner_of(log, run_id, ("generation",))
    return await RunService(log, config).retry(owner, run_id, command_id)
