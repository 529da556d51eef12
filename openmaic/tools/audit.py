"""Audit export and offline verification of the event log's hash chains (format: docs/audit.md).

An export is JSON Lines: a header, then each stream's events in seq order — every event with the exact stored
bytes of its ``data`` embedded as they are, its ``prev_hash`` and ``hash`` — then a ``stream_end`` line per
stream carrying the last seq and hash, so that a truncated file is detected. ``verify`` needs no database: it
recomputes every chain from the file alone.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import itertools
import os
import struct
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, BinaryIO

import msgspec

from openmaic import errors
from openmaic.events.hashchain import GENESIS
from openmaic.store.database import Database
from openmaic.store.queries import Q

FORMAT = "openmaic-audit"
VERSION = 1
HASH = "sha256-chain-v1"
GENESIS_HEX = GENESIS.hex()

#: Events per page: one query each, server-side, by stream and seq range.
PAGE = 10_000


class AuditFileError(errors.OpenMaicError):
    """The file is not an openmaic audit export (unreadable, not JSON, or a wrong header)."""

    code = "invalid_audit_file"
    status = 422


class StreamRange(msgspec.Struct, frozen=True):
    id: str
    first_seq: int
    """The first seq exported (1 unless ``--since`` started later); the chain is verified from its prev_hash."""
    last_seq: int
    """The last seq exported; ``first_seq - 1`` when the range is empty."""


class Header(msgspec.Struct, frozen=True, kw_only=True):
    format: str
    version: int
    hash: str
    exported_at: str
    streams: list[StreamRange]
    owner: str | None = None
    since: str | None = None
    until: str | None = None


class EventLine(msgspec.Struct, frozen=True):
    stream_id: str
    seq: int
    type: str
    v: int
    recorded_at: dt.datetime
    attempt: int | None
    command_id: str | None
    data: msgspec.Raw
    prev_hash: str
    hash: str


class TextEventLine(msgspec.Struct, frozen=True):
    """Used only when the stored data has a line break or surrounding whitespace (valid JSON, but it cannot be
    embedded in one line as it is): ``data_text`` holds the exact stored text as a JSON string."""

    stream_id: str
    seq: int
    type: str
    v: int
    recorded_at: dt.datetime
    attempt: int | None
    command_id: str | None
    data_text: str
    prev_hash: str
    hash: str


class StreamEnd(msgspec.Struct, frozen=True):
    stream_end: str
    head_seq: int
    head_hash: str
    events: int


class ExportResult(msgspec.Struct, frozen=True):
    path: str
    streams: int
    events: int


# -- export -------------------------------------------------------------------------------------------------------


class _Range(msgspec.Struct, frozen=True):
    """``audit_ranges``: a stream's head, and the first and last seq to export (None: none in the window)."""

    id: str
    head_seq: int
    lo: int | None
    hi: int | None


class _Anchor(msgspec.Struct, frozen=True):
    stream_id: str
    hash: bytes


class _Stored(msgspec.Struct, frozen=True):
    """An event as ``audit_page`` reads it; ``ord`` is the page entry it answers."""

    ord: int
    seq: int
    type: str
    v: int
    recorded_at: dt.datetime
    attempt: int | None
    command_id: str | None
    data: str
    hash: bytes


async def plan_export(db: Database, stream_ids: Sequence[str] = (), *, owner: str | None = None,
                      since: dt.datetime | None = None, until: dt.datetime | None = None) -> list[StreamRange]:
    """The seq range to export of each stream, read in one statement (one snapshot).

    With ``since``/``until`` a stream's range runs from its first event recorded at or after ``since`` to its
    last event recorded before ``until``, contiguous, so that the chain can be verified across it.
    """
    if owner is not None:
        ids = await db.fetch_values(Q.owner_stream_ids, owner)
        if not ids:
            raise errors.NotFound(f"owner {owner!r} has no streams")
    else:
        ids = list(dict.fromkeys(stream_ids))
        if not ids:
            raise errors.InvalidInput("name at least one stream, or --owner")
    rows = {r.id: r for r in await db.fetch_as(_Range, Q.audit_ranges, ids, since, until)}
    missing = [i for i in ids if i not in rows]
    if missing:
        raise errors.StreamNotFound(f"no stream {', '.join(map(repr, missing))}", stream_id=missing[0])
    out = []
    for i in ids:
        r = rows[i]
        lo = r.lo if r.lo is not None else r.head_seq + 1
        hi = r.hi if r.hi is not None else 0
        out.append(StreamRange(i, lo, max(hi, lo - 1)))
    return out


def _pages(ranges: Sequence[StreamRange], page: int) -> Iterator[list[tuple[int, int, int]]]:
    """Split ranges into pages of at most ``page`` events: lists of (stream index, lo, hi). Seqs are gap-free,
    so a range holds exactly hi - lo + 1 events."""
    current: list[tuple[int, int, int]] = []
    room = page
    for i, r in enumerate(ranges):
        lo = r.first_seq
        if r.last_seq < lo:
            current.append((i, lo, lo - 1))
            continue
        while lo <= r.last_seq:
            hi = min(r.last_seq, lo + room - 1)
            current.append((i, lo, hi))
            room -= hi - lo + 1
            lo = hi + 1
            if room == 0:
                yield current
                current, room = [], page
    if current:
        yield current


async def export(db: Database, path: str | os.PathLike[str], ranges: Sequence[StreamRange], *,
                 owner: str | None = None, since: dt.datetime | None = None, until: dt.datetime | None = None,
                 progress: Callable[[int], None] | None = None, page: int = PAGE) -> ExportResult:
    """Write the export of ``ranges`` to ``path`` (atomically: a temporary file renamed at the end)."""
    header = Header(
        format=FORMAT, version=VERSION, hash=HASH, exported_at=_iso(dt.datetime.now(dt.UTC)), streams=list(ranges),
        owner=owner, since=_iso(since) if since else None, until=_iso(until) if until else None,
    )
    encoder = msgspec.json.Encoder()
    prev = {r.id: GENESIS_HEX for r in ranges}
    anchors = [(r.id, r.first_seq - 1) for r in ranges if r.first_seq > 1]
    if anchors:
        for anchor in await db.fetch_as(_Anchor, Q.audit_hashes, [a[0] for a in anchors], [a[1] for a in anchors]):
            prev[anchor.stream_id] = anchor.hash.hex()
    last_hash = dict(prev)
    target = Path(path)
    tmp = target.with_name(target.name + ".partial")
    total = 0
    try:
        with open(tmp, "wb") as f:
            f.write(encoder.encode(header) + b"\n")
            for pg in _pages(ranges, page):
                rows = await db.fetch_as(_Stored, Q.audit_page, [ranges[i].id for i, _, _ in pg],
                                         [lo for _, lo, _ in pg], [hi for _, _, hi in pg])
                by_ord = {k: list(g) for k, g in itertools.groupby(rows, key=lambda r: r.ord)}
                lines: list[Any] = []
                for n, (i, lo, hi) in enumerate(pg, 1):
                    sid = ranges[i].id
                    p = prev[sid]
                    for r in by_ord.get(n, ()):
                        h = r.hash.hex()
                        data = r.data.encode()
                        if b"\n" in data or b"\r" in data or data[:1].isspace() or data[-1:].isspace():
                            lines.append(TextEventLine(sid, r.seq, r.type, r.v, r.recorded_at, r.attempt,
                                                       r.command_id, r.data, p, h))
                        else:
                            lines.append(EventLine(sid, r.seq, r.type, r.v, r.recorded_at, r.attempt, r.command_id,
                                                   msgspec.Raw(data), p, h))
                        p = h
                    prev[sid] = last_hash[sid] = p
                    if hi == ranges[i].last_seq:
                        r_ = ranges[i]
                        lines.append(StreamEnd(sid, r_.last_seq, last_hash[sid], r_.last_seq - r_.first_seq + 1))
                f.write(encoder.encode_lines(lines))
                done = sum(hi - lo + 1 for _, lo, hi in pg)
                total += done
                if progress is not None:
                    progress(done)
        os.replace(tmp, target)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise errors.OpenMaicError(f"cannot write {target}: {exc.strerror or exc}") from exc
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return ExportResult(str(target), len(ranges), total)


def _iso(t: dt.datetime) -> str:
    return t.isoformat().replace("+00:00", "Z")


# -- verify -------------------------------------------------------------------------------------------------------


class _Line(msgspec.Struct):
    """Any line after the header; which fields are set says what it is."""

    stream_id: str | None = None
    seq: int | None = None
    type: str | None = None
    data: msgspec.Raw = msgspec.Raw(b"")
    """Empty when absent (a JSON value is never empty)."""
    data_text: str | None = None
    prev_hash: str | None = None
    hash: str | None = None
    stream_end: str | None = None
    head_seq: int | None = None
    head_hash: str | None = None
    events: int | None = None


class StreamReport(msgspec.Struct, frozen=True):
    stream_id: str
    first_seq: int
    last_seq: int
    events: int
    head_hash: str


class VerifyReport(msgspec.Struct, frozen=True):
    ok: bool
    lines: int
    events: int
    streams: list[StreamReport]
    bad_line: int | None = None
    reason: str | None = None
    exported_at: str | None = None

    def describe(self) -> str:
        if not self.ok:
            return f"line {self.bad_line}: {self.reason}"
        head = (f"OK: {self.events:,} events in {len(self.streams)} stream(s), every hash chain intact "
                f"(exported {self.exported_at})")
        shown = [f"  {s.stream_id}: seq {s.first_seq}–{s.last_seq} ({s.events} events), head {s.head_hash[:16]}…"
                 for s in self.streams[:20]]
        more = [f"  … and {len(self.streams) - 20} more"] if len(self.streams) > 20 else []
        return "\n".join([head, *shown, *more])


class _Bad(Exception):
    def __init__(self, line: int, reason: str) -> None:
        self.line = line
        self.reason = reason


class _Stream:
    __slots__ = ("first", "last", "expected", "prev", "count", "ended", "started")

    def __init__(self, r: StreamRange) -> None:
        self.first, self.last = r.first_seq, r.last_seq
        self.expected = r.first_seq
        self.prev: bytes | None = None
        self.count = 0
        self.ended = False
        self.started = False


_PACK = struct.Struct(">qi").pack


def read_header(f: BinaryIO, path: str) -> Header:
    first = f.readline()
    if not first.strip():
        raise AuditFileError(f"{path} is empty: not an openmaic audit export")
    try:
        header = msgspec.json.decode(first, type=Header)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise AuditFileError(f"{path} is not an openmaic audit export: its first line is not a valid header "
                             f"({exc})") from None
    if header.format != FORMAT or header.version != VERSION or header.hash != HASH:
        raise AuditFileError(f"{path} is not an openmaic audit export this version reads: header says format "
                             f"{header.format!r} version {header.version} hash {header.hash!r}, expected "
                             f"{FORMAT!r} version {VERSION} hash {HASH!r}")
    return header


def verify(path: str | os.PathLike[str], progress: Callable[[int], None] | None = None) -> VerifyReport:
    """Recompute every chain in the export at ``path``. Raises :class:`AuditFileError` when the file cannot be
    read or is not an export; otherwise reports the first bad line and why, or a summary when intact."""
    name = str(path)
    try:
        f = open(path, "rb")
    except OSError as exc:
        raise AuditFileError(f"cannot read {name}: {exc.strerror or exc}") from None
    with f:
        header = read_header(f, name)
        streams = {r.id: _Stream(r) for r in header.streams}
        if len(streams) != len(header.streams):
            raise AuditFileError(f"{name}: the header lists a stream twice")
        lines = (ln for ln in f)
        numbered = enumerate(lines, start=2)
        try:
            n_events, n_lines = _check(numbered, streams, progress)
        except _Bad as bad:
            return VerifyReport(False, bad.line, 0, [], bad.line, bad.reason, header.exported_at)
        except OSError as exc:
            raise AuditFileError(f"cannot read {name}: {exc.strerror or exc}") from None
    reports = [StreamReport(sid, s.first, s.last, s.count, s.prev.hex() if s.prev else "") for sid, s in
               streams.items()]
    return VerifyReport(True, n_lines, n_events, reports, exported_at=header.exported_at)


def _check(numbered: Iterator[tuple[int, bytes]], streams: dict[str, _Stream],
           progress: Callable[[int], None] | None) -> tuple[int, int]:
    decode = msgspec.json.Decoder(_Line).decode
    events = 0
    n = 1
    tick = 0
    for n, raw in numbered:
        try:
            line = decode(raw)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise _Bad(n, f"malformed line ({exc})") from None
        if line.stream_end is not None:
            _end(n, line, streams)
            continue
        sid = line.stream_id
        if sid is None or line.seq is None or line.type is None or line.prev_hash is None or line.hash is None \
                or (not line.data) == (line.data_text is None):
            raise _Bad(n, "malformed line: neither an event (stream_id, seq, type, data, prev_hash, hash) nor a "
                          "stream_end line")
        s = streams.get(sid)
        if s is None:
            raise _Bad(n, f"stream {sid!r} is not listed in the header")
        if s.ended:
            raise _Bad(n, f"an event of stream {sid!r} after its stream_end line")
        seq = line.seq
        if seq != s.expected:
            raise _Bad(n, _misplaced(sid, s, seq, numbered))
        if not s.started:
            s.started = True
            try:
                anchor = bytes.fromhex(line.prev_hash)
            except ValueError:
                raise _Bad(n, "malformed line: prev_hash is not hex") from None
            if seq == 1 and anchor != GENESIS:
                raise _Bad(n, f"prev_hash of stream {sid!r} seq 1 must be the genesis hash (64 zeros)")
            if len(anchor) != 32:
                raise _Bad(n, "malformed line: prev_hash is not 32 bytes of hex")
            s.prev = anchor
        elif line.prev_hash != s.prev.hex():  # type: ignore[union-attr]
            raise _Bad(n, f"prev_hash does not match the hash of stream {sid!r} seq {seq - 1}: that event was "
                          "altered and re-hashed, or this field was altered")
        data = line.data if line.data_text is None else line.data_text.encode()
        t = line.type.encode()
        h = hashlib.sha256(s.prev)  # type: ignore[arg-type]
        h.update(_PACK(seq, len(t)))
        h.update(t)
        h.update(data)
        digest = h.digest()
        if digest.hex() != line.hash:
            raise _Bad(n, _mismatch(sid, seq, digest.hex(), line.hash, numbered))
        s.prev = digest
        s.expected = seq + 1
        s.count += 1
        events += 1
        tick += 1
        if progress is not None and tick == 10_000:
            progress(tick)
            tick = 0
    if progress is not None and tick:
        progress(tick)
    for sid, s in streams.items():
        if not s.ended:
            raise _Bad(n + 1, f"truncated file: stream {sid!r} has no stream_end line (the file ends after line {n})")
    return events, n


def _end(n: int, line: _Line, streams: dict[str, _Stream]) -> None:
    sid = line.stream_end
    s = streams.get(sid)  # type: ignore[arg-type]
    if s is None:
        raise _Bad(n, f"stream_end of stream {sid!r}, which is not listed in the header")
    if s.ended:
        raise _Bad(n, f"a second stream_end line for stream {sid!r}")
    if line.head_seq is None or line.head_hash is None:
        raise _Bad(n, "malformed line: stream_end without head_seq and head_hash")
    seen = s.expected - 1
    if s.count == 0 and s.last >= s.first:
        raise _Bad(n, f"missing lines: stream {sid!r} should have seq {s.first}–{s.last}, the file has none of them")
    if seen != s.last or line.head_seq != s.last:
        raise _Bad(n, f"truncated: stream {sid!r} ends at seq {seen} in this file, but the export covered up to seq "
                      f"{s.last} (stream_end says head_seq {line.head_seq}): lines are missing")
    if s.count and line.head_hash != s.prev.hex():  # type: ignore[union-attr]
        raise _Bad(n, f"stream_end head_hash of stream {sid!r} does not match the hash of its last event")
    if line.events is not None and line.events != s.count:
        raise _Bad(n, f"stream_end of stream {sid!r} counts {line.events} events, the file has {s.count}")
    s.ended = True


def _peek_stream(numbered: Iterator[tuple[int, bytes]], sid: str) -> Iterator[tuple[int, _Line]]:
    """The rest of the file's lines of stream ``sid`` (events and its stream_end), for diagnosing a failure."""
    decode = msgspec.json.Decoder(_Line).decode
    for n, raw in numbered:
        try:
            line = decode(raw)
        except (msgspec.DecodeError, msgspec.ValidationError):
            continue
        if line.stream_id == sid or line.stream_end == sid:
            yield n, line


def _misplaced(sid: str, s: _Stream, seq: int, numbered: Iterator[tuple[int, bytes]]) -> str:
    for m, later in _peek_stream(numbered, sid):
        if later.seq == s.expected:
            return (f"reordered lines: stream {sid!r} seq {seq} comes before seq {s.expected} "
                    f"(which is on line {m})")
    if seq > s.expected and s.count == 0:
        return f"missing line: the export of stream {sid!r} begins at seq {s.expected}, its first line has seq {seq}"
    if seq > s.expected:
        return f"missing line: stream {sid!r} jumps from seq {s.expected - 1} to seq {seq}; seq {s.expected} " \
               "is not in the file"
    return f"reordered or repeated line: stream {sid!r} seq {seq} appears after seq {s.expected - 1}"


def _mismatch(sid: str, seq: int, computed: str, stored: str, numbered: Iterator[tuple[int, bytes]]) -> str:
    # The next link of the chain says which side changed: it points at the original hash.
    for _, later in _peek_stream(numbered, sid):
        pointer = later.prev_hash if later.stream_end is None else later.head_hash
        if later.stream_end is not None and later.head_seq != seq:
            break
        if pointer == computed:
            return (f"hash mismatch: stream {sid!r} seq {seq}: its hash field was altered (the data matches the "
                    "chain, the stored hash does not)")
        if pointer == stored:
            return (f"hash mismatch: stream {sid!r} seq {seq}: its data or type was altered (the stored hash "
                    "no longer matches its content)")
        break
    return f"hash mismatch: stream {sid!r} seq {seq}: its data, type or hash was altered"
