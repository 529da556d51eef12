"""The operators' HTTP API: the command line's ``sessions list|show|cancel`` and ``runs retry``, over HTTP.

Served by the admin listener only (:mod:`openmaic.admin`), never on the public API's port, and only to an
operator: with ``server.admin_token`` (``OPENMAIC_ADMIN_TOKEN``) set, a request must carry
``Authorization: Bearer <token>``; without one, only clients on this host (loopback) are served, as through
``kubectl port-forward`` or an SSH tunnel. Anything else is a 403 that says which.

Each route calls the function the command line calls (:mod:`openmaic.tools.sessions`), which makes the owner's
own command through the service the public API uses: an operator's cancel or retry is an event in the log with
its ``commandId``, and the same id again answers the first result and writes nothing.
"""

from __future__ import annotations

import datetime as dt
import hmac
import ipaddress
from typing import Annotated, Literal

import msgspec
from quart import Blueprint

from openmaic.api.pages import MAX_LIMIT, cursor_of, read_cursor
from openmaic.api.routing import Call, api_route
from openmaic.api.wire import CommandId, Success, Wire
from openmaic.errors import InvalidInput, OpenMaicError
from openmaic.kinds import SESSION_KINDS
from openmaic.tools import sessions

__all__ = ["bp"]

bp = Blueprint("operators", __name__)

SessionKind = Literal["generation", "workbench"]
assert set(SessionKind.__args__) == set(SESSION_KINDS)  # type: ignore[attr-defined]


class Forbidden(OpenMaicError):
    """The caller is not an operator."""

    code = "forbidden"
    status = 403
    error_code = "FORBIDDEN"


class SessionsQuery(Wire, forbid_unknown_fields=True):
    owner: str | None = None
    kind: SessionKind | None = None
    state: str | None = None
    stuck: bool = False
    """Only stuck ones: running with an expired lease nobody claimed, queued too long, or paused."""
    limit: Annotated[int, msgspec.Meta(ge=1, le=MAX_LIMIT)] = 100
    cursor: str = ""
    """``nextCursor`` of the page before (:mod:`openmaic.api.pages`)."""


class SessionList(Success):
    sessions: list[sessions.SessionRow]
    next_cursor: str | None = None
    """The ``cursor`` of the next page; null on the last."""


class SessionDetail(Success):
    session: sessions.SessionRow
    leases: list[sessions.Lease]
    events: list[sessions.Event]
    truncated: bool


class OperatorCommand(Wire):
    command_id: CommandId


class CommandDone(Success):
    command_id: str
    seq: int
    replayed: bool


def _require_operator(call: Call) -> None:
    token = call.services.config.server.admin_token
    header = call.request.headers.get("Authorization", "")
    if token is not None:
        given = header[7:] if header[:7].lower() == "bearer " else ""
        # Compared in constant time: the token is a password.
        if not hmac.compare_digest(given.encode(), token.reveal().encode()):
            raise Forbidden("the operators' API needs Authorization: Bearer <server.admin_token>")
        return
    peer = (call.request.remote_addr or "").split("%")[0]
    try:
        loopback = ipaddress.ip_address(peer).is_loopback
    except ValueError:
        loopback = False
    if not loopback:
        raise Forbidden("the operators' API answers only this host's clients unless server.admin_token "
                        "(OPENMAIC_ADMIN_TOKEN) is set")  # fmt: skip


@api_route(bp, "GET", "/api/admin/sessions", query=SessionsQuery, response=SessionList, auth=False, errors=(400, 403))
async def list_sessions(call: Call) -> SessionList:
    """Sessions and runs, newest activity first: state, attempt, lease holder and expiry, last event age."""
    _require_operator(call)
    q: SessionsQuery = call.query
    # A session without events yet sorts last; its cursor says so with an empty time.
    after = read_cursor(q.cursor, (str, str))
    if after is not None:
        after = [_cursor_time(after[0]), after[1]]
    rows = await sessions.list_sessions(call.services.log, owner=q.owner, kind=q.kind, state=q.state, stuck=q.stuck,
                                        stuck_queued_s=call.services.config.runtime.stuck_queued_s, limit=q.limit + 1,
                                        after=after)  # fmt: skip
    page = rows[: q.limit]
    last = page[-1] if len(rows) > q.limit else None
    nxt = None if last is None else cursor_of(last.last_at.isoformat() if last.last_at else "", last.id)
    return SessionList(sessions=page, next_cursor=nxt)


def _cursor_time(text: str) -> dt.datetime | None:
    try:
        return dt.datetime.fromisoformat(text) if text else None
    except ValueError:
        raise InvalidInput("cursor: not a cursor this server gave; start again without it", path="cursor") from None


@api_route(bp, "GET", "/api/admin/sessions/{id}", response=SessionDetail, auth=False, errors=(403, 404))
async def show_session(call: Call, id: str) -> SessionDetail:
    """One session's lease timeline and history."""
    _require_operator(call)
    view = await sessions.show(call.services.log, id, stuck_queued_s=call.services.config.runtime.stuck_queued_s)
    return SessionDetail(session=view.session, leases=view.leases, events=view.events, truncated=view.truncated)


@api_route(bp, "POST", "/api/admin/sessions/{id}/cancel", body=OperatorCommand, response=CommandDone, auth=False,
           errors=(403, 404, 409))
async def cancel_session(call: Call, id: str) -> CommandDone:
    """Cancel a session or run on its owner's behalf (a command in its log)."""
    _require_operator(call)
    r = await sessions.cancel(call.services.log, id, call.body.command_id)
    return CommandDone(command_id=r.command_id, seq=r.seq, replayed=r.replayed)


@api_route(bp, "POST", "/api/admin/runs/{id}/retry", body=OperatorCommand, response=CommandDone, auth=False,
           errors=(403, 404, 409, 429))
async def retry_run(call: Call, id: str) -> CommandDone:
    """Re-run the step a paused run failed on, on its owner's behalf (a command in its log)."""
    _require_operator(call)
    r = await sessions.retry(call.services.log, call.services.config, id, call.body.command_id)
    return CommandDone(command_id=r.command_id, seq=r.seq, replayed=r.replayed)
