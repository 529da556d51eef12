"""A process killed in the middle of a multi-event append leaves the whole batch or none of it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import trio

from openmaic.events.core import SessionCreated
from openmaic.events.hashchain import verify_chain
from openmaic.events.log import EventLog, NewStream, StreamAppend

ROOT = Path(__file__).resolve().parents[2]
N = 20_000


async def wait_for(predicate, timeout: float = 30.0) -> None:
    with trio.fail_after(timeout):
        while not await predicate():
            await trio.sleep(0.01)


async def child_backends(db) -> int:
    return await db.fetchval("SELECT count(*) FROM pg_stat_activity WHERE application_name = 'append_child'")


@pytest.mark.parametrize("mode", ["statement", "transaction"])
async def test_sigkill_mid_append_is_all_or_nothing(db, db_url, mode):
    log = EventLog(db)
    await log.append(StreamAppend(stream_id="s", events=[SessionCreated(kind="t", owner_id="o")], create=NewStream("t", "o")))
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.faults.append_child", db_url, mode, str(N)],
        cwd=ROOT, stdout=subprocess.PIPE, text=True,
    )
    try:
        line = await trio.to_thread.run_sync(proc.stdout.readline)
        if mode == "statement":
            assert line.strip() == "appending"
            # kill while the append statement is running on the server
            await wait_for(lambda: db.fetchval(
                "SELECT count(*) > 0 FROM pg_stat_activity WHERE application_name = 'append_child' "
                "AND state = 'active' AND query LIKE '%openmaic_append%'"
            ))
        else:
            assert line.strip() == "appended, not committed"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.stdout.close()
    # once the server has noticed the dead client, the stream holds all of the batch or none of it
    await wait_for(lambda: _zero(child_backends(db)))
    events = await log.read_stream("s", limit=N + 10)
    row = await log.stream_row("s")
    assert len(events) - 1 in (0, N)
    assert row.head_seq == len(events)
    assert verify_chain([(e.seq, e.type, bytes(e.data), e.hash) for e in events]) == row.head_hash
    if mode == "transaction":
        assert len(events) == 1


async def _zero(awaitable) -> bool:
    return await awaitable == 0
