"""The bounds every database call of ours lives under: statement and cancel timeouts, the session settings of
every connection, and what a refusal at the server's connection limit says. Plain values: the driver that applies
them is :mod:`openmaic.store.database`'s.

Every call is bounded, statement and cancel, because a silent partition (packets dropped, no reset: a failover that
moves the address, a dead link) would otherwise hang it for good: asyncpg cancels a statement by sending a cancel
request and then waits for the server's answer on the old connection, which never comes. So:

* the server ends any statement after ``statement_timeout`` (:data:`STATEMENT_TIMEOUT_S`), and the client gives up a
  little later (asyncpg's ``command_timeout``, which also bounds its own cancel requests);
* a call cancelled from trio whose connection has not come back within :data:`CANCEL_GRACE_S` has its connection
  terminated, which ends the call at once (the server rolls back whatever that connection had open);
* the server notices a client that vanished without a word (TCP keepalives, ``tcp_user_timeout``) and ends a
  transaction left idle (``idle_in_transaction_session_timeout``, below any lease TTL), so a cut-off process's
  locks do not outlive its leases.
"""

from __future__ import annotations

import time

from openmaic import errors

STATEMENT_TIMEOUT_S = 30.0
"""The server ends any statement of ours that runs longer (a migration lifts it for its own transaction)."""

CLIENT_MARGIN_S = 5.0
"""The client waits this much longer than :data:`STATEMENT_TIMEOUT_S` before it gives a statement up itself: the
server normally ends it first, with a clean error on a reusable connection."""

CANCEL_GRACE_S = 0.5
"""How long a cancelled call may take to come back before its connection is terminated. A cancel that reaches the
server takes milliseconds; one that has not come back by then most likely never will, and terminating a connection
that was merely slow costs only a new connection (the server rolls back what it had open)."""

#: Session settings on every connection of ours (the keepalive and user-timeout settings act on TCP connections only).
DEFAULT_SERVER_SETTINGS = {
    "application_name": "openmaic",
    # A transaction left idle (a stuck or vanished client) holds its row locks and the global log's visibility horizon
    # for every projector, so the server ends it. Below any lease TTL (services pass half the configured TTL, see
    # lease_bounded_settings): the transaction of a worker cut off mid-transaction is gone before another worker can
    # take its streams over.
    "idle_in_transaction_session_timeout": "5000",
    "statement_timeout": str(int(STATEMENT_TIMEOUT_S * 1000)),
    # A client gone without a word is found by keepalive probes after ~11 s idle, and sooner when the server has
    # data it cannot get acknowledged: its session ends, and with it its locks (a projector's advisory locks too).
    "tcp_keepalives_idle": "5",
    "tcp_keepalives_interval": "2",
    "tcp_keepalives_count": "3",
    "tcp_user_timeout": "10000",
}

CONNECTION_LIMIT = "connection_limit"
"""``details["reason"]`` of the :class:`errors.DatabaseUnavailable` raised when PostgreSQL refuses a new connection
at its connection limit (SQLSTATE 53300)."""
CONNECTION_LIMIT_MESSAGE = (
    "the database is at its connection limit and refuses new connections; retry in a few seconds (an operator "
    "raises PostgreSQL's max_connections or the role's or database's CONNECTION LIMIT, or runs fewer server "
    "processes)"
)
REFUSED_RECENTLY_S = 5.0
"""How long after a refusal at the connection limit :meth:`Database.refused_recently` says so (readiness)."""


def lease_bounded_settings(lease_ttl_s: float) -> dict[str, str]:
    """Session settings for a process that holds leases of ``lease_ttl_s``: a transaction it leaves idle (because it
    was cut off mid-transaction) is ended within half a lease, so its row locks are gone before another worker can
    take its streams over. Never below a second: our transactions never wait on anything but the server, yet a
    loaded machine may schedule a process late between two statements, and ending a live transaction then would
    fail a request for nothing (with a lease that short, a takeover waits at most that second for the locks)."""
    idle_ms = min(float(DEFAULT_SERVER_SETTINGS["idle_in_transaction_session_timeout"]), lease_ttl_s * 500)
    return {"idle_in_transaction_session_timeout": str(int(max(idle_ms, 1000)))}


def session_bounds(
    server_settings: dict[str, str] | None, statement_timeout_s: float | None
) -> tuple[dict[str, str], float | None]:
    """The session settings of a pool's connections and the client's own bound on each statement
    (``command_timeout``): the server ends a statement after ``statement_timeout_s`` (None: unbounded, for tools
    that run one huge statement on purpose; an explicit ``statement_timeout`` setting wins), and the client gives
    up a little later."""
    settings = dict(DEFAULT_SERVER_SETTINGS, **(server_settings or {}))
    if "statement_timeout" not in (server_settings or {}):
        settings["statement_timeout"] = str(int((statement_timeout_s or 0) * 1000))
    if statement_timeout_s is None:
        return settings, None
    return settings, statement_timeout_s + min(CLIENT_MARGIN_S, statement_timeout_s)


class Refusals:
    """When PostgreSQL last refused a pool a new connection at its connection limit. The pool's open connections
    still answer meanwhile, so a ping alone would call a process ready whose requests are refused: readiness asks
    this instead."""

    def __init__(self) -> None:
        self._at: float | None = None

    def note(self, exc: errors.DatabaseUnavailable) -> None:
        if exc.details.get("reason") == CONNECTION_LIMIT:
            self._at = time.monotonic()

    def recently(self) -> float | None:
        """Seconds since the last refusal, if within :data:`REFUSED_RECENTLY_S`; else None."""
        if self._at is None:
            return None
        ago = time.monotonic() - self._at
        return ago if ago < REFUSED_RECENTLY_S else None
