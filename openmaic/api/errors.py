"""Errors of the HTTP layer, and how every error becomes ``{"error": {"code", "message", "details"}}``.

One function, :func:`describe`, decides the status, code, message and details of any exception, so the JSON
body of an HTTP error, the HTTP answer to a refused WebSocket handshake and the ``error`` frame on an open
WebSocket are always the same. Unexpected exceptions become a generic 500 carrying only a reference that is
also written to the log with the traceback: their text may hold internals or secrets.
"""

from __future__ import annotations

import logging
import uuid
from typing import Any

import msgspec
from werkzeug.exceptions import HTTPException

from openmaic.errors import OpenMaicError

__all__ = [
    "AddressInUse", "ErrorBody", "ErrorInfo", "MalformedJson", "NotReady", "PayloadTooLarge", "ServiceUnavailable",
    "Unauthorized", "describe",
]  # fmt: skip

log = logging.getLogger("openmaic.api")


class Unauthorized(OpenMaicError):
    """Who you are could not be established for this request."""

    code = "unauthorized"
    status = 401

    def __init__(self, message: str | None = None, *, challenge: str | None = None, **details: Any) -> None:
        super().__init__(message, **details)
        self.headers = {"WWW-Authenticate": challenge} if challenge else {}


class MalformedJson(OpenMaicError):
    """The request body is not valid JSON."""

    code = "malformed_json"
    status = 400


class PayloadTooLarge(OpenMaicError):
    """The request body is larger than this route accepts."""

    code = "payload_too_large"
    status = 413


class ServiceUnavailable(OpenMaicError):
    """This part of the service is not available in this process."""

    code = "service_unavailable"
    status = 503


class NotReady(OpenMaicError):
    """The server is not ready to serve (see details.checks)."""

    code = "not_ready"
    status = 503


class AddressInUse(OpenMaicError):
    """The HTTP listener could not bind its address."""

    code = "address_in_use"


class ErrorInfo(msgspec.Struct, frozen=True):
    """What went wrong: a stable ``code`` to branch on, a ``message`` for people, and structured ``details``."""

    code: str
    message: str
    details: dict[str, Any] = {}


class ErrorBody(msgspec.Struct, frozen=True):
    """The body of every error response."""

    error: ErrorInfo


# werkzeug's exceptions (routing, body size, timeouts) by status: our stable code and message.
_HTTP_CODES = {
    400: ("bad_request", "the request is malformed"),
    404: ("not_found", "no such route"),
    405: ("method_not_allowed", "this route does not accept this method"),
    408: ("request_timeout", "the request body did not arrive in time"),
    413: ("payload_too_large", "the request body is larger than this route accepts"),
    415: ("unsupported_media_type", "this route does not accept this content type"),
}


def describe(exc: BaseException, *, method: str = "", path: str = "") -> tuple[int, ErrorInfo, dict[str, str]]:
    """Status, error body and extra headers for ``exc``. Logs unexpected exceptions (with a reference)."""
    if isinstance(exc, OpenMaicError):
        return exc.status, ErrorInfo(exc.code, exc.message, _jsonable(exc.details)), getattr(exc, "headers", {})
    if isinstance(exc, HTTPException):
        status = exc.code or 500
        code, message = _HTTP_CODES.get(status, (f"http_{status}", exc.name.lower()))
        details: dict[str, Any] = {}
        headers: dict[str, str] = {}
        if status == 404:
            message = f"no route for {method} {path}" if method else message
        elif status == 405:
            allowed = sorted(getattr(exc, "valid_methods", None) or [])
            details = {"allowed": allowed}
            headers = {"Allow": ", ".join(allowed)}
            message = f"{path} does not accept {method}; allowed: {', '.join(allowed)}" if method else message
        return status, ErrorInfo(code, message, details), headers
    ref = uuid.uuid4().hex[:12]
    log.error("unexpected error answering %s %s (ref %s)", method, path, ref, exc_info=exc)
    return 500, ErrorInfo("internal_error", f"internal error; the server log has the details (ref {ref})",
                          {"ref": ref}), {}  # fmt: skip


def _jsonable(details: dict[str, Any]) -> dict[str, Any]:
    """Details as JSON-safe values (anything msgspec cannot encode becomes its ``str``)."""
    try:
        msgspec.json.encode(details)
        return details
    except (TypeError, ValueError, OverflowError):
        return {k: v if isinstance(v, str | int | float | bool | None) else str(v) for k, v in details.items()}
