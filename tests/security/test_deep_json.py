"""JSON nested thousands deep is a malformed request: over HTTP a 400, over the stream's WebSocket an error frame
with the socket left open. Before, the WebSocket connection was closed with 1011 (a RecursionError)."""

from __future__ import annotations

import json

import trio_websocket

from tests.integration.api_harness import running_api

DEEP = "[" * 100_000 + "]" * 100_000


async def test_deeply_nested_json_is_refused_and_the_socket_stays_open(db):
    async with running_api(db) as api, api.client() as client:
        await api.create_stream("s", owner="local")
        for body in ('{"text": ' + DEEP + "}", '{"text": "hi", "extra": ' + DEEP + "}", DEEP):
            r = await client.post("/api/agent/sessions/s/messages", content=body,
                                  headers={"Content-Type": "application/json"})
            assert r.status_code == 400, r.text[:300]
        async with trio_websocket.open_websocket_url(api.ws_url("/api/streams/s/ws")) as ws:
            while json.loads(await ws.get_message())["type"] != "caught_up":
                pass
            await ws.send_message('{"type": "message", "commandId": "c1", "text": ' + DEEP + "}")
            frame = json.loads(await ws.get_message())
            assert frame["type"] == "error" and frame["errorCode"] == "INVALID_REQUEST", frame
            await ws.send_message(json.dumps({"type": "title", "commandId": "c2", "title": "Still here"}))
            assert json.loads(await ws.get_message())["type"] in ("ack", "event")
