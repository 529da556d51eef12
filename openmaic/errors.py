"""The project's exceptions: one root, and per class a stable ``code``, an HTTP ``status`` and an ``error_code``.

* ``code`` is this project's own name for what went wrong (``wrong_expected_seq``, ``unsupported_file_type``):
  logs, the CLI and tests branch on it.
* ``error_code`` is the code the HTTP API sends (``errorCode`` in OpenMAIC's envelope
  ``{"success": false, "errorCode", "error", "details"}``), from OpenMAIC's vocabulary: ``INVALID_REQUEST``,
  ``MISSING_REQUIRED_FIELD``, ``RUN_STATE_CONFLICT``, ``ACTIVE_RUN_LIMIT``, ``INTERNAL_ERROR``, …. Several
  ``code`` values share one ``error_code``: OpenMAIC's clients branch on the coarse one.
* ``status`` is the HTTP status (a validation error is a 400, as in OpenMAIC).

The CLI prints the message and exits 2. Messages are written for the person who has to act on them; ``details``
holds structured facts (``path`` names the offending field).
"""

from __future__ import annotations

from typing import Any


class OpenMaicError(Exception):
    """Root of every error this project raises on purpose."""

    code = "error"
    status = 500
    error_code = "INTERNAL_ERROR"

    def __init__(self, message: str | None = None, **details: Any) -> None:
        self.message = message or (self.__doc__ or self.code).strip().splitlines()[0]
        self.details = details
        super().__init__(self.message)


class ConfigError(OpenMaicError):
    """The configuration is invalid."""

    code = "invalid_config"


class DatabaseUnavailable(OpenMaicError):
    """PostgreSQL cannot be reached; check DATABASE_URL and that the server is running."""

    code = "database_unavailable"
    status = 503
    error_code = "SERVICE_UNAVAILABLE"


class ServiceUnavailable(OpenMaicError):
    """This part of the service is not available in this process."""

    code = "service_unavailable"
    status = 503
    error_code = "SERVICE_UNAVAILABLE"


class DatabaseError(OpenMaicError):
    """PostgreSQL refused a statement."""

    code = "database_error"


class MigrationError(OpenMaicError):
    """The database schema could not be brought up to date."""

    code = "migration_error"


class NotFound(OpenMaicError):
    """No such resource (or it belongs to someone else)."""

    code = "not_found"
    status = 404
    error_code = "INVALID_REQUEST"  # OpenMAIC's JSON 404s ("Classroom generation job not found") use this code


class StreamNotFound(NotFound):
    """No such stream."""

    code = "stream_not_found"


class Conflict(OpenMaicError):
    """The request conflicts with the current state."""

    code = "conflict"
    status = 409
    error_code = "CONFLICT"


class StreamExists(Conflict):
    """A stream with this id already exists."""

    code = "stream_exists"


class WrongExpectedSeq(Conflict):
    """The stream moved on since you read it; read it again and retry."""

    code = "wrong_expected_seq"


class StaleAttempt(Conflict):
    """This writer no longer holds the stream's lease; its write was refused."""

    code = "stale_attempt"


class CommandConflict(Conflict):
    """This command_id was already used for a different command on this stream."""

    code = "command_conflict"


class UnknownEventType(OpenMaicError):
    """A stored event has a type this version does not know."""

    code = "unknown_event_type"


class InvalidInput(OpenMaicError):
    """The input is invalid."""

    code = "invalid_input"
    status = 400
    error_code = "INVALID_REQUEST"


class MissingField(InvalidInput):
    """A required field is missing."""

    code = "missing_field"
    error_code = "MISSING_REQUIRED_FIELD"


class TooManyRequests(OpenMaicError):
    """Too many requests of this kind; wait, then try again."""

    code = "too_many_requests"
    status = 429
    error_code = "INVALID_REQUEST"
