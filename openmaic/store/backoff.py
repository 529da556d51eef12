"""Retry pacing for the loops that serve a process (the NOTIFY sender, the listener, a projector's supervisor, the
claim loop): each must outlive any refusal of the database, so it waits and tries again, and says so once."""

from __future__ import annotations

import logging

import trio

log = logging.getLogger("openmaic.store.database")  # where these lines have always been logged


class Backoff:
    """Retry pacing for a loop that serves the process (a sender, a listener, a supervisor): it must outlive any
    refusal of the database, so it waits and tries again — 0.1 s doubling to ``cap`` — and logs once when the
    trouble starts and once when it ends, not at every attempt."""

    def __init__(self, what: str, meanwhile: str = "", *, first: float = 0.1, cap: float = 5.0) -> None:
        self.what = what
        self.meanwhile = meanwhile
        self.first = first
        self.cap = cap
        self.delay = first
        self.failures = 0
        self._said = ""

    async def failed(self, exc: BaseException) -> None:
        """Log (see :meth:`note`) and sleep before the next attempt."""
        self.note(exc)
        await trio.sleep(self.delay)
        self.delay = min(self.delay * 2, self.cap)

    def note(self, exc: BaseException) -> None:
        """Count a failure; log it when it is the first of a run or says something new (a lost connection, then
        a refused one), so that a long outage is a few lines, not one per attempt."""
        self.failures += 1
        said = f"{type(exc).__name__}: {exc}"
        if said != self._said:
            self._said = said
            log.warning("%s: %s; retrying%s", self.what, exc, f" ({self.meanwhile})" if self.meanwhile else "")

    def succeeded(self) -> None:
        if self.failures:
            log.info("%s: working again after %d failed attempts", self.what, self.failures)
        self.failures = 0
        self.delay = self.first
        self._said = ""
