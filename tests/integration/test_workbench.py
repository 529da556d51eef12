"""Workbench sessions against a real PostgreSQL and a real worker: the demo agent for happy paths, the fake
OpenAI server (scripted replies, recorded requests) where the exact transcript matters."""

from __future__ import annotations

import json
from typing import Any

import pytest
import trio

from openmaic import errors
from openmaic.actors.commands import create_session
from openmaic.config import Config, ProviderSpec, Secret
from openmaic.courses import format as fmt
from openmaic.courses.document import document_of
from openmaic.courses.events import CourseCreated, CourseRetitled, CourseUnlocked
from openmaic.events.core import LeaseClaimed, ModelTurnCompleted, ToolCalled
from openmaic.events.log import EventLog, NewStream, StreamAppend
from openmaic.models.provider import ModelRouter
from openmaic.models.types import ToolCall
from openmaic.workbench import WorkbenchKind, WorkbenchSessions
from openmaic.workbench.kind import OVER_CAP_ERROR
from openmaic.workbench.tools import INTERRUPTED, ToolEnv, fold_course, run_tool
from tests.fakes.provider_server import FakeProviderServer, Stall, Status, Text, ToolCalls, open_fake_provider
from tests.runtime import FAST, open_worker, wait_for

KEY = "sk-workbench-test-key"


def make_config(fake: FakeProviderServer | None = None) -> Config:
    providers = {"demo": ProviderSpec(preset="demo")}
    slots = {"llm": "demo:course", "agent": "demo:agent"}
    if fake is not None:
        providers["fake"] = ProviderSpec(preset="openai-compatible", base_url=fake.openai_url, api_key=Secret(KEY),
                                         options={"maxRetries": 0, "timeoutS": 20.0})
        slots["agent"] = "fake:gpt-test"
    return Config(providers=providers, slots=slots, runtime=FAST)


def open_workbench_worker(url: str, config: Config) -> Any:
    return open_worker(url, config.runtime, kinds={"workbench": WorkbenchKind(config)}, config=config)


@pytest.fixture
def log(db):
    return EventLog(db)


@pytest.fixture
def sessions(log):
    return WorkbenchSessions(log)


@pytest.fixture
async def fake():
    async with open_fake_provider() as server:
        yield server


async def events_of(log: EventLog, sid: str, type_: str | None = None) -> list[Any]:
    """The stream's decoded events (of one type when given)."""
    return [log.decode(e) for e in await log.read_stream(sid, limit=100_000) if type_ in (None, e.type)]


async def types_of(log: EventLog, sid: str) -> list[str]:
    return [e.type for e in await log.read_stream(sid, limit=100_000)]


async def wait_status(sessions: WorkbenchSessions, sid: str, status: str, timeout: float = 20.0) -> None:
    async def ok() -> bool:
        snap = await sessions.snapshot("o", sid)
        row = await sessions.log.stream_row(sid)
        # idle means the lease was given back too (status waiting: no worker is held)
        return snap.status == status and (status != "idle" or row.status == "waiting")

    await wait_for(ok, timeout=timeout)


def sent_messages(fake: FakeProviderServer) -> list[list[dict[str, Any]]]:
    return [r.body["messages"] for r in fake.requests]


def trailing_users(messages: list[dict[str, Any]]) -> list[str]:
    """The user messages a request delivered (those after the last assistant or tool message)."""
    out: list[str] = []
    for m in reversed(messages):
        if m["role"] != "user":
            break
        out.insert(0, m["content"])
    return out


# -- happy paths with the demo agent ------------------------------------------------------------------------------


async def test_a_message_reads_the_course_edits_it_replies_and_goes_idle(db_url, log, sessions):
    snap = await sessions.create_session("o", "create-1", message="Add a scene about fractions")
    assert (snap.status, snap.turns, snap.pending_messages) == ("queued", 0, 1)
    again = await sessions.create_session("o", "create-1", message="Add a scene about fractions")
    assert (again.id, again.course_id) == (snap.id, snap.course_id)
    async with open_workbench_worker(db_url, make_config()):
        await wait_status(sessions, snap.id, "idle")
        types = await types_of(log, snap.id)
        assert [t for t in types if t.startswith(("model.turn", "tool."))] == [
            "model.turn_completed", "tool.called", "tool.result",  # read_course
            "model.turn_completed", "tool.called", "tool.result",  # add_scene
            "model.turn_completed",                                # the reply
        ]
        assert types[-1] == "lease.released"
        doc = await fold_course(log, snap.course_id)
        assert doc.title == "Untitled course" and [s.title for s in doc.scenes] == ["Fractions"]
        results = await events_of(log, snap.id, "tool.result")
        assert all(r.ok for r in results) and results[1].result["added"] == doc.scenes[0].id

        # a follow-up re-queues the idle session; generate_scene writes the scene's content (demo course slot)
        await sessions.post_message("o", snap.id, "m-2", "Please generate the content of that scene")
        await wait_for(lambda: _turns(sessions, snap.id, 6))
        await wait_status(sessions, snap.id, "idle")
    doc = await fold_course(log, snap.course_id)
    (scene,) = doc.scenes
    assert scene.id in doc.ready and isinstance(scene.content, fmt.SlideContent) and scene.content.canvas.elements
    assert scene.actions and fmt.validate_document(fmt.to_json(document_of(snap.course_id, doc))) == []
    final = await sessions.snapshot("o", snap.id)
    assert (final.status, final.turns, final.error, final.pending_messages) == ("idle", 6, None, 0)
    with pytest.raises(errors.StreamNotFound):
        await sessions.snapshot("someone-else", snap.id)


async def test_a_locked_course_refuses_sessions_and_edits_with_a_tool_error(db_url, log, sessions):
    await log.append(StreamAppend(stream_id="course-locked", create=NewStream("course", "o"),
                                  events=[CourseCreated(title="Algebra", locked_by="run-1")]))
    with pytest.raises(errors.Conflict, match="being generated by run run-1"):
        await sessions.create_session("o", "c-1", course_id="course-locked", message="hi")
    with pytest.raises(errors.StreamNotFound):
        await sessions.create_session("o", "c-2", course_id="no-such-course")
    # a session opened before the run locked the course: its edits are refused, the model is told why
    await create_session(log, stream_id="s-locked", kind="workbench", owner_id="o", command_id="c-3",
                         input={"course_id": "course-locked"}, status="waiting")
    await sessions.post_message("o", "s-locked", "m-1", "Add a scene about vectors")
    async with open_workbench_worker(db_url, make_config()):
        await wait_status(sessions, "s-locked", "idle")
    results = await events_of(log, "s-locked", "tool.result")
    assert [(r.name, r.ok) for r in results] == [("read_course", True), ("add_scene", False)]
    assert "read-only while generation run run-1 builds it" in results[1].error
    reply = (await events_of(log, "s-locked", "model.turn_completed"))[-1]
    assert "failed" in reply.text
    assert await types_of(log, "course-locked") == ["course.created"]
    # once the run has completed, the course opens in the workbench
    await log.append_one("course-locked", [CourseUnlocked(run_id="run-1")])
    snap = await sessions.create_session("o", "c-1", course_id="course-locked")
    assert (snap.status, snap.course_id) == ("idle", "course-locked")


async def test_a_course_edit_is_reapplied_when_another_writer_moved_the_course(log):
    await log.append(StreamAppend(stream_id="c1", create=NewStream("course", "o"),
                                  events=[CourseCreated(title="Physics")]))
    env = ToolEnv(session_id="s1", course_id="c1", log=log, models=ModelRouter(make_config()))
    commits: list[int] = []

    async def commit(events: Any, also: Any) -> None:
        commits.append(also[0].expected_seq)
        if len(commits) == 1:
            await log.append_one("c1", [CourseRetitled(title="Optics")])  # lands between our read and write
        await log.append(*also)

    arguments = {"title": "Lenses", "goal": "Focus light"}
    assert await run_tool(env, ToolCall(id="call_1", name="add_scene", arguments=arguments), commit) is None
    assert commits == [1, 2]  # refused at the head it read, re-read and re-applied at the new head
    doc = await fold_course(log, "c1")
    assert (doc.title, [s.title for s in doc.scenes]) == ("Optics", ["Lenses"])


# -- the transcript, precisely (fake provider) --------------------------------------------------------------------


async def test_history_and_follow_ups_posted_during_a_turn_are_delivered_once(db_url, log, sessions, fake):
    fake.push(ToolCalls([("c1", "read_course", "{}")]), Text("Read it.", chunks=2), Text("Noted.", chunks=2),
              Text("Noted that too.", chunks=2))
    snap = await sessions.create_session("o", "create-1", message="hello")
    async with open_workbench_worker(db_url, make_config(fake)):
        await wait_for(lambda: _true(len(fake.requests) >= 1))
        # posted while the first turn is in flight: the steer joins the next model call, the queued one waits
        # for the exchange to end (either way each is delivered exactly once)
        steer = await sessions.post_message("o", snap.id, "m-steer", "also check the title", "steer")
        queued = await sessions.post_message("o", snap.id, "m-queued", "then stop", "queued")
        await wait_for(lambda: _delivered(log, snap.id, {steer.seq, queued.seq}))
        await wait_status(sessions, snap.id, "idle")
    assert fake.errors == []
    sent = sent_messages(fake)
    # 3 calls when both follow-ups are in hand by the third, else a fourth delivers the later one
    assert len(sent) in (3, 4) and len(sent) + fake.pending == 4
    for prev, cur in zip(sent, sent[1:]):
        assert cur[: len(prev)] == prev  # each call resends the whole committed history, in order
    assert sent[0][0]["role"] == "system" and trailing_users(sent[0]) == ["hello"]
    assistant, tool = sent[1][2], sent[1][3]
    assert assistant["tool_calls"][0]["id"] == "c1" and assistant["tool_calls"][0]["function"]["name"] == "read_course"
    assert tool["role"] == "tool" and tool["tool_call_id"] == "c1"
    assert json.loads(tool["content"])["scenes"] == []
    assert sent[2][len(sent[1])] == {"role": "assistant", "content": "Read it."}
    assert "then stop" not in trailing_users(sent[1])  # queued: not inside the tool loop
    for text in ("hello", "also check the title", "then stop"):
        delivered_in = [i for i, msgs in enumerate(sent) if text in trailing_users(msgs)]
        assert len(delivered_in) == 1, text
        for msgs in sent[delivered_in[0]:]:
            assert sum(m["role"] == "user" and m["content"] == text for m in msgs) == 1
    delivered = [s for e in await events_of(log, snap.id, "model.turn_completed") for s in e.delivered]
    assert sorted(delivered) == sorted({2, steer.seq, queued.seq}) and len(delivered) == 3


async def test_invalid_tool_arguments_go_back_to_the_model_as_tool_errors(db_url, log, sessions, fake):
    fake.push(
        ToolCalls([("c1", "add_scene", '{"title": 5, "goal": "g"}'), ("c2", "no_such_tool", "{}"),
                   ("c3", "retitle_course", "not json"), ("c4", "retitle_course", '{"title": "T", "x": 1}')]),
        Text("Sorry, let me fix that."),
    )
    snap = await sessions.create_session("o", "create-1", message="do things")
    async with open_workbench_worker(db_url, make_config(fake)):
        await wait_status(sessions, snap.id, "idle")
    results = await events_of(log, snap.id, "tool.result")
    assert [(r.call_id, r.ok) for r in results] == [("c1", False), ("c2", False), ("c3", False), ("c4", False)]
    tools = [m for m in sent_messages(fake)[1] if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in tools] == ["c1", "c2", "c3", "c4"]
    assert tools[0]["content"].startswith("Error: invalid arguments for add_scene: Expected `str`, got `int`")
    assert "there is no tool named 'no_such_tool'" in tools[1]["content"]
    assert "must be a JSON object" in tools[2]["content"] and "unknown field `x`" in tools[3]["content"]
    assert (await fold_course(log, snap.course_id)).title == "Untitled course"
    assert (await sessions.snapshot("o", snap.id)).turns == 2


# -- cancellation, crashes, failures ------------------------------------------------------------------------------


async def test_cancel_mid_turn_settles_cancelled_and_a_follow_up_revives_it(db_url, log, sessions, fake):
    fake.push(Stall("partial"))
    snap = await sessions.create_session("o", "create-1", message="first")
    async with open_workbench_worker(db_url, make_config(fake)):
        await wait_for(lambda: _has(log, snap.id, "model.output_delta"))
        with trio.fail_after(5):
            await sessions.cancel("o", snap.id, "cancel-1")
            await wait_status(sessions, snap.id, "cancelled")
        types = await types_of(log, snap.id)
        assert types[-2:] == ["model.output_reset", "session.ended"] and "model.turn_completed" not in types
        with pytest.raises(errors.Conflict, match="already ended"):
            await sessions.cancel("o", snap.id, "cancel-2")
        fake.push(Text("Back again."))
        second = await sessions.post_message("o", snap.id, "m-2", "second")
        await wait_status(sessions, snap.id, "idle")
    (turn,) = await events_of(log, snap.id, "model.turn_completed")
    assert turn.delivered == [2, second.seq] and turn.text == "Back again."
    assert trailing_users(sent_messages(fake)[1]) == ["first", "second"]


async def test_a_tool_call_cut_off_by_a_crash_is_repaired_before_the_next_model_call(db_url, log, db, sessions, fake):
    snap = await sessions.create_session("o", "create-1", message="add a scene")
    # What a worker that died mid-tool left behind: its claim, the committed turn, tool.called, no result.
    await db.execute("UPDATE streams SET status = 'running', attempt = 1, lease_worker = 'dead', "
                     "lease_expires_at = now() + interval '1 hour' WHERE id = $1", snap.id)
    arguments = {"title": "Vectors", "goal": "Add them", "kind": "slide", "position": None}
    await log.append(StreamAppend(stream_id=snap.id, attempt=1, events=[
        LeaseClaimed(attempt=1, worker="dead", reason="queued"),
        ModelTurnCompleted(tool_calls=[{"id": "call_9", "name": "add_scene", "arguments": arguments}], delivered=[2]),
        ToolCalled(call_id="call_9", name="add_scene", arguments=arguments),
    ]))
    await db.execute("UPDATE streams SET lease_expires_at = now() - interval '1 second' WHERE id = $1", snap.id)
    fake.push(Text("That edit was interrupted; shall I try again?"))
    async with open_workbench_worker(db_url, make_config(fake)):
        await wait_status(sessions, snap.id, "idle")
    tail = [e.type for e in await log.read_stream(snap.id) if e.seq > 5 and e.type != "model.output_delta"]
    assert tail[:3] == ["lease.claimed", "tool.result", "model.turn_completed"]
    (result,) = await events_of(log, snap.id, "tool.result")
    assert (result.call_id, result.ok, result.interrupted, result.error) == ("call_9", False, True, INTERRUPTED)
    assert (await fold_course(log, snap.course_id)).scenes == ()  # not applied, and not applied twice
    (sent,) = sent_messages(fake)
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "tool"]
    assert sent[2]["tool_calls"][0]["id"] == "call_9"
    assert sent[3] == {"role": "tool", "tool_call_id": "call_9", "content": f"Error: {INTERRUPTED}"}


async def test_over_the_unattended_cap_the_session_fails_and_a_message_retries(db_url, log, db, sessions, fake):
    snap = await sessions.create_session("o", "create-1", message="hello")
    await db.execute("UPDATE streams SET status = 'running', attempt = 9, lease_worker = 'dead', "
                     "unattended_attempts = 5, lease_expires_at = now() - interval '1 second' WHERE id = $1", snap.id)
    async with open_workbench_worker(db_url, make_config(fake)):
        await wait_status(sessions, snap.id, "failed")
        assert (await sessions.snapshot("o", snap.id)).error == OVER_CAP_ERROR
        assert fake.requests == []
        fake.push(Text("Hello!"))
        await sessions.post_message("o", snap.id, "m-2", "are you there?")
        await wait_status(sessions, snap.id, "idle")
    final = await sessions.snapshot("o", snap.id)
    assert (final.turns, final.error) == (1, None)
    assert trailing_users(sent_messages(fake)[0]) == ["hello", "are you there?"]


async def test_a_provider_error_fails_the_session_with_a_key_free_message_and_a_follow_up_retries(
    db_url, log, sessions, fake
):
    fake.push(Status(401, {"error": {"type": "invalid_api_key", "message": f"bad key {KEY}"}}))
    snap = await sessions.create_session("o", "create-1", message="hello")
    async with open_workbench_worker(db_url, make_config(fake)):
        await wait_status(sessions, snap.id, "failed")
        error = (await sessions.snapshot("o", snap.id)).error
        assert error == "the model provider 'fake' rejected the request (HTTP 401, invalid_api_key); check its API key"
        fake.push(Text("Working now."))
        await sessions.post_message("o", snap.id, "m-2", "retry")
        await wait_status(sessions, snap.id, "idle")
    rows = await log.db.fetch("SELECT data::text AS d FROM events WHERE stream_id = $1", snap.id)
    assert not any(KEY in r["d"] for r in rows)


async def test_output_deltas_are_coalesced(db_url, log, sessions, fake):
    text = " ".join(f"word{i}" for i in range(120))
    fake.push(Text(text, chunks=60))
    snap = await sessions.create_session("o", "create-1", message="talk")
    async with open_workbench_worker(db_url, make_config(fake)):
        await wait_status(sessions, snap.id, "idle")
    deltas = [e.text for e in await events_of(log, snap.id, "model.output_delta")]
    assert 1 <= len(deltas) < 60
    assert "".join(deltas) == text
    assert [e.text for e in await events_of(log, snap.id, "model.turn_completed")] == [text]


# -- helpers -----------------------------------------------------------------------------------------------------


async def _true(v: bool) -> bool:
    return v


async def _has(log: EventLog, sid: str, type_: str) -> bool:
    return type_ in await types_of(log, sid)


async def _turns(sessions: WorkbenchSessions, sid: str, n: int) -> bool:
    return (await sessions.snapshot("o", sid)).turns >= n


async def _delivered(log: EventLog, sid: str, seqs: set[int]) -> bool:
    got = {s for e in await events_of(log, sid, "model.turn_completed") for s in e.delivered}
    return seqs <= got
