"""Pages of events are bounded by bytes, not only by count: many clients catching up on a stream of large events
at once cost the server a bounded amount of memory.

Before, a catch-up read took up to 1,000 events whatever their size: twelve concurrent reads of a 26 MB page
added about 320 MB to the server. Here a real `openmaic serve` has a session stream of 120 events of 130,000
characters (16 MB), and twelve SSE clients read all of it at once; the server's peak resident memory during the
reads stays within a bound that twelve whole pages pass (about 300 MB with pages cut by count only).
"""

from __future__ import annotations

from pathlib import Path

import httpx
import trio

from openmaic.actors.commands import create_session
from openmaic.events.core import SessionMessagePosted
from openmaic.events.log import PAGE_BYTES, EventLog, more_after
from openmaic.store.database import open_database
from openmaic.store.postgres import free_port
from tests.eventsource import open_sse
from tests.serving import serve_processes, wait_ready

SID = "big-session"
EVENTS, SIZE, READERS = 120, 130_000, 12
BOUND_MB = 200


def _memory_kb(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise AssertionError(field)


async def _fill(db_url: str) -> None:
    async with open_database(db_url, max_size=2) as db:
        log = EventLog(db)
        await create_session(log, stream_id=SID, kind="workbench", owner_id="local", command_id="c-big",
                             input={"course_id": "course-big", "new_course": True}, status="waiting")
        for i in range(0, EVENTS, 10):
            await log.append_one(SID, [SessionMessagePosted(text=f"{i + j:04d}" + "x" * SIZE, delivery="queued")
                                       for j in range(10)])
        # The read itself: pages stop at the budget (one event at least) and say when to read on.
        page = await log.read_stream(SID, 0, 1000, max_bytes=PAGE_BYTES)
        assert 1 <= len(page) <= PAGE_BYTES // SIZE + 2 and more_after(page, 1000, PAGE_BYTES)
        assert len(await log.read_stream(SID, 0, 1000, max_bytes=1)) == 1


async def _read_all(base: str) -> int:
    """Read the session's SSE from the start up to its caught_up; the user_message frames seen."""
    async with open_sse(f"{base}/api/agent/sessions/{SID}/events") as r:
        assert r.status == 200
        seen = 0
        async for line in r.lines:
            if line == "event: caught_up":
                return seen
            seen += line == "event: user_message"
    raise AssertionError("the stream ended before caught_up")


async def test_twelve_concurrent_reads_of_a_large_stream_grow_the_server_by_a_bounded_amount(db_url, tmp_path):
    port = free_port()
    with serve_processes(db_url, tmp_path, [(None, port)]) as procs:
        base = f"http://127.0.0.1:{port}"
        async with httpx.AsyncClient(base_url=base, trust_env=False) as probe:
            await wait_ready(probe, procs, tmp_path)
        await _fill(db_url)
        pid = procs[0].pid
        with trio.fail_after(60):
            assert await _read_all(base) == EVENTS  # warm: the first read's one-off costs are not the bound's
        before = _memory_kb(pid, "VmRSS")
        Path(f"/proc/{pid}/clear_refs").write_text("5")  # restart the peak (VmHWM) from now
        counts: list[int] = []

        async def reader() -> None:
            counts.append(await _read_all(base))

        with trio.fail_after(120):
            async with trio.open_nursery() as nursery:
                for _ in range(READERS):
                    nursery.start_soon(reader)
        grown_mb = (_memory_kb(pid, "VmHWM") - before) / 1024
    assert counts == [EVENTS] * READERS
    assert grown_mb < BOUND_MB, f"the server grew by {grown_mb:.0f} MB for {READERS} readers"
