"""The classroom's model routes over HTTP against a real `openmaic serve`, its ``classroom`` slot on the scriptable
fake provider: ``POST /api/quiz-grade`` grades a short answer, ``/api/classroom-chat/{stageId}`` streams an agent's
reply and keeps the conversation per learner (bearer tokens of two owners). Bad input is a clear 400 that keeps
nothing and calls no model."""

from __future__ import annotations

import json

import trio

from openmaic.owners.tokens import create_token
from openmaic.store.database import open_database
from tests.fakes.provider_server import Json, Text, open_fake_provider
from tests.serving import FAST_CONFIG, running_server, stderr_of


def config(fake_url: str) -> str:
    return FAST_CONFIG + (
        "identity: {mode: token}\n"
        f"providers:\n  fake: {{preset: openai-compatible, baseUrl: '{fake_url}', apiKey: sk-test, "
        "options: {maxRetries: 0, timeoutS: 5}}\n"
        'slots: {llm: "demo:course", classroom: "fake:gpt-grader"}\n'
    )


def frames(text: str) -> list[tuple[str, dict]]:
    """The (event, data) frames of an SSE body."""
    out = []
    for block in text.strip().split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
        out.append((fields["event"], json.loads(fields["data"])))
    return out


SCENE = {"id": "scene_tides", "title": "Why the sea rises",
         "texts": ["The moon pulls the ocean towards it."], "speech": ["Twice a day the water rises."]}
AGENTS = [{"id": "t1", "name": "Ms Moon", "role": "teacher", "persona": "Patient."},
          {"id": "s1", "name": "Curious Cat", "role": "student"}]


async def test_a_short_answer_is_graded_by_the_classroom_model_and_bad_input_is_refused(db_url, tmp_path):
    async with open_fake_provider() as fake, running_server(db_url, tmp_path, config(fake.openai_url)) as (client, _):
        async with open_database(db_url) as db:
            auth = {"Authorization": f"Bearer {await create_token(db, 'alice')}"}
        fake.push(Json({"score": 9, "comment": "Right: the moon's pull."}), Text("I cannot grade that."))
        ok = {"question": "Why are there tides?", "userAnswer": "The moon pulls the water.", "points": 5,
              "commentPrompt": "Mentions the moon's gravity.", "language": "en"}
        r = await client.post("/api/quiz-grade", json=ok, headers=auth)
        assert r.status_code == 200, stderr_of(tmp_path)
        assert r.json() == {"success": True, "score": 5.0, "comment": "Right: the moon's pull."}  # clamped to points
        sent = fake.requests[0].body
        assert sent["model"] == "gpt-grader"
        prompt = "\n".join(m["content"] for m in sent["messages"] if isinstance(m["content"], str))
        assert "> The moon pulls the water." in prompt and "Mentions the moon's gravity." in prompt

        r = await client.post("/api/quiz-grade", json=ok, headers=auth)  # prose, no score
        assert r.status_code == 502 and "score" in r.json()["error"]["message"], r.text

        bad = [({k: v for k, v in ok.items() if k != "question"}, "MISSING_REQUIRED_FIELD", "question"),
               ({**ok, "userAnswer": "   "}, "INVALID_REQUEST", "userAnswer"),
               ({**ok, "points": 0}, "INVALID_REQUEST", "points"),
               ({**ok, "points": "five"}, "INVALID_REQUEST", "points"),
               ({**ok, "question": "x" * 4001}, "INVALID_REQUEST", "question")]
        for body, code, path in bad:
            r = await client.post("/api/quiz-grade", json=body, headers=auth)
            assert r.status_code == 400, (body, r.text)
            error = r.json()["error"]
            assert error["code"] == code and error["details"]["path"] == path, error
        r = await client.post("/api/quiz-grade", content=b"{not json",
                              headers={**auth, "Content-Type": "application/json"})
        assert r.status_code == 400
        assert len(fake.requests) == 2  # no refused request reached the model
        assert (await client.post("/api/quiz-grade", json=ok)).status_code == 401


async def test_a_question_streams_the_agents_reply_and_the_conversation_is_kept_per_learner(db_url, tmp_path):
    async with open_fake_provider() as fake, running_server(db_url, tmp_path, config(fake.openai_url)) as (client, _):
        async with open_database(db_url) as db:
            alice = {"Authorization": f"Bearer {await create_token(db, 'alice')}"}
            bob = {"Authorization": f"Bearer {await create_token(db, 'bob')}"}
        gate = trio.Event()
        fake.push(Text("The moon pulls the water towards it, twice a day.", chunks=4, gate=gate),
                  Text("Yes: the sun pulls too, more weakly.", chunks=2), Text("And the moon is closer.", chunks=2))
        ask = {"message": "Why does the sea rise?", "scene": SCENE, "agents": AGENTS, "course": "Tides",
               "language": "en", "actionIndex": 2}
        body = ""
        async with client.stream("POST", "/api/classroom-chat/stage-tides/messages", json=ask, headers=alice) as r:
            assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
            async for chunk in r.aiter_text():
                body += chunk
                if not gate.is_set() and "event: delta" in body:
                    # The first piece arrived on its own, while the model still holds the rest back.
                    assert [d["text"] for k, d in frames(body) if k == "delta"] == ["The moon pull"], body
                    assert "event: done" not in body
                    gate.set()
        got = frames(body)
        kinds = [k for k, _ in got]
        assert kinds[:3] == ["message", "agent", "delta"] and kinds[-1] == "done" and kinds.count("delta") >= 2, kinds
        assert got[0][1]["content"] == "Why does the sea rise?" and got[0][1]["sceneId"] == "scene_tides"
        assert got[1][1] == {"agentId": "t1", "agentName": "Ms Moon"}  # the teacher answers
        assert "".join(d["text"] for k, d in got if k == "delta") == "The moon pulls the water towards it, twice a day."
        assert got[-1][1]["role"] == "assistant" and got[-1][1]["agentName"] == "Ms Moon"
        # Grounded in the scene: its title, element text and speech are in the prompt, with the agent's persona.
        sent = fake.requests[0].body["messages"]
        assert "Ms Moon" in sent[0]["content"] and "Patient." in sent[0]["content"]
        for line in ("Why the sea rises", "> The moon pulls the ocean towards it.", "> Twice a day the water rises."):
            assert line in sent[-1]["content"], line

        # A discussion's opener answers the next one, and the conversation so far goes with it; then another agent
        # of the course adds a follow-up in the same stream, having heard the answer.
        follow = {**ask, "message": "Does the sun matter?", "agentId": "s1", "topic": "Sun or moon?"}
        r = await client.post("/api/classroom-chat/stage-tides/messages", json=follow, headers=alice)
        got = frames(r.text)
        runs = [k for i, (k, _) in enumerate(got) if k != "delta" or got[i - 1][0] != "delta"]  # deltas may merge
        assert runs == ["message", "agent", "delta", "done", "agent", "delta", "done"], got
        assert [d["agentName"] for k, d in got if k == "agent"] == ["Curious Cat", "Ms Moon"]
        assert [d["content"] for k, d in got if k == "done"] == ["Yes: the sun pulls too, more weakly.",
                                                                  "And the moon is closer."]
        sent = fake.requests[1].body["messages"]
        assert [m["role"] for m in sent] == ["system", "user", "assistant", "user"]
        assert "> Sun or moon?" in sent[-1]["content"]
        sent = fake.requests[2].body["messages"]
        assert "You are Ms Moon" in sent[0]["content"]
        assert [m["role"] for m in sent] == ["system", "user", "assistant", "user", "assistant", "user"]
        assert sent[-2]["content"] == "Curious Cat: Yes: the sun pulls too, more weakly."
        assert "Curious Cat has answered" in sent[-1]["content"] and '"followUp":"Curious Cat"' in sent[-1]["content"]

        mine = (await client.get("/api/classroom-chat/stage-tides", headers=alice)).json()
        assert [(m["role"], m.get("agentName")) for m in mine["messages"]] == [
            ("user", None), ("assistant", "Ms Moon"), ("user", None), ("assistant", "Curious Cat"),
            ("assistant", "Ms Moon")]
        assert mine["messages"][1]["content"] == "The moon pulls the water towards it, twice a day."
        # Another learner has a conversation of their own (empty), and cannot reach this one.
        assert (await client.get("/api/classroom-chat/stage-tides", headers=bob)).json()["messages"] == []
        r = await client.get(f"/api/persistence/runtime/sessions/{mine['sessionId']}", headers=bob)
        assert r.status_code == 404
        # It is the learner's runtime session of kind chat, with OpenMAIC's chat payloads.
        r = await client.get(f"/api/persistence/runtime/sessions/{mine['sessionId']}/records", headers=alice)
        # Each reply is claimed before it is written (a system record the conversation does not show).
        assert [rec["payload"]["role"] for rec in r.json()] == ["user", "system", "assistant"] * 2 + ["assistant"]
        assert r.json()[0]["actionIndex"] == 2 and r.json()[1]["payload"]["reply"]["to"] == r.json()[0]["id"]

        bad = [({**ask, "message": " "}, "message"), ({**ask, "agentId": "nobody"}, "agentId"),
               ({**ask, "scene": {**SCENE, "texts": "not a list"}}, "scene.texts"),
               ({**ask, "agents": [{"id": "x"}]}, "agents[0].name")]
        for body, path in bad:
            r = await client.post("/api/classroom-chat/stage-tides/messages", json=body, headers=alice)
            assert r.status_code == 400 and r.json()["error"]["details"]["path"] == path, (body, r.text)
        assert len(fake.requests) == 3
        after = (await client.get("/api/classroom-chat/stage-tides", headers=alice)).json()["messages"]
        assert len(after) == 5  # nothing refused was kept


async def test_with_no_key_the_demo_model_grades_and_answers(db_url, tmp_path):
    async with running_server(db_url, tmp_path) as (client, _):
        r = await client.post("/api/quiz-grade", json={
            "question": "Why are there tides?", "userAnswer": "Because of the moon's gravity.", "points": 4,
            "commentPrompt": "The answer names the moon and its gravity."})
        assert r.status_code == 200, r.text
        assert 0 < r.json()["score"] <= 4 and "moon" in r.json()["comment"]
        r = await client.post("/api/classroom-chat/stage-demo/messages", json={
            "message": "What is this about?", "scene": SCENE, "agents": AGENTS, "language": "en"})
        reply = "".join(d["text"] for k, d in frames(r.text) if k == "delta")
        assert "Ms Moon" in reply and "Why the sea rises" in reply, reply
        # In a discussion the demo model answers as the lead, then as a classmate following up.
        r = await client.post("/api/classroom-chat/stage-demo/messages", json={
            "message": "The moon, I think.", "scene": SCENE, "agents": AGENTS, "language": "en",
            "agentId": "t1", "topic": "Sun or moon?"})
        done = [d for k, d in frames(r.text) if k == "done"]
        assert [d["agentName"] for d in done] == ["Ms Moon", "Curious Cat"], r.text
        assert done[1]["content"].startswith("Curious Cat here. Adding to what Ms Moon said:"), done


async def test_a_reply_its_reader_leaves_is_kept_as_far_as_it_was_written(db_url, tmp_path):
    async with open_fake_provider() as fake, \
            running_server(db_url, tmp_path, config(fake.openai_url)) as (client, port):
        async with open_database(db_url) as db:
            alice = {"Authorization": f"Bearer {await create_token(db, 'alice')}"}
        gate = trio.Event()
        fake.push(Text("The moon pulls the water towards it.", chunks=3, gate=gate))
        ask = {"message": "Why does the sea rise?", "scene": SCENE, "agents": AGENTS}
        # A raw connection, so the test decides when it is closed: once the first piece arrived.
        payload = json.dumps(ask).encode()
        stream = await trio.open_tcp_stream("127.0.0.1", port)
        async with stream:
            await stream.send_all(
                b"POST /api/classroom-chat/stage-tides/messages HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                b"Content-Type: application/json\r\nAuthorization: " + alice["Authorization"].encode()
                + b"\r\nContent-Length: " + str(len(payload)).encode() + b"\r\n\r\n" + payload)
            seen = b""
            while b"event: delta" not in seen:
                data = await stream.receive_some()
                assert data, seen
                seen += data
        assert b" 200 " in seen.split(b"\r\n", 1)[0]
        with trio.fail_after(10):
            while len(messages := (await client.get("/api/classroom-chat/stage-tides", headers=alice))
                      .json()["messages"]) < 2:
                await trio.sleep(0.05)  # the server notices the hang-up in its own time
        gate.set()
        assert messages[0]["content"] == "Why does the sea rise?"
        assert messages[1]["content"] == "The moon pul" and messages[1]["interrupted"] is True  # the first third
        assert messages[1]["agentName"] == "Ms Moon"


async def test_an_owners_classroom_model_calls_are_bounded_and_a_question_sends_only_the_last_messages(
        db_url, tmp_path):
    async with open_fake_provider() as fake, running_server(db_url, tmp_path, config(fake.openai_url) + (
            "limits: {classroom_calls_per_owner: 1, runtime_list_bytes: 3000}\n")) as (client, _):
        async with open_database(db_url) as db:
            alice = {"Authorization": f"Bearer {await create_token(db, 'alice')}"}
            bob = {"Authorization": f"Bearer {await create_token(db, 'bob')}"}
        gate = trio.Event()
        fake.push(Text("The moon pulls the water.", chunks=2, gate=gate), Json({"score": 1, "comment": "Right."}))
        ask = {"message": "Why does the sea rise?", "scene": SCENE, "agents": AGENTS}
        grade = {"question": "Why are there tides?", "userAnswer": "The moon."}
        body = ""
        async with client.stream("POST", "/api/classroom-chat/stage-tides/messages", json=ask, headers=alice) as r:
            async for chunk in r.aiter_text():
                body += chunk
                if not gate.is_set() and "event: delta" in body:
                    # Alice's one call is running: her grading and her next question are refused, naming the key.
                    for path, refused in (("/api/quiz-grade", grade), ("/api/classroom-chat/stage-tides/messages",
                                                                       {**ask, "message": "And the sun?"})):
                        r2 = await client.post(path, json=refused, headers=alice)
                        assert r2.status_code == 429, r2.text
                        error = r2.json()["error"]
                        assert "limits.classroom_calls_per_owner" in error["message"], error
                        assert error["details"]["key"] == "limits.classroom_calls_per_owner", error
                    # Another owner's calls are their own.
                    r2 = await client.post("/api/quiz-grade", json=grade, headers=bob)
                    assert r2.status_code == 200, r2.text
                    gate.set()
        assert frames(body)[-1][0] == "done"
        kept = (await client.get("/api/classroom-chat/stage-tides", headers=alice)).json()["messages"]
        assert [m["content"] for m in kept] == ["Why does the sea rise?", "The moon pulls the water."]  # none refused

        # The call ended and gave its slot back. Then a long conversation: each question sends the model only its
        # last 12 messages, read from the session's end (a whole read would stop at limits.runtime_list_bytes, at
        # the conversation's start).
        for i in range(8):
            fake.push(Text(f"Answer number {i}.", chunks=1))
            r = await client.post("/api/classroom-chat/stage-tides/messages", json={**ask, "message": f"Q{i}?"},
                                  headers=alice)
            assert frames(r.text)[-1][0] == "done", r.text
        sent = fake.requests[-1].body["messages"]
        past = sent[1:-1]
        assert len(past) == 12, [m["content"] for m in past]
        assert past[-1]["content"] == "Ms Moon: Answer number 6." and past[-2]["content"] == "Q6?"
        assert past[0]["content"] == "Q1?"
        assert len(fake.requests) == 10
