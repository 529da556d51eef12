"""asyncpg hosted under trio: the only module in the project that touches asyncio.

asyncpg speaks asyncio; the rest of openmaic speaks trio. trio-asyncio runs an asyncio loop on top of trio, and
each public method here runs *one* asyncio coroutine for its whole unit of work (acquire, transaction, every
statement, release). That matters twice:

* cost: a trio→asyncio crossing is ~70 µs, so we cross once per unit of work, not once per query;
* cancellation: a trio cancel becomes a single ``asyncio.CancelledError`` inside that coroutine, whose own
  ``async with`` exits (ROLLBACK, release to the pool) then run to completion — trio-asyncio keeps the trio
  side waiting until the asyncio task has finished. A naive ``aio_as_trio(conn.transaction())`` would cancel the
  exit itself and leak the transaction and the pooled connection.

Where a caller needs a connection across several crossings (a session advisory lock, a cursor), the context
managers below run their exits inside ``trio.CancelScope(shield=True)`` for the same reason.

Every call is bounded, statement and cancel (why, and the bounds: :mod:`openmaic.store.bounds`); this module applies
the bounds: a call cancelled from trio whose connection has not come back within :data:`CANCEL_GRACE_S` has its
connection terminated, which ends the call at once.

Driver errors are translated into :mod:`openmaic.errors` in exactly one place, :func:`translated` (what each SQLSTATE
means: :mod:`openmaic.store.sqlstates`). What does not touch the driver lives beside this module: the NOTIFY sender
(:mod:`~openmaic.store.hints`), the listener's subscriptions and reconnect policy (:mod:`~openmaic.store.listener`),
the statement methods and typed rows (:mod:`~openmaic.store.gateway`), retry pacing (:mod:`~openmaic.store.backoff`),
a multi-host DSN's hosts (:mod:`~openmaic.store.hosts`), the driver's own log lines
(:mod:`~openmaic.store.driver_logs`), background tasks (:mod:`~openmaic.store.background`).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from typing import Any

import asyncpg
import trio
import trio_asyncio

from openmaic import errors
from openmaic.concurrency import collapse_groups
from openmaic.store.background import Background
from openmaic.store.backoff import Backoff  # noqa: F401 - importers use it from either module
from openmaic.store.bounds import (  # noqa: F401 - the bounds, applied here; importers use them from either module
    CANCEL_GRACE_S,
    CLIENT_MARGIN_S,
    CONNECTION_LIMIT,
    CONNECTION_LIMIT_MESSAGE,
    DEFAULT_SERVER_SETTINGS,
    REFUSED_RECENTLY_S,
    STATEMENT_TIMEOUT_S,
    Refusals,
    lease_bounded_settings,
    session_bounds,
)
from openmaic.store.driver_logs import summarize_driver_logs
from openmaic.store.gateway import Gateway
from openmaic.store.hints import HintSender
from openmaic.store.hosts import connect_each
from openmaic.store.listener import Listener
from openmaic.store.pooler import Pooler, open_session
from openmaic.store.queries import Q
from openmaic.store.spares import Spares
from openmaic.store.sqlstates import NOT_PRIMARY, NOT_PRIMARY_MESSAGE, QUERY_CANCELED, discards_connection
from openmaic.store.sqlstates import error_for_sqlstate  # noqa: F401 - also importable from here, as it always was
from openmaic.store.subscriptions import Subscription
from openmaic.store import units
from openmaic.store.units import Op

log = logging.getLogger(__name__)

Record = asyncpg.Record

_CONNECTION_ERRORS = (OSError, asyncpg.PostgresConnectionError, asyncpg.InterfaceError, asyncpg.CannotConnectNowError,
                      asyncpg.AdminShutdownError, asyncpg.CrashShutdownError, asyncio.TimeoutError)

def translate(exc: BaseException, setting: str = "DATABASE_URL") -> BaseException:
    """Map a driver exception to the project's hierarchy (``__cause__`` keeps the original), naming ``setting``."""
    if isinstance(exc, errors.OpenMaicError):
        return exc
    if isinstance(exc, asyncpg.PostgresError):
        state, detail = getattr(exc, "sqlstate", None) or "", getattr(exc, "detail", None) or None
        lost = isinstance(exc, _CONNECTION_ERRORS)
        new: BaseException = error_for_sqlstate(state, str(exc), detail, connection_lost=lost)
    elif isinstance(exc, asyncpg.TargetServerAttributeNotMatched):
        # Every host answered, none as DATABASE_URL's target_session_attrs asks (read-write): a failover is under way.
        new = errors.DatabaseUnavailable(NOT_PRIMARY_MESSAGE, reason=NOT_PRIMARY)
    elif isinstance(exc, asyncpg.InternalClientError):
        # asyncpg found a pooled connection in a state it cannot use. Seen when the server ends a connection
        # (restart, pg_terminate_backend): its unsolicited FATAL arrives before the close, and a statement started
        # in between is refused this way. The connection is replaced once the close is processed; callers retry.
        new = errors.DatabaseUnavailable(f"PostgreSQL connection unusable (it was closed by the server?): {exc}")
    elif isinstance(exc, _CONNECTION_ERRORS) or (isinstance(exc, ConnectionError)):
        new = errors.DatabaseUnavailable(
            f"cannot reach PostgreSQL ({type(exc).__name__}: {exc}); check {setting} and that the server runs"
        )
    else:
        return exc
    new.__cause__ = exc
    return new


@contextlib.contextmanager
def translated(setting: str = "DATABASE_URL") -> Iterator[None]:
    """Re-raise driver errors as project errors (naming ``setting``). The one place where that happens."""
    try:
        yield
    except (asyncpg.PostgresError, asyncpg.InterfaceError, asyncpg.InternalClientError, OSError,
            asyncio.TimeoutError) as exc:
        raise translate(exc, setting) from exc


async def _aio(fn: Callable[..., Any], *args: Any, setting: str = "DATABASE_URL") -> Any:
    """Run one asyncio coroutine function to completion from trio (its errors naming ``setting``)."""
    with translated(setting):
        return await trio_asyncio.aio_as_trio(fn)(*args)


async def _aio_or_abort(fn: Callable[..., Any], *args: Any, abort: Callable[[], None], grace: float,
                        setting: str = "DATABASE_URL") -> Any:
    """:func:`_aio`, for a call on a connection: if trio cancels it and it has not come back ``grace`` seconds later,
    ``abort()`` (terminate the connection), which ends it at once.

    trio-asyncio's own adapter cancels the asyncio task and then waits for it however long it takes; asyncpg's
    cancellation waits for the server (forever, across a silent partition). This is the same wait with a timer
    armed at the moment of cancellation. As with the adapter, a call that completes in spite of the cancel returns
    its result (the cancel is delivered at the caller's next checkpoint); one that fails or is cancelled raises
    ``trio.Cancelled``.
    """
    loop = trio_asyncio.current_loop.get()
    finished = trio.Event()
    with translated(setting):  # also around fn(*args): the proxy of a connection asyncpg took back raises right there
        future = asyncio.ensure_future(fn(*args), loop=loop)
        future.add_done_callback(lambda _: finished.set())
        try:
            await finished.wait()
        except trio.Cancelled:
            future.cancel()
            loop.call_later(grace, lambda: future.done() or abort())
            # Shielded: the asyncio task must end before its connection can be given back (or is gone); the timer
            # above bounds this wait.
            with trio.CancelScope(shield=True):
                await finished.wait()
            if future.cancelled() or future.exception() is not None:
                raise
        return future.result()


class _Held:
    """The connection a unit of work has acquired, while it holds it: what to terminate if the unit gets stuck."""

    __slots__ = ("conn", "grace")

    def __init__(self, grace: float) -> None:
        self.conn: Any = None
        self.grace = grace
        """How long the unit, cancelled, is given to come back before :meth:`terminate` is called."""

    def terminate(self) -> None:
        conn = self.conn
        if conn is not None:
            if self.grace > 0:
                log.warning("a cancelled database call did not come back within %.1f s; terminating its connection",
                            self.grace)
            else:  # a call never waited on once cancelled (the NOTIFY sender's, at close): the plan, not a fault
                log.debug("a cancelled database call is not waited on; terminating its connection")
            try:
                conn.terminate()
            except asyncpg.InterfaceError:  # already given back to the pool
                pass


class Connection(Gateway):
    """A pooled connection held across several crossings (each method is one crossing).

    Each crossing runs shielded, and a pending cancellation is raised right after it: cancelling asyncpg in the
    middle of a statement on a connection that outlives the unit of work leaves its protocol state unusable
    (the pool's reset then hangs; terminating it instead surfaces "unexpected connection_lost" in the loop). So
    statements on a held connection must be short; never block on a held connection (use
    ``pg_try_advisory_lock`` and poll, not ``pg_advisory_lock``). A connection whose crossing failed at the
    driver level is marked broken and terminated on release; the server then rolls back its transaction.
    """

    def __init__(self, raw: asyncpg.Connection, setting: str = "DATABASE_URL") -> None:
        self._raw = raw
        self._setting = setting
        self.broken = False

    async def _call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        call = functools.partial(fn, **kwargs) if kwargs else fn
        try:
            # Cancelled mid-statement, the connection is terminated at once rather than cancelled: asyncpg's cancel
            # would leave a connection that outlives the unit unusable, and may never return (see the module doc).
            result = await _aio_or_abort(call, *args, abort=self.terminate, grace=0.0, setting=self._setting)
        except errors.DatabaseUnavailable:
            self.broken = True
            raise
        except trio.Cancelled:
            self.broken = True
            raise
        return result

    async def _statement(self, method: str, sql: str, args: Sequence[Any]) -> Any:
        return await self._call(getattr(self._raw, method), sql, *args)

    async def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        await self._call(self._raw.executemany, sql, rows)

    async def copy_records(self, table: str, records: Sequence[Sequence[Any]], columns: Sequence[str]) -> None:
        await self._call(self._raw.copy_records_to_table, table, records=records, columns=list(columns))

    @contextlib.asynccontextmanager
    async def transaction(self) -> AsyncIterator[None]:
        with translated():  # the proxy of a connection asyncpg took back refuses at once
            tx = self._raw.transaction()
        try:
            # Inside the try: a cancellation raised just after BEGIN completed must still roll back.
            await self._call(tx.start)
            yield
        except BaseException:
            # Shielded: a cancelled ROLLBACK would leave the connection inside a failed transaction. A broken
            # connection is not rolled back here; terminating it on release ends the transaction server-side.
            if not self.broken and not _detached(self._raw) and self._raw.is_in_transaction():
                with trio.CancelScope(shield=True), trio.move_on_after(CANCEL_GRACE_S * 2) as scope:
                    await self._call(tx.rollback)
                if scope.cancelled_caught:
                    self.broken = True
            raise
        else:
            with trio.CancelScope(shield=True):
                await self._call(tx.commit)

    def terminate(self) -> None:
        self.broken = True
        if not _detached(self._raw) and not self._raw.is_closed():
            self._raw.terminate()

    @property
    def backend_pid(self) -> int:
        with translated():  # one the server ended was taken back by asyncpg: its proxy refuses every call
            return self._raw.get_server_pid()


def _detached(raw: Any) -> bool:
    """Whether asyncpg has taken a held connection back: it does so by itself when the connection is closed under
    us (the server ended it), and the proxy we hold then refuses every call with InterfaceError."""
    try:
        raw.is_closed()
    except asyncpg.InterfaceError:
        return True
    return False


class Database(Gateway, Background):
    """A pool, a LISTEN connection and a coalescing NOTIFY sender. Open it with :func:`open_database`."""

    def __init__(self, dsn: str, pool: asyncpg.Pool, server_settings: dict[str, str],
                 command_timeout: float | None = None, pooler: Pooler = Pooler(),
                 setting: str = "DATABASE_URL") -> None:
        self.dsn = dsn
        self.setting = setting  # where dsn came from (DATABASE_URL, DATABASE_REPLICA_URL): what its errors name
        self.pooler = pooler
        self._pool = pool
        self._server_settings = server_settings
        self._command_timeout = command_timeout
        self._channels: set[str] = set()
        self._hints = HintSender()
        self._listener: Listener[asyncpg.Connection] = Listener()
        self._listener_raw: asyncpg.Connection | None = None
        self._listener_lost = trio.Event()
        self._refusals = Refusals()
        self._spares = Spares()
        """the pool's idle connections that units take before asking the pool (see store.spares)"""

    async def _run(
        self, fn: Callable[..., Any], *args: Any, abort: Callable[[], None] | None = None, grace: float = CANCEL_GRACE_S
    ) -> Any:
        """One unit of work on the pool, noting when PostgreSQL refuses the pool a new connection at its limit. With
        ``abort``, cancelled, it is given ``grace`` seconds to come back before ``abort()`` (see
        :func:`_aio_or_abort`)."""
        try:
            if abort is None:
                return await _aio(fn, *args, setting=self.setting)
            return await _aio_or_abort(fn, *args, abort=abort, grace=grace, setting=self.setting)
        except errors.DatabaseUnavailable as exc:
            self._refusals.note(exc)
            raise

    def refused_recently(self) -> float | None:
        """Seconds since PostgreSQL last refused this pool a new connection at its connection limit, if within
        :data:`REFUSED_RECENTLY_S` (see :class:`~openmaic.store.bounds.Refusals`); else None."""
        return self._refusals.recently()

    # -- units of work: one asyncio coroutine each -------------------------------------------------------------

    async def _unit(self, op: Callable[..., Any], *args: Any, grace: float = CANCEL_GRACE_S) -> Any:
        """``op(conn, *args)`` on a pooled connection, as one asyncio coroutine (take, op, give back). Cancelled, it
        is given ``grace`` seconds to come back before its connection is terminated."""
        pool = self._pool
        held = _Held(grace)
        spares = self._spares

        async def unit() -> Any:
            conn = await spares.get(pool.acquire)
            held.conn = conn
            clean = False
            try:
                result = await op(conn, *args)
                clean = True
                return result
            except asyncpg.PostgresError as exc:
                # Refused by a server still answering: the connection is fine unless the server is ending the session
                # (08, 57P) or is not the primary (25006 …), or it cancelled the statement (a statement timeout, whose
                # session state is unknown); such a one is terminated, so the pool never hands it out again, and its
                # replacement finds the primary.
                clean = not discards_connection(exc.sqlstate or "", str(exc)) and exc.sqlstate != QUERY_CANCELED
                if not clean and not _detached(conn):  # (one the server closed, asyncpg has taken back already)
                    conn.terminate()
                raise
            except asyncio.TimeoutError:
                # The client's own bound (command_timeout) passed: the server did not answer in time, and the
                # connection's state is unknown. Terminate it rather than wait for asyncpg's cancel to come back.
                conn.terminate()
                raise
            except asyncio.CancelledError:
                # Cancelled mid-call: the statement stopped at a point we cannot know, and session state taken on the
                # way (an advisory lock) would go to the next unit, since units get no reset. So the connection is
                # never reused: close() first waits for asyncpg's cancel to be answered (the statement stops now, not
                # at its timeout), within the unit's grace (then _Held terminates it).
                try:
                    await conn.close(timeout=CANCEL_GRACE_S)
                except (Exception, asyncio.CancelledError):
                    conn.terminate()
                raise
            finally:
                # Kept for the next unit (store.spares), or given back to the pool; until the pool has it, the
                # connection is still this unit's to terminate if a cancelled release outlasts the grace.
                try:
                    await spares.settle(conn, clean, pool.release)
                finally:
                    held.conn = None

        return await self._run(unit, abort=held.terminate, grace=grace)

    async def _hint(self, sql: str, *args: Any) -> Any:
        # The NOTIFY sender's statement. It is cancelled only when the database closes, and a hint is never the
        # carrier: its connection is terminated at once rather than waited on (across a partition each such wait
        # would add CANCEL_GRACE_S to a shutdown).
        return await self._unit(units.statement, "execute", sql, args, grace=0.0)

    async def _statement(self, method: str, sql: str, args: Sequence[Any]) -> Any:
        return await self._unit(units.statement, method, sql, args)

    async def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        await self._unit(units.executemany, sql, rows)

    async def transaction(self, ops: Sequence[Op], *, isolation: str = "read_committed") -> list[list[Record]]:
        """Run the statements in one transaction; returns each statement's rows."""
        return await self._unit(units.transaction, ops, isolation)

    async def copy_records(self, table: str, records: Sequence[Sequence[Any]], columns: Sequence[str]) -> None:
        await self._unit(units.copy_records, table, records, columns)

    @contextlib.asynccontextmanager
    async def connection(self) -> AsyncIterator[Connection]:
        """Hold one pooled connection across several units (a transaction; session state takes :meth:`session`). A
        statement on it that is cancelled terminates the connection at once (see :class:`Connection`)."""

        raw = await self._run(self._spares.get, self._pool.acquire)
        conn = Connection(raw, self.setting)
        try:
            yield conn
        finally:
            # Shielded: a cancelled release leaks the connection, and the pool's next acquire hangs. Each step is
            # bounded, and a step that does not finish in time terminates the connection (Connection._call).
            with trio.CancelScope(shield=True):
                await self._give_back(conn)

    def session(self) -> contextlib.AbstractAsyncContextManager[Connection]:
        """Hold a connection with a server session of its own (session advisory locks, migrations): a pooled one
        unless ``dsn`` is a transaction-mode pooler (see :func:`openmaic.store.pooler.open_session`)."""
        return open_session(self, open_database, self._server_settings)

    async def _give_back(self, conn: Connection) -> None:
        # Its own method: a `return` inside the `finally` above would swallow whatever ended the block.
        raw = conn._raw
        if _detached(raw):
            return  # the server closed it and asyncpg already gave it back to the pool
        if not conn.broken and raw.is_in_transaction():
            # Never hand asyncpg's pool a connection inside a transaction: its reset path can hang.
            with trio.move_on_after(CANCEL_GRACE_S * 2):
                await conn._call(raw.execute, "ROLLBACK")
        if not conn.broken and not _detached(raw):  # (asyncpg may have taken it back during the ROLLBACK)
            # The pool itself skips the reset (see _no_reset); a held connection may carry session state
            # (advisory locks, settings, LISTEN), so it gets the full reset here (and a session pooler's SETs again).
            with trio.move_on_after(CANCEL_GRACE_S * 2):
                await conn._call(raw.execute, raw.get_reset_query() + self.pooler.set_sql(self._server_settings))
        if _detached(raw):
            return
        if conn.broken and not raw.is_closed():
            raw.terminate()
        try:
            await _aio(self._pool.release, raw)
        except errors.OpenMaicError:
            log.warning("releasing a broken connection", exc_info=True)

    def statistics(self) -> dict[str, int]:
        """Pool size and idle connections: a leak shows as ``size - idle`` staying above zero at rest."""
        return {"size": self._pool.get_size(), "idle": self._pool.get_idle_size() + len(self._spares),
                "max": self._pool.get_max_size()}

    # -- NOTIFY and LISTEN: the driver's part (the policies are store.hints' and store.listener's) ------------

    def notify_soon(self, channel: str, payload: str) -> None:
        """Queue a NOTIFY hint, sent after the caller's commit; identical hints queued before the next flush are
        sent once (see :mod:`openmaic.store.hints`)."""
        self._hints.queue(channel, payload)

    def subscribe(self, max_pending: int = 10_000) -> Subscription:
        return self._listener.subscribe(max_pending)

    def unsubscribe(self, sub: Subscription) -> None:
        self._listener.unsubscribe(sub)

    @property
    def listener_connected(self) -> bool:
        return self._listener.connected

    @property
    def listener_reconnects(self) -> int:
        return self._listener.reconnects

    def _on_notification(self, _conn: Any, _pid: int, channel: str, payload: str) -> None:
        # Runs as an asyncio callback on the trio thread: only non-blocking calls here.
        self._listener.deliver(channel, payload)

    def _on_listener_terminated(self, _conn: Any) -> None:
        self._listener_lost.set()

    async def _connect_listener(self) -> asyncpg.Connection:
        async def unit() -> asyncpg.Connection:
            url, settings = self.pooler.session_target(self.dsn, self._server_settings)
            conn = await _connect(url, server_settings=settings, timeout=10, command_timeout=self._command_timeout)
            try:
                for channel in sorted(self._channels):
                    await conn.add_listener(channel, self._on_notification)
                conn.add_termination_listener(self._on_listener_terminated)
            except BaseException:
                conn.terminate()
                raise
            return conn

        self._listener_lost = trio.Event()
        conn = await self._run(unit)
        self._listener_raw = conn
        return conn

    def _close_listener(self, conn: asyncpg.Connection) -> None:
        self._listener_raw = None
        conn.terminate()

    async def _listen_forever(
        self, channels: Sequence[str], ping_s: float, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        self._channels = set(channels)
        # The connect step is looked up at every reconnect, not bound once here, so it can be replaced while the
        # listener runs (the readiness test refuses reconnections through it).
        await self._listener.run(lambda: self._connect_listener(),
                                 functools.partial(self._watch_listener, ping_s=ping_s),
                                 self._close_listener, task_status=task_status)

    async def _watch_listener(self, conn: asyncpg.Connection, ping_s: float) -> None:
        """Return when the listener connection is gone: told by asyncpg, or found by a ping."""
        while not conn.is_closed():
            with trio.move_on_after(ping_s):
                await self._listener_lost.wait()
                return
            try:
                with trio.fail_after(max(ping_s, 1.0)):
                    # A ping that does not come back ends the connection at once (it is replaced anyway).
                    await _aio_or_abort(conn.fetchval, Q.ping, abort=conn.terminate, grace=0.0)
            except (errors.OpenMaicError, trio.TooSlowError):
                return

    def listener_backend_pid(self) -> int | None:
        raw = self._listener_raw
        return None if raw is None or raw.is_closed() else raw.get_server_pid()


@contextlib.asynccontextmanager
async def open_loop() -> AsyncIterator[None]:
    """Provide the asyncio loop asyncpg runs on (reusing one that is already open)."""
    if trio_asyncio.current_loop.get() is not None:
        yield
        return
    with collapse_groups():
        async with trio_asyncio.open_loop() as loop:
            loop.set_exception_handler(_log_loop_error)
            yield


def _log_loop_error(loop: Any, context: dict[str, Any]) -> None:
    """Log, as plain asyncio would, instead of trio-asyncio's default of raising into trio.

    What reaches here are orphaned futures of connections we already discarded (e.g. asyncpg's
    "unexpected connection_lost()" after terminating a connection whose query was being cancelled); raising
    them would tear down whatever trio task happens to run the loop.
    """
    exc = context.get("exception")
    if isinstance(exc, (ConnectionError, OSError, asyncpg.InterfaceError)):
        log.debug("asyncio: %s (%r)", context.get("message"), exc)
    else:
        log.warning("asyncio: %s", context.get("message"), exc_info=exc)


@contextlib.asynccontextmanager
async def open_database(
    dsn: str,
    *,
    min_size: int = 1,
    max_size: int = 10,
    listen: Sequence[str] = (),
    listener_ping_s: float = 5.0,
    server_settings: dict[str, str] | None = None,
    connect_timeout: float = 10.0,
    statement_timeout_s: float | None = STATEMENT_TIMEOUT_S,
    pooler: Pooler | None = None,
    setting: str = "DATABASE_URL",
) -> AsyncIterator[Database]:
    """Open a pool (and, with ``listen``, the LISTEN connection and the NOTIFY sender) for the block's lifetime.

    Every statement is bounded by ``statement_timeout_s`` on the server and a little later on the client (None:
    unbounded, for tools that run one huge statement on purpose). Raises :class:`~openmaic.errors.DatabaseUnavailable`
    (naming ``setting``, where ``dsn`` came from) at once if PostgreSQL cannot be reached, and ConfigError if the
    bounds do not hold behind ``pooler`` (default: from the environment; see :mod:`openmaic.store.pooler`)."""
    settings, command_timeout = session_bounds(server_settings, statement_timeout_s)
    pooler = Pooler.from_env() if pooler is None else pooler
    summarize_driver_logs()
    async with open_loop():
        pool = await _aio(_create_pool, dsn, min_size, max_size, settings, connect_timeout, command_timeout, pooler,
                          setting)
        db = Database(dsn, pool, settings, command_timeout, pooler, setting)
        try:
            with collapse_groups():
                async with trio.open_nursery() as nursery:
                    if listen:
                        await nursery.start(db._listen_forever, list(listen), listener_ping_s)
                    nursery.start_soon(db._hints.run, db._hint)
                    db._nursery = nursery
                    try:
                        yield db
                    finally:
                        # No new background tasks from here on: the block is over and they would be cancelled.
                        db._nursery = None
                        nursery.cancel_scope.cancel()
        except BaseException:
            # Ended by an error or a cancellation (a hard stop): no goodbyes, which a server out of reach would never
            # acknowledge. The server ends the sessions (and rolls back what they had open) as their sockets close.
            pool.terminate()
            raise
        else:
            # Shielded with a bound: closing waits for borrowed connections and says goodbye on each, which takes
            # milliseconds; one that has not closed by then is cut off (or stuck): terminate the stragglers.
            with trio.CancelScope(shield=True):
                with trio.move_on_after(CANCEL_GRACE_S) as scope:
                    await _aio(db._spares.release_all, pool.release)
                    await _aio(pool.close)
                if scope.cancelled_caught:
                    pool.terminate()


async def _connect(dsn: str, *, setting: str = "DATABASE_URL", **kwargs: Any) -> asyncpg.Connection:
    """The pool's and the listener's connect: one host of a multi-host DSN at a time, so that when none can serve,
    the error names every host and what it said (:mod:`openmaic.store.hosts`), and ``setting``."""
    return await connect_each(dsn, functools.partial(asyncpg.connect, **kwargs), translate, setting=setting)


async def _no_reset(_conn: asyncpg.Connection) -> None:
    """Units of work leave no session state behind, so skip asyncpg's reset query (a round trip per release).

    asyncpg still rolls back a connection returned inside a transaction before calling this.
    """


async def _create_pool(
    dsn: str, min_size: int, max_size: int, settings: dict[str, str], timeout: float, command_timeout: float | None,
    pooler: Pooler, setting: str,
) -> asyncpg.Pool:
    try:
        # command_timeout bounds each statement on the client, and asyncpg's own cancel requests too.
        return await asyncpg.create_pool(
            dsn, min_size=min_size, max_size=max_size, reset=_no_reset, command_timeout=command_timeout,
            timeout=timeout, **pooler.pool_options(settings, functools.partial(_connect, setting=setting)),
        )
    except asyncpg.InvalidCatalogNameError as exc:
        raise errors.DatabaseUnavailable(f"database does not exist: {exc}") from exc
    except asyncpg.InvalidPasswordError as exc:
        raise errors.DatabaseUnavailable(f"PostgreSQL refused the credentials: {exc}") from exc

