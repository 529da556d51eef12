"""OpenMAIC's browser persistence at ``/api/persistence``: what its three storage contracts share, and the
learner key.

* ``GET /api/persistence/learner-key`` → ``{learnerKey}``: the key runtime sessions are filed under (derived from
  the owner id, :func:`openmaic.owners.learners.learner_key`; never taken from the client).
* Documents: :mod:`openmaic.api.persistence_documents`; runtime sessions: :mod:`openmaic.api.persistence_runtime`;
  assets: :mod:`openmaic.api.persistence_assets`. Their errors are the storage contracts' (``{"error": {code,
  message, details?}}``, :mod:`openmaic.api.errors`), and an unknown path under ``/api/persistence`` is 404
  ``ROUTE_NOT_FOUND``.

A request carrying ``X-OpenMAIC-Legacy-Import`` (OpenMAIC's importer of a 1.1.x browser's data) is refused with
409 ``LEGACY_IMPORT_NOT_BOUND`` unless its owner holds that browser's binding, before anything is read or written
(:func:`import_fence`, called first by every persistence route).
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Any

import trio
from quart import Blueprint

from openmaic import errors
from openmaic.api import fair_share
from openmaic.api.routing import Call, api_route
from openmaic.api.wire import Wire
from openmaic.browser_import.service import HEADER, browser_of
from openmaic.browser_import.store import owner_turn
from openmaic.owners.learners import learner_key as learner_key_of

Handler = Callable[..., Awaitable[Any]]

__all__ = ["UnsupportedAsset", "bp", "import_fence", "owner_writes"]

bp = Blueprint("persistence", __name__)


class UnsupportedAsset(errors.InvalidInput):
    """An asset write is sent as multipart/form-data."""

    code = "unsupported_media_type"
    status = 415
    error_code = "UNSUPPORTED_MEDIA_TYPE"


def owner_writes(handler: Handler) -> Handler:
    """A write route's handler, run in its owner's turn (:func:`openmaic.browser_import.store.owner_turn`): one
    owner's burst of writes takes one request's worth of this process at a time, and, while other owners are
    served, at most about a third of its time (:mod:`openmaic.api.fair_share`)."""

    @functools.wraps(handler)
    async def in_turn(call: Call, **params: str) -> Any:
        async with owner_turn(call.user):
            # In the turn: the owner's other writes queue behind this wait, nobody else's do.
            await trio.sleep(fair_share.wait_before_write(call.user))
            started = trio.current_time()
            try:
                return await handler(call, **params)
            finally:
                fair_share.pause_after(call.user, trio.current_time() - started)

    return in_turn


async def import_fence(call: Call) -> str | None:
    """The browser an importer request names (checked to be bound to the caller), or None for other requests."""
    header = call.request.headers.get(HEADER)
    return await browser_of(call.services.log, call.user, header) if header is not None else None


class LearnerKey(Wire):
    learner_key: str


@api_route(bp, "GET", "/api/persistence/learner-key", response=LearnerKey, error_style="json", errors=(409,))
async def learner_key(call: Call) -> LearnerKey:
    """The key your runtime sessions are filed under."""
    await import_fence(call)
    return LearnerKey(learner_key=learner_key_of(call.user))
