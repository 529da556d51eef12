"""Following streams over real sockets: a session's SSE and the stream WebSocket, resuming, commands, slow
consumers, the live feeds behind them."""

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
EVENTS = "/api/agent/sessions/s/events"


def is_event(f) -> bool:
    """An SSE frame that carries one of the stream's events (not caught_up, not a comment)."""
    return f.data is not None and f.event != "caught_up"

# An SSE response never ends, so its reader stops mid-body; httpx/httpcore then leave their internal body
# generators to the garbage collector (the connection itself is closed by the response's context manager).
pytestmark = pytest.mark.filterwarnings(
    r"ignore:Async generator 'http(x|core)\._[^']*' was garbage collected:ResourceWarning"
)


async def test_sse_sends_backlog_caught_up_live_events_and_pings(db):
    config = make_config("server: {sse_ping_s: 0.3}")
    async with running_api(db, config) as api, api.client() as client:
        await api.create_stream("s", events=4)
        async with (
            client.stream("GET", f"{EVENTS}?lastEventId=2", headers=SSE) as r,
            sse_frames(r) as frames,
        ):
            assert r.status_code == 200
            assert r.headers["content-type"] == "text/event-stream; charset=utf-8"
            assert (await anext(frames)).comment  # ": replaying from event 2"
            for seq in (3, 4, 5):
                f = await anext(frames)
                assert (f.id, f.event) == (str(seq), "user_message")
                assert f.json()["id"] == seq and f.json()["phase"] == "backlog"
            f = await anext(frames)
            assert (f.event, f.id, f.json()) == ("caught_up", None, {"type": "caught_up", "replayed": 3,
                                                                     "fromEventId": 2})
            await api.append_messages("s", 2)
            live = [await anext(frames), await anext(frames)]
            assert [int(f.id) for f in live] == [6, 7]
            assert [(f.json()["data"]["text"], f.json()["phase"]) for f in live] == [("m1", "live"), ("m2", "live")]
            with trio.fail_after(3):
                while not (await anext(frames)).comment:
                    pass
            assert metrics.sample("openmaic_sse_clients") >= 1


async def test_websocket_backlog_live_events_and_commands(db):
    async with running_api(db) as api:
        await api.create_stream("s", events=2)
        async with trio_websocket.open_websocket_url(api.ws_url("/api/streams/s/ws?after=1")) as ws:

            async def frame() -> dict:
                with trio.fail_after(5):
                    return json.loads(await ws.get_message())

            # The session's client events (the same as its SSE), then caught_up.
            first = [await frame() for _ in range(3)]
            assert [(f["type"], f.get("seq")) for f in first] == [("event", 2), ("event", 3), ("caught_up", 3)]
            assert first[0]["event"]["type"] == "user_message" and first[0]["event"]["data"]["text"] == "m1"
            assert first[2] == {"type": "caught_up", "from": 1, "seq": 3}
            await ws.send_message(json.dumps({"type": "message", "commandId": "c1", "text": "hello"}))
            got = [await frame(), await frame()]
            ack = next(f for f in got if f["type"] == "ack")
            event = next(f for f in got if f["type"] == "event")
            # The answer of POST /api/agent/sessions/{id}/messages: the server chose the delivery.
            assert ack == {"type": "ack", "commandId": "c1", "result": {
                "id": "s", "message": {"seq": 4, "text": "hello", "delivery": "queued"},
                "elementRefsAccepted": 0, "courseRefsAccepted": 0}}
            assert event["seq"] == 4 and event["event"]["data"] == {"seq": 4, "text": "hello", "delivery": "queued"}
            # The same command again: the original seq, nothing written.
            await ws.send_message(json.dumps({"type": "message", "commandId": "c1", "text": "hello"}))
            assert (await frame())["result"]["message"]["seq"] == 4
            # The same id for another command: a conflict, as an error frame.
            await ws.send_message(json.dumps({"type": "cancel", "commandId": "c1"}))
            err = await frame()
            assert (err["type"], err["commandId"], err["errorCode"], err["success"]) == ("error", "c1", "CONFLICT",
                                                                                          False)
            # Malformed messages get an error frame; the socket stays open.
            await ws.send_message("{not json")
            err = await frame()
            assert (err["type"], err.get("commandId"), err["errorCode"]) == ("error", None, "INVALID_REQUEST")
            await ws.send_message(json.dumps({"type": "shout", "commandId": "c2"}))
            err = await frame()
            assert (err["commandId"], err["errorCode"], err["details"]["path"]) == ("c2", "INVALID_REQUEST", "type")
            assert "message, title" in err["error"]
            await ws.send_message(json.dumps({"type": "message", "commandId": "c3"}))
            err = await frame()
            assert (err["errorCode"], err["details"]["path"]) == ("MISSING_REQUIRED_FIELD", "text")
            await ws.send_message(json.dumps({"type": "message", "commandId": "c4", "text": 5}))
            assert (await frame())["details"]["path"] == "text"
            await ws.send_message(json.dumps({"type": "retry", "commandId": "c5"}))
            err = await frame()
            assert (err["commandId"], err["errorCode"]) == ("c5", "INVALID_REQUEST")
            await ws.send_message(json.dumps({"type": "title", "title": "Fractions"}))
            assert (await frame())["result"] == {"title": "Fractions"}
            await ws.send_message(json.dumps({"type": "cancel", "commandId": "c6"}))
            assert await frame() == {"type": "ack", "commandId": "c6", "result": {"id": "s", "cancelRequested": True}}
        assert [e.type for e in await api.log.read_stream("s")][-2:] == ["session.title_set", "session.cancel_requested"]


async def test_one_road_bad_messages_are_refused_alike_over_http_and_the_websocket(db):
    """The same message, sent as POST …/messages and as a WebSocket command, gets the same refusal."""
    async with running_api(db) as api, api.client() as client:
        await api.create_stream("s")
        async with trio_websocket.open_websocket_url(api.ws_url("/api/streams/s/ws"), max_message_size=4 << 20) as ws:
            while json.loads(await ws.get_message())["type"] != "caught_up":
                pass
            for body in ({"text": "   \n\t "}, {"text": "x" * 1_000_000}, {"text": None}, {"text": ["a"]},
                         {"materialIds": ["mat_00000000000000000000000000"], "text": "hi"}):
                r = await client.post("/api/agent/sessions/s/messages", json=body)
                await ws.send_message(json.dumps({"type": "message", **body}))
                with trio.fail_after(5):
                    frame = json.loads(await ws.get_message())
                assert frame["type"] == "error" and r.status_code in (400, 404), (body, r.text)
                if r.status_code == 404:
                    assert frame["errorCode"] == "INVALID_REQUEST"  # the material: not found either way
                else:
                    http = r.json()
                    assert (frame["errorCode"], frame["error"], frame.get("details")) == (
                        http["errorCode"], http["error"], http.get("details")), body
        assert await api.log.stream_row("s") and (await api.log.stream_row("s")).head_seq == 1  # nothing was written


async def test_an_oversized_command_is_refused_as_its_route_refuses_the_body(db):
    """Over the JSON body limit: the route's 413 as an error frame, and the socket stays open; past twice the limit
    the connection is closed (1009) rather than read on. Nothing is written either way."""
    limit = 4096
    async with running_api(db, make_config(f"limits: {{json_body_bytes: {limit}}}")) as api, api.client() as client:
        await api.create_stream("s")
        body = {"commandId": "big", "text": "x" * (limit + 10)}
        r = await client.post("/api/agent/sessions/s/messages", json=body)
        assert r.status_code == 413, r.text
        async with trio_websocket.open_websocket_url(api.ws_url("/api/streams/s/ws")) as ws:
            with trio.fail_after(10):
                while json.loads(await ws.get_message())["type"] != "caught_up":
                    pass
                await ws.send_message(json.dumps({"type": "message", **body}))
                frame = json.loads(await ws.get_message())
                assert (frame["type"], frame["commandId"], frame["errorCode"], frame["error"], frame["details"]) == (
                    "error", "big", r.json()["errorCode"], r.json()["error"], r.json()["details"])
                await ws.send_message(json.dumps({"type": "message", "commandId": "ok", "text": "fits"}))
                while (frame := json.loads(await ws.get_message()))["type"] != "ack":
                    pass
                assert frame["commandId"] == "ok"
        # raw_ws: trio-websocket leaves the socket of a connection the server closed to the garbage collector.
        async with raw_ws(api.port, "/api/streams/s/ws?after=2", message_queue_size=4) as ws:
            with trio.fail_after(10):
                assert json.loads(await ws.get_message())["type"] == "caught_up"
                await ws.send_message(json.dumps({"type": "message", "commandId": "huge", "text": "x" * (3 * limit)}))
                with pytest.raises(trio_websocket.ConnectionClosed) as closed:
                    await ws.get_message()
        assert closed.value.reason.code == 1009
        assert (await api.log.stream_row("s")).head_seq == 2  # only "fits"


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
                # raw_ws closes its socket however the connection ends (trio-websocket may leave it to the GC).
                async with raw_ws(api.port, f"/api/streams/s/ws?after={last}") as ws:
                    while True:
                        try:
                            msg = json.loads(await ws.get_message())
                        except trio_websocket.ConnectionClosed as closed:
                            # A loaded machine can make this reader the slow consumer: the server then closes with
                            # 1013 and the client resumes from its last seq, as documented. Anything else fails.
                            assert closed.reason.code == 1013, closed.reason
                            break
                        if msg["type"] == "event":
                            assert msg["event"]["id"] == msg["seq"]
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
                    client.stream("GET", f"{EVENTS}?lastEventId=0", headers=headers) as r,
                    sse_frames(r) as frames,
                ):
                    assert r.status_code == 200
                    async for f in frames:
                        if is_event(f):
                            assert int(f.id) == f.json()["id"]
                            received.append(f.json()["id"])
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
            dropped = metrics.sample("openmaic_slow_consumers_total")
            await api.append_messages("s", 640, batch=40, size=16_000)
            await wait_for(lambda: _true(metrics.sample("openmaic_slow_consumers_total") > dropped), timeout=20)
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
            client.stream("GET", EVENTS, headers=SSE) as r,
            sse_frames(r) as frames,
        ):
            async for f in frames:
                if f.event == "caught_up":
                    break
                if is_event(f):
                    received.append(int(f.id))
            assert received == [1, 2, 3, 4, 5]
            dropped = metrics.sample("openmaic_slow_consumers_total")
            await api.append_messages("s", 640, batch=40, size=16_000)
            await wait_for(lambda: _true(metrics.sample("openmaic_slow_consumers_total") > dropped), timeout=20)
            with trio.fail_after(20):
                async for f in frames:  # what was queued, then the end of the response
                    if is_event(f):
                        received.append(int(f.id))
        assert len(received) < 645, "the server ended the response before sending everything"
        assert received == list(range(1, len(received) + 1))
        # Resumed by a client with an ordinary receive buffer (4 KiB windows would take minutes for 10 MB).
        async with (
            api.client() as resumed,
            resumed.stream("GET", EVENTS, headers={**SSE, "Last-Event-ID": str(received[-1])}) as r,
            sse_frames(r) as frames,
        ):
            with trio.fail_after(20):
                async for f in frames:
                    if f.event == "caught_up":
                        break
                    if is_event(f):
                        received.append(int(f.id))
        assert received == list(range(1, 646))


async def test_a_failed_feed_ends_its_clients_with_try_again_later_and_they_resume(db):
    async with running_api(db) as api, api.client() as client:
        await api.create_stream("s", events=2)
        async with (
            raw_ws(api.port, "/api/streams/s/ws", message_queue_size=10) as ws,  # closes its socket itself
            client.stream("GET", EVENTS, headers=SSE) as r,
            sse_frames(r) as frames,
        ):
            ws_seqs = await _ws_until_caught_up(ws)
            sse_seqs = [int(f.id) async for f in _sse_until_caught_up(frames) if is_event(f)]
            assert ws_seqs == sse_seqs == [1, 2, 3]
            await db.execute("ALTER TABLE events RENAME TO events_away")  # the feed's next read fails
            api.services.wakeups.poke(["s"])
            with trio.fail_after(10), pytest.raises(trio_websocket.ConnectionClosed) as closed:
                await ws.get_message()
            assert closed.value.reason.code == 1013 and "reconnect" in closed.value.reason.reason
            with trio.fail_after(10):
                assert [f async for f in frames if is_event(f)] == []  # the SSE response just ends
            await db.execute("ALTER TABLE events_away RENAME TO events")
        await api.append_messages("s", 2)
        async with trio_websocket.open_websocket_url(api.ws_url("/api/streams/s/ws?after=3")) as ws:
            assert await _ws_until_caught_up(ws) == [4, 5]
        async with (
            client.stream("GET", EVENTS, headers={**SSE, "Last-Event-ID": "3"}) as r,
            sse_frames(r) as frames,
        ):
            assert [int(f.id) async for f in _sse_until_caught_up(frames) if is_event(f)] == [4, 5]


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
            async with client.stream("GET", EVENTS, headers=SSE) as r, sse_frames(r) as frames:
                async for f in frames:
                    if f.event == "caught_up":
                        task_status.started()
                    elif is_event(f):
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
        base_ws, base_sse = metrics.sample("openmaic_websocket_clients"), metrics.sample("openmaic_sse_clients")
        async with trio_websocket.open_websocket_url(api.ws_url("/api/streams/s/ws")) as ws:
            await ws.get_message()
            assert metrics.sample("openmaic_websocket_clients") == base_ws + 1
        async with client.stream("GET", EVENTS, headers=SSE) as r, sse_frames(r) as frames:
            await anext(frames)
            await anext(frames)
            assert metrics.sample("openmaic_sse_clients") == base_sse + 1
        with trio.fail_after(5):
            while (metrics.sample("openmaic_websocket_clients"), metrics.sample("openmaic_sse_clients")) != (base_ws, base_sse):
                await trio.sleep(0.01)


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
