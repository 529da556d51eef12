"""Reading streams over real sockets: JSON pages, SSE and WebSocket, resuming, commands, slow consumers."""

from __future__ import annotations

import json
import random
import socket

import httpx
import pytest
import trio
import trio_websocket

from benchmarks._raw_ws import RawWebSocket
from openmaic import metrics
from tests.integration.api_harness import make_config, running_api, raw_ws, sse_frames
from tests.runtime import wait_for

SSE = {"Accept": "text/event-stream"}

# An SSE response never ends, so its reader stops mid-body; httpx/httpcore then leave their internal body
# generators to the garbage collector (the connection itself is closed by the response's context manager).
pytestmark = pytest.mark.filterwarnings(
    r"ignore:Async generator 'http(x|core)\._[^']*' was garbage collected:ResourceWarning"
)


async def test_json_pages_carry_envelopes_with_the_stored_bytes(db):
    async with running_api(db) as api, api.client() as client:
        await api.create_stream("s", events=24)
        seen = []
        after = 0
        while True:
            r = await client.get("/api/streams/s/events", params={"after": after, "limit": 10})
            assert r.status_code == 200, r.text
            assert r.headers["content-type"] == "application/json"
            page = r.json()
            assert page["head_seq"] == 25
            seen += page["events"]
            if not page["events"]:
                assert page["next_after"] == after == 25
                break
            assert page["next_after"] == page["events"][-1]["seq"]
            after = page["next_after"]
        assert [e["seq"] for e in seen] == list(range(1, 26))
        stored = await api.log.read_stream("s", 0, 100)
        first = seen[1]
        assert set(first) == {"stream_id", "seq", "type", "v", "data", "attempt", "command_id", "recorded_at"}
        assert (first["stream_id"], first["type"], first["v"]) == ("s", "session.message_posted", 1)
        # The data bytes pass through untouched: the raw response contains them verbatim.
        r = await client.get("/api/streams/s/events", params={"after": 1, "limit": 1})
        assert bytes(stored[1].data) in r.content


async def test_sse_sends_backlog_caught_up_live_events_and_pings(db):
    config = make_config("server: {sse_ping_s: 0.3}")
    async with running_api(db, config) as api, api.client() as client:
        await api.create_stream("s", events=4)
        async with (
            client.stream("GET", "/api/streams/s/events?after=2", headers=SSE) as r,
            sse_frames(r) as frames,
        ):
            assert r.status_code == 200
            assert r.headers["content-type"].startswith("text/event-stream")
            for seq in (3, 4, 5):
                f = await anext(frames)
                assert (f.id, f.event) == (str(seq), None)
                assert f.json()["seq"] == seq
            f = await anext(frames)
            assert (f.event, f.id, f.json()) == ("caught_up", None, {"seq": 5})
            await api.append_messages("s", 2)
            live = [await anext(frames), await anext(frames)]
            assert [f.json()["seq"] for f in live] == [6, 7]
            assert [f.json()["data"]["text"] for f in live] == ["m1", "m2"]
            with trio.fail_after(3):
                while not (await anext(frames)).comment:
                    pass
            assert metrics.SSE_CLIENTS.value() >= 1


async def test_websocket_backlog_live_events_and_commands(db):
    async with running_api(db) as api:
        await api.create_stream("s", events=2)
        async with trio_websocket.open_websocket_url(api.ws_url("/api/streams/s/ws?after=1")) as ws:

            async def frame() -> dict:
                with trio.fail_after(5):
                    return json.loads(await ws.get_message())

            async with api.client() as client:
                page = (await client.get("/api/streams/s/events?after=1")).json()
            # The same envelopes as the JSON page, then caught_up.
            assert [await frame() for _ in range(3)] == [
                {"type": "event", "seq": 2, "event": page["events"][0]},
                {"type": "event", "seq": 3, "event": page["events"][1]},
                {"type": "caught_up", "seq": 3},
            ]
            await ws.send_message(json.dumps({"type": "message", "command_id": "c1", "text": "hello", "delivery": "steer"}))
            got = [await frame(), await frame()]
            ack = next(f for f in got if f["type"] == "ack")
            event = next(f for f in got if f["type"] == "event")
            assert ack == {"type": "ack", "command_id": "c1", "seq": 4, "replayed": False}
            assert event["seq"] == 4 and event["event"]["data"] == {"text": "hello", "delivery": "steer"}
            assert event["event"]["command_id"] == "c1"
            # The same command again: the original seq, nothing written.
            await ws.send_message(json.dumps({"type": "message", "command_id": "c1", "text": "hello"}))
            assert await frame() == {"type": "ack", "command_id": "c1", "seq": 4, "replayed": True}
            # The same id for another command: a conflict, as an error frame.
            await ws.send_message(json.dumps({"type": "cancel", "command_id": "c1"}))
            err = await frame()
            assert (err["type"], err["command_id"], err["error"]["code"]) == ("error", "c1", "CONFLICT")
            # Malformed messages get an error frame; the socket stays open.
            await ws.send_message("{not json")
            err = await frame()
            assert (err["type"], err["command_id"], err["error"]["code"]) == ("error", None, "INVALID_REQUEST")
            await ws.send_message(json.dumps({"type": "shout", "command_id": "c2"}))
            err = await frame()
            assert (err["command_id"], err["error"]["code"], err["error"]["details"]["path"]) == ("c2", "INVALID_REQUEST", "type")
            await ws.send_message(json.dumps({"type": "message", "command_id": "c3"}))
            err = await frame()
            assert (err["error"]["code"], err["error"]["details"]["path"]) == ("MISSING_REQUIRED_FIELD", "text")
            await ws.send_message(json.dumps({"type": "message", "command_id": "c4", "text": "x", "extra": 1}))
            assert (await frame())["error"]["details"]["path"] == "extra"
            await ws.send_message(json.dumps({"type": "retry", "command_id": "c5"}))
            err = await frame()
            assert (err["command_id"], err["error"]["code"]) == ("c5", "CONFLICT")
            await ws.send_message(json.dumps({"type": "cancel", "command_id": "c6"}))
            got = [await frame(), await frame()]
            assert {"type": "ack", "command_id": "c6", "seq": 5, "replayed": False} in got
            assert any(f["type"] == "event" and f["event"]["type"] == "session.cancel_requested" for f in got)


@pytest.mark.parametrize("transport", ["ws", "sse"])
async def test_resume_after_random_disconnects_delivers_every_seq_exactly_once(db, transport):
    total = 2000
    async with running_api(db) as api, api.client() as client:
        await api.create_stream("s", events=999)  # 1000 now; 1000 more arrive while the client reads
        cuts = sorted(random.sample(range(1, total - 1), 20))
        received: list[int] = []

        async def appender() -> None:
            for _ in range(50):
                await api.append_messages("s", 20)
                await trio.sleep(0.01)

        async def read_ws() -> None:
            while True:
                last = received[-1] if received else 0
                async with trio_websocket.open_websocket_url(api.ws_url(f"/api/streams/s/ws?after={last}")) as ws:
                    while True:
                        msg = json.loads(await ws.get_message())
                        if msg["type"] == "event":
                            assert msg["event"]["seq"] == msg["seq"]
                            received.append(msg["seq"])
                            if received[-1] == total:
                                return
                            if cuts and len(received) >= cuts[0]:
                                cuts.pop(0)
                                break  # disconnect here; resume from the last seq

        async def read_sse() -> None:
            while True:
                headers = dict(SSE)
                if received:
                    headers["Last-Event-ID"] = str(received[-1])
                # after=0 on every attempt: Last-Event-ID must win, as it does for a reconnecting EventSource.
                async with (
                    client.stream("GET", "/api/streams/s/events?after=0", headers=headers) as r,
                    sse_frames(r) as frames,
                ):
                    assert r.status_code == 200
                    async for f in frames:
                        if f.event is None and f.data is not None:
                            assert int(f.id) == f.json()["seq"]
                            received.append(f.json()["seq"])
                            if received[-1] == total:
                                return
                            if cuts and len(received) >= cuts[0]:
                                cuts.pop(0)
                                break

        with trio.fail_after(30):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(appender)
                await (read_ws() if transport == "ws" else read_sse())
        assert not cuts, "every planned disconnect happened"
        assert received == list(range(1, total + 1))


async def test_slow_websocket_consumer_is_closed_with_1013_and_resumes_losslessly(db):
    config = make_config("server: {ws_send_queue: 8}")
    async with running_api(db, config) as api:
        await api.create_stream("s", events=4)
        received: list[int] = []
        async with raw_ws(api.port, "/api/streams/s/ws", rcvbuf=4096) as ws:
            while True:
                msg = json.loads(await ws.get_message())
                if msg["type"] == "caught_up":
                    break
                received.append(msg["seq"])
            assert received == [1, 2, 3, 4, 5]
            # Stop reading while the stream grows by ~10 MB: the socket fills, then the send queue overflows.
            dropped = metrics.SLOW_CONSUMERS.value()
            await api.append_messages("s", 640, batch=40, size=16_000)
            await wait_for(lambda: _true(metrics.SLOW_CONSUMERS.value() > dropped), timeout=20)
            with pytest.raises(trio_websocket.ConnectionClosed) as closed:
                with trio.fail_after(20):
                    while True:
                        msg = json.loads(await ws.get_message())
                        assert msg["type"] == "event"
                        received.append(msg["seq"])
            assert closed.value.reason.code == 1013
            assert len(received) < 645, "the server closed before sending everything"
            assert received == list(range(1, len(received) + 1))
        async with trio_websocket.open_websocket_url(
            api.ws_url(f"/api/streams/s/ws?after={received[-1]}"), max_message_size=16 * 1024 * 1024
        ) as ws:
            with trio.fail_after(20):
                while True:
                    msg = json.loads(await ws.get_message())
                    if msg["type"] == "caught_up":
                        assert msg["seq"] == 645
                        break
                    received.append(msg["seq"])
        assert received == list(range(1, 646))


async def test_slow_sse_consumer_is_ended_and_resumes_losslessly(db):
    config = make_config("server: {ws_send_queue: 8}")
    # A small receive buffer: a client that stops reading stalls the server's writes almost at once.
    transport = httpx.AsyncHTTPTransport(socket_options=[(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)])
    async with running_api(db, config) as api, api.client(transport=transport) as client:
        await api.create_stream("s", events=4)
        received: list[int] = []
        async with (
            client.stream("GET", "/api/streams/s/events", headers=SSE) as r,
            sse_frames(r) as frames,
        ):
            async for f in frames:
                if f.event == "caught_up":
                    break
                received.append(int(f.id))
            assert received == [1, 2, 3, 4, 5]
            dropped = metrics.SLOW_CONSUMERS.value()
            await api.append_messages("s", 640, batch=40, size=16_000)
            await wait_for(lambda: _true(metrics.SLOW_CONSUMERS.value() > dropped), timeout=20)
            with trio.fail_after(20):
                async for f in frames:  # what was queued, then the end of the response
                    if f.data is not None and f.event is None:
                        received.append(int(f.id))
        assert len(received) < 645, "the server ended the response before sending everything"
        assert received == list(range(1, len(received) + 1))
        # Resumed by a client with an ordinary receive buffer (4 KiB windows would take minutes for 10 MB).
        async with (
            api.client() as resumed,
            resumed.stream("GET", "/api/streams/s/events", headers={**SSE, "Last-Event-ID": str(received[-1])}) as r,
            sse_frames(r) as frames,
        ):
            with trio.fail_after(20):
                async for f in frames:
                    if f.event == "caught_up":
                        assert f.json()["seq"] == 645
                        break
                    received.append(int(f.id))
        assert received == list(range(1, 646))


async def test_a_failed_feed_ends_its_clients_with_try_again_later_and_they_resume(db):
    async with running_api(db) as api, api.client() as client:
        await api.create_stream("s", events=2)
        async with (
            raw_ws(api.port, "/api/streams/s/ws", message_queue_size=10) as ws,  # closes its socket itself
            client.stream("GET", "/api/streams/s/events", headers=SSE) as r,
            sse_frames(r) as frames,
        ):
            ws_seqs = await _ws_until_caught_up(ws)
            sse_seqs = [int(f.id) async for f in _sse_until_caught_up(frames)]
            assert ws_seqs == sse_seqs == [1, 2, 3]
            await db.execute("ALTER TABLE events RENAME TO events_away")  # the feed's next read fails
            api.services.wakeups.poke(["s"])
            with trio.fail_after(10), pytest.raises(trio_websocket.ConnectionClosed) as closed:
                await ws.get_message()
            assert closed.value.reason.code == 1013 and "reconnect" in closed.value.reason.reason
            with trio.fail_after(10):
                assert [f async for f in frames if f.data is not None] == []  # the SSE response just ends
            await db.execute("ALTER TABLE events_away RENAME TO events")
        await api.append_messages("s", 2)
        async with trio_websocket.open_websocket_url(api.ws_url("/api/streams/s/ws?after=3")) as ws:
            assert await _ws_until_caught_up(ws) == [4, 5]
        async with (
            client.stream("GET", "/api/streams/s/events", headers={**SSE, "Last-Event-ID": "3"}) as r,
            sse_frames(r) as frames,
        ):
            assert [int(f.id) async for f in _sse_until_caught_up(frames)] == [4, 5]


async def _ws_until_caught_up(ws) -> list[int]:
    seqs = []
    with trio.fail_after(10):
        while (msg := json.loads(await ws.get_message()))["type"] != "caught_up":
            seqs.append(msg["seq"])
    return seqs


async def _sse_until_caught_up(frames):
    with trio.fail_after(10):
        async for f in frames:
            if f.event == "caught_up":
                return
            yield f


async def test_every_client_of_a_stream_is_fed_by_one_reader(db):
    config = make_config("runtime: {wake_poll_s: 0.2}")
    async with running_api(db, config) as api, api.client() as client:
        await api.create_stream("s")
        feeds = api.services.feeds
        got: dict[str, list[int]] = {}
        total = 1 + 5 * 8

        async def ws_client(name: str, task_status: trio.TaskStatus[None]) -> None:
            got[name] = []
            async with trio_websocket.open_websocket_url(api.ws_url("/api/streams/s/ws")) as ws:
                while True:
                    msg = json.loads(await ws.get_message())
                    if msg["type"] == "caught_up":
                        task_status.started()
                    else:
                        got[name].append(msg["seq"])
                        if msg["seq"] == total:
                            return

        async def sse_client(name: str, task_status: trio.TaskStatus[None]) -> None:
            got[name] = []
            async with client.stream("GET", "/api/streams/s/events", headers=SSE) as r, sse_frames(r) as frames:
                async for f in frames:
                    if f.event == "caught_up":
                        task_status.started()
                    elif f.data is not None:
                        got[name].append(int(f.id))
                        if int(f.id) == total:
                            return

        with trio.fail_after(30):
            async with trio.open_nursery() as nursery:
                for i in range(10):
                    await nursery.start(ws_client, f"ws{i}")
                    await nursery.start(sse_client, f"sse{i}")
                assert feeds.active == 1
                for _ in range(8):
                    await api.append_messages("s", 5, batch=5)
        assert all(seqs == list(range(1, total + 1)) for seqs in got.values()), got
        # Every client left: the feed goes at its next wake-up (a poll at the latest).
        await wait_for(lambda: _true(feeds.active == 0), timeout=10)


async def test_client_counts_return_to_zero_after_disconnects(db):
    async with running_api(db) as api, api.client() as client:
        await api.create_stream("s")
        base_ws, base_sse = metrics.WEBSOCKET_CLIENTS.value(), metrics.SSE_CLIENTS.value()
        async with trio_websocket.open_websocket_url(api.ws_url("/api/streams/s/ws")) as ws:
            await ws.get_message()
            assert metrics.WEBSOCKET_CLIENTS.value() == base_ws + 1
        async with client.stream("GET", "/api/streams/s/events", headers=SSE) as r, sse_frames(r) as frames:
            await anext(frames)
            assert metrics.SSE_CLIENTS.value() == base_sse + 1
        with trio.fail_after(5):
            while (metrics.WEBSOCKET_CLIENTS.value(), metrics.SSE_CLIENTS.value()) != (base_ws, base_sse):
                await trio.sleep(0.01)


async def test_page_is_json_when_the_client_accepts_anything(db):
    async with running_api(db) as api, api.client() as client:
        await api.create_stream("s")
        r = await client.get("/api/streams/s/events", headers={"Accept": "*/*"})
        assert r.status_code == 200 and r.json()["head_seq"] == 1
        with pytest.raises(httpx.ReadTimeout):
            # an SSE response never ends by itself
            async with client.stream("GET", "/api/streams/s/events", headers=SSE, timeout=0.5) as r:
                await r.aread()


async def _true(value: bool) -> bool:
    return value


async def test_the_benchmarks_lean_websocket_client_reads_every_frame_length(db):
    """benchmarks/_raw_ws.py measures fan-out: it must read the server's frames exactly (7-, 16- and 64-bit
    lengths), or the benchmark's figures mean nothing."""
    async with running_api(db) as api:
        await api.create_stream("s")
        for size in (10, 1_000, 70_000):
            await api.append_messages("s", 1, size=size)
        ws = await RawWebSocket.connect("127.0.0.1", api.port, "/api/streams/s/ws?after=0")
        try:
            frames = []
            with trio.fail_after(10):
                while (frame := json.loads(await ws.get_message()))["type"] != "caught_up":
                    frames.append(frame)
        finally:
            await ws.aclose()
        assert [f["seq"] for f in frames] == [1, 2, 3, 4]
        assert [len(f["event"]["data"]["text"]) for f in frames[1:]] == [12, 1_002, 70_002]
