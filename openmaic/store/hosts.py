"""The hosts of a ``DATABASE_URL``, and what to say when none of them would serve.

A failover-ready URL names every member of the cluster and asks for the one that takes writes:
``postgresql://u@h1:5432,h2:5433/db?target_session_attrs=read-write``. asyncpg tries the hosts in order but reports
only the last error it met (or "None of the hosts match the target attribute requirement" when every host answered
and none was the primary), so an outage reads as if only one host had been tried.
:mod:`openmaic.store.database` therefore connects one host at a time (:func:`split_hosts`) and, when none serves,
raises one :class:`~openmaic.errors.DatabaseUnavailable` naming each host and what it said (:class:`Tried`).

No driver here: the caller hands in the errors it has already translated (``__cause__`` keeps the driver's own).
"""

from __future__ import annotations

import time
import urllib.parse
from collections.abc import Awaitable, Callable
from typing import Any

from openmaic import errors
from openmaic.store.bounds import CONNECTION_LIMIT
from openmaic.store.sqlstates import NOT_PRIMARY


def split_hosts(dsn: str) -> list[tuple[str, str]]:
    """``(host[:port], the URL with that host alone)`` for each host of a multi-host URL, in order; a URL with one
    host (or hosts given any other way, such as ``?host=``) is one entry, itself."""
    parts = urllib.parse.urlsplit(dsn)
    userinfo, at, hostlist = parts.netloc.rpartition("@")
    names = [h for h in hostlist.split(",") if h]
    if parts.scheme not in ("postgres", "postgresql") or len(names) < 2 or "host=" in parts.query:
        return [(hostlist, dsn)]
    return [(name, urllib.parse.urlunsplit(parts._replace(netloc=f"{userinfo}{at}{name}"))) for name in names]


async def connect_each(dsn: str, connect: Callable[[str], Awaitable[Any]],
                       translate: Callable[[BaseException], BaseException], *, setting: str = "DATABASE_URL") -> Any:
    """``connect(url)`` for each host of ``dsn`` in turn (the driver's connect, bound to its other arguments; see
    :class:`_Failed` for the order); the first connection made is the answer. A failure that ``translate`` makes
    :class:`~openmaic.errors.DatabaseUnavailable` is the host's (the next host is tried); any other is a refusal no
    other host would change (credentials, no such database), raised as is. With one host, its failure is raised as
    is; with several, one error names ``setting`` (where ``dsn`` came from), each host and what it said."""
    hosts = split_hosts(dsn)
    if len(hosts) > 1:
        hosts = sorted(hosts, key=lambda h: _FAILED.cost(h[0]))  # stable: the URL's order among equals
    tried = Tried(setting)
    for host, one in hosts:
        started = time.monotonic()
        try:
            conn = await connect(one)
        except Exception as exc:
            said = translate(exc)
            if len(hosts) == 1 or not isinstance(said, errors.DatabaseUnavailable):
                raise
            tried.add(host, said)
            _FAILED.failed(host, time.monotonic() - started)
        else:
            _FAILED.served(host)
            return conn
    raise tried.error()


FAILED_RECENTLY_S = 30.0
"""How long a host's failure to serve orders the hosts (see :class:`_Failed`)."""


class _Failed:
    """How long each host's last failure to serve took, if recent. Hosts are tried in the URL's order, except that one
    that failed lately goes after those that did not, and one whose failure took long (a primary that vanished
    without a word, a partition: the connect waits for its whole timeout) after one that answered at once (a standby:
    "not the primary"): after a failover, the new primary must not wait behind the old one at every attempt."""

    def __init__(self) -> None:
        self._failed: dict[str, tuple[float, float]] = {}
        """host → (when it failed, how long the attempt took)"""

    def failed(self, host: str, took: float) -> None:
        self._failed[host] = (time.monotonic(), took)

    def served(self, host: str) -> None:
        self._failed.pop(host, None)

    def cost(self, host: str) -> float:
        """-1 for a host that did not fail lately; else how long its last failure took."""
        at, took = self._failed.get(host, (0.0, 0.0))
        return took if at and time.monotonic() - at < FAILED_RECENTLY_S else -1.0


_FAILED = _Failed()


def said(exc: errors.DatabaseUnavailable) -> str:
    """What one host said, short: the reason we know it by, else the driver's own words."""
    reason = exc.details.get("reason")
    if reason == NOT_PRIMARY:
        return "answered, but is not the primary (a standby, or demoted: it accepts no writes)"
    if reason == CONNECTION_LIMIT:
        return "refused: at its connection limit (53300 too many clients)"
    cause = exc.__cause__
    if isinstance(cause, OSError) and cause.strerror:
        return f"{type(cause).__name__}: {cause.strerror}"
    return f"{type(cause).__name__}: {cause}" if cause is not None else exc.message


class Tried:
    """The hosts tried for one connection (of the URL in ``setting``), and what each said."""

    def __init__(self, setting: str = "DATABASE_URL") -> None:
        self.setting = setting
        self.hosts: list[tuple[str, errors.DatabaseUnavailable]] = []

    def add(self, host: str, exc: errors.DatabaseUnavailable) -> None:
        self.hosts.append((host, exc))

    def error(self) -> errors.DatabaseUnavailable:
        """One error for them all: every host and what it said; the reason they share, if they share one (a
        cluster whose every member is at its connection limit is "at its connection limit", for readiness)."""
        reasons = {exc.details.get("reason") for _, exc in self.hosts}
        reason = reasons.pop() if len(reasons) == 1 else None
        each = "; ".join(f"{host}: {said(exc)}" for host, exc in self.hosts)
        # The primary's URL names the cluster's members, one of which a failover promotes; a replica's names standbys.
        after = "; a failover lasts until one is promoted" if self.setting == "DATABASE_URL" else ""
        message = f"no PostgreSQL host of {self.setting} can serve now ({each}{after})"
        new = errors.DatabaseUnavailable(message, **({"reason": reason} if reason else {}))
        new.__cause__ = self.hosts[-1][1] if self.hosts else None
        return new
