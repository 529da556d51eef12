"""DNS rebinding: a page whose name is rebound to this server's address talks to it as its own origin (its
``Origin`` equals its ``Host``), so only the ``Host`` itself tells it apart. Before, ``PUT /api/model-config`` and
``/api/classrooms/ws`` with ``Host``/``Origin: http://rebind.attacker.example:PORT`` were served as same-origin by a
default local install; every request must now name one of the server's hosts, over a real `openmaic serve`.
"""

from __future__ import annotations

import json

import pytest
import trio
import trio_websocket

from openmaic.api.hosts import HostPolicy, host_name
from tests.serving import FAST_CONFIG, running_server

CONFIG = FAST_CONFIG + "server: {allowed_hosts: [openmaic.example.org, '*.lab.example']}\n"
CHANGE = {"revision": None, "change": {"kind": "slots", "set": {"agent": None}}}


async def test_a_rebinding_host_is_refused_before_any_route(db_url, tmp_path):
    async with running_server(db_url, tmp_path, CONFIG) as (client, port):
        rebind = f"rebind.attacker.example:{port}"
        for method, path, body in (("PUT", "/api/model-config", CHANGE), ("GET", "/api/model-config", None),
                                   ("GET", "/readyz", None), ("GET", "/", None)):
            r = await client.request(method, path, json=body, headers={"Host": rebind, "Origin": f"http://{rebind}"})
            assert r.status_code == 421, (path, r.text)
            body = r.json()
            assert (body["success"], body["errorCode"]) == (False, "HOST_NOT_ALLOWED")
            assert "server.allowed_hosts" in body["error"]
        assert (await client.get("/api/model-config")).json()["revision"] is None  # nothing was written
        for other in ("2130706433", "localhost.attacker.example", "openmaic.example.org.evil", "lab.example"):
            r = await client.get("/api/model-config", headers={"Host": f"{other}:{port}"})
            assert r.status_code == 421, other

        # Loopback names and addresses, a pod's address, and the configured names are this server's.
        for own in (f"127.0.0.1:{port}", f"localhost:{port}", "openmaic.example.org", f"a.lab.example:{port}"):
            revision = (await client.get("/api/model-config")).json()["revision"]
            r = await client.put("/api/model-config", json={**CHANGE, "revision": revision},
                                 headers={"Host": own, "Origin": f"http://{own}"})
            assert r.status_code == 200, (own, r.text)
        r = await client.get("/readyz", headers={"Host": f"10.1.2.3:{port}"})  # a Kubernetes probe
        assert r.status_code == 200, r.text


async def _handshake(port: int, host: str) -> tuple[int, dict] | None:
    """``(status, body)`` of a refused handshake to /api/classrooms/ws naming ``host`` (with an Origin of that
    host, as a page there sends), or None when it was accepted."""
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    refused: list[trio_websocket.ConnectionRejected] = []
    try:
        async with trio.open_nursery() as nursery:
            ws = await trio_websocket.wrap_client_stream(nursery, stream, host, "/api/classrooms/ws",
                                                         extra_headers=[("Origin", f"http://{host}")])
            await ws.aclose()
    except* trio_websocket.ConnectionRejected as group:
        refused += group.exceptions  # type: ignore[arg-type]
    finally:
        await stream.aclose()
    return (refused[0].status_code, json.loads(refused[0].body)) if refused else None


async def test_a_rebinding_host_cannot_open_a_websocket(db_url, tmp_path):
    async with running_server(db_url, tmp_path, CONFIG) as (_, port):
        status, body = await _handshake(port, f"rebind.attacker.example:{port}")
        assert status == 421 and body["errorCode"] == "HOST_NOT_ALLOWED", body
        assert await _handshake(port, f"127.0.0.1:{port}") is None
        assert await _handshake(port, f"openmaic.example.org:{port}") is None


@pytest.mark.parametrize(("header", "allowed"), [
    ("127.0.0.1:8000", True), ("[::1]:8000", True), ("localhost", True), ("LOCALHOST.:80", True),
    ("app.localhost", True), ("10.0.0.7", True), ("openmaic.example.org", True), ("x.lab.example", True),
    ("rebind.attacker.example", False), ("0x7f000001", False), ("127.1", False), ("lab.example", False),
    ("a@127.0.0.1", False), ("", False), ("[::1", False), ("evil.example/x", False),
])  # fmt: skip
def test_host_names(header, allowed):
    policy = HostPolicy(["openmaic.example.org", "*.lab.example"])
    name = host_name(header)
    assert (name is not None and policy.allows(name)) == allowed
