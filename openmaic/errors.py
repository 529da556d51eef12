"""The project's exceptions: one root, a stable ``code`` per class.

The API turns ``code`` and ``status`` into ``{"error": {"code", "message", "details"}}``; the CLI prints the
message and exits 2. Messages are written for the person who has to act on them.
"""

from __future__ import annotations

from typing import Any


class OpenMaicError(Exception):
    """Root of every error this project raises on purpose."""

    code = "error"
    status = 500

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


class StreamNotFound(NotFound):
    """No such stream."""

    code = "stream_not_found"


class Conflict(OpenMaicError):
    """The request conflicts with the current state."""

    code = "conflict"
    status = 409


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
    status = 422
