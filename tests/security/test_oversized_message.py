"""A message far over the length a message may have is refused the same way on every road, and never billed.

Before, the WebSocket command path skipped the message's checks: a 1,000,000-character message reached the
provider as a 1,004,013-byte request, paid for by the operator. Here a real `openmaic serve` whose agent slot is
the fake provider gets that message over HTTP and over the stream's WebSocket; both answer the same 400, the
provider receives nothing of it, and a message of ordinary size sent on the same socket afterwards still reaches
the provider (so "nothing arrived" is not the silence of a broken pipe).
"""

from __future__ import annotations

import json
from typing import Any

import trio

from tests.fakes.provider_server import Text, open_fake_provider
from tests.integration.api_harness import raw_ws
from tests.serving import FAST_CONFIG, running_server

BIG = "x" * 1_000_000


def _config(url: str) -> str:
    return FAST_CONFIG + (
        "providers:\n"
        f"  fake: {{preset: openai-compatible, baseUrl: '{url}', apiKey: sk-billed-0123456789, models: [gpt-test],"
        " options: {maxRetries: 0, timeoutS: 10}}\n"
        "slots: {llm: 'demo:course', agent: 'fake:gpt-test', agent.title: null}\n"
    )


async def _frame(ws: Any, kind: str) -> dict[str, Any]:
    """The next frame that is not an event (an ack or an error), checked to be ``kind``."""
    while (frame := json.loads(await ws.get_message()))["type"] == "event":
        pass
    assert frame["type"] == kind, frame
    return frame


async def test_a_million_character_message_is_the_same_400_over_http_and_websocket_and_never_reaches_the_provider(
    db_url, tmp_path
):
    async with open_fake_provider() as fake:
        fake.push(Text("Ready.", chunks=1))
        async with running_server(db_url, tmp_path, _config(fake.openai_url)) as (client, port):
            r = await client.post("/api/agent/sessions", json={"prompt": BIG})
            assert r.status_code == 400 and r.json()["details"]["path"] == "prompt", r.text[:300]
            r = await client.post("/api/agent/sessions", json={"prompt": "Make a course on tides"})
            assert r.status_code == 202, r.text
            sid = r.json()["id"]
            with trio.fail_after(30):
                while (await client.get(f"/api/agent/sessions/{sid}")).json()["status"] != "succeeded":
                    await trio.sleep(0.1)
            assert len(fake.requests) == 1

            r = await client.post(f"/api/agent/sessions/{sid}/messages", json={"text": BIG})
            assert r.status_code == 400, r.text[:300]
            refused = r.json()
            assert refused["errorCode"] == "INVALID_REQUEST" and refused["details"] == {"path": "text"}

            fake.push(Text("Noted.", chunks=1))
            async with raw_ws(port, f"/api/streams/{sid}/ws?after=0", message_queue_size=64) as ws:
                with trio.fail_after(30):
                    while json.loads(await ws.get_message())["type"] != "caught_up":
                        pass
                    await ws.send_message(json.dumps({"type": "message", "commandId": "big", "text": BIG}))
                    frame = await _frame(ws, "error")
                    assert frame["commandId"] == "big"
                    assert {k: frame.get(k) for k in ("errorCode", "error", "details")} == \
                        {k: refused[k] for k in ("errorCode", "error", "details")}
                    await ws.send_message(json.dumps({"type": "message", "commandId": "small",
                                                      "text": "Add a quiz at the end"}))
                    await _frame(ws, "ack")
                    while len(fake.requests) < 2:
                        await trio.sleep(0.05)
    # The provider got the two ordinary messages and nothing of the refused ones: zero of their bytes billed.
    bodies = [json.dumps(r.body) for r in fake.requests]
    assert len(bodies) == 2 and "Add a quiz at the end" in bodies[1]
    assert max(len(b) for b in bodies) < 50_000, [len(b) for b in bodies]
    assert not any("x" * 20_001 in b for b in bodies)
