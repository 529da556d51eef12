"""Logs written by earlier code, loaded into a test database as they were stored (audit exports, docs/audit.md)."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path


def log_fixture(path: Path) -> tuple[dict, list[dict]]:
    """The export's header and its rows."""
    lines = path.read_text().splitlines()
    return json.loads(lines[0]), [json.loads(line) for line in lines[1:]]


def raw_data(line: str) -> str:
    """The stored bytes of an export line's data (embedded as they are, docs/audit.md)."""
    start = line.index(',"data":') + len(',"data":')
    return line[start:line.index(',"prev_hash":')]


def _ts(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00"))


async def load_log_fixture(db, path: Path) -> dict[str, str]:
    """Insert the export's rows as they were stored (bytes, hashes, heads); returns each stream's kind."""
    header, rows = log_fixture(path)
    raw = path.read_text().splitlines()[1:]
    kinds: dict[str, str] = {}
    for r in rows:
        if r.get("seq") == 1:
            created = r["data"]
            kinds[r["stream_id"]] = created.get("kind", "course") if r["type"] == "session.created" else "course"
    for sid, kind in kinds.items():
        await db.execute("INSERT INTO streams (id, kind, owner_id, status) VALUES ($1, $2, $3, 'waiting')",
                         sid, kind, header["owner"])
    for line, r in zip(raw, rows):
        if "seq" not in r:
            continue
        await db.execute(
            "INSERT INTO events (stream_id, seq, type, v, data, attempt, command_id, recorded_at, hash) "
            "VALUES ($1, $2, $3, $4, $5::json, $6, $7, $8::timestamptz, $9)",
            r["stream_id"], r["seq"], r["type"], r["v"], raw_data(line), r["attempt"], r["command_id"],
            _ts(r["recorded_at"]), bytes.fromhex(r["hash"]))
    for end in (r for r in rows if "stream_end" in r):
        status = "terminal" if any(x.get("stream_id") == end["stream_end"] and x["type"] == "session.ended"
                                   for x in rows if "type" in x) else "waiting"  # fmt: skip
        await db.execute("UPDATE streams SET head_seq = $2, head_hash = $3, status = $4 WHERE id = $1",
                         end["stream_end"], end["head_seq"], bytes.fromhex(end["head_hash"]),
                         status)
    return kinds
