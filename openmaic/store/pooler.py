"""A connection pooler (PgBouncer) between us and PostgreSQL: what each of its modes allows, where each of our
connections goes, and how the session bounds of :mod:`openmaic.store.bounds` reach the server through it.

``DATABASE_POOLER`` says what ``DATABASE_URL`` points at; ``DATABASE_DIRECT_URL`` is PostgreSQL itself, for the
connections that need a session of their own. Both describe the URL every command uses (``serve``, ``migrate``,
``db status``, the tools), so they are read from the environment beside it, not from ``openmaic.yml``.

* unset (``none``): PostgreSQL itself. The bounds go as startup parameters, as always.
* ``session``: each client connection keeps one server session for its whole life, so sessions work as without a
  pooler (LISTEN, session advisory locks, ``SET``). PgBouncer refuses startup parameters it does not know
  (``unsupported startup parameter: idle_in_transaction_session_timeout``), so the bounds are sent by ``SET`` on
  each new connection (and again after the reset of a held one).
* ``transaction``: a client connection has a server session only for the length of one transaction. So: no named
  prepared statements (the driver's statement cache is off and it re-parses an unnamed statement at each call:
  PgBouncer before 1.21 cannot carry named ones, and Debian's is 1.18); no ``SET`` (it would land on whichever
  session comes next): the bounds must be the role's or database's defaults (``ALTER ROLE … SET``), which every
  server session starts with; and the connections that need a session — the LISTEN connection, the projector's
  and rebuild's session advisory locks, migrations — go to ``DATABASE_DIRECT_URL``. Without it the start is
  refused: a listener through the pooler would hear nothing (its LISTEN lands on a session it does not keep) and
  two processes would both "hold" a projection's lock.

Whatever the mode, :func:`check_bounds` reads the bounds in effect on each new pooled connection (the first one at
start) and refuses it when one is off or looser than asked, naming it and what to change: a pooler that dropped
them silently (``ignore_startup_parameters``) is found there.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from openmaic import errors
from openmaic.store.queries import Q

POOLER_VARIABLE = "DATABASE_POOLER"
DIRECT_URL_VARIABLE = "DATABASE_DIRECT_URL"
MODES = ("none", "session", "transaction")

#: The startup parameters PgBouncer accepts from a client (it tracks them per client); every other one it refuses.
POOLER_STARTUP_PARAMETERS = frozenset({"application_name", "client_encoding", "datestyle", "timezone",
                                       "standard_conforming_strings"})

#: The bounds the design relies on (see :mod:`openmaic.store.bounds`), checked at start: the server ends a statement
#: and a transaction left idle. The keepalives act on the socket PostgreSQL sees, which behind a pooler is the
#: pooler's: the pooler's own settings bound a client that vanished (see deploy/pgbouncer/).
CHECKED_BOUNDS = ("statement_timeout", "idle_in_transaction_session_timeout")

#: What PgBouncer answers a startup parameter it does not know.
_UNSUPPORTED_STARTUP = "unsupported startup parameter"


@dataclass(frozen=True)
class Pooler:
    """What ``DATABASE_URL`` points at (:data:`MODES`) and, optionally, PostgreSQL itself (``direct_url``)."""

    mode: str = "none"
    direct_url: str | None = None

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise errors.ConfigError(f"{POOLER_VARIABLE} must be one of session, transaction (or unset for none); "
                                     f"got {self.mode!r}")
        if self.mode == "transaction" and not self.direct_url:
            raise errors.ConfigError(
                f"{POOLER_VARIABLE}=transaction needs {DIRECT_URL_VARIABLE}: the LISTEN connection, the projectors' "
                "advisory locks and migrations need a session of their own, which a transaction-mode pooler does not "
                f"keep; set {DIRECT_URL_VARIABLE} to PostgreSQL itself (not the pooler), or run the pooler in "
                f"session mode ({POOLER_VARIABLE}=session)"
            )

    @classmethod
    def from_env(cls, environ: Mapping[str, str] = os.environ) -> Pooler:
        mode = (environ.get(POOLER_VARIABLE) or "none").strip().lower()
        return cls(mode, environ.get(DIRECT_URL_VARIABLE) or None)

    @property
    def pooled(self) -> bool:
        return self.mode != "none"

    @property
    def sessions_on_pool(self) -> bool:
        """Whether a pooled connection keeps its server session across transactions (session locks, LISTEN)."""
        return self.mode != "transaction"

    def startup_settings(self, settings: dict[str, str]) -> dict[str, str]:
        """The settings sent as startup parameters on a connection to ``DATABASE_URL``."""
        if not self.pooled:
            return settings
        return {k: v for k, v in settings.items() if k in POOLER_STARTUP_PARAMETERS}

    def set_sql(self, settings: dict[str, str]) -> str:
        """The ``SET`` statements that give a new pooled connection its session settings in session mode (after
        the reset of a held one too); else none: they are startup parameters (none), or the role's defaults
        (transaction: a ``SET`` would stay behind on a session another client gets next)."""
        if self.mode != "session":
            return ""
        rest = {k: v for k, v in settings.items() if k not in POOLER_STARTUP_PARAMETERS}
        return "".join(f"SET {k} = {_literal(v)};" for k, v in sorted(rest.items()))

    def session_target(self, dsn: str, settings: dict[str, str]) -> tuple[str, dict[str, str]]:
        """Where a connection of its own that is no pooled one goes (the LISTEN connection), with its startup
        settings: PostgreSQL itself when it is known (through a transaction-mode pooler LISTEN would land on a
        session the pooler gives the next client, and no notification would come), else ``dsn``."""
        return (self.direct_url, settings) if self.direct_url else (dsn, self.startup_settings(settings))

    def pool_options(self, settings: dict[str, str], connect: Callable[..., Any]) -> dict[str, Any]:
        """The driver pool's options for ``DATABASE_URL`` with the session ``settings``: the startup parameters
        the pooler accepts; on each new connection the SETs of session mode, then :func:`check_bounds`; the
        statement cache off in transaction mode; and ``connect`` (the driver's), naming a pooler nobody declared."""
        sql = self.set_sql(settings)

        async def init(conn: Any) -> None:
            if sql:
                await conn.execute(sql)
            await check_bounds(conn, settings, self)

        async def connecting(*args: Any, **kwargs: Any) -> Any:
            try:
                return await connect(*args, **kwargs)
            except Exception as exc:  # (the driver's own, or ours naming each host)
                refusal = None if self.pooled else refused_startup(exc)
                if refusal is None:
                    raise
                raise refusal from exc

        options: dict[str, Any] = {"server_settings": self.startup_settings(settings), "init": init,
                                   "connect": connecting}
        if self.mode == "transaction":
            # Unnamed statements only: the driver parses each again at every call, in the same message sequence as
            # its execution, so it never names a statement another session would not know.
            options["statement_cache_size"] = 0
        return options


@contextlib.asynccontextmanager
async def open_session(db: Any, open_database: Callable[..., Any], settings: dict[str, str]) -> AsyncIterator[Any]:
    """A held connection of ``db`` (a :class:`~openmaic.store.database.Database`) with a server session of its own
    for the block: ``db.connection()``, unless ``db`` is behind a transaction-mode pooler, which keeps no session
    across transactions; then the one connection of a pool opened to PostgreSQL itself (``DATABASE_DIRECT_URL``)
    with the session ``settings``, closed after the block: the session, and every lock it took, end with it."""
    if db.pooler.sessions_on_pool:
        async with db.connection() as conn:
            yield conn
        return
    async with open_database(db.pooler.direct_url, min_size=1, max_size=1, server_settings=settings,
                             pooler=Pooler()) as direct, direct.connection() as conn:
        yield conn


def _literal(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def refused_startup(exc: BaseException) -> errors.ConfigError | None:
    """The refusal to report when ``DATABASE_URL`` turned out to be a pooler that refuses our startup parameters
    (``DATABASE_POOLER`` unset); None for any other error."""
    text = str(exc)
    if _UNSUPPORTED_STARTUP not in text:
        return None
    parameter = text.split(_UNSUPPORTED_STARTUP, 1)[1].strip(" :") or "?"
    return errors.ConfigError(
        f"DATABASE_URL points at a connection pooler, which refused the session setting {parameter}: set "
        f"{POOLER_VARIABLE}=transaction (with {DIRECT_URL_VARIABLE} set to PostgreSQL itself) or "
        f"{POOLER_VARIABLE}=session, as the pooler's pool_mode is"
    )


async def check_bounds(conn: Any, asked: dict[str, str], pooler: Pooler) -> None:
    """Refuse (:class:`~openmaic.errors.ConfigError`) when a bound of :data:`CHECKED_BOUNDS` in effect on ``conn`` (a
    new pooled connection, the driver's) is off or looser than ``asked``, naming each and what to change. A bound
    asked as 0 (a tool that runs one huge statement on purpose) is not checked."""
    rows = await conn.fetch(Q.session_bounds, list(CHECKED_BOUNDS))
    found = {r["name"]: int(r["setting"]) for r in rows}
    wrong = []
    for name in CHECKED_BOUNDS:
        want = int(asked[name]) if asked.get(name, "").isdigit() else 0  # (in ms; one with a unit is not checked)
        have = found.get(name, 0)
        if want > 0 and not 0 < have <= want:
            wrong.append((name, have, want))
    if not wrong:
        return
    shown = ", ".join(f"{name} is {have or 'off'} (at most {want} ms needed)" for name, have, want in wrong)
    if pooler.mode == "transaction":
        fix = ("through a transaction-mode pooler these bounds must be the role's defaults: run "
               + " ".join(f"`ALTER ROLE <role> SET {name} = {want};`" for name, _, want in wrong)
               + " (or ALTER DATABASE … SET) on PostgreSQL itself, then have the pooler open new server "
               "connections (RECONNECT on its admin console): the ones it holds keep what they started with")
    elif pooler.mode == "session":
        fix = ("the SET sent on each new connection did not hold: check that the pooler's pool_mode is session "
               f"(else set {POOLER_VARIABLE}=transaction) and that no server_reset_query_always resets it")
    else:
        fix = (f"something between us and PostgreSQL drops startup parameters (a pooler with "
               f"ignore_startup_parameters?): set {POOLER_VARIABLE}=session or transaction, as its pool_mode is")
    raise errors.ConfigError(f"the session bounds the service relies on are not in effect: {shown}; {fix}")
