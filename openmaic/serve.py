"""``openmaic serve``: one process, one root nursery, the roles it was asked to run.

Startup order: resolve the database (``DATABASE_URL`` or the embedded server), migrate, then start every role
with ``await nursery.start(...)`` so that "ready" is only logged once each role reports readiness. SIGINT and
SIGTERM cancel the root nursery; every role shuts down through ordinary cancellation.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import urllib.parse
from collections.abc import Awaitable, Callable
from typing import Any

import trio

from openmaic.store.database import Database, open_database
from openmaic.store.migrations import load_migrations, migrate
from openmaic.store.postgres import data_dir, database_url, embedded_running

log = logging.getLogger("openmaic.serve")

ROLES = ("api", "worker", "projector")

RoleRunner = Callable[..., Awaitable[Any]]
"""``async def run(db, args, *, task_status)``: runs one role until cancelled, calling ``task_status.started()``
once it serves."""

#: The runner of each role. A role without a runner here starts no task of its own.
ROLE_RUNNERS: dict[str, RoleRunner] = {}


def redact(url: str) -> str:
    """The URL with its password replaced, for logs and status output."""
    parts = urllib.parse.urlsplit(url)
    if not parts.password:
        return url
    netloc = parts.netloc.rsplit("@", 1)[1]
    user = urllib.parse.quote(parts.username or "", safe="")
    return urllib.parse.urlunsplit(parts._replace(netloc=f"{user}:***@{netloc}"))


def describe_database(url: str) -> str:
    """Where the URL came from, then the URL without its password."""
    if os.environ.get("DATABASE_URL"):
        return f"DATABASE_URL {redact(url)}"
    return f"embedded PostgreSQL under {data_dir() / 'pgdata'} ({redact(url)})"


async def run_serve(args: argparse.Namespace) -> None:
    """Serve ``args.roles`` until SIGINT or SIGTERM."""
    # The receiver is opened first so that a signal during a slow start (initdb, migrations) still stops us
    # cleanly instead of raising KeyboardInterrupt at an arbitrary point.
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_cancel_on_signal, signals, nursery.cancel_scope)
            await _serve(args)
            nursery.cancel_scope.cancel()
    log.info("stopped")
    if not os.environ.get("DATABASE_URL") and embedded_running():
        log.info("the embedded PostgreSQL keeps running for the next start; `openmaic db stop` stops it")


async def _cancel_on_signal(signals: Any, scope: trio.CancelScope) -> None:
    async for signum in signals:
        log.info("%s received, stopping", signal.Signals(signum).name)
        scope.cancel()
        return


async def _serve(args: argparse.Namespace) -> None:
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
        await serve_roles(db, args)


async def serve_roles(db: Database, args: argparse.Namespace) -> None:
    """Start each requested role that has a runner, report ready, and run until cancelled."""
    async with trio.open_nursery() as nursery:
        for role in args.roles:
            runner = ROLE_RUNNERS.get(role)
            if runner is not None:
                await nursery.start(runner, db, args)
        log.info("ready: roles %s; Ctrl-C stops", ", ".join(args.roles))
        # Keeps the process up (and the nursery open) even when no role has a task of its own.
        await trio.sleep_forever()
