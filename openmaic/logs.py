"""Logging for ``openmaic serve``: text for a terminal, or one JSON object per line for a log pipeline.

:func:`configure` installs one handler on the root logger (stderr), in the format ``server.log_format`` names
(``--log-format`` and ``OPENMAIC_LOG_FORMAT`` override it). hypercorn's and the libraries' loggers go through it
too, so a JSON deployment gets nothing but JSON lines.

**Context.** :func:`bind` adds fields to every line logged inside its block, by the task that entered it and by
every task started from there: the fields live in a :class:`contextvars.ContextVar`, and trio gives each new
task a copy of its spawner's context. The worker binds ``worker``; each actor's task binds ``stream_id``,
``attempt`` and ``kind``; a step binds ``step``. So every line an actor writes (its own, a step's, a provider's
retry warning inside the step) says which stream, attempt, worker and step it is about, whatever logger wrote it.

A JSON line is ``{"ts", "level", "logger", "message", <context fields>, "exc"?}`` with ``ts`` in ISO 8601 UTC
(milliseconds) and ``exc`` the formatted traceback. Text lines are unchanged by the context (it is in their
message already, where it matters).

**Keys never reach a line.** Code never logs a key on purpose (:class:`~openmaic.config.Secret` does not even
print itself); as a last line of defence each formatted line, in either format, has every configured secret
(providers' keys and credentials, ``OPENMAIC_SECRET_KEY``, ``ACCESS_CODE``, the admin token; any of 8 characters or
more) replaced by ``***``.
"""

from __future__ import annotations

import contextlib
import contextvars
import datetime as dt
import logging
import sys
from collections.abc import Iterable, Iterator
from typing import Any, Literal

import msgspec

__all__ = ["LogFormat", "bind", "configure", "context", "secrets_of"]

LogFormat = Literal["text", "json"]

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"

_CONTEXT: contextvars.ContextVar[dict[str, Any]] = contextvars.ContextVar("openmaic_log_context", default={})
_ENCODER = msgspec.json.Encoder()


def context() -> dict[str, Any]:
    """The fields bound for the current task."""
    return _CONTEXT.get()


@contextlib.contextmanager
def bind(**fields: Any) -> Iterator[None]:
    """Add ``fields`` to every line logged in the block (and by tasks started in it)."""
    token = _CONTEXT.set({**_CONTEXT.get(), **fields})
    try:
        yield
    finally:
        _CONTEXT.reset(token)


class _Scrubbing(logging.Formatter):
    def __init__(self, fmt: str | None, secrets: Iterable[str]) -> None:
        super().__init__(fmt)
        # Longest first, so a secret that contains another is replaced whole.
        self._secrets = sorted({s for s in secrets if s and len(s) >= 8}, key=len, reverse=True)

    def scrub(self, line: str) -> str:
        for secret in self._secrets:
            line = line.replace(secret, "***")
        return line

    def format(self, record: logging.LogRecord) -> str:
        return self.scrub(super().format(record))


class JsonFormatter(_Scrubbing):
    """One JSON object per record (see the module's doc)."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        super().__init__(None, secrets)

    def format(self, record: logging.LogRecord) -> str:
        when = dt.datetime.fromtimestamp(record.created, dt.UTC)
        line: dict[str, Any] = {
            "ts": when.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in context().items():
            line.setdefault(key, value)
        if record.exc_info:
            line["exc"] = self.formatException(record.exc_info)
        elif record.exc_text:
            line["exc"] = record.exc_text
        return self.scrub(_ENCODER.encode(line).decode())


def configure(fmt: LogFormat = "text", *, secrets: Iterable[str] = (), level: int = logging.INFO) -> None:
    """Log to stderr in ``fmt``, scrubbing ``secrets``; replaces whatever handlers the root logger had."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter(secrets) if fmt == "json" else _Scrubbing(TEXT_FORMAT, secrets))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)


def secrets_of(config: Any) -> list[str]:
    """Every secret a configuration holds: the providers' keys and credentials, the secret that seals the keys
    owners save, the access code and the admin token. (Owners' own keys live sealed in the database and are never
    logged.)"""
    found: list[Any] = []
    for provider in getattr(config, "providers", {}).values():
        found.append(getattr(provider, "api_key", None))
        found += list((getattr(provider, "credentials", None) or {}).values())
    found += [getattr(config, "secret_key", None), getattr(config, "access_code", None),
              getattr(getattr(config, "server", None), "admin_token", None)]
    return [s.reveal() if hasattr(s, "reveal") else str(s) for s in found if s is not None]
