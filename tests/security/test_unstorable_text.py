"""Text PostgreSQL cannot store (U+0000) is refused at every door and cleaned out of what must be kept.

Before, ``"requirement": "evil\\u0000"`` was accepted (202), stored by the log (``json`` keeps it), and refused by
the first projection that copied it into a ``text`` column: the projector retried that batch forever and every
owner's library stopped. A path parameter with ``%00`` was a 500 from the database.
"""

from __future__ import annotations

import json

import httpx
import pytest
import trio
import trio_websocket

from openmaic.config import ProviderConfig, Secret
from openmaic.errors import InvalidInput
from openmaic.events.core import SessionMessagePosted
from openmaic.models.provider import build_provider
from openmaic.models.types import SystemMessage, ToolCall, ToolSpec, UserMessage
from openmaic.text import clean, find_unstorable, json_has_nul
from tests.fakes.provider_server import Text, ToolCalls, open_fake_provider
from tests.integration.api_harness import running_api, testing_bp
from tests.serving import running_server

URL = "/api/test/streams/s/messages"


def test_the_checks_find_only_real_nuls():
    assert json_has_nul(b'{"a": "x\\u0000"}') and json_has_nul(b'["\\\\\\u0000"]')  # \\ then a NUL
    assert not json_has_nul(b'{"a": "x\\\\u0000"}')  # a backslash and the text u0000
    assert not json_has_nul(b'{"a": "plain"}')
    assert find_unstorable({"a": [{"b": "ok"}, {"c": "x\x00"}]}) == "a[1].c"
    assert find_unstorable({"a": "\ud800"}) == "a"
    assert clean("a\x00b\udc00") == "ab\ufffd"


async def test_bodies_and_query_strings_with_a_nul_are_400s_naming_them_and_path_parameters_404s(db):
    async with running_api(db, blueprints=[testing_bp]) as api, api.client() as client:
        await api.create_stream("s")
        r = await client.post(URL, json={"commandId": "c1", "text": "evil\x00pill"})
        assert r.status_code == 400, r.text
        assert r.json()["errorCode"] == "INVALID_REQUEST" and r.json()["details"]["path"] == "text"
        assert "NUL" in r.json()["error"]
        r = await client.post(URL, json={"commandId": "c2", "text": "ok", "meta": {"count": 1, "note\x00": 1}})
        assert r.status_code == 400 and r.json()["details"]["path"] == "meta.note\x00"
        # A backslash followed by "u0000" is ordinary text.
        r = await client.post(URL, json={"commandId": "c3", "text": "a literal \\u0000"})
        assert r.status_code == 202, r.text

        r = await client.get("/api/agent/sessions/s/events?x=%00")
        assert r.status_code == 400 and r.json()["details"]["path"] == "x", r.text
        r = await client.get("/api/agent/sessions/s%00")  # names no stream: the route's 404, not the database's 500
        assert r.status_code == 404, r.text
        assert (await api.log.stream_row("s")).head_seq == 2  # only the ordinary message was written


async def test_a_websocket_command_with_a_nul_gets_an_error_frame_and_writes_nothing(db):
    async with running_api(db) as api:
        await api.create_stream("s")
        async with trio_websocket.open_websocket_url(api.ws_url("/api/streams/s/ws?after=0")) as ws:
            with trio.fail_after(10):
                while json.loads(await ws.get_message())["type"] != "caught_up":
                    pass
                await ws.send_message(json.dumps({"type": "message", "commandId": "c1", "text": "a\x00b"}))
                frame = json.loads(await ws.get_message())
                assert frame["type"] == "error" and frame["commandId"] == "c1"
                assert frame["errorCode"] == "INVALID_REQUEST" and frame["details"]["path"] == "text"
                await ws.send_message(json.dumps({"type": "message", "commandId": "c2", "text": "fine"}))
                while (frame := json.loads(await ws.get_message()))["type"] != "ack":
                    pass
                assert frame["result"]["message"]["seq"] == 2
        assert (await api.log.stream_row("s")).head_seq == 2


async def test_the_log_refuses_an_event_holding_a_nul_whoever_writes_it(db):
    async with running_api(db) as api:
        await api.create_stream("s")
        with pytest.raises(InvalidInput) as refused:
            await api.log.append_one("s", [SessionMessagePosted(text="a\x00b")])
        assert "session.message_posted" in refused.value.message
        assert (await api.log.stream_row("s")).head_seq == 1


ADD = ToolSpec(name="add", description="Add.", parameters={"type": "object", "properties": {"t": {"type": "string"}}})


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
async def test_model_output_is_cleaned_before_it_is_kept(kind):
    async with open_fake_provider() as fake, httpx.AsyncClient(trust_env=False) as http:
        base_url = fake.openai_url if kind == "openai" else fake.anthropic_url
        provider = build_provider(kind, ProviderConfig(kind=kind, base_url=base_url, api_key=Secret("sk-x")),
                                  http=http)
        history = [SystemMessage("Be terse."), UserMessage("Hi.")]
        fake.push(Text("he\x00llo", chunks=2))
        deltas: list[str] = []
        result = await provider.stream_turn("m", history, [], on_delta=deltas.append)
        assert result.text == "hello" and "".join(deltas) == "hello"

        fake.push(ToolCalls([("call_a", "add", json.dumps({"t": "ti\x00tle"}))], chunks=3))
        result = await provider.stream_turn("m", history, [ADD], on_delta=None)
        assert result.tool_calls == [ToolCall("call_a", "add", {"t": "title"})]


async def test_a_poisoned_requirement_is_refused_and_the_library_keeps_projecting(db_url, tmp_path):
    async with running_server(db_url, tmp_path) as (client, _port):
        r = await client.post("/api/generate-classroom", json={"requirement": "evil\x00" + "x" * 100})
        assert r.status_code == 400 and r.json()["details"]["path"] == "requirement", r.text
        r = await client.post("/api/generate-classroom", json={"requirement": "Photosynthesis for 12-year-olds"})
        assert r.status_code == 202, r.text
        with trio.fail_after(60):
            while not (await client.get("/api/classrooms")).json()["classrooms"]:
                await trio.sleep(0.2)
