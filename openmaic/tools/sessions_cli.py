"""``openmaic sessions list|show|cancel`` and ``openmaic runs retry``: the operators' view, on the command line.

Registered by :func:`openmaic.tools.cli.register`. Tables are for people (``--json`` for scripts); a command prints
the seq it wrote and its command id, and says so when the id had already been used (nothing was written again).
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import re
import sys
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import msgspec

from openmaic.actors.commands import CommandResult
from openmaic.config import load_config
from openmaic.events.log import EventLog
from openmaic.store.database import Database
from openmaic.tools import sessions
from openmaic.tools.args import at_least, duration
from openmaic.tools.sessions import SESSION_KINDS, STUCK_REASONS, SessionRow, SessionView

WithDb = Callable[[Callable[[Database, argparse.Namespace], Awaitable[int]]], Callable[[argparse.Namespace], int]]

_COMMAND_ID = re.compile(r"^[A-Za-z0-9_.:-]{1,128}$")


def register(commands: argparse._SubParsersAction, command: Callable[..., argparse.ArgumentParser],
             with_db: WithDb) -> None:  # fmt: skip
    s = commands.add_parser("sessions", help="sessions and runs: list, show, cancel")
    actions = s.add_subparsers(title="actions", dest="action", required=True, metavar="ACTION")
    ls = command(actions, "list", with_db(_list),
                 "sessions and runs, newest activity first: state, attempt, lease holder and expiry, last event age")
    ls.add_argument("--owner", metavar="O", help="only this owner's")
    ls.add_argument("--kind", choices=SESSION_KINDS, help="only this kind")
    ls.add_argument("--state", metavar="S", help="only in this state (paused, idle, running, queued …)")
    ls.add_argument("--stuck", action="store_true",
                    help="only stuck ones: running with an expired lease nobody claimed, queued longer than "
                         "runtime.stuck_queued_s, or paused")  # fmt: skip
    ls.add_argument("--limit", type=at_least(1), default=100, metavar="N", help="at most N rows (default 100)")
    ls.add_argument("--json", action="store_true", help="print JSON instead of a table")
    sh = command(actions, "show", with_db(_show), "one session's lease timeline and history")
    sh.add_argument("id", metavar="ID")
    sh.add_argument("--json", action="store_true", help="print JSON")
    cancel = command(actions, "cancel", with_db(_cancel), "cancel a session or run (a command in its log)")
    cancel.add_argument("id", metavar="ID")
    _command_id_flag(cancel)

    r = commands.add_parser("runs", help="generation runs: retry")
    run_actions = r.add_subparsers(title="actions", dest="action", required=True, metavar="ACTION")
    retry = command(run_actions, "retry", with_db(_retry), "re-run the step a paused run failed on")
    retry.add_argument("id", metavar="ID")
    _command_id_flag(retry)


def _command_id_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("--command-id", type=_command_id, metavar="CID",
                   help="the command's id ([A-Za-z0-9_.:-], at most 128): the same id again writes nothing and "
                        "answers the first result (default: a new one, printed)")  # fmt: skip


def _command_id(text: str) -> str:
    if not _COMMAND_ID.match(text):
        raise argparse.ArgumentTypeError(f"a command id is 1 to 128 of A-Z a-z 0-9 _ . : -, got {text!r}")
    return text


def _config() -> Any:
    return load_config(os.environ.get("OPENMAIC_CONFIG") or None)


def _lease(row: SessionRow) -> str:
    if row.lease_worker is None or row.lease_left_s is None:
        return "-"
    when = f"expires in {duration(row.lease_left_s)}" if row.lease_left_s >= 0 else (
        f"EXPIRED {duration(row.lease_left_s)} ago")
    return f"{row.lease_worker} ({when})"


def table(rows: list[SessionRow], *, stuck: bool = False) -> str:
    head = ["ID", "KIND", "OWNER", "STATE", "ATTEMPT", "LEASE", "LAST EVENT"] + (["STUCK"] if stuck else [])
    body = [[r.id, r.kind, r.owner, r.state if r.state == r.status else f"{r.state} ({r.status})", str(r.attempt),
             _lease(r), f"{duration(r.idle_s)} ago"] + ([STUCK_REASONS.get(r.stuck or "", "")] if stuck else [])
            for r in rows]  # fmt: skip
    widths = [max(len(c[i]) for c in [head, *body]) for i in range(len(head))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip()
                     for line in [head, *body])  # fmt: skip


def _time(t: dt.datetime | None) -> str:
    return "-" if t is None else t.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + "Z"


def describe(view: SessionView) -> str:
    s = view.session
    out = [f"{s.id}  {s.kind} of {s.owner}: {s.title or '(untitled)'}",
           f"  state     {s.state} (scheduling: {s.status}), attempt {s.attempt}",
           f"  lease     {_lease(s)}",
           f"  last      event {duration(s.idle_s)} ago"]  # fmt: skip
    if s.stuck:
        out.append(f"  STUCK     {STUCK_REASONS.get(s.stuck, s.stuck)}")
    out.append(f"leases ({len(view.leases)}):")
    for le in view.leases:
        ended = le.ended if le.ended_at is None else f"{le.ended} at {_time(le.ended_at)}"
        out.append(f"  attempt {le.attempt:<3} {le.worker}  claimed {_time(le.claimed_at)} ({le.reason}, seq "
                   f"{le.claimed_seq}) -> {ended}")  # fmt: skip
    out.append(f"history ({len(view.events)} events{', cut' if view.truncated else ''}):")
    for e in view.events:
        data = bytes(e.data).decode()
        data = data if len(data) <= 100 else data[:99] + "…"
        who = f"a{e.attempt}" if e.attempt is not None else (f"cmd {e.command_id}" if e.command_id else "")
        out.append(f"  {e.seq:>5}  {_time(e.recorded_at)}  {e.type:<28} {who:<14} {data}")
    return "\n".join(out)


async def _list(db: Database, args: argparse.Namespace) -> int:
    rows = await sessions.list_sessions(EventLog(db), owner=args.owner, kind=args.kind, state=args.state,
                                        stuck=args.stuck, stuck_queued_s=_config().runtime.stuck_queued_s,
                                        limit=args.limit)  # fmt: skip
    if args.json:
        sys.stdout.buffer.write(msgspec.json.encode(rows) + b"\n")
    elif rows:
        print(table(rows, stuck=args.stuck))
    else:
        print("no stuck sessions" if args.stuck else "no sessions")
    return 0


async def _show(db: Database, args: argparse.Namespace) -> int:
    view = await sessions.show(EventLog(db), args.id, stuck_queued_s=_config().runtime.stuck_queued_s)
    if args.json:
        sys.stdout.buffer.write(msgspec.json.encode(view) + b"\n")
    else:
        print(describe(view))
    return 0


def _report(what: str, args: argparse.Namespace, result: CommandResult) -> int:
    if result.replayed:
        print(f"{what} {args.id}: already done by command {result.command_id} (seq {result.seq}); nothing written")
    else:
        print(f"{what} {args.id}: seq {result.seq} (command {result.command_id})")
    return 0


def _new_command_id(args: argparse.Namespace) -> str:
    return args.command_id or f"cli-{uuid.uuid4().hex[:16]}"


async def _cancel(db: Database, args: argparse.Namespace) -> int:
    result = await sessions.cancel(EventLog(db), args.id, _new_command_id(args))
    return _report("cancel requested for", args, result)


async def _retry(db: Database, args: argparse.Namespace) -> int:
    result = await sessions.retry(EventLog(db), _config(), args.id, _new_command_id(args))
    return _report("retry requested for", args, result)
