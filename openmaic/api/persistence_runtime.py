"""OpenMAIC's runtime contract (``@openmaic/storage``'s ``runtime-http-contract.md``) at
``/api/persistence/runtime``: a learner's sessions and their records (the rules are in
:mod:`openmaic.browser_import.runtime`).

* ``POST /runtime/sessions {id, kind, stageId, learnerKey, status, createdAt, updatedAt}`` → 201 the session,
  stamped ``runtimeDslVersion``; 409 ``SESSION_ALREADY_EXISTS`` for an id that exists.
* ``GET /runtime/sessions/{id}`` → the session; 404 ``SESSION_NOT_FOUND``. ``DELETE`` → 204 (missing: fine).
* ``PATCH …/sessions/{id}/status {status, updatedAt, expectedLastSeq?}`` → 204.
* ``POST …/sessions/{id}/records {id, sessionId, createdAt, payload, sceneId?, actionIndex?, subAnchor?,
  expectedLastSeq?, sessionTransition?}`` → 201 the record with its ``seq`` (from 0); 200 for the last record
  sent again.
* ``GET …/sessions/{id}/records[?sceneId=]`` → the records in ``seq`` order: every one unless they pass
  ``limits.runtime_list_bytes`` or ``?limit=`` asks for fewer; then ``X-Next-Cursor`` (and ``Link``) name the
  next page's ``?cursor=`` (the answer is a bare array, :mod:`openmaic.api.pages`).
* ``GET /runtime/stages/{stageId}/learners/{learnerKey}/sessions`` → the sessions by the instant of
  ``createdAt``, then id (``?limit=&cursor=`` pages them); ``DELETE`` the same path → 204.
* ``POST /runtime/learners/merge {fromLearnerKey, toLearnerKey}`` → ``{moved}``.
* ``DELETE /runtime/stages/{stageId}`` and ``DELETE /runtime`` → 204: the caller's own sessions on that stage,
  or all of them (an owner administers their own learner data; no route reaches another owner's).

``learnerKey`` is the caller's (``GET /api/persistence/learner-key``); another key in a body or a path is 403
``FORBIDDEN_LEARNER``. Errors are the storage contract's (style ``storage``). Fenced by
``X-OpenMAIC-Legacy-Import`` like every persistence route.
"""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Any

import msgspec
from quart import Blueprint, Response

from openmaic.api.pages import MAX_LIMIT, WholeByDefault, cursor_of, next_page_headers, read_cursor
from openmaic.api.persistence import import_fence, owner_writes
from openmaic.api.routing import Call, api_route
from openmaic.api.wire import Wire, encode
from openmaic.browser_import import runtime
from openmaic.browser_import.runtime_rules import RuntimeInvalid

__all__ = ["bp"]

bp = Blueprint("persistence_runtime", __name__)

_STYLE: dict[str, Any] = {"error_style": "storage"}
Body = dict[str, Any]


class RecordsQuery(Wire):
    scene_id: str | None = None
    limit: Annotated[int, msgspec.Meta(ge=1, le=MAX_LIMIT)] | None = None
    """A page of at most :data:`~openmaic.api.pages.MAX_LIMIT` records, as every list pages; without it, the whole
    session within ``limits.runtime_list_bytes``."""
    cursor: str = ""


class Moved(Wire):
    moved: int


def _expected(body: Body, label: str) -> Any:
    if "expectedLastSeq" not in body:
        return runtime.NO_SEQ
    value = body["expectedLastSeq"]
    if value is None or (isinstance(value, int) and not isinstance(value, bool) and value >= 0):
        return value
    raise RuntimeInvalid(label, [{"path": "/expectedLastSeq",
                                  "message": "expected non-negative integer or null `expectedLastSeq`"}])


@api_route(bp, "POST", "/api/persistence/runtime/sessions", body=Body, response=Body, status=201,
           errors=(403, 409, 429), **_STYLE)
@owner_writes
async def create_session(call: Call) -> tuple[Body, int]:
    """Start a runtime session (filed under your learner key)."""
    await import_fence(call)
    session = await runtime.create_session(call.services.log, call.user, call.body, call.services.config.limits)
    return session, 201


@api_route(bp, "GET", "/api/persistence/runtime/sessions/{session_id}", response=Body, errors=(404, 409),
           **_STYLE)
async def get_session(call: Call, session_id: str) -> Body:
    """One of your runtime sessions."""
    await import_fence(call)
    return await runtime.read_session(call.services.log, call.user, session_id)


@api_route(bp, "DELETE", "/api/persistence/runtime/sessions/{session_id}", errors=(409,), **_STYLE)
@owner_writes
async def delete_session(call: Call, session_id: str) -> None:
    """Delete one of your runtime sessions and its records (a missing one is fine)."""
    await import_fence(call)
    await runtime.delete_sessions(call.services.log, call.user, session_id=session_id)


@api_route(bp, "POST", "/api/persistence/runtime/sessions/{session_id}/records", body=Body, response=Body,
           status=201, errors=(404, 409, 429), **_STYLE)
@owner_writes
async def append_record(call: Call, session_id: str) -> tuple[Body, int]:
    """Append a record to one of your active runtime sessions (its seq is the server's)."""
    await import_fence(call)
    body: Body = call.body
    label = f"runtime record {msgspec.json.encode(body.get('id')).decode()}"
    transition = body.get("sessionTransition")
    if transition is not None and not isinstance(transition, dict):
        raise RuntimeInvalid(label, [{"path": "/sessionTransition", "message": "expected object `sessionTransition`"}])
    stored, appended = await runtime.append_record(
        call.services.log, call.user, session_id, body, call.services.config.limits,
        expected_last_seq=_expected(body, label), transition=transition)
    return stored, 201 if appended else 200


@api_route(bp, "GET", "/api/persistence/runtime/sessions/{session_id}/records", query=RecordsQuery,
           response=list[Body], errors=(400, 404, 409), **_STYLE)
async def list_records(call: Call, session_id: str) -> Response:
    """The records of one of your runtime sessions in seq order (sceneId: only that scene's); a page when they
    pass limits.runtime_list_bytes or ?limit= (X-Next-Cursor: the next page's ?cursor=)."""
    await import_fence(call)
    q: RecordsQuery = call.query
    after = read_cursor(q.cursor, (int,))
    limits = call.services.config.limits
    found, nxt = await runtime.list_records(
        call.services.log, call.user, session_id, q.scene_id, limit=q.limit or limits.runtime_records_per_session,
        after=after[0] if after else 0, budget=limits.runtime_list_bytes)
    return _bare(call, found, None if nxt is None else cursor_of(nxt))


@api_route(bp, "PATCH", "/api/persistence/runtime/sessions/{session_id}/status", body=Body, errors=(404, 409),
           **_STYLE)
@owner_writes
async def set_session_status(call: Call, session_id: str) -> None:
    """Set the status of one of your runtime sessions."""
    await import_fence(call)
    body: Body = call.body
    await runtime.set_status(call.services.log, call.user, session_id, body.get("status"), body.get("updatedAt"),
                             expected_last_seq=_expected(body, "session status"))


@api_route(bp, "GET", "/api/persistence/runtime/stages/{stage_id}/learners/{learner_key}/sessions",
           query=WholeByDefault, response=list[Body], errors=(400, 403, 409), **_STYLE)
async def list_sessions(call: Call, stage_id: str, learner_key: str) -> Response:
    """Your runtime sessions on one course, by the instant they were created (?limit=&cursor=: a page)."""
    await import_fence(call)
    q: WholeByDefault = call.query
    after = read_cursor(q.cursor, (dt.datetime, str))
    found, nxt = await runtime.sessions_of(call.services.log, call.user, stage_id, learner_key, limit=q.limit,
                                           after=after)
    return _bare(call, found, None if nxt is None else cursor_of(*nxt))


@api_route(bp, "DELETE", "/api/persistence/runtime/stages/{stage_id}/learners/{learner_key}", errors=(403, 409),
           **_STYLE)
@owner_writes
async def delete_learner_runtime(call: Call, stage_id: str, learner_key: str) -> None:
    """Delete your runtime sessions on one course."""
    await import_fence(call)
    await runtime.delete_sessions(call.services.log, call.user, stage_id=stage_id, learner_key=learner_key)


@api_route(bp, "DELETE", "/api/persistence/runtime/stages/{stage_id}", errors=(409,), **_STYLE)
@owner_writes
async def delete_stage_runtime(call: Call, stage_id: str) -> None:
    """Delete every runtime session of yours on one course."""
    await import_fence(call)
    await runtime.delete_sessions(call.services.log, call.user, stage_id=stage_id)


@api_route(bp, "DELETE", "/api/persistence/runtime", errors=(409,), **_STYLE)
@owner_writes
async def delete_all_runtime(call: Call) -> None:
    """Delete every runtime session of yours."""
    await import_fence(call)
    await runtime.delete_sessions(call.services.log, call.user)


@api_route(bp, "POST", "/api/persistence/runtime/learners/merge", body=Body, response=Moved, errors=(403, 409),
           **_STYLE)
@owner_writes
async def merge_learner(call: Call) -> Moved:
    """File the sessions of a learner key of yours (an anonymous visit you claimed) under your learner key."""
    await import_fence(call)
    body: Body = call.body
    moved = await runtime.merge_learner(call.services.log, call.user, body.get("fromLearnerKey"),
                                        body.get("toLearnerKey"))
    return Moved(moved=moved)


def _bare(call: Call, items: list[Body], next_cursor: str | None) -> Response:
    return Response(encode(items), 200, next_page_headers(call.request.path, call.query, next_cursor),
                    content_type="application/json")
