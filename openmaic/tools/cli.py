"""The operator commands of ``openmaic``: ``projections status|rebuild``, ``replay``, ``audit export|verify``,
``sessions list|show|cancel`` and ``runs retry`` (:mod:`openmaic.tools.sessions_cli`).

Registered into the main parser by :func:`register`, which :mod:`openmaic.cli` calls with its own subparser
factory (common flags included) and database-URL resolver, so these commands behave like the others: a project
error prints one line and exits 2.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import sys
from collections.abc import Awaitable, Callable

import msgspec
import trio

from openmaic import errors
from openmaic.events.log import EventLog
from openmaic.projections import default_projections, get_projection, projection_status, rebuild
from openmaic.store.database import Database, open_database
from openmaic.tools import audit, replay, sessions_cli
from openmaic.tools.args import at_least, duration
from openmaic.tools.progress import Progress
from openmaic.store.queries import Q

Command = Callable[..., argparse.ArgumentParser]


def register(commands: argparse._SubParsersAction, command: Command, resolve_url: Callable[[], str]) -> None:
    """Add the operator commands. ``command(subparsers, name, run, help)`` makes a subcommand with the common
    flags; ``resolve_url()`` gives the database URL (DATABASE_URL or the embedded server)."""

    def with_db(fn: Callable[[Database, argparse.Namespace], Awaitable[int]]) -> Callable[[argparse.Namespace], int]:
        def run(args: argparse.Namespace) -> int:
            url = resolve_url()

            async def main() -> int:
                async with open_database(url, min_size=1, max_size=4) as db:
                    return await fn(db, args)

            return trio.run(main)

        run.with_database = fn  # type: ignore[attr-defined] # the command itself, for a caller with a database
        return run

    p = commands.add_parser("projections", help="read models: status, rebuild")
    actions = p.add_subparsers(title="actions", dest="action", required=True, metavar="ACTION")
    command(actions, "status", with_db(_status),
            "each projection's checkpoint, lag (events, seconds) and whether a live projector holds it")
    rb = command(actions, "rebuild", with_db(_rebuild),
                 "rebuild a read model from the start beside the live one, then swap it in")
    which = rb.add_mutually_exclusive_group(required=True)
    which.add_argument("name", nargs="?", metavar="NAME",
                       help=f"the projection ({', '.join(x.name for x in default_projections())})")
    which.add_argument("--all", action="store_true", help="rebuild every projection, one after the other")

    r = command(commands, "replay", with_db(_replay), "a stream's folded state at any seq")
    r.add_argument("stream", metavar="STREAM", help="the stream id")
    r.add_argument("--to-seq", type=at_least(0), metavar="N", help="fold up to seq N (default: the head)")
    r.add_argument("--json", action="store_true", help="print the state as JSON")

    a = commands.add_parser("audit", help="export the hash-chained log; verify an export offline")
    audit_actions = a.add_subparsers(title="actions", dest="action", required=True, metavar="ACTION")
    ex = command(audit_actions, "export", with_db(_export),
                 "write streams' events with their hash chains as JSON Lines (format: docs/audit.md)")
    ex.add_argument("streams", nargs="*", metavar="STREAM", help="stream ids to export")
    ex.add_argument("--owner", metavar="O", help="export every stream of this owner instead")
    ex.add_argument("--since", type=_timestamp, metavar="ISO",
                    help="start at each stream's first event recorded at or after this time (ISO 8601)")
    ex.add_argument("--until", type=_timestamp, metavar="ISO",
                    help="stop at each stream's last event recorded before this time (ISO 8601)")
    ex.add_argument("-o", "--output", required=True, metavar="FILE", help="the file to write")
    command(audit_actions, "verify", _verify, "recompute every hash chain of an export, offline").add_argument(
        "file", metavar="FILE", help="an export written by `openmaic audit export`")

    sessions_cli.register(commands, command, with_db)


def _timestamp(text: str) -> dt.datetime:
    try:
        t = dt.datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an ISO 8601 time: {text!r} (e.g. 2025-01-31T12:00:00Z)") from None
    return t if t.tzinfo else t.replace(tzinfo=dt.UTC)


async def _status(db: Database, args: argparse.Namespace) -> int:
    rows = await projection_status(db, default_projections())
    head = f"{'projection':<18}{'checkpoint (epoch:tx:position)':<32}{'applied':>12}{'lag events':>12}{'lag':>10}  live"
    print(head)
    for s in rows:
        cp = f"{s.epoch}:{s.tx}:{s.position}" if s.tx is not None else "none"
        live = f"yes (backend {s.holder_pid})" if s.holder_pid is not None else "no"
        if s.rebuilding:
            live += "; rebuild running"
        print(f"{s.name:<18}{cp:<32}{s.events_applied:>12,}{s.lag_events:>12,}{duration(s.lag_s):>10}  {live}")
    return 0


async def _rebuild(db: Database, args: argparse.Namespace) -> int:
    targets = default_projections() if args.all else [get_projection(args.name)]
    log = EventLog(db)
    total = await db.fetchval(Q.events_count)
    for p in targets:
        with Progress(f"rebuilding {p.name}", total) as progress:
            result = await rebuild(db, log, p, progress=progress)
        rate = result.events / result.seconds if result.seconds else 0.0
        print(f"rebuilt {p.name}: {result.events:,} events in {result.seconds:.2f} s ({rate:,.0f} events/s); "
              f"live projector paused {result.paused_s:.2f} s", flush=True)
    return 0


async def _replay(db: Database, args: argparse.Namespace) -> int:
    result = await replay.replay(EventLog(db), args.stream, args.to_seq)
    if args.json:
        # A course prints as the document every door serves (OpenMAIC's); other streams as their fold's state.
        shown = result.document if result.document is not None else result.state
        sys.stdout.buffer.write(msgspec.json.encode(shown) + b"\n")
    else:
        print(replay.summary(result))
    return 0


async def _export(db: Database, args: argparse.Namespace) -> int:
    if bool(args.streams) == bool(args.owner):
        raise errors.InvalidInput("name the streams to export, or --owner O (not both)")
    ranges = await audit.plan_export(db, args.streams, owner=args.owner, since=args.since, until=args.until)
    total = sum(r.last_seq - r.first_seq + 1 for r in ranges)
    with Progress("exporting", total) as progress:
        result = await audit.export(db, args.output, ranges, owner=args.owner, since=args.since,
                                    until=args.until, progress=progress)
    print(f"exported {result.events:,} events of {result.streams} stream(s) to {result.path}")
    return 0


def _verify(args: argparse.Namespace) -> int:
    size = _lines_hint(args.file)
    with Progress("verifying", size) as progress:
        report = audit.verify(args.file, progress=progress)
    print(report.describe(), file=sys.stdout if report.ok else sys.stderr)
    return 0 if report.ok else 1


def _lines_hint(path: str) -> int:
    # Only for the progress bar's total: an estimate from the file's size, never an error (verify itself
    # reports an unreadable file).
    try:
        return max(os.path.getsize(path) // 350, 1) if sys.stderr.isatty() else 0
    except OSError:
        return 0
