"""Catch-up reads on a streaming standby (``DATABASE_REPLICA_URL``): served by it, never behind what a reader saw.

The test starts a primary and its hot standby (``pg_basebackup -R``, asynchronous), and one `openmaic serve` given
both. With replay running, classroom reads and SSE backlogs come from the replica (its counter rises, and the
standby shows the replica pool's connections). With replay paused on the standby (``pg_wal_replay_pause()``), what
was written since is still in every answer: a read waits for the replica as long as ``database.replica_wait_ms``,
then reads the primary; a client resuming from seq n gets nothing less than n. With the standby stopped, reads
go on from the primary, and ``/readyz`` says so without failing.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import httpx
import pytest
import trio

from openmaic.store.database import open_database
from openmaic.store.migrations import migrate
from openmaic.store.postgres import ThrowawayCluster, free_port
from openmaic.store.queries import Q
from openmaic.store.replica import APPLICATION_NAME
from tests.eventsource import EventSource
from tests.integration.api_harness import raw_ws
from tests.serving import serve_processes, wait_ready
from tests.standby import Standby

pytestmark = pytest.mark.filterwarnings(
    r"ignore:Async generator 'http(x|core)\._[^']*' was garbage collected:ResourceWarning"
)

WAIT_MS = 300
CONFIG = (
    "runtime: {lease_ttl_s: 3, heartbeat_s: 0.5, claim_poll_s: 0.2, wake_poll_s: 1}\n"
    "providers: {demo: {preset: demo, options: {latencyMs: 5}}}\nslots: {llm: demo:course, agent: demo:agent}\n"
    f"database: {{replica_wait_ms: {WAIT_MS}, replica_pool_size: 2}}\n"
)


async def replayed(primary: str, standby: str) -> None:
    """Until the standby has replayed everything the primary has written so far."""
    async with open_database(primary, min_size=1, max_size=1) as p, open_database(standby, min_size=1, max_size=1) as s:
        target = await p.fetchval(Q.replica_primary_lsn)
        with trio.fail_after(10):
            while not await s.fetchval(Q.replica_replayed, target):
                await trio.sleep(0.01)


async def paused(standby: str) -> None:
    """Pause WAL replay on the standby, and wait until it has taken effect: pg_wal_replay_pause() only asks, and a
    record already being applied (or the next few) may still be replayed before replay stops."""
    async with open_database(standby, min_size=1, max_size=1) as s:
        await s.fetchval("SELECT pg_wal_replay_pause()")
        with trio.fail_after(10):
            while await s.fetchval("SELECT pg_get_wal_replay_pause_state()") != "paused":
                await trio.sleep(0.01)


async def on(url: str, sql: str) -> object:
    async with open_database(url, min_size=1, max_size=1) as db:
        return await db.fetchval(sql)


async def reads(client: httpx.AsyncClient) -> dict[str, float]:
    """``openmaic_replica_reads`` by outcome, as the server counts them."""
    text = (await client.get("/metrics")).text
    return {m[1]: float(m[2]) for m in re.finditer(r'^openmaic_replica_reads_total\{outcome="(\w+)"\} (\S+)$', text,
                                                   re.M)}


def more(after: dict[str, float], before: dict[str, float]) -> dict[str, float]:
    return {k: v - before.get(k, 0.0) for k, v in after.items() if v != before.get(k, 0.0)}


async def backlog(base: str, run: str, last_event_id: int = 0) -> tuple[list[int], dict]:
    """A run's SSE from ``last_event_id`` on (``Last-Event-ID``): the frames' seqs up to caught_up, and caught_up."""
    source = EventSource(f"{base}/api/generation-runs/{run}/events", last_event_id=str(last_event_id or ""))
    seqs = []
    with trio.fail_after(15):
        async with source.connect() as messages:
            async for m in messages:
                if m.type == "caught_up":
                    return seqs, m.json()
                seqs.append(int(m.last_event_id))
    raise AssertionError("the stream ended before caught_up")


async def ws_backlog(port: int, stream: str, after: int = 0) -> tuple[list[int], dict]:
    """The stream's WebSocket from ``after`` on: the event frames' seqs up to caught_up, and caught_up."""
    seqs = []
    with trio.fail_after(15):
        async with raw_ws(port, f"/api/streams/{stream}/ws?after={after}") as ws:
            while (frame := json.loads(await ws.get_message()))["type"] != "caught_up":
                if frame["type"] == "event":
                    seqs.append(frame["seq"])
            return seqs, frame


async def finished_run(client: httpx.AsyncClient, requirement: str) -> dict:
    r = await client.post("/api/generation-runs", json={"requirement": requirement, "outlineReview": "auto"})
    assert r.status_code == 202, r.text
    run = r.json()["run"]["id"]
    with trio.fail_after(60):
        while (snap := (await client.get(f"/api/generation-runs/{run}")).json()["run"])["state"] != "completed":
            assert snap["state"] != "paused", snap
            await trio.sleep(0.1)
    return snap


async def test_catch_up_reads_come_from_the_replica_never_behind_the_reader_and_survive_it(tmp_path: Path):
    # Committing durably, as a primary in service does: a throwaway cluster's asynchronous commits reach a standby
    # only when the WAL writer flushes them, up to 3 x wal_writer_delay later, and the replica would time out.
    primary = ThrowawayCluster(durable=True)
    standby = Standby(primary)
    try:
        await trio.to_thread.run_sync(primary.start)
        async with open_database(primary.url(), min_size=1, max_size=1) as db:
            await migrate(db)
        await trio.to_thread.run_sync(standby.start)
        await replayed(primary.url(), standby.url())
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        env = {"DATABASE_REPLICA_URL": standby.url()}
        with serve_processes(primary.url(), tmp_path, [(None, port)], CONFIG, envs=[env]) as procs, \
                trio.fail_after(120):
            async with httpx.AsyncClient(base_url=base, trust_env=False, timeout=10) as client:
                await wait_ready(client, procs, tmp_path)
                snap = await finished_run(client, "Replica reads, part one")
                run, course = snap["id"], snap["stageId"]
                await replayed(primary.url(), standby.url())

                # Replay running: the replica serves the classroom and the backlog.
                before = await reads(client)
                classroom = (await client.get(f"/api/classrooms/{course}")).json()["classroom"]
                seqs, caught_up = await backlog(base, run)
                assert seqs and seqs == sorted(seqs) and caught_up["seq"] == snap["seq"]
                served = more(await reads(client), before)
                assert served.get("replica", 0) >= 2 and set(served) == {"replica"}, served
                assert await on(standby.url(), f"SELECT count(*) FROM pg_stat_activity "
                                               f"WHERE application_name = '{APPLICATION_NAME}'") >= 1

                # Replay paused: writes since then are on the primary only, and every read still has them. The
                # history is read before the pause: a catch-up read after it that found the replica behind (a write
                # to the course landing between the replay check and the pause) would start the replica's lagging
                # window, and the timed read below would then go to the primary without waiting.
                versions = (await client.get(f"/api/classrooms/{course}/history")).json()["versions"]
                # Caught up, readiness says so (and forgets a wait that ran out on this loaded machine before).
                await replayed(primary.url(), standby.url())
                assert (await client.get("/readyz")).json()["checks"]["replica"] == "ok"
                await paused(standby.url())
                r = await client.post(f"/api/classrooms/{course}/restore", json={"seq": versions[-1]["seq"]})
                assert r.status_code == 200, r.text
                restored = r.json()["seq"]
                assert restored > classroom["seq"]
                before = await reads(client)
                started = trio.current_time()
                again = (await client.get(f"/api/classrooms/{course}")).json()["classroom"]
                waited = trio.current_time() - started
                outcomes = more(await reads(client), before)
                assert again["seq"] == restored  # never the replica's older document
                assert waited >= WAIT_MS / 1000, (waited, outcomes)  # it waited for the replica first
                assert outcomes.get("lagging", 0) >= 1, outcomes
                ready = await client.get("/readyz")
                assert ready.status_code == 200, ready.text
                assert ready.json()["checks"]["replica"].startswith("lagging: WAL replay on the replica"), ready.text

                # A run the replica has not seen at all: its SSE, fresh or resumed from seq n, misses nothing.
                later = await finished_run(client, "Replica reads, part two")
                head = later["seq"]
                frames, caught_up = await backlog(base, later["id"])
                assert frames == sorted(set(frames)) and caught_up["seq"] == head, (frames, caught_up)
                middle = frames[len(frames) // 2]
                resumed, caught_up = await backlog(base, later["id"], middle)
                assert resumed == [s for s in frames if s > middle] and caught_up == {"type": "caught_up",
                                                                                    "from": middle, "seq": head}
                assert await ws_backlog(port, later["id"], middle) == (resumed, {"type": "caught_up", "from": middle,
                                                                                 "seq": head})

                # Replay resumed: the replica serves again, and what it serves is the newest.
                await on(standby.url(), "SELECT pg_wal_replay_resume()")
                await replayed(primary.url(), standby.url())
                before = await reads(client)
                assert await backlog(base, later["id"]) == (frames, {"type": "caught_up", "from": 0, "seq": head})
                assert await ws_backlog(port, later["id"]) == (frames, {"type": "caught_up", "from": 0, "seq": head})
                assert set(more(await reads(client), before)) == {"replica"}
                assert (await client.get(f"/api/classrooms/{course}")).json()["classroom"]["seq"] == restored
                assert (await client.get("/readyz")).json()["checks"]["replica"] == "ok"

                # The standby gone: reads go on, from the primary, and readiness only warns.
                await trio.to_thread.run_sync(standby.stop_immediately)
                before = await reads(client)
                assert (await client.get(f"/api/classrooms/{course}")).json()["classroom"]["seq"] == restored
                assert await backlog(base, later["id"]) == (frames, {"type": "caught_up", "from": 0, "seq": head})
                assert await ws_backlog(port, later["id"], middle) == (resumed, {"type": "caught_up", "from": middle,
                                                                                 "seq": head})
                assert more(await reads(client), before).get("unreachable", 0) >= 2
                ready = await client.get("/readyz")
                assert ready.status_code == 200, ready.text
                assert "unreachable" in ready.json()["checks"]["replica"], ready.text
    finally:
        standby.stop()
        primary.stop()
