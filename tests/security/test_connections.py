"""Idle HTTP connections are closed by the server, over real sockets to a real `openmaic serve`.

Before, none was: after a first response hypercorn's recycling of the connection was cancelled by quart-trio
(see :mod:`openmaic.api.server`), so 190 of 190 idle keep-alive connections were still open after 60 s and
``Connection: close`` was ignored.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import trio
import trio_websocket

from openmaic.config import ServerConfig
from openmaic.store.postgres import free_port
from tests.serving import FAST_CONFIG, serve_processes, wait_ready

import httpx

KEEP_ALIVE_S = 1.0


@pytest.fixture
async def server(db_url, tmp_path):
    port = free_port()
    config = FAST_CONFIG + f"server: {{keep_alive_s: {KEEP_ALIVE_S}}}\n"
    with serve_processes(db_url, tmp_path, [(None, port)], config) as procs:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", trust_env=False, timeout=10) as client:
            await wait_ready(client, procs, tmp_path)
            yield port


async def _request(port: int, *, close: bool = False) -> tuple[trio.SocketStream, bytes]:
    """Send one request on a new connection and read its whole answer (the connection stays as the server left
    it)."""
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    header = b"Connection: close\r\n" if close else b""
    await stream.send_all(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n" + header + b"\r\n")
    data = b""
    with trio.fail_after(10):
        while b"\r\n\r\n" not in data:
            data += await stream.receive_some(65536)
        head, _, body = data.partition(b"\r\n\r\n")
        length = int(next(line.split(b":")[1] for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")))
        while len(body) < length:
            body += await stream.receive_some(65536)
    assert head.startswith(b"HTTP/1.1 200"), head
    return stream, head


async def _closed_within(stream: trio.SocketStream, seconds: float, *, rest_of_answer: bool = False) -> float:
    """Seconds until the server closed ``stream`` (end of file), failing after ``seconds``; bytes on the way
    fail it too, unless they are the ``rest_of_answer`` being read."""
    start = trio.current_time()
    with trio.fail_after(seconds):
        while True:
            try:
                chunk = await stream.receive_some(65536)
            except trio.BrokenResourceError:  # a reset is a close too
                break
            if not chunk:
                break
            if not rest_of_answer:
                raise AssertionError(f"unexpected bytes on an idle connection: {chunk!r}")
    await stream.aclose()
    return trio.current_time() - start


async def test_idle_keep_alive_connections_are_closed_after_keep_alive_s(server):
    # Each connection is timed from its own response (the idle timer starts there).
    connections = [((await _request(server))[0], trio.current_time()) for _ in range(20)]
    idle: list[float] = []

    async def watch(stream: trio.SocketStream, answered: float) -> None:
        await _closed_within(stream, KEEP_ALIVE_S + 15)
        idle.append(trio.current_time() - answered)

    async with trio.open_nursery() as nursery:
        for stream, answered in connections:
            nursery.start_soon(watch, stream, answered)
    assert len(idle) == 20
    # Kept open while idle for about keep_alive_s (not closed at once), then closed.
    assert min(idle) > KEEP_ALIVE_S / 2


async def test_connection_close_is_honoured(server):
    stream, head = await _request(server, close=True)
    assert b"connection: close" in head.lower()
    assert await _closed_within(stream, 5) < KEEP_ALIVE_S


async def _head(stream: trio.SocketStream) -> bytes:
    data = b""
    with trio.fail_after(10):
        while b"\r\n\r\n" not in data:
            chunk = await stream.receive_some(65536)
            assert chunk, data
            data += chunk
    return data.partition(b"\r\n\r\n")[0].lower()


async def test_an_answer_before_the_body_came_closes_the_connection_and_says_so(server):
    # The headers of a POST no route takes (or from a host this server does not answer for), with its body still
    # to come: the answer cannot wait for it, and the connection cannot be reused (the rest of the body would be
    # read as the next request), so it says so.
    for path, host, status in [(b"/api/no-such-route", b"localhost", b"404"),
                               (b"/api/generation-runs", b"evil.example", b"421")]:
        stream = await trio.open_tcp_stream("127.0.0.1", server)
        await stream.send_all(b"POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"
                              b"Content-Length: 100000\r\n\r\n%s" % (path, host, b"[" * 100))
        head = await _head(stream)
        assert head.startswith(b"http/1.1 " + status) and b"connection: close" in head, head
        assert await _closed_within(stream, 5, rest_of_answer=True) < KEEP_ALIVE_S
    # A body sent whole is read with its request, and the connection is kept for the next one.
    stream = await trio.open_tcp_stream("127.0.0.1", server)
    body = b'{"requirement": 1}'
    await stream.send_all(b"POST /api/generation-runs HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                          b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
    head = await _head(stream)
    assert head.startswith(b"http/1.1 400") and b"connection:" not in head, head
    await stream.aclose()


async def test_a_connection_in_use_is_not_idle(server):
    # A live WebSocket sends nothing for longer than keep_alive_s and stays open, and a connection reused for a
    # second request within keep_alive_s serves it.
    async with trio_websocket.open_websocket_url(f"ws://127.0.0.1:{server}/api/classrooms/ws") as ws:
        first = json.loads(await ws.get_message())
        assert first["type"] == "classrooms"
        await trio.sleep(KEEP_ALIVE_S * 2.5)
        await ws.ping()
        assert not ws.closed
    stream, _ = await _request(server)
    await stream.send_all(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
    with trio.fail_after(10):
        assert (await stream.receive_some(65536)).startswith(b"HTTP/1.1 200")
    await stream.aclose()


def _seconds(value: str) -> float:
    m = re.fullmatch(r"(\d+)(ms|s|m|h)?", value)
    assert m, value
    return int(m.group(1)) * {"ms": 0.001, "s": 1, "m": 60, "h": 3600, None: 1}[m.group(2)]


def test_the_reverse_proxy_closes_idle_and_slow_clients_and_limits_connections():
    conf = (Path(__file__).resolve().parents[2] / "deploy" / "nginx" / "openmaic.conf").read_text()
    directives = re.findall(r"^\s*([a-z_]+)\s+([^;]*);", conf, re.M)
    found: dict[str, list[str]] = {}
    for name, value in directives:
        found.setdefault(name, []).append(value.strip())
    for name in ("client_header_timeout", "client_body_timeout", "send_timeout"):
        assert _seconds(found[name][0]) <= 60, name
    # The client side's idle timeout, then the upstream's: nginx must drop an idle upstream connection before
    # openmaic does, or a request could be sent on a connection the server is closing.
    upstream_idle, client_idle = (_seconds(v) for v in found["keepalive_timeout"])  # in the order of the file
    assert client_idle <= 60
    assert upstream_idle < ServerConfig().keep_alive_s
    assert any(v.startswith("openmaic_conn ") for v in found["limit_conn"])
    assert found["limit_conn_zone"] and found["limit_req_zone"]
