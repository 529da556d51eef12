"""Retry pacing for the loops that serve a process (the NOTIFY sender, the listener, a projector's supervisor, the
claim loop): each must outlive any refusal of the database, so it waits and tries again, and says so once.

The pace is 0.1 s doubling to :data:`CAP_S` (1 s): after a failover every loop must be back within a couple of
seconds of the new primary taking writes, and one attempt a second per loop is nothing to a server that is down or
starting (each attempt is one connection refused at once, or one ``target_session_attrs`` check)."""

from __future__ import annotations

import logging

import trio

log = logging.getLogger("openmaic.store.database")  # where these lines have always been logged

FIRST_S = 0.1
CAP_S = 1.0
"""The longest pause between two attempts of a loop that serves the process."""
MAX_LINES = 8
"""At most this many lines per outage and loop (each says something the others did not)."""


class Backoff:
    """Retry pacing for a loop that serves the process (a sender, a listener, a supervisor): it must outlive any
    refusal of the database, so it waits and tries again — 0.1 s doubling to ``cap`` — and logs once when the
    trouble starts and once when it ends, not at every attempt."""

    def __init__(self, what: str, meanwhile: str = "", *, first: float = FIRST_S, cap: float = CAP_S) -> None:
        self.what = what
        self.meanwhile = meanwhile
        self.first = first
        self.cap = cap
        self.delay = first
        self.failures = 0
        self._said: set[str] = set()
        self._since = 0.0

    async def failed(self, exc: BaseException) -> None:
        """Log (see :meth:`note`) and sleep before the next attempt."""
        self.note(exc)
        await trio.sleep(self.pause())

    def pause(self) -> float:
        """The pause before the next attempt (each call doubles the next one, up to ``cap``)."""
        delay = self.delay
        self.delay = min(self.delay * 2, self.cap)
        return delay

    def note(self, exc: BaseException) -> None:
        """Count a failure; log it when it is the first of a run or says something not said yet in this run (a lost
        connection, then a refused one), so that a long outage is a few lines, not one per attempt — also when its
        messages alternate (one host refusing, then another)."""
        if not self.failures:
            self._since = trio.current_time()
        self.failures += 1
        said = f"{type(exc).__name__}: {exc}"
        if said not in self._said and len(self._said) < MAX_LINES:
            self._said.add(said)
            log.warning("%s: %s; retrying%s", self.what, exc, f" ({self.meanwhile})" if self.meanwhile else "")

    def succeeded(self) -> None:
        if self.failures:
            log.info("%s: working again after %d failed attempts (%.1f s)", self.what, self.failures,
                     trio.current_time() - self._since)
        self.failures = 0
        self.delay = self.first
        self._said.clear()
