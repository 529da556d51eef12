"""The driver's own log lines, one per fault.

asyncpg's pool logs a warning with a full traceback each time it fails to restore its connection floor ("Failed to
restore the pool connection floor; retrying"), several times a second per pool at the start of an outage: a
failover used to print 4–21 tracebacks for one fault, burying the one line that said what happened. The outage
itself is reported by the loops that meet it (:class:`~openmaic.store.backoff.Backoff`, once per outage); the
driver's lines are kept, but each as one line (the traceback summed up as its exception's type and message), and a
line repeating the last one about the same fault within :data:`QUIET_S` is dropped.
"""

from __future__ import annotations

import logging
import time

QUIET_S = 60.0
"""A driver line saying what it said last (same message, same kind of exception) within this long is dropped."""

DRIVER_LOGGERS = ("asyncpg.pool",)


class OneLinePerFault(logging.Filter):
    """A filter for the driver's loggers: tracebacks become one line; repeats of a fault are dropped (counted)."""

    def __init__(self, quiet_s: float = QUIET_S) -> None:
        super().__init__()
        self.quiet_s = quiet_s
        self.dropped = 0
        self._last: tuple[str, str] | None = None
        self._at = 0.0

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        kind = type(exc).__name__ if exc is not None else ""
        key = (str(record.msg), kind)
        now = time.monotonic()
        if key == self._last and now - self._at < self.quiet_s:
            self.dropped += 1
            return False
        self._last, self._at = key, now
        if exc is not None:
            record.msg = f"{record.getMessage()} ({kind}: {exc})"
            record.args = None
            record.exc_info = None
            record.exc_text = None
            record.stack_info = None
        return True


_INSTALLED: list[OneLinePerFault] = []


def summarize_driver_logs() -> None:
    """Install :class:`OneLinePerFault` on the driver's loggers (once per process; later calls do nothing)."""
    if _INSTALLED:
        return
    for name in DRIVER_LOGGERS:
        f = OneLinePerFault()
        logging.getLogger(name).addFilter(f)
        _INSTALLED.append(f)
