"""A classroom reply lost with its process: a real `openmaic serve` is SIGKILLed while the fake model holds the
reply to a learner's question; after a restart, loading the conversation shows the question waiting, and asking
for it has it answered once (two requests at once: one writes it, the other is refused), the earlier exchange kept.
"""

from __future__ import annotations

import json

import httpx
import trio

from openmaic.owners.tokens import create_token
from openmaic.store.database import open_database
from openmaic.store.postgres import free_port
from tests.fakes.provider_server import Text, open_fake_provider
from tests.integration.test_classroom_tutoring import AGENTS, SCENE, config, frames
from tests.serving import serve_processes, stderr_of, wait_ready

REPLY_S = 3
"""limits.classroom_reply_s: how long the dead process's claim holds the question."""

CONTEXT = {"scene": SCENE, "agents": AGENTS, "course": "Tides", "language": "en"}


async def test_a_reply_lost_with_its_process_is_answered_once_when_the_conversation_is_loaded(db_url, tmp_path):
    async with open_fake_provider() as fake:
        async with open_database(db_url) as db:
            alice = {"Authorization": f"Bearer {await create_token(db, 'alice')}"}
        conf = config(fake.openai_url) + f"limits: {{classroom_reply_s: {REPLY_S}}}\n"
        held = trio.Event()  # never set: the first server dies while the model holds this reply
        fake.push(Text("Mostly the moon.", chunks=1), Text("The moon pulls the water towards it.", chunks=3, gate=held))
        url = "/api/classroom-chat/stage-tides"
        port = free_port()
        with serve_processes(db_url, tmp_path, [(None, port)], conf) as procs:
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", trust_env=False, timeout=10) as client:
                await wait_ready(client, procs, tmp_path)
                r = await client.post(f"{url}/messages", json={**CONTEXT, "message": "Sun or moon?"}, headers=alice)
                assert frames(r.text)[-1][0] == "done", r.text
                seen = ""
                with trio.fail_after(10):
                    async with client.stream("POST", f"{url}/messages", headers=alice,
                                             json={**CONTEXT, "message": "Why does the sea rise?"}) as r:
                        try:
                            async for chunk in r.aiter_text():
                                seen += chunk
                                if "event: delta" in seen and procs[0].poll() is None:
                                    procs[0].kill()  # SIGKILL mid-reply: nothing of the reply is kept
                                    procs[0].wait()
                        except (httpx.RemoteProtocolError, httpx.ReadError):
                            pass  # the stream ends with its server
        assert "event: delta" in seen and "event: done" not in seen and procs[0].returncode == -9

        port = free_port()
        with serve_processes(db_url, tmp_path, [(None, port)], conf) as procs:
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", trust_env=False, timeout=10) as client:
                await wait_ready(client, procs, tmp_path)
                kept = (await client.get(url, headers=alice)).json()
                assert [m["content"] for m in kept["messages"]] == [
                    "Sun or moon?", "Mostly the moon.", "Why does the sea rise?"], kept
                assert kept["pendingQuestion"] == kept["messages"][-1]["id"]

                # The dead process's claim holds the question until it lapses (on the database's clock). Two devices
                # ask at once, as each page does on load, again after the wait a refusal names: while the claim
                # holds, both are refused; once it lapsed, one writes the reply and the other is refused.
                again = trio.Event()
                fake.push(Text("The moon's pull raises the sea.", chunks=2, gate=again))
                with trio.fail_after(REPLY_S + 30):
                    while True:
                        statuses: dict[int, int] = {}
                        bodies: dict[int, str] = {}
                        both = trio.Event()

                        async def load(i: int) -> None:
                            async with client.stream("POST", f"{url}/pending", json=CONTEXT, headers=alice) as r:
                                statuses[i] = r.status_code
                                if len(statuses) == 2:
                                    both.set()
                                bodies[i] = (await r.aread()).decode()

                        async with trio.open_nursery() as nursery:
                            nursery.start_soon(load, 0)
                            nursery.start_soon(load, 1)
                            await both.wait()
                            again.set()  # the writer's model answers only once the other was answered
                        if 200 in statuses.values():
                            break
                        assert list(statuses.values()) == [409, 409], (statuses, bodies)
                        error = json.loads(bodies[0])["error"]
                        assert error["code"] == "REPLY_IN_PROGRESS", error
                        assert 1 <= error["details"]["retryAfter"] <= REPLY_S + 1, error
                        await trio.sleep(error["details"]["retryAfter"])  # as the page does: wait as told
                assert sorted(statuses.values()) == [200, 409], (statuses, bodies)
                loser = json.loads(next(bodies[i] for i, s in statuses.items() if s == 409))["error"]
                assert loser["code"] == "REPLY_IN_PROGRESS", loser
                answered = frames(next(bodies[i] for i, s in statuses.items() if s == 200))
                assert answered[0] == ("agent", {"agentId": "t1", "agentName": "Ms Moon"}), answered
                assert answered[-1][0] == "done" and answered[-1][1]["content"] == "The moon's pull raises the sea."

                kept = (await client.get(url, headers=alice)).json()
                assert [(m["role"], m["content"]) for m in kept["messages"]] == [
                    ("user", "Sun or moon?"), ("assistant", "Mostly the moon."),
                    ("user", "Why does the sea rise?"), ("assistant", "The moon's pull raises the sea.")], kept
                assert kept.get("pendingQuestion") is None
                r = await client.post(f"{url}/pending", json=CONTEXT, headers=alice)
                assert r.status_code == 204, r.text  # nothing waits: no model is asked
                r = await client.get(f"/api/persistence/runtime/sessions/{kept['sessionId']}/records", headers=alice)
                assert [rec["payload"]["role"] for rec in r.json()] == [
                    "user", "system", "assistant", "user", "system", "system", "assistant"]
        held.set()
        # The model was asked three times: the first question, the lost reply, and the reply written again, with
        # the exchange before the question as its history.
        assert len(fake.requests) == 3, stderr_of(tmp_path)
        sent = fake.requests[2].body["messages"]
        assert [m["role"] for m in sent] == ["system", "user", "assistant", "user"]
        assert "> Why does the sea rise?" in sent[-1]["content"]
