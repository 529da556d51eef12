"""Audit export against a real PostgreSQL, offline verification of the file, every kind of tampering, the
documented verification script, and the operator CLI (audit, replay) run as subprocesses."""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest
import trio

from benchmarks.workload import generation, scenarios, workbench
from openmaic.courses import format as fmt
from openmaic.courses.events import CourseDocument
from openmaic.events.core import SessionCreated, SessionMessagePosted
from openmaic.events.hashchain import GENESIS
from openmaic.events.log import EventLog, NewStream, StreamAppend
from openmaic.store.queries import Q
from openmaic.tools import audit
from openmaic.tools.replay import register_fold, replay, summary
from tests.integration.projection_helpers import play, play_all

ROOT = Path(__file__).resolve().parents[2]


def _env(db_url: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENMAIC_") and k != "DATABASE_URL"}
    return env | ({"DATABASE_URL": db_url} if db_url else {})


async def cli(db_url: str | None, *args: str) -> subprocess.CompletedProcess[bytes]:
    with trio.fail_after(60):
        return await trio.run_process([sys.executable, "-m", "openmaic", *args], env=_env(db_url), cwd=ROOT,
                                      capture_stdout=True, capture_stderr=True, check=False)


async def exported(db, tmp_path: Path, *ids: str, **kw) -> Path:
    path = tmp_path / "export.jsonl"
    ranges = await audit.plan_export(db, ids, **kw)
    await audit.export(db, path, ranges, page=7, **{k: v for k, v in kw.items() if k != "owner"},
                       owner=kw.get("owner"))
    return path


@pytest.fixture
async def log(db):
    log = EventLog(db)
    rng = random.Random(5)
    await play(log, generation(rng, "run-1", "course-1", "alice", scenes=3))
    await play(log, workbench(rng, "wb-1", "wbc-1", "alice", turns=2, interrupt_at=1))
    await play(log, generation(rng, "run-2", "course-2", "bob", scenes=2, delete_at=1))
    return log


def lines_of(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines(keepends=True)


def write(path: Path, lines: list[bytes]) -> Path:
    path.write_bytes(b"".join(lines))
    return path


def event_lines(lines: list[bytes], stream: str) -> list[int]:
    return [i for i, ln in enumerate(lines) if ln.startswith(b'{"stream_id":"%s"' % stream.encode())]


async def test_export_then_verify_is_intact(db, log, tmp_path):
    path = await exported(db, tmp_path, owner="alice")
    lines = lines_of(path)
    header = json.loads(lines[0])
    assert (header["format"], header["version"], header["hash"]) == ("openmaic-audit", 1, "sha256-chain-v1")
    ids = [s["id"] for s in header["streams"]]
    assert ids == sorted(["run-1", "course-1", "wb-1", "wbc-1"])
    total = await db.fetchval("SELECT count(*) FROM events e JOIN streams s ON s.id = e.stream_id "
                              "WHERE s.owner_id = 'alice'")
    assert len(lines) == 1 + total + len(ids)
    report = audit.verify(path)
    assert report.ok, report.describe()
    assert report.events == total and {s.stream_id for s in report.streams} == set(ids)
    # every line carries the stored bytes and hash, exactly
    for ln in lines[1:]:
        obj = json.loads(ln)
        if "stream_end" in obj:
            row = await log.stream_row(obj["stream_end"])
            assert (obj["head_seq"], obj["head_hash"]) == (row.head_seq, row.head_hash.hex())
            continue
        (e,) = await log.read_stream(obj["stream_id"], obj["seq"] - 1, 1)
        raw = ln[ln.index(b',"data":') + 8: ln.rindex(b',"prev_hash":')]
        assert raw == bytes(e.data) and obj["hash"] == e.hash.hex()
        assert set(obj) == {"stream_id", "seq", "type", "v", "recorded_at", "attempt", "command_id", "data",
                            "prev_hash", "hash"}


async def test_since_starts_midway_and_the_chain_verifies_from_there(db, log, tmp_path):
    cut = await db.fetchval("SELECT recorded_at FROM events WHERE stream_id = 'run-1' AND seq = 10")
    # events of one transaction share recorded_at: the range starts at the first event recorded at the cut
    start = await db.fetchval("SELECT min(seq) FROM events WHERE stream_id = 'run-1' AND recorded_at >= $1", cut)
    assert 1 < start <= 10
    path = await exported(db, tmp_path, "run-1", "course-2", since=cut)
    lines = lines_of(path)
    first = json.loads(lines[1])
    assert first["stream_id"] == "run-1" and first["seq"] == start
    assert first["prev_hash"] == (await db.fetchval(
        "SELECT hash FROM events WHERE stream_id = 'run-1' AND seq = $1", start - 1)).hex()
    report = audit.verify(path)
    assert report.ok, report.describe()
    # nothing recorded after the last event: empty ranges that still end properly
    late = await db.fetchval("SELECT max(recorded_at) + interval '1 second' FROM events")
    empty = await exported(db, tmp_path, "run-1", "course-2", since=late)
    report = audit.verify(empty)
    assert report.ok and [s.events for s in report.streams] == [0, 0]
    until = await db.fetchval("SELECT recorded_at FROM events WHERE stream_id = 'run-1' AND seq = 14")
    end = await db.fetchval("SELECT max(seq) FROM events WHERE stream_id = 'run-1' AND recorded_at < $1", until)
    path = await exported(db, tmp_path, "run-1", since=cut, until=until)
    report = audit.verify(path)
    assert report.ok and [(s.first_seq, s.last_seq) for s in report.streams] == [(start, end)]


async def test_data_with_line_breaks_is_exported_as_text_and_verifies(db, tmp_path):
    log = EventLog(db)
    await log.append(StreamAppend(stream_id="s", events=[SessionCreated(kind="t", owner_id="o")],
                                  create=NewStream("t", "o")))
    args = list(log.append_args([StreamAppend(stream_id="s", events=[SessionMessagePosted(text="x")])]))
    args[14] = ['{\n  "text": "pretty ✓",\n  "delivery": "queued"\n}  ']
    await db.fetch(Q.append, *args)
    path = await exported(db, tmp_path, "s")
    assert b'"data_text"' in path.read_bytes()
    assert audit.verify(path).ok


# -- tampering: each kind is detected and named, at the first bad line ---------------------------------------------


@pytest.fixture
async def export_file(db, log, tmp_path) -> Path:
    return await exported(db, tmp_path, "run-1", "wb-1", "course-1")


def verdict(path: Path) -> tuple[int | None, str]:
    report = audit.verify(path)
    assert not report.ok
    return report.bad_line, report.reason or ""


async def test_altered_data_byte(export_file):
    lines = lines_of(export_file)
    i = event_lines(lines, "wb-1")[3]
    j = lines[i].index(b'"data":') + 10
    lines[i] = lines[i][:j] + bytes([lines[i][j] ^ 1]) + lines[i][j + 1:]
    bad, reason = verdict(write(export_file, lines))
    assert bad == i + 1 and "data or type was altered" in reason


async def test_altered_type(export_file):
    lines = lines_of(export_file)
    i = event_lines(lines, "run-1")[5]
    lines[i] = re.sub(rb'"type":"[^"]+"', b'"type":"run.step_failed"', lines[i], count=1)
    bad, reason = verdict(write(export_file, lines))
    assert bad == i + 1 and "data or type was altered" in reason


async def test_altered_hash(export_file):
    lines = lines_of(export_file)
    i = event_lines(lines, "course-1")[2]
    obj = json.loads(lines[i])
    lines[i] = lines[i].replace(obj["hash"].encode(), ("f" * 64).encode())
    bad, reason = verdict(write(export_file, lines))
    assert bad == i + 1 and "hash field was altered" in reason


async def test_altered_and_rehashed_event_breaks_the_next_link(export_file):
    lines = lines_of(export_file)
    i, k = event_lines(lines, "run-1")[4:6]
    obj = json.loads(lines[i])
    lines[i] = lines[i].replace(obj["hash"].encode(), ("a" * 64).encode())
    _, reason = verdict(write(export_file, lines))
    assert "hash" in reason


async def test_deleted_line(export_file):
    lines = lines_of(export_file)
    i = event_lines(lines, "wb-1")[6]
    del lines[i]
    bad, reason = verdict(write(export_file, lines))
    assert bad == i + 1 and "missing line" in reason and "seq 7" in reason


async def test_deleted_first_line_of_a_stream(export_file):
    lines = lines_of(export_file)
    i = event_lines(lines, "course-1")[0]
    del lines[i]
    bad, reason = verdict(write(export_file, lines))
    assert bad == i + 1 and "missing line" in reason


async def test_swapped_lines(export_file):
    lines = lines_of(export_file)
    i = event_lines(lines, "run-1")[3]
    lines[i], lines[i + 1] = lines[i + 1], lines[i]
    bad, reason = verdict(write(export_file, lines))
    assert bad == i + 1 and "reordered" in reason and f"line {i + 2}" in reason


async def test_lines_of_different_streams_may_be_interleaved(export_file):
    lines = lines_of(export_file)
    a, b = event_lines(lines, "run-1")[0], event_lines(lines, "wb-1")[0]
    lines.insert(a, lines.pop(b))
    assert audit.verify(write(export_file, lines)).ok


@pytest.mark.parametrize("cut", [1, 3, 40])
async def test_truncated_file(export_file, cut):
    lines = lines_of(export_file)[:-cut]
    bad, reason = verdict(write(export_file, lines))
    assert "truncated" in reason or "missing" in reason
    assert bad <= len(lines) + 1


async def test_truncated_mid_line(export_file):
    data = export_file.read_bytes()
    export_file.write_bytes(data[: len(data) - 30])
    _, reason = verdict(export_file)
    assert "malformed line" in reason or "truncated" in reason


async def test_malformed_line(export_file):
    lines = lines_of(export_file)
    lines.insert(5, b"this is not json\n")
    bad, reason = verdict(write(export_file, lines))
    assert bad == 6 and "malformed line" in reason


async def test_event_of_an_unlisted_stream(export_file):
    lines = lines_of(export_file)
    lines.insert(3, lines[3].replace(b'"stream_id":"', b'"stream_id":"x'))
    bad, reason = verdict(write(export_file, lines))
    assert bad == 4 and "not listed in the header" in reason


@pytest.mark.parametrize("content", [b"", b"not json at all\n", b'{"format":"other","version":1}\n',
                                     b"\xff\xfe\x00garbage\n", b'{"format":"openmaic-audit","version":2,'
                                     b'"hash":"sha256-chain-v1","exported_at":"x","streams":[]}\n'])
def test_not_an_export_is_a_file_error(tmp_path, content):
    path = tmp_path / "bad.jsonl"
    path.write_bytes(content)
    with pytest.raises(audit.AuditFileError):
        audit.verify(path)


def test_unreadable_file_is_a_file_error(tmp_path):
    with pytest.raises(audit.AuditFileError, match="cannot read"):
        audit.verify(tmp_path / "missing.jsonl")
    with pytest.raises(audit.AuditFileError, match="cannot read"):
        audit.verify(tmp_path)


# -- the documented algorithm --------------------------------------------------------------------------------------


async def test_the_script_in_the_docs_verifies_an_export(export_file, tmp_path):
    doc = (ROOT / "docs" / "audit.md").read_text()
    script = re.search(r"```python\n(.*?)```", doc, re.S).group(1)
    assert len(script.strip().splitlines()) <= 20
    (tmp_path / "verify_audit.py").write_text(script)
    ok = subprocess.run([sys.executable, str(tmp_path / "verify_audit.py"), str(export_file)], capture_output=True,
                        text=True)
    assert ok.returncode == 0 and ok.stdout.strip().startswith("OK"), ok.stderr
    lines = lines_of(export_file)
    i = event_lines(lines, "wb-1")[2]
    j = lines[i].index(b'"data":') + 10
    lines[i] = lines[i][:j] + bytes([lines[i][j] ^ 1]) + lines[i][j + 1:]
    bad = subprocess.run([sys.executable, str(tmp_path / "verify_audit.py"), str(write(export_file, lines))],
                         capture_output=True, text=True)
    assert bad.returncode != 0 and f"line {i + 1}" in bad.stderr


async def test_the_documented_hash_is_the_databases(export_file):
    import hashlib
    import struct

    first = json.loads(lines_of(export_file)[1])
    line = lines_of(export_file)[1]
    data = line[line.index(b',"data":') + 8: line.rindex(b',"prev_hash":')]
    t = first["type"].encode()
    h = hashlib.sha256(GENESIS + struct.pack(">qi", first["seq"], len(t)) + t + data).hexdigest()
    assert h == first["hash"]


# -- the CLI -----------------------------------------------------------------------------------------------------


async def test_cli_export_and_verify(db, db_url, log, tmp_path):
    out = tmp_path / "a.jsonl"
    r = await cli(db_url, "audit", "export", "--owner", "alice", "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert b"exported" in r.stdout and r.stderr == b""
    r = await cli(None, "audit", "verify", str(out))
    assert r.returncode == 0 and r.stdout.startswith(b"OK:"), r.stderr
    lines = lines_of(out)
    del lines[4]
    write(out, lines)
    r = await cli(None, "audit", "verify", str(out))
    assert r.returncode == 1 and b"line 5: missing line" in r.stderr


@pytest.mark.parametrize("content", [None, b"\x00\x01 binary", b'{"format": "something else"}\n'])
async def test_cli_verify_of_an_unreadable_or_malformed_file_exits_2(tmp_path, content):
    path = tmp_path / "x.jsonl"
    if content is not None:
        path.write_bytes(content)
    r = await cli(None, "audit", "verify", str(path))
    assert r.returncode == 2
    err = r.stderr.decode()
    assert err.startswith("openmaic: error: ") and err.count("\n") == 1


async def test_cli_export_bad_input_exits_2(db, db_url, tmp_path):
    r = await cli(db_url, "audit", "export", "nope", "-o", str(tmp_path / "x.jsonl"))
    assert r.returncode == 2 and b"no stream 'nope'" in r.stderr
    assert not (tmp_path / "x.jsonl").exists()
    r = await cli(db_url, "audit", "export", "-o", str(tmp_path / "x.jsonl"))
    assert r.returncode == 2
    log = EventLog(db)
    await log.append(StreamAppend(stream_id="s", events=[SessionCreated(kind="t", owner_id="o")],
                                  create=NewStream("t", "o")))
    r = await cli(db_url, "audit", "export", "--owner", "nobody", "-o", str(tmp_path / "x.jsonl"))
    assert r.returncode == 2 and b"nobody" in r.stderr
    r = await cli(db_url, "audit", "export", "--owner", "o", "--since", "yesterday", "-o", str(tmp_path / "x"))
    assert r.returncode == 2 and b"ISO 8601" in r.stderr
    r = await cli(db_url, "audit", "export", "s", "-o", str(tmp_path / "no" / "such" / "dir.jsonl"))
    assert r.returncode == 2 and b"cannot write" in r.stderr and r.stderr.count(b"\n") == 1


async def test_replay_folds_a_course_at_any_seq(db, log):
    full = await replay(log, "course-1")
    assert isinstance(full.state, CourseDocument) and full.seq == full.head_seq
    assert len(full.state.scenes) == 3 and set(full.state.ready) == {s.id for s in full.state.scenes}
    assert [s.id for s in full.document.scenes] == [s.id for s in full.state.scenes]
    assert fmt.validate_document(fmt.to_json(full.document)) == []
    doc = msgspec.json.decode(await db.fetchval("SELECT document::text FROM course_documents WHERE course_id = "
                                                "'course-1'") or "null")
    assert doc is None  # no projector ran: replay reads the log itself
    early = await replay(log, "course-1", to_seq=2)
    assert early.seq == 2 and early.state.outline_revision == 1 and not early.state.scenes
    assert len(early.state.pending) == 3 and early.document.scenes == []
    assert "3 ready" in summary(full) and "course-1" in summary(full)


async def test_replay_uses_registered_folds(db):
    log = EventLog(db)
    await log.append(StreamAppend(stream_id="t-1", events=[SessionCreated(kind="test-kind", owner_id="o")],
                                  create=NewStream("test-kind", "o")))
    await log.append_one("t-1", [SessionMessagePosted(text=str(i)) for i in range(4)])
    register_fold("test-kind", lambda: (), lambda texts, ev, seq: (*texts, ev.text) if hasattr(ev, "text") else texts)
    assert (await replay(log, "t-1")).state == ("0", "1", "2", "3")
    assert (await replay(log, "t-1", to_seq=3)).state == ("0", "1")


async def test_cli_replay(db, db_url, log):
    r = await cli(db_url, "replay", "course-1", "--json")
    assert r.returncode == 0, r.stderr
    doc = msgspec.json.decode(r.stdout)  # a course replays as OpenMAIC's document, as every door serves it
    assert doc["dslVersion"] == fmt.DSL_VERSION and doc["stage"]["name"] and len(doc["scenes"]) == 3
    assert fmt.validate_document(doc) == []
    r = await cli(db_url, "replay", "course-1", "--to-seq", "1")
    assert r.returncode == 0 and b"at seq 1 of" in r.stdout
    # a workbench stream is folded by the workbench kind's own evolve, as its actors fold it
    r = await cli(db_url, "replay", "wb-1")
    assert r.returncode == 0 and b"kind workbench" in r.stdout and b"turns:" in r.stdout, r.stderr
    r = await cli(db_url, "replay", "nope")
    assert r.returncode == 2 and r.stderr.decode().count("\n") == 1 and b"no stream 'nope'" in r.stderr
    r = await cli(db_url, "replay", "course-1", "--to-seq", "-3")
    assert r.returncode == 2


async def test_export_throughput_smoke(db, tmp_path):
    """Many small streams take few queries: pages span streams."""
    log = EventLog(db)
    await play_all(log, scenarios(2, 5, 5), concurrency=5)
    path = await exported(db, tmp_path, owner="owner-1")
    assert audit.verify(path).ok
