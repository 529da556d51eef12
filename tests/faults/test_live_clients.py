"""Live clients across server-side faults: the API's LISTEN connection dropped, then PostgreSQL restarted.

An `openmaic serve --role api` process serves a WebSocket client and an SSE client following one stream, while this
process appends to it (another process: the API learns of the appends only through NOTIFY or its poll). The
appender retries each append under its command id until it is acknowledged, so an append whose reply was lost in
the restart is answered from the log, not written twice. Clients reconnect whenever their connection ends and
resume from the last seq they have. Each must end up with every seq exactly once, in order.
"""

from __future__ import annotations

import json

import httpx
import pytest
import trio
import trio_websocket

from openmaic.errors import DatabaseError, DatabaseUnavailable
from openmaic.events.core import SessionCreated, SessionMessagePosted
from openmaic.events.log import EventLog, NewStream, StreamAppend
from openmaic.store.database import open_database
from openmaic.store.migrations import migrate
from openmaic.store.postgres import ThrowawayCluster, free_port
from tests.integration.api_harness import raw_ws, sse_frames
from tests.serving import serve_processes, wait_ready

# An SSE response never ends by itself, so a reader stops mid-body; httpx/httpcore then leave their internal body
# generators to the garbage collector (the connection itself is closed by the response's context manager).
pytestmark = pytest.mark.filterwarnings(
    r"ignore:Async generator 'http(x|core)\._[^']*' was garbage collected:ResourceWarning"
)

APPENDS = 240
LAST = APPENDS + 1  # seq 1 is the stream's creation
RECONNECT_DELAY_S = 0.1  # a client's pause between attempts while the server cannot serve


class Follower:
    def __init__(self, name: str) -> None:
        self.name = name
        self.seqs: list[int] = []
        self.connections = 0
        self.refusals: list[int] = []  # HTTP statuses of refused (re)connections
        self.close_codes: list[int] = []  # WebSocket close codes of ended connections

    @property
    def last(self) -> int:
        return self.seqs[-1] if self.seqs else 0

    def got(self, seq: int) -> bool:
        self.seqs.append(seq)
        return seq >= LAST


async def follow_ws(port: int, f: Follower) -> None:
    while True:
        try:
            async with raw_ws(port, f"/api/streams/s/ws?after={f.last}") as ws:
                f.connections += 1
                while True:
                    frame = json.loads(await ws.get_message())
                    if frame["type"] == "event" and f.got(frame["seq"]):
                        return
        except* trio_websocket.ConnectionRejected as rejected:
            f.refusals += [e.status_code for e in rejected.exceptions]
        except* trio_websocket.ConnectionClosed as closed:
            # Only "try again later" is expected: the database went away under a live feed.
            f.close_codes += [e.reason.code for e in closed.exceptions]
        except* (trio_websocket.HandshakeError, OSError):
            pass
        await trio.sleep(RECONNECT_DELAY_S)


async def follow_sse(client: httpx.AsyncClient, f: Follower) -> None:
    while True:
        headers = {"Accept": "text/event-stream", "Last-Event-ID": str(f.last)}
        try:
            async with client.stream("GET", "/api/agent/sessions/s/events", headers=headers) as r:
                if r.status_code != 200:
                    f.refusals.append(r.status_code)
                else:
                    f.connections += 1
                    async with sse_frames(r) as frames:
                        async for frame in frames:
                            if frame.event not in (None, "caught_up") and frame.data is not None and \
                                    f.got(int(frame.id)):
                                return
        except httpx.TransportError:
            pass
        await trio.sleep(RECONNECT_DELAY_S)


async def append_until_acknowledged(log: EventLog, i: int) -> None:
    while True:
        try:
            await log.append_one("s", [SessionMessagePosted(text=f"m{i}")], command_id=f"append-{i}")
            return
        except (DatabaseUnavailable, DatabaseError):
            await trio.sleep(RECONNECT_DELAY_S)  # the database is restarting: try the same command again


async def test_live_clients_lose_nothing_across_a_dropped_listener_and_a_postgresql_restart(tmp_path):
    cluster = ThrowawayCluster(durable=True).start()
    try:
        url = cluster.url()
        async with open_database(url) as db:
            await migrate(db)
            log = EventLog(db)
            await log.append(StreamAppend(stream_id="s", events=[SessionCreated(kind="workbench", owner_id="local")],
                                          create=NewStream("workbench", "local")))  # fmt: skip
            port = free_port()
            with serve_processes(url, tmp_path, [("api", port)]) as procs:
                async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", trust_env=False,
                                             timeout=10) as client:  # fmt: skip
                    await wait_ready(client, procs, tmp_path)
                    ws, sse = Follower("ws"), Follower("sse")
                    with trio.fail_after(120):
                        async with trio.open_nursery() as nursery:
                            nursery.start_soon(follow_ws, port, ws)
                            nursery.start_soon(follow_sse, client, sse)
                            for i in range(APPENDS):
                                if i == APPENDS // 3:
                                    # Drop the API's LISTEN connection: hints stop until it is back.
                                    rows = await db.fetch(
                                        "SELECT pid FROM pg_stat_activity WHERE query LIKE 'LISTEN%'")
                                    assert rows, "the API process listens"
                                    for r in rows:
                                        await db.execute("SELECT pg_terminate_backend($1)", r["pid"])
                                if i == 2 * APPENDS // 3:
                                    # Restart PostgreSQL while appends go on: every connection of every process
                                    # breaks, whatever it was doing.
                                    nursery.start_soon(trio.to_thread.run_sync, cluster.restart)
                                await append_until_acknowledged(log, i)
                    assert all(p.poll() is None for p in procs), "the API process survived"
                    for f in (ws, sse):
                        assert f.seqs == list(range(1, LAST + 1)), f"{f.name}: lost or duplicated events"
                        assert set(f.refusals) <= {503}, f"{f.name}: refused with {f.refusals}"
                    assert set(ws.close_codes) <= {1013}, f"closed with {ws.close_codes}"
            events = await log.read_stream("s", limit=10_000)
            assert [e.seq for e in events] == list(range(1, LAST + 1)), "every append written once"
    finally:
        cluster.stop()
