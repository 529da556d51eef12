"""Cross-origin WebSockets and cross-site writes are refused by the routing layer, for every route.

Before, a page on another port of the same host read the victim's library over a WebSocket and planted a run
with a ``no-cors`` ``text/plain`` POST. The browser itself is in ``test_origins_browser.py``; here the rules,
over real sockets.
"""

from __future__ import annotations

import json

import pytest
import trio
import trio_websocket

from tests.integration.api_harness import anonymous_owner, make_config, running_api, testing_bp

URL = "/api/test/streams/s/messages"
ANON = "identity: {mode: anonymous}\n"


async def _handshake(api, path: str, origin: str | None) -> int | None:
    """The status of a refused handshake, or None when it was accepted (the first frame is then read). The socket
    is this helper's, closed however the handshake ends (trio-websocket leaves a rejected one open)."""
    headers = [("Origin", origin)] if origin else None
    stream = await trio.open_tcp_stream("127.0.0.1", api.port)
    refused: list[trio_websocket.ConnectionRejected] = []
    try:
        async with trio.open_nursery() as nursery:
            ws = await trio_websocket.wrap_client_stream(nursery, stream, f"127.0.0.1:{api.port}", path,
                                                         extra_headers=headers)
            json.loads(await ws.get_message())
            await ws.aclose()
    except* trio_websocket.ConnectionRejected as group:
        refused += group.exceptions  # type: ignore[arg-type]
    finally:
        await stream.aclose()
    if not refused:
        return None
    body = json.loads(refused[0].body)
    assert body["errorCode"] == "CROSS_ORIGIN_REFUSED", body
    return refused[0].status_code


async def test_a_websocket_handshake_from_another_origin_is_refused(db):
    config = make_config("server: {allowed_origins: ['https://app.example.org']}")
    async with running_api(db, config) as api:
        await api.create_stream("s", events=2)
        path = "/api/streams/s/ws?after=0"
        own = f"http://127.0.0.1:{api.port}"
        assert await _handshake(api, path, own) is None
        assert await _handshake(api, path, None) is None  # not a browser: carries nobody's cookie
        assert await _handshake(api, path, "https://app.example.org") is None
        for other in (f"http://127.0.0.1:{api.port + 1}", f"http://localhost:{api.port}", "https://evil.example",
                      "null", f"https://127.0.0.1:{api.port}x"):
            assert await _handshake(api, path, other) == 403, other


async def test_json_routes_refuse_other_content_types(db):
    async with running_api(db, blueprints=[testing_bp]) as api, api.client() as client:
        await api.create_stream("s")
        body = json.dumps({"commandId": "c1", "text": "hi"})
        for content_type in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x",
                             None):
            headers = {"Content-Type": content_type} if content_type else {}
            r = await client.post(URL, content=body, headers=headers)
            assert r.status_code == 415, (content_type, r.text)
            assert r.json()["errorCode"] == "INVALID_REQUEST" and "application/json" in r.json()["error"]
        for content_type in ("application/json", "application/json; charset=utf-8", "application/merge-patch+json"):
            r = await client.post(URL, content=body.replace("c1", content_type[:20]), headers={"Content-Type": content_type})
            assert r.status_code == 202, (content_type, r.text)
        assert (await api.log.stream_row("s")).head_seq == 4  # only the three JSON posts were written


@pytest.mark.parametrize("mode", ["anonymous", "single_user"])
async def test_writes_from_another_origin_are_refused(db, mode):
    config = make_config(ANON if mode == "anonymous" else "")
    async with running_api(db, config, blueprints=[testing_bp]) as api, api.client() as client:
        owner = "local"
        if mode == "anonymous":
            first = await client.get("/api/agent/sessions")  # any owner-scoped route mints the owner cookie
            owner = anonymous_owner(first.cookies["anonymous_id"])
        await api.create_stream("s", owner=owner)
        own = f"http://127.0.0.1:{api.port}"
        n = 0

        async def post(headers: dict[str, str]) -> int:
            nonlocal n
            n += 1
            r = await client.post(URL, json={"commandId": f"c{n}", "text": "hi"}, headers=headers)
            if r.status_code == 403:
                assert r.json()["errorCode"] == "CROSS_ORIGIN_REFUSED"
            return r.status_code

        assert await post({"Origin": own}) == 202
        assert await post({"Sec-Fetch-Site": "same-origin"}) == 202
        assert await post({"Sec-Fetch-Site": "none"}) == 202  # typed into the address bar
        assert await post({}) == 202  # a script: no browser headers
        assert await post({"Origin": f"http://127.0.0.1:{api.port + 1}"}) == 403
        assert await post({"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"}) == 403
        assert await post({"Sec-Fetch-Site": "same-site"}) == 403  # another port of this host
        assert await post({"Sec-Fetch-Site": "cross-site"}) == 403
        assert (await api.log.stream_row("s")).head_seq == 5


async def test_token_mode_writes_are_not_judged_by_origin(db):
    from openmaic.owners.tokens import create_token

    async with running_api(db, make_config("identity: {mode: token}"), blueprints=[testing_bp]) as api, \
            api.client() as client:  # fmt: skip
        await api.create_stream("s", owner="alice")
        token = await create_token(db, "alice")
        r = await client.post(URL, json={"commandId": "c1", "text": "hi"},
                              headers={"Authorization": f"Bearer {token}", "Origin": "https://tool.example"})
        assert r.status_code == 202, r.text


async def test_allowed_origins_are_validated():
    from openmaic.errors import ConfigError

    with pytest.raises(ConfigError) as bad:
        make_config("server: {allowed_origins: ['app.example.org']}")
    assert "server.allowed_origins[0]" in str(bad.value)
