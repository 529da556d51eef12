"""A client's send queue is bounded by bytes as well as by frames (``server.ws_send_queue_bytes``), over real
sockets: a WebSocket client and an SSE client that stop reading while large events arrive are dropped (1013;
the feed ends the response) long before their queues are full by frames, a client that keeps reading is not, and the
dropped ones resume losslessly. Before, such a client held up to ``ws_send_queue`` frames of any size."""

from __future__ import annotations

import json
import socket

import httpx
import pytest
import trio
import trio.testing
import trio_websocket

from openmaic import metrics
from openmaic.config import parse_config
from openmaic.errors import ConfigError
from openmaic.feeds.queues import open_send_queue
from tests.integration.api_harness import make_config, raw_ws, running_api, sse_frames
from tests.runtime import wait_for

EVENTS = "/api/agent/sessions/s/events"
SSE = {"Accept": "text/event-stream"}
TOTAL = 5 + 640  # the stream's first events, then 640 of 16 kB: ~10 MB
# Frames alone would let each slow client hold all 640 events; the byte bound lets it hold ~120 of them.
CONFIG = "server: {ws_send_queue: 100000, ws_send_queue_bytes: 2000000}"

pytestmark = pytest.mark.filterwarnings(
    r"ignore:Async generator 'http(x|core)\._[^']*' was garbage collected:ResourceWarning"
)


async def _true(value: bool) -> bool:
    return value


async def _drops(before: float) -> bool:
    return metrics.sample("openmaic_slow_consumers_total") >= before + 2


async def _read_ws_to_caught_up(url: str, received: list[int]) -> int:
    async with trio_websocket.open_websocket_url(url, max_message_size=16 * 1024 * 1024) as ws:
        while True:
            msg = json.loads(await ws.get_message())
            if msg["type"] == "caught_up":
                return int(msg["seq"])
            received.append(msg["seq"])


async def test_clients_that_stop_reading_are_dropped_by_bytes_alone_and_resume(db):
    async with running_api(db, make_config(CONFIG)) as api:
        await api.create_stream("s", events=4)
        slow_ws: list[int] = []
        slow_sse: list[int] = []
        fast: list[int] = []
        transport = httpx.AsyncHTTPTransport(socket_options=[(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)])
        async with (
            raw_ws(api.port, "/api/streams/s/ws", rcvbuf=4096) as ws,
            api.client(transport=transport) as client,
            client.stream("GET", EVENTS, headers=SSE) as r,
            sse_frames(r) as frames,
            trio_websocket.open_websocket_url(api.ws_url("/api/streams/s/ws"),
                                              max_message_size=16 * 1024 * 1024) as reader,
        ):  # fmt: skip
            while (msg := json.loads(await ws.get_message()))["type"] != "caught_up":
                slow_ws.append(msg["seq"])
            async for f in frames:
                if f.event == "caught_up":
                    break
                if f.data is not None:
                    slow_sse.append(int(f.id))
            while (msg := json.loads(await reader.get_message()))["type"] != "caught_up":
                fast.append(msg["seq"])
            assert slow_ws == slow_sse == fast == [1, 2, 3, 4, 5]

            dropped = metrics.sample("openmaic_slow_consumers_total")

            async def keep_reading() -> None:  # the client that keeps up gets every event, live
                while fast[-1] < TOTAL:
                    fast.append(json.loads(await reader.get_message())["seq"])

            with trio.fail_after(60):
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(keep_reading)
                    for appended in range(15, TOTAL + 1, 10):
                        await api.append_messages("s", 10, batch=10, size=16_000)
                        # The reading client keeps up: it is never more than these 10 events (160 kB) behind,
                        # however fast the server writes and however slowly a loaded machine runs the client.
                        await wait_for(lambda n=appended: _true(fast[-1] >= n), timeout=30)
                    # The two that stopped reading are dropped; neither queue came near 100 000 frames.
                    await wait_for(lambda: _drops(dropped), timeout=30)
            assert fast == list(range(1, TOTAL + 1)) and metrics.sample("openmaic_slow_consumers_total") == dropped + 2

            with pytest.raises(trio_websocket.ConnectionClosed) as closed, trio.fail_after(20):
                while True:  # what was queued and in the socket's buffers, then the close
                    slow_ws.append(json.loads(await ws.get_message())["seq"])
            assert closed.value.reason.code == 1013
            # The SSE client walks away with what it read (draining ~2 MB through a 4 KiB window takes long; the
            # response's end after a drop is tests/integration/test_api_streams.py's) and resumes from there.
            await reader.send_message('{"type": "nothing"}')  # the reading client's socket is still open
            assert json.loads(await reader.get_message())["type"] == "error"
        for got in (slow_ws, slow_sse):
            assert len(got) < TOTAL and got == list(range(1, len(got) + 1)), got[-3:]
        # Both resume from their last seq and lose nothing.
        last = await _read_ws_to_caught_up(api.ws_url(f"/api/streams/s/ws?after={slow_ws[-1]}"), slow_ws)
        assert last == TOTAL and slow_ws == list(range(1, TOTAL + 1))
        async with (
            api.client() as resumed,
            resumed.stream("GET", EVENTS, headers={**SSE, "Last-Event-ID": str(slow_sse[-1])}) as r,
            sse_frames(r) as frames,
        ):
            with trio.fail_after(20):
                async for f in frames:
                    if f.event == "caught_up":
                        break
                    if f.data is not None:
                        slow_sse.append(int(f.id))
        assert slow_sse == list(range(1, TOTAL + 1))


async def test_the_queue_refuses_past_its_bytes_but_always_takes_one_item():
    send, receive = open_send_queue(1000, 10_000)
    send.send_nowait(b"x" * 50_000)  # larger than the bound, but alone: it passes
    with pytest.raises(trio.WouldBlock):
        send.send_nowait(b"y")
    assert await receive.receive() == b"x" * 50_000
    for _ in range(20):
        send.send_nowait(b"z" * 100)  # 20 × (100 + overhead) = 7120
    with pytest.raises(trio.WouldBlock):
        send.send_nowait(b"z" * 3000)  # 7120 + 3256 > 10 000
    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(send.send, b"w" * 3000)  # a paced sender waits for room by bytes
            await trio.testing.wait_all_tasks_blocked()
            with pytest.raises(trio.WouldBlock):
                send.send_nowait(b"z" * 3000)  # still no room: it was not queued meanwhile
            for _ in range(10):
                await receive.receive()
    got = [receive.receive_nowait() for _ in range(11)]
    assert got[-1] == b"w" * 3000


def test_an_invalid_byte_bound_is_refused_naming_its_key():
    for bad in ("0", "-1", "lots"):
        with pytest.raises(ConfigError, match="server.ws_send_queue_bytes"):
            parse_config(f"server: {{ws_send_queue_bytes: {bad}}}", source="<test>", env={})
