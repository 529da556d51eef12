"""Errors of the HTTP layer, and how every error becomes one of OpenMAIC's three error answers.

One function, :func:`describe`, decides the status, code, message, details and headers of any exception (a
:class:`Problem`), so an HTTP error, the answer to a refused WebSocket handshake and the ``error`` frame on an
open WebSocket always agree. A route then renders the problem in the form OpenMAIC uses on that route
(:func:`render`):

* ``api`` (OpenMAIC's ``apiError``): ``{"success": false, "errorCode", "error", "details"?}`` — the default;
* ``json`` (OpenMAIC's ``jsonErr``): ``{"error": {"code", "message", "details"?}}`` — identity, model settings,
  agents, claims;
* ``storage`` (``@openmaic/storage``'s document and runtime contracts): ``jsonErr``'s shape with the storage
  package's codes: every refused input is ``VALIDATION_FAILED`` (``details`` the ``[{path, message}]`` list),
  an unknown route or method ``ROUTE_NOT_FOUND``, a body too large ``PAYLOAD_TOO_LARGE``, 500s carry nothing;
* ``asset`` (its asset contract): ``storage`` with a wrong method 405 ``METHOD_NOT_ALLOWED`` (and ``Allow``), and
  the code repeated in ``X-Error-Code``;
* the *plain 404*: the text ``Not found`` — routes that must not reveal whether a resource exists answer every
  404 this way (``api_route(..., not_found="plain")``).

``details`` is an object of structured facts (``path`` names the offending field, ``limit`` a size limit); it is
left out when there are none. Unexpected exceptions become a generic 500 carrying only a reference that is also
written to the log with the traceback: their text may hold internals or secrets.
"""

from __future__ import annotations

import logging
import uuid
from typing import Any, Literal

import msgspec
from quart import Response
from werkzeug.exceptions import HTTPException

from openmaic.errors import OpenMaicError, ServiceUnavailable

__all__ = [
    "AddressInUse", "ApiErrorBody", "ErrorInfo", "ErrorStyle", "JsonErrorBody", "MalformedJson", "NotReady",
    "PLAIN_NOT_FOUND", "PayloadTooLarge", "Problem", "ServiceUnavailable", "Unauthorized", "UnsupportedMediaType",
    "describe", "error_body", "storage_problem",
    "render",
]  # fmt: skip

ErrorStyle = Literal["api", "json", "storage", "asset"]

PLAIN_NOT_FOUND = b"Not found"
"""The body of OpenMAIC's owner-hiding 404 (``ownerNotFound``)."""

log = logging.getLogger("openmaic.api")


class Unauthorized(OpenMaicError):
    """Who you are could not be established for this request."""

    code = "unauthorized"
    status = 401
    error_code = "INVALID_CREDENTIAL"

    def __init__(self, message: str | None = None, *, challenge: str | None = None, **details: Any) -> None:
        super().__init__(message, **details)
        self.headers = {"WWW-Authenticate": challenge} if challenge else {}


class MalformedJson(OpenMaicError):
    """The request body is not valid JSON."""

    code = "malformed_json"
    status = 400
    error_code = "INVALID_REQUEST"


class PayloadTooLarge(OpenMaicError):
    """The request body is larger than this route accepts."""

    code = "payload_too_large"
    status = 413
    error_code = "INVALID_REQUEST"


class UnsupportedMediaType(OpenMaicError):
    """This route does not accept a body of this type."""

    code = "unsupported_media_type"
    status = 415
    error_code = "INVALID_REQUEST"


class NotReady(OpenMaicError):
    """The server is not ready to serve (see details.checks)."""

    code = "not_ready"
    status = 503
    error_code = "SERVICE_UNAVAILABLE"


class AddressInUse(OpenMaicError):
    """The HTTP listener could not bind its address."""

    code = "address_in_use"


class Problem(msgspec.Struct, frozen=True, kw_only=True):
    """What went wrong, before it is rendered in a route's style."""

    status: int
    code: str
    """OpenMAIC's ``errorCode`` (``INVALID_REQUEST``, ``RUN_STATE_CONFLICT``, …)."""
    message: str
    details: dict[str, Any] = {}
    headers: dict[str, str] = {}
    reason: str = "error"
    """This project's own code for it (``wrong_expected_seq``): for logs and the WebSocket error frame."""


class ApiErrorBody(msgspec.Struct, frozen=True, kw_only=True, rename="camel", omit_defaults=True):
    """OpenMAIC's ``apiError`` body: ``{"success": false, "errorCode", "error", "details"?}``."""

    success: bool
    error_code: str
    error: str
    """What went wrong, for people (a field's problem names the field)."""
    details: dict[str, Any] | None = None
    """Structured facts: ``path`` names the offending field, ``limit`` a size limit, ``ref`` a server log entry."""


class ErrorInfo(msgspec.Struct, frozen=True, omit_defaults=True):
    """OpenMAIC's ``jsonErr`` error object, also the ``error`` of a WebSocket error frame."""

    code: str
    message: str
    details: dict[str, Any] | None = None


class JsonErrorBody(msgspec.Struct, frozen=True):
    """OpenMAIC's ``jsonErr`` body: ``{"error": {"code", "message", "details"?}}``."""

    error: ErrorInfo


# werkzeug's exceptions (routing, body size, timeouts) by status: OpenMAIC's code and our message.
_HTTP_CODES = {
    400: ("INVALID_REQUEST", "the request is malformed"),
    404: ("INVALID_REQUEST", "no such route"),
    405: ("INVALID_REQUEST", "this route does not accept this method"),
    408: ("INVALID_REQUEST", "the request body did not arrive in time"),
    413: ("INVALID_REQUEST", "the request body is larger than this route accepts"),
    415: ("INVALID_REQUEST", "this route does not accept this content type"),
}

_ENCODER = msgspec.json.Encoder()


def describe(exc: BaseException, *, method: str = "", path: str = "") -> Problem:
    """The problem ``exc`` stands for. Logs unexpected exceptions (with a reference)."""
    if isinstance(exc, OpenMaicError):
        return Problem(status=exc.status, code=exc.error_code, message=exc.message, details=_jsonable(exc.details),
                       headers=getattr(exc, "headers", {}), reason=exc.code)  # fmt: skip
    if isinstance(exc, HTTPException):
        status = exc.code or 500
        code, message = _HTTP_CODES.get(status, ("INVALID_REQUEST", exc.name.lower()))
        details: dict[str, Any] = {}
        headers: dict[str, str] = {}
        if status == 404:
            message = f"no route for {method} {path}" if method else message
        elif status == 405:
            allowed = sorted(getattr(exc, "valid_methods", None) or [])
            details = {"allowed": allowed}
            headers = {"Allow": ", ".join(allowed)}
            message = f"{path} does not accept {method}; allowed: {', '.join(allowed)}" if method else message
        return Problem(status=status, code=code, message=message, details=details, headers=headers,
                       reason=f"http_{status}")
    ref = uuid.uuid4().hex[:12]
    log.error("unexpected error answering %s %s (ref %s)", method, path, ref, exc_info=exc)
    return Problem(status=500, code="INTERNAL_ERROR", message=f"internal error; the server log has the details "
                   f"(ref {ref})", details={"ref": ref}, reason="internal_error")  # fmt: skip


def error_body(problem: Problem, style: ErrorStyle = "api") -> bytes:
    """The JSON body of ``problem`` in ``style``."""
    details = problem.details or None
    if style == "json":
        return _ENCODER.encode(JsonErrorBody(ErrorInfo(problem.code, problem.message, details)))
    return _ENCODER.encode(ApiErrorBody(success=False, error_code=problem.code, error=problem.message,
                                        details=details))


_STORAGE_CODES = {400: "VALIDATION_FAILED", 401: "UNAUTHENTICATED", 413: "PAYLOAD_TOO_LARGE",
                  415: "UNSUPPORTED_MEDIA_TYPE"}


def storage_problem(problem: Problem, style: ErrorStyle) -> tuple[str, str, Any]:
    """``problem`` as the storage contracts write it: ``(code, message, details)``."""
    if problem.reason.startswith("http_"):  # no route matched, or the wrong method on one that did
        if problem.status == 405 and style == "asset":
            return "METHOD_NOT_ALLOWED", problem.message, None
        if problem.status in (404, 405):
            return "ROUTE_NOT_FOUND", problem.message, None
    if problem.status == 500:
        return "INTERNAL_ERROR", "@openmaic/storage: internal server error", None
    if style == "asset" and problem.status == 404:
        # Every miss is the same answer, whatever made it one (an unstorable id included).
        return "ASSET_NOT_FOUND", "@openmaic/storage: asset not found", None
    code = _STORAGE_CODES.get(problem.status, problem.code)
    details: Any = problem.details or None
    if code == "VALIDATION_FAILED":
        found = problem.details.get("problems")
        path = problem.details.get("path")
        details = found if found else ([{"path": path or "/", "message": problem.message}] if path else None)
    return code, problem.message, details


def render(problem: Problem, style: ErrorStyle = "api", *, plain_not_found: bool = False) -> Response:
    """The HTTP answer for ``problem``: JSON in ``style``, or the plain ``Not found`` for a hidden 404."""
    if style in ("storage", "asset"):
        code, message, details = storage_problem(problem, style)
        body = {"error": {"code": code, "message": message, **({"details": details} if details else {})}}
        response = Response(_ENCODER.encode(body), problem.status if code != "ROUTE_NOT_FOUND" else 404,
                            content_type="application/json")
        if code != "ROUTE_NOT_FOUND":  # a 405 turned 404 sends no Allow
            for name, value in problem.headers.items():
                response.headers[name] = value
        if style == "asset":
            response.headers["X-Error-Code"] = code
        return response
    if plain_not_found and problem.status == 404:
        response = Response(PLAIN_NOT_FOUND, 404, content_type="text/plain; charset=utf-8")
    else:
        response = Response(error_body(problem, style), problem.status, content_type="application/json")
    for name, value in problem.headers.items():
        response.headers[name] = value
    return response


def _jsonable(details: dict[str, Any]) -> dict[str, Any]:
    """Details as JSON-safe values (anything msgspec cannot encode becomes its ``str``)."""
    try:
        msgspec.json.encode(details)
        return details
    except (TypeError, ValueError, OverflowError):
        return {k: v if isinstance(v, str | int | float | bool | None) else str(v) for k, v in details.items()}
