"""``openmaic serve``: one process, one root nursery, the roles it was asked to run.

Startup order: resolve the database (``DATABASE_URL`` or the embedded server), migrate, then start every role
with ``await nursery.start(...)`` so that "ready" is only logged once each role reports readiness. SIGINT and
SIGTERM cancel the root nursery; every role shuts down through ordinary cancellation.
"""

from __future__ import annotations

import argparse
import functools
import gc
import ipaddress
import logging
import os
import re
import signal
import urllib.parse
from collections.abc import Awaitable, Callable
from typing import Any

import trio

from openmaic import logs
from openmaic.actors.worker import Worker
from openmaic.admin import admin_port, is_default_admin_port, serve_admin
from openmaic.api.errors import AddressInUse
from openmaic.api.app import create_app
from openmaic.api.resources import api_services, resource_blueprints
from openmaic.api.server import serve_api
from openmaic.config import Config, load_config
from openmaic.models.errors import ModelNotReady
from openmaic.models.provider import check_slot
from openmaic.kinds import session_kinds
from openmaic.projections import default_projections
from openmaic.projections.projector import run_projectors
from openmaic.services import Services, open_services
from openmaic.store.database import open_database
from openmaic.store.migrations import load_migrations, migrate
from openmaic.store.pooler import Pooler
from openmaic.store.postgres import data_dir, database_url, embedded_running

log = logging.getLogger("openmaic.serve")

ROLES = ("api", "worker", "projector")

RoleRunner = Callable[..., Awaitable[Any]]
"""``async def run(services, args, *, task_status)``: runs one role, calling ``task_status.started()`` once it
serves, and returns after ``services.stopping`` is set and it has wound down."""

#: The runner of each role. A role without a runner here starts no task of its own.
ROLE_RUNNERS: dict[str, RoleRunner] = {}


GC_THRESHOLDS = (50_000, 20, 100)
"""Collector thresholds for a serving process (CPython's defaults are 700, 10, 10).

A server holds many long-lived objects (every open connection's protocol state, tasks and buffers) and, when it
fans an event out to many clients, briefly keeps thousands of coroutine frames alive at once. With the default
thresholds those bursts trigger young collections that promote the frames, and the promotions soon trigger full
collections over every connection's objects: measured with 1,000 WebSocket clients on one stream, half of the
API process's CPU went to collections, in pauses of up to 300 ms. At these thresholds the same run spends about
what it does with the collector off (``python -m benchmarks.fanout``; see docs/benchmarks.md)."""


def tune_gc() -> None:
    """Freeze what start-up allocated (modules, classes, config) out of every collection, and use
    :data:`GC_THRESHOLDS`. Reference counting still frees everything as before; only cycles wait longer."""
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


_QUERY_SECRET = re.compile(r"(?i)(^|&)((?:ssl)?password)=[^&]*")


def redact(url: str) -> str:
    """The URL with its passwords replaced (``user:***@`` and libpq's ``?password=`` / ``?sslpassword=``), for
    logs and status output."""
    parts = urllib.parse.urlsplit(url)
    if parts.password:
        netloc = parts.netloc.rsplit("@", 1)[1]
        user = urllib.parse.quote(parts.username or "", safe="")
        parts = parts._replace(netloc=f"{user}:***@{netloc}")
    if parts.query:
        parts = parts._replace(query=_QUERY_SECRET.sub(r"\1\2=***", parts.query))
    return urllib.parse.urlunsplit(parts)


def describe_database(url: str) -> str:
    """Where the URL came from, then the URL without its password (and the pooler's mode and DATABASE_DIRECT_URL
    when it is a pooler: an invalid combination is refused here, before anything connects)."""
    if os.environ.get("DATABASE_URL"):
        pooler = Pooler.from_env()
        if pooler.pooled:
            direct = f"; sessions of their own to {redact(pooler.direct_url)}" if pooler.direct_url else ""
            return f"DATABASE_URL {redact(url)} (a connection pooler in {pooler.mode} mode{direct})"
        return f"DATABASE_URL {redact(url)}"
    return f"embedded PostgreSQL under {data_dir() / 'pgdata'} ({redact(url)})"


async def run_serve(args: argparse.Namespace) -> None:
    """Serve ``args.roles`` until SIGINT or SIGTERM.

    The first signal asks every role to wind down gracefully (the worker stops claiming, lets actors reach a
    boundary within the shutdown grace, then releases their leases); a second signal cancels at once.
    """
    # The receiver is opened first so that a signal during a slow start (initdb, migrations) still stops us
    # cleanly instead of raising KeyboardInterrupt at an arbitrary point.
    stop = _Stop()
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with trio.open_nursery() as nursery:
            stop.scope = nursery.cancel_scope
            nursery.start_soon(_stop_on_signal, signals, stop)
            await _serve(args, stop)
            nursery.cancel_scope.cancel()
    log.info("stopped")
    if not os.environ.get("DATABASE_URL") and embedded_running():
        log.info("the embedded PostgreSQL keeps running for the next start; `openmaic db stop` stops it")


class _Stop:
    def __init__(self) -> None:
        self.scope: trio.CancelScope | None = None
        self.graceful: trio.Event | None = None
        """Set once the roles run; until then a signal cancels the start-up."""


async def _stop_on_signal(signals: Any, stop: _Stop) -> None:
    async for signum in signals:
        name = signal.Signals(signum).name
        if stop.graceful is not None and not stop.graceful.is_set():
            log.info("%s received, shutting down gracefully (again to stop at once)", name)
            stop.graceful.set()
            continue
        log.info("%s received, stopping", name)
        assert stop.scope is not None
        stop.scope.cancel()
        return


async def _serve(args: argparse.Namespace, stop: _Stop) -> None:
    config = load_config(os.environ.get("OPENMAIC_CONFIG") or None)
    logs.configure(config.server.log_format, secrets=logs.secrets_of(config))
    report_models(config)
    if not os.environ.get("DATABASE_URL") and not embedded_running():
        log.info("starting the embedded PostgreSQL under %s", data_dir() / "pgdata")
    # In a thread: the embedded server's first start runs initdb, which takes seconds.
    url = await trio.to_thread.run_sync(database_url)
    log.info("database: %s", describe_database(url))
    async with open_database(url) as db:
        applied = await migrate(db)
        for m in applied:
            log.info("applied migration %04d_%s", m.version, m.name)
        log.info("schema is current (version %d)", max((m.version for m in load_migrations()), default=0))
    async with open_services(config, url) as services:
        stop.graceful = services.stopping
        tune_gc()
        await serve_roles(services, args)


def report_models(config: Config) -> None:
    """Log where the model configuration came from, what did not carry over, and the slots that cannot run."""
    log.info("models: from %s", {"openmaic.yml": config.source, "environment": "the environment (legacy variables)",
                                 "built-in": "the built-in offline demo (nothing is configured)"}[config.model_source])
    for notice in config.notices:
        log.warning("models: %s", notice)
    for slot in ("llm", "course.outline", "course.content", "course.actions", "course.agents", "agent"):
        try:
            check_slot(config, slot)
        except ModelNotReady as e:
            log.warning("models: %s", e.message)


async def serve_roles(services: Services, args: argparse.Namespace) -> None:
    """Start each requested role and the admin listener, report ready, and run until every role has wound down."""
    port = admin_port(args.roles, getattr(args, "admin_port", None), services.config)
    async with trio.open_nursery() as outer:
        async with trio.open_nursery() as nursery:
            for role in args.roles:
                runner = ROLE_RUNNERS.get(role)
                if runner is not None:
                    await nursery.start(runner, services, args)
            if port is not None:
                await _start_admin(outer, services, args, port)
            log.info("ready: roles %s; Ctrl-C stops", ", ".join(args.roles))
            # Keeps the process up (and the nursery open) even when no role has a task of its own.
            await services.stopping.wait()
        # The roles have wound down: the admin listener, which answered probes meanwhile, goes last.
        outer.cancel_scope.cancel()


async def _start_admin(nursery: trio.Nursery, services: Services, args: argparse.Namespace, port: int) -> None:
    host = args.host or services.config.server.host
    try:
        await nursery.start(serve_admin, services, host, port)
    except AddressInUse as exc:
        if not is_default_admin_port(args.roles, getattr(args, "admin_port", None), services.config):
            raise  # a port the operator asked for: refuse to run without it
        # The default port, taken (a second worker on this host): serve without probes rather than not at all.
        log.warning("%s; the admin listener (/healthz, /readyz, /metrics) is off: give this process its own "
                    "--admin-port", exc.message)


async def run_worker(services: Services, args: argparse.Namespace, *,
                     task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
    """The worker role: claims and runs every session kind this build knows."""
    worker = Worker(services.log, services.wakeups, session_kinds(services.config), services.config.runtime,
                    services=services)
    async with trio.open_nursery() as nursery:
        await nursery.start(worker.run)
        log.info("worker %s claiming %s", worker.id, ", ".join(sorted(worker.kinds)) or "nothing")
        task_status.started()
        await services.stopping.wait()
        worker.shutdown()


async def run_projector(services: Services, args: argparse.Namespace, *,
                        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
    """The projector role: keeps every read model it can lock up to date (one process per projection at once)."""
    async with trio.open_nursery() as nursery:
        await nursery.start(
            functools.partial(run_projectors, services.db, services.log, services.wakeups, default_projections())
        )
        task_status.started()
        await services.stopping.wait()
        # Projections checkpoint in the same transaction as their rows: stopping anywhere loses nothing.
        nursery.cancel_scope.cancel()


def exposure_warning(host: str, config: Config) -> str | None:
    """What to tell the operator when the API would serve every request as one owner to anyone who reaches it: a
    non-loopback address in ``single_user`` mode without ``ACCESS_CODE`` (``docker run`` with no configuration).
    Served all the same — a container behind a private network is a legitimate set-up — but never silently."""
    if config.identity.mode != "single_user" or config.access_code is not None:
        return None
    try:
        if ipaddress.ip_address(host.strip("[]")).is_loopback:
            return None
    except ValueError:
        if host == "localhost":
            return None
    return (f"the API listens on {host} with identity.mode single_user and no ACCESS_CODE: anyone who can reach "
            f"this port acts as {config.identity.single_user_owner!r}. Set ACCESS_CODE, choose identity.mode "
            "token or trusted_header, or listen on 127.0.0.1 (server.host, --host)")


async def run_api(services: Services, args: argparse.Namespace, *,
                  task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
    """The API role: the HTTP/SSE/WebSocket server. It only serves; durable work happens in workers."""
    host = args.host or services.config.server.host
    app = create_app(api_services(services), blueprints=resource_blueprints(), listen_host=host)
    if (warning := exposure_warning(host, services.config)) is not None:
        log.warning("%s", warning)
    port = services.config.server.port if args.port is None else args.port
    async with trio.open_nursery() as nursery:
        # hypercorn stops accepting and drains when ``stopping`` is set (the graceful first signal).
        await nursery.start(functools.partial(serve_api, app, host, port, shutdown_trigger=services.stopping.wait))
        task_status.started()


ROLE_RUNNERS["api"] = run_api
ROLE_RUNNERS["worker"] = run_worker
ROLE_RUNNERS["projector"] = run_projector
