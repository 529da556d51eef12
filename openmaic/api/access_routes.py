"""OpenMAIC's ``/api/access-code`` routes, the door of the access-code gate (:mod:`openmaic.api.access_code`).

* ``POST /api/access-code/verify {code}`` — a correct code sets the ``openmaic_access`` cookie (200
  ``{success: true}``); a wrong one is 401; too many attempts from one address are 429 ``RATE_LIMITED`` with
  ``Retry-After``.
* ``GET /api/access-code/status`` — ``{success, enabled, authenticated}``: whether the gate is on, and whether this
  request carries a cookie that passes it.

Both are open (the gate does not guard its own door) and need no owner.
"""

from __future__ import annotations

from typing import Any

import msgspec
from quart import Blueprint, Response

from openmaic.api.access_code import ACCESS_COOKIE
from openmaic.api.routing import Call, api_route, app_state
from openmaic.api.wire import Success, encode
from openmaic.errors import OpenMaicError

__all__ = ["bp"]

bp = Blueprint("access_code", __name__)


class InvalidAccessCode(OpenMaicError):
    """Invalid access code"""

    code = "invalid_access_code"
    error_code = "INVALID_REQUEST"
    status = 401


class AccessCodeNotConfigured(OpenMaicError):
    """This server has no access code"""

    code = "access_code_not_configured"
    error_code = "INVALID_REQUEST"
    status = 400


class VerifyBody(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    code: str


class AccessStatus(Success):
    enabled: bool
    authenticated: bool


@api_route(bp, "POST", "/api/access-code/verify", body=VerifyBody, response=Success, auth=False,
           errors=(400, 401, 429))
async def verify_access_code(call: Call) -> Any:
    """Check the access code; a correct one sets the cookie every other /api route needs."""
    identity = app_state().identity
    if identity.gate is None:
        raise AccessCodeNotConfigured()
    identity.attempts.attempt(identity.client_address(call.request))
    if not identity.gate.check_code(call.body.code):
        raise InvalidAccessCode()
    response = Response(encode(Success()), 200, content_type="application/json")
    identity.access_cookie(response, call.request)
    return response


@api_route(bp, "GET", "/api/access-code/status", response=AccessStatus, auth=False)
async def access_code_status(call: Call) -> AccessStatus:
    """Whether the access-code gate is on, and whether this request passes it."""
    gate = app_state().identity.gate
    authenticated = gate is None or gate.admits(call.request.cookies.get(ACCESS_COOKIE))
    return AccessStatus(enabled=gate is not None, authenticated=authenticated)
