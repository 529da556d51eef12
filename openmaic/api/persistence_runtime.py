"""OpenMAIC's learner runtime routes (``/api/persistence/runtime/…``), as its ``HttpRuntimeStore`` uses them
(errors in OpenMAIC's ``jsonErr`` form; the rules are in :mod:`openmaic.browser_import.runtime`).

* ``POST /api/persistence/runtime/sessions {id, kind, stageId, learnerKey, status, createdAt, updatedAt}`` → 201
  the session (200 when it exists exactly so).
* ``GET /api/persistence/runtime/sessions/{id}`` → the session; 404 ``SESSION_NOT_FOUND``.
* ``POST …/sessions/{id}/records {id, sessionId, createdAt, payload, sceneId?, actionIndex?, subAnchor?,
  expectedLastSeq?, sessionTransition?}`` → 201 the record with its ``seq`` (200 when it exists exactly so).
* ``GET …/sessions/{id}/records[?sceneId=]`` → the records in ``seq`` order.

The two lists are bare arrays, whole unless ``?limit=`` asks for a page; then ``X-Next-Cursor`` (and ``Link``)
give the next page's ``?cursor=`` (:mod:`openmaic.api.pages`).
* ``PATCH …/sessions/{id}/status {status, updatedAt, expectedLastSeq?}`` → 204.
* ``GET /api/persistence/runtime/stages/{stageId}/learners/{learnerKey}/sessions`` → the sessions, oldest first.

Fenced by ``X-OpenMAIC-Legacy-Import`` like every persistence route.
"""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Any

import msgspec
from quart import Blueprint, Response

from openmaic import errors
from openmaic.api.pages import WholeByDefault, cursor_of, next_page_headers, page_of, read_cursor
from openmaic.api.persistence import import_fence
from openmaic.api.routing import Call, api_route
from openmaic.api.wire import Wire, encode
from openmaic.browser_import import runtime

__all__ = ["bp"]

bp = Blueprint("persistence_runtime", __name__)

Id = Annotated[str, msgspec.Meta(min_length=1, max_length=200)]
Stamp = Annotated[str, msgspec.Meta(min_length=1, max_length=64)]
Status = Annotated[str, msgspec.Meta(pattern=r"^[a-z][a-z_-]{0,31}$")]
Kind = Annotated[str, msgspec.Meta(pattern=r"^[A-Za-z][A-Za-z0-9_.-]{0,63}$")]
Unset = msgspec.UnsetType
UNSET: Any = msgspec.UNSET


class SessionInit(Wire):
    """A runtime session as its client creates it."""

    id: Id
    kind: Kind
    stage_id: Id
    learner_key: Id
    status: Status = "active"
    created_at: Stamp
    updated_at: Stamp


class Transition(Wire):
    status: Status
    updated_at: Stamp | Unset = UNSET


class RecordInit(Wire):
    """A runtime record as its client appends it (``seq`` is the server's)."""

    id: Id
    session_id: Id
    created_at: Stamp
    payload: Any
    scene_id: Id | Unset = UNSET
    action_index: Annotated[int, msgspec.Meta(ge=0)] | Unset = UNSET
    sub_anchor: Any = UNSET
    expected_last_seq: Annotated[int, msgspec.Meta(ge=0)] | None | Unset = UNSET
    session_transition: Transition | Unset = UNSET


class StatusChange(Wire):
    status: Status
    updated_at: Stamp
    expected_last_seq: Annotated[int, msgspec.Meta(ge=0)] | None | Unset = UNSET


class RecordsQuery(WholeByDefault):
    scene_id: Id | None = None


def _json(value: Any) -> dict[str, Any]:
    out: dict[str, Any] = msgspec.to_builtins(value)
    return out


@api_route(bp, "POST", "/api/persistence/runtime/sessions", body=SessionInit, response=dict[str, Any], status=201,
           error_style="json", errors=(400, 403, 404, 409))
async def create_session(call: Call) -> tuple[dict[str, Any], int]:
    """Start a runtime session on one of your courses (the same session again changes nothing)."""
    await import_fence(call)
    session, created = await runtime.create_session(call.services.log, call.user, _json(call.body))
    return session, 201 if created else 200


@api_route(bp, "GET", "/api/persistence/runtime/sessions/{session_id}", response=dict[str, Any],
           error_style="json", errors=(404, 409))
async def get_session(call: Call, session_id: str) -> dict[str, Any]:
    """One of your runtime sessions."""
    await import_fence(call)
    state = await runtime.read_session(call.services.log, call.user, session_id)
    assert state.session is not None
    return state.session


@api_route(bp, "POST", "/api/persistence/runtime/sessions/{session_id}/records", body=RecordInit,
           response=dict[str, Any], status=201, error_style="json", errors=(400, 404, 409))
async def append_record(call: Call, session_id: str) -> tuple[dict[str, Any], int]:
    """Append a record to one of your active runtime sessions (the same record again changes nothing)."""
    await import_fence(call)
    body: RecordInit = call.body
    if body.session_id != session_id:
        raise errors.InvalidInput(f"sessionId must be the session of the path ({session_id!r})", path="sessionId")
    record = _json(msgspec.structs.replace(body, expected_last_seq=UNSET, session_transition=UNSET))
    transition = _json(body.session_transition) if body.session_transition is not UNSET else None
    stored, appended = await runtime.append_record(call.services.log, call.user, session_id, record,
                                                   expected_last_seq=body.expected_last_seq, transition=transition)
    return stored, 201 if appended else 200


@api_route(bp, "GET", "/api/persistence/runtime/sessions/{session_id}/records", query=RecordsQuery,
           response=list[dict[str, Any]], error_style="json", errors=(400, 404, 409))
async def list_records(call: Call, session_id: str) -> Response:
    """The records of one of your runtime sessions, in order (sceneId: only that scene's); every one unless
    ?limit= asks for a page (X-Next-Cursor: the next page's ?cursor=, since the answer is a bare array)."""
    await import_fence(call)
    found = await runtime.list_records(call.services.log, call.user, session_id, call.query.scene_id)
    page, nxt = page_of(found, lambda r: (r["seq"],), call.query, (int,))
    return _bare(call, page, nxt)


@api_route(bp, "PATCH", "/api/persistence/runtime/sessions/{session_id}/status", body=StatusChange,
           error_style="json", errors=(400, 404, 409))
async def set_session_status(call: Call, session_id: str) -> None:
    """Set the status of one of your runtime sessions."""
    await import_fence(call)
    body: StatusChange = call.body
    await runtime.set_status(call.services.log, call.user, session_id, body.status, body.updated_at,
                             expected_last_seq=body.expected_last_seq)


@api_route(bp, "GET", "/api/persistence/runtime/stages/{stage_id}/learners/{learner_key}/sessions",
           query=WholeByDefault, response=list[dict[str, Any]], error_style="json", errors=(400, 409))
async def list_sessions(call: Call, stage_id: str, learner_key: str) -> Response:
    """Your runtime sessions on one course under one learner key, oldest first; every one unless ?limit= asks
    for a page (X-Next-Cursor as for records)."""
    await import_fence(call)
    q: WholeByDefault = call.query
    after = read_cursor(q.cursor, (dt.datetime, str))
    found, nxt = await runtime.sessions_of(call.services.log, call.user, stage_id, learner_key, limit=q.limit,
                                           after=after)
    return _bare(call, found, None if nxt is None else cursor_of(*nxt))


def _bare(call: Call, items: list[dict[str, Any]], next_cursor: str | None) -> Response:
    return Response(encode(items), 200, next_page_headers(call.request.path, call.query, next_cursor),
                    content_type="application/json")
