"""OpenMAIC's claim routes (errors in its ``jsonErr`` form).

* ``POST /api/identity/claim`` — the signed-in owner of the request claims the anonymous owner its
  ``anonymous_id`` cookie names (:mod:`openmaic.owners.claims`). Same-origin JSON only (403
  ``CROSS_ORIGIN_REFUSED``, checked before anything else). 200 ``{status: "claimed", moved}`` or ``{status:
  "already-claimed"}``, both dropping the anonymous cookie (so does ``ALREADY_CLAIMED_ELSEWHERE``: that identity
  can never be claimed by this owner). 403 ``TARGET_ANONYMOUS`` when the request's own owner is anonymous, 409
  ``NO_PENDING_CLAIM`` without a cookie to claim, the other refusals as :class:`~openmaic.owners.claims
  .ClaimRefused` says, 503 ``OWNER_BUSY`` with ``Retry-After: 2``. Uncacheable.
* ``GET /api/identity/merged-from?salt=&digest=`` — ``{merged}``: whether a claim merged into the requesting
  owner an owner whose id hashes to ``digest`` (sha256 hex of ``salt ‖ NUL ‖ id``). Answers for the requester's
  own claims only, names no owner.
"""

from __future__ import annotations

from typing import Annotated, Any

import msgspec
from quart import Blueprint, Response

from openmaic.api.routing import Call, api_route, app_state
from openmaic.api.origins import require_same_origin_json
from openmaic.api.wire import encode
from openmaic.owners.claims import ClaimQuotas, ClaimRefused, ClaimResult, claim_owner, is_anonymous, merged_from

__all__ = ["bp"]

bp = Blueprint("identity", __name__)


class MergedFromQuery(msgspec.Struct, kw_only=True):
    salt: Annotated[str, msgspec.Meta(min_length=16, max_length=128, pattern=r"^[0-9a-f]+$")]
    digest: Annotated[str, msgspec.Meta(min_length=64, max_length=64, pattern=r"^[0-9a-f]+$")]


class MergedFrom(msgspec.Struct, frozen=True):
    merged: bool


def _no_store(value: Any, status: int = 200) -> Response:
    return Response(encode(value), status, content_type="application/json", headers={"Cache-Control": "no-store"})


@api_route(bp, "POST", "/api/identity/claim", auth=False, response=ClaimResult, error_style="json",
           errors=(400, 403, 409, 503))
async def claim_anonymous_work(call: Call) -> Response:
    """Move the anonymous owner this browser used before signing in to the signed-in owner, and retire it."""
    state = app_state()
    require_same_origin_json(call.request, "claims", state.allowed_origins)
    identity = state.identity
    owner = await identity.resolve(call.request)
    if is_anonymous(owner):
        raise ClaimRefused("TARGET_ANONYMOUS")
    pending = await identity.pending_claim(call.request)
    if pending is None:
        raise ClaimRefused("NO_PENDING_CLAIM")
    try:
        result = await claim_owner(call.services.log, pending, owner,
                                   quotas=ClaimQuotas.of(call.services.config.limits))
    except ClaimRefused as refused:
        if refused.error_code == "ALREADY_CLAIMED_ELSEWHERE":
            identity.drop_anonymous_cookie()  # it can never be claimed here: stop presenting it
        raise
    identity.drop_anonymous_cookie()
    return _no_store(result)


@api_route(bp, "GET", "/api/identity/merged-from", query=MergedFromQuery, response=MergedFrom, error_style="json")
async def merged_from_digest(call: Call) -> Response:
    """Whether a claim merged into you an owner whose id hashes to the given salted digest."""
    q: MergedFromQuery = call.query
    return _no_store(MergedFrom(merged=await merged_from(call.services.db, call.user, q.salt, q.digest)))
