"""The classroom's conversation with its agents: a learner's questions, and the discussions a course opens,
answered by the caller's ``classroom`` model slot, streamed, and kept.

* ``GET /api/classroom-chat/{stageId}`` → ``{success, sessionId, messages: [{id, role, content, agentId?,
  agentName?, sceneId?, createdAt, interrupted?}], pendingQuestion?}``: the caller's conversation on that course,
  oldest first, and the last question when no reply follows it.
* ``POST /api/classroom-chat/{stageId}/pending {scene?, agents?, …}`` → that question's reply, streamed as below
  (no ``message`` frame); 204 when none waits, 409 ``REPLY_IN_PROGRESS`` while a reply to it is being written
  (:mod:`openmaic.api.classroom_replies`: how a reply lost with its process is known, and written once).
* ``POST /api/classroom-chat/{stageId}/messages {message, scene?: {id?, title, texts, speech}, agents?: [{id,
  name, role?, persona?}], agentId?, topic?, actionIndex?, course?, language?}`` → ``text/event-stream``:
  ``message`` (the learner's message, as kept), ``agent`` ``{agentId, agentName}`` (who answers), ``delta``
  ``{text}`` as the model writes (``reset``: start the reply over, when a fallback model took over), then
  ``done`` (the reply, as kept) or ``error`` ``{code, message}``. In a discussion (``topic``), another agent of the
  course (a student agent if any) then follows up in the same stream: ``agent``, its deltas, ``done``.

The conversation is the learner's runtime session of kind ``chat`` on the course (``classroom-chat:<stageId>``,
filed under the caller's learner key, :mod:`openmaic.browser_import.runtime`), each message one record with
OpenMAIC's chat payload ``{role, content}`` (plus who spoke) anchored at the scene: so it is the learner's alone,
survives a reload, reads the same from another device, and goes with the learner's runtime data (deleted,
merged on a claim) through ``/api/persistence/runtime``. The learner's message is kept before the model is asked,
then the reply's claim, then the reply when it ends. A reader that leaves mid-reply cancels it: what was written so
far is kept, marked ``interrupted``.

The page says what the learner sees (the scene's title, the text of its elements, its speech lines, the course's
agents), as OpenMAIC's stateless ``/api/chat`` is told its store state; the prompt quotes it
(:mod:`openmaic.steps.tutoring`). The answering agent is ``agentId`` (the discussion's opener), else the course's
teacher, else its first agent. Bad input is 400 before anything is kept or streamed; a slot that cannot run is
400 ``MISSING_MODEL`` / ``MISSING_API_KEY``; a model failing mid-reply is the ``error`` frame.
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import AsyncIterator
from typing import Annotated, Any

import msgspec
import trio
from quart import Blueprint, Response

from openmaic import errors
from openmaic.api import classroom_calls, classroom_replies as replies
from openmaic.api.follow import SSE_HEADERS, sse_data
from openmaic.api.persistence import owner_writes
from openmaic.api.quiz_grade import classroom_model, required_text
from openmaic.api.routing import Call, api_route
from openmaic.api.wire import Success, Wire, encode
from openmaic.browser_import import runtime
from openmaic.models.errors import ProviderError
from openmaic.owners.learners import learner_key
from openmaic.steps.tutoring import HISTORY_TURNS, SceneContext, Speaker, Turn, tutor_messages

__all__ = ["bp", "session_id_of"]

bp = Blueprint("classroom_chat", __name__)

_STYLE: dict[str, Any] = {"error_style": "json"}
SAVE_TIMEOUT_S = 10
"""How long keeping a cut-off reply may take once its reader has gone."""

Id = Annotated[str, msgspec.Meta(min_length=1, max_length=200)]
Line = Annotated[str, msgspec.Meta(max_length=4000)]


class SceneIn(Wire):
    id: Id | None = None
    title: Annotated[str, msgspec.Meta(max_length=500)] = ""
    texts: Annotated[list[Line], msgspec.Meta(max_length=60)] = []
    """The text of the scene's elements, in drawing order."""
    speech: Annotated[list[Line], msgspec.Meta(max_length=60)] = []
    """The scene's speech lines, in playing order."""


class AgentIn(Wire):
    id: Id
    name: Annotated[str, msgspec.Meta(min_length=1, max_length=100)]
    role: Annotated[str, msgspec.Meta(max_length=40)] = ""
    persona: Annotated[str, msgspec.Meta(max_length=2000)] = ""


class ReplyContext(Wire):
    """What the learner sees when a reply is asked for (the scene, the course's agents) and who answers."""

    scene: SceneIn = SceneIn()
    agents: Annotated[list[AgentIn], msgspec.Meta(max_length=12)] = []
    agent_id: Id | None = None
    """Who answers (a discussion's opener); the course's teacher when absent."""
    topic: Annotated[str, msgspec.Meta(max_length=2000)] | None = None
    """The discussion's topic, when the message joins one."""
    action_index: Annotated[int, msgspec.Meta(ge=0)] | None = None
    course: Annotated[str, msgspec.Meta(max_length=300)] = ""
    language: Annotated[str, msgspec.Meta(max_length=35)] | None = None


class ChatBody(ReplyContext):
    message: Annotated[str, msgspec.Meta(max_length=4000)]


class ChatMessage(Wire, omit_defaults=True):
    id: str
    role: str
    content: str
    created_at: str
    agent_id: str | None = None
    agent_name: str | None = None
    scene_id: str | None = None
    interrupted: bool = False


class Conversation(Success):
    session_id: str
    messages: list[ChatMessage]
    pending_question: str | None = None
    """The id of your last question when no reply follows it (being written, or lost with the process that wrote
    it): ``POST …/pending`` has it answered if nobody is writing it."""


def session_id_of(stage_id: str) -> str:
    """The id of the learner's conversation on a course (one per learner and course)."""
    return f"classroom-chat:{stage_id}"


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _message(record: dict[str, Any]) -> ChatMessage | None:
    p = record.get("payload")
    if not isinstance(p, dict) or not isinstance(p.get("content"), str) or p.get("role") not in ("user", "assistant"):
        return None  # a record some other client wrote into the session: not a message of this conversation
    text = lambda v: v if isinstance(v, str) else None  # noqa: E731
    return ChatMessage(id=str(record.get("id")), role=p["role"], content=p["content"],
                       created_at=str(record.get("createdAt")), agent_id=text(p.get("agentId")),
                       agent_name=text(p.get("agentName")), scene_id=text(record.get("sceneId")),
                       interrupted=p.get("interrupted") is True)


async def _records(call: Call, session_id: str) -> list[dict[str, Any]]:
    limits = call.services.config.limits
    try:
        found, _ = await runtime.list_records(call.services.log, call.user, session_id, None,
                                              limit=limits.runtime_records_per_session, after=0,
                                              budget=limits.runtime_list_bytes)
    except runtime.SessionNotFound:
        return []
    return found


async def _tail(call: Call, session_id: str) -> list[dict[str, Any]]:
    """The session's last records, enough to hold its last :data:`HISTORY_TURNS` messages (each reply also has
    its claim: three records for two messages)."""
    try:
        return await runtime.tail_records(call.services.log, call.user, session_id, 2 * HISTORY_TURNS)
    except runtime.SessionNotFound:
        return []


@api_route(bp, "GET", "/api/classroom-chat/{stage_id}", response=Conversation, errors=(400,), **_STYLE)
async def conversation(call: Call, stage_id: str) -> Conversation:
    """Your conversation with the agents of a course, oldest message first (empty before your first question),
    and your last question when no reply follows it."""
    session_id = session_id_of(required_text(stage_id, "stageId"))
    records = await _records(call, session_id)
    waiting = replies.pending(records)
    open_question = None if waiting is None else str(waiting.question.get("id"))
    return Conversation(session_id=session_id, messages=[m for m in map(_message, records) if m is not None],
                        pending_question=open_question)


async def _open_session(call: Call, stage_id: str, session_id: str) -> None:
    """The learner's conversation session on the course, created on their first message (active again when
    something closed it)."""
    log, owner = call.services.log, call.user
    try:
        session = await runtime.read_session(log, owner, session_id)
    except runtime.SessionNotFound:
        now = _now()
        try:
            await runtime.create_session(log, owner, {
                "id": session_id, "kind": "chat", "stageId": stage_id, "learnerKey": learner_key(owner),
                "status": "active", "createdAt": now, "updatedAt": now}, call.services.config.limits)
        except runtime.SessionExists:
            pass  # another request of this learner made it just now
        return
    if session.get("status") != "active":
        await runtime.set_status(log, owner, session_id, "active", _now())


def _speaker(b: ReplyContext) -> Speaker:
    agents = [Speaker(id=a.id, name=a.name.strip() or a.id, role=a.role, persona=a.persona) for a in b.agents]
    chosen = next((a for a in agents if a.id == b.agent_id), None) if b.agent_id else None
    if b.agent_id and chosen is None:
        raise errors.InvalidInput(f"agentId {b.agent_id!r} is not one of the agents sent", path="agentId")
    teacher = next((a for a in agents if a.role == "teacher"), None)
    default = Speaker(id="teacher", name="老师" if (b.language or "").lower().startswith("zh") else "Teacher",
                      role="teacher")
    return chosen or teacher or (agents[0] if agents else default)


async def _append(call: Call, session_id: str, payload: dict[str, Any], b: ReplyContext, *,
                  expected_last_seq: Any = runtime.NO_SEQ) -> dict[str, Any]:
    record: dict[str, Any] = {"id": f"msg-{uuid.uuid4().hex}", "sessionId": session_id, "createdAt": _now(),
                              "payload": payload}
    if b.scene.id:
        record["sceneId"] = b.scene.id
    if b.action_index is not None:
        record["actionIndex"] = b.action_index
    stored, _ = await runtime.append_record(call.services.log, call.user, session_id, record,
                                            call.services.config.limits, expected_last_seq=expected_last_seq)
    return stored


def _frame(event: str, value: Any) -> bytes:
    return b"event: " + event.encode() + b"\ndata: " + sse_data(encode(value)) + b"\n\n"




def _turns(history: list[dict[str, Any]]) -> list[Turn]:
    return [Turn(role=m.role, content=m.content, name=m.agent_name or "")
            for m in map(_message, history) if m is not None][-HISTORY_TURNS:]


def _prompt(b: ReplyContext, speaker: Speaker, message: str, turns: list[Turn], *,
            follow_up: str | None = None) -> list[Any]:
    scene = SceneContext(title=b.scene.title.strip(), texts=[t for t in b.scene.texts if t.strip()],
                         speech=[s for s in b.scene.speech if s.strip()])
    return tutor_messages(message=message, speaker=speaker, scene=scene, course=b.course.strip(),
                          agents=[Speaker(id=a.id, name=a.name, role=a.role) for a in b.agents], history=turns,
                          language=b.language, topic=(b.topic or "").strip() or None, follow_up=follow_up)


def _follower(b: ReplyContext, lead: Speaker) -> Speaker | None:
    """Who adds a follow-up to the lead's answer in a discussion: a student agent of the course if there is one,
    else another of its agents; nobody outside a discussion, or when the course has no other agent."""
    if not (b.topic or "").strip():
        return None
    others = [a for a in b.agents if a.id != lead.id]
    chosen = next((a for a in others if a.role == "student"), others[0] if others else None)
    if chosen is None:
        return None
    return Speaker(id=chosen.id, name=chosen.name.strip() or chosen.id, role=chosen.role, persona=chosen.persona)


def _stream(call: Call, session_id: str, b: ReplyContext, speaker: Speaker, message: str, turns: list[Turn],
            claim: replies.Claim, release: Any, lead: list[bytes]) -> Response:
    """The reply's response: ``lead`` frames, then for each agent who speaks, ``agent``, its deltas and ``done``
    (kept), or ``error``. The reply is kept only while ``claim`` is the session's last record, so that two writers
    of one reply never both keep it; in a discussion another agent then adds a follow-up, kept after the reply."""
    provider, model = claim.provider, claim.model
    limit_s = call.services.config.limits.classroom_reply_s
    follower = _follower(b, speaker)

    async def keep(payload: dict[str, Any], after_seq: int) -> dict[str, Any] | None:
        try:
            return await _append(call, session_id, payload, b, expected_last_seq=after_seq)
        except runtime.AppendConflict:
            return None  # the session moved on (the reply was claimed again elsewhere): the other writer keeps it

    @trio.as_safe_channel
    async def frames() -> AsyncIterator[bytes]:
        for chunk in lead:
            yield chunk
        who, prompt, after_seq = speaker, _prompt(b, speaker, message, turns), claim.seq
        while True:
            said = {"agentId": who.id, "agentName": who.name}
            yield _frame("agent", said)
            written: list[str] = []
            wake = trio.Event()
            result: dict[str, Any] = {}

            def on_delta(text: str) -> None:
                written.append(text)
                wake.set()

            def on_retry() -> None:
                written.clear()  # a fallback model starts the reply over

            # The lead's reply is bounded by its claim (another writer may take the question once it lapses); a
            # follow-up comes after the question is answered, so by the limit alone.
            deadline = trio.current_time() + limit_s if who is follower else claim.deadline

            async def answer() -> None:
                with trio.move_on_at(deadline) as bounded:
                    try:
                        turn = await provider.stream_turn(model, prompt, [], on_delta=on_delta, on_retry=on_retry)
                        result["text"] = turn.text
                    except ProviderError as exc:
                        result["error"] = (exc.error_code, exc.message)
                if bounded.cancelled_caught:
                    result["error"] = ("MODEL_TIMEOUT",
                                       f"the reply took longer than limits.classroom_reply_s ({limit_s:g} s)")
                wake.set()

            shown = ""  # what the reader has been sent
            try:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(answer)
                    while True:
                        await wake.wait()
                        wake = trio.Event()
                        text = "".join(written)
                        if text.startswith(shown) and len(text) > len(shown):
                            yield _frame("delta", {"text": text[len(shown):]})
                            shown = text
                        if result:
                            break
            finally:
                if not result and written:
                    # The reader went away mid-reply: keep what was written, marked as cut off. Shielded and
                    # bounded, since this runs while the request is being cancelled.
                    with trio.CancelScope(shield=True), trio.move_on_after(SAVE_TIMEOUT_S):
                        await keep({"role": "assistant", "content": "".join(written), "interrupted": True, **said},
                                   after_seq)
            if "error" in result:
                code, text = result["error"]
                yield _frame("error", {"code": code, "message": text})
                return
            reply = str(result["text"])
            if not reply.startswith(shown):
                yield _frame("reset", {})  # a fallback model wrote the reply over: the reader starts it again
                shown = ""
            if len(reply) > len(shown):
                yield _frame("delta", {"text": reply[len(shown):]})
            kept = await keep({"role": "assistant", "content": reply.strip(), **said}, after_seq)
            if kept is None and who is follower:
                return  # the learner went on meanwhile: the follow-up is left out
            if kept is None:
                yield _frame("error", {"code": "REPLY_TAKEN_OVER",
                                       "message": "this reply was answered again elsewhere; reload the conversation"})
                return
            yield _frame("done", _message(kept))
            if follower is None or who is follower:
                return
            # The discussion goes on: a classmate adds to the lead's answer, which it hears as the last message.
            heard = [*turns, Turn(role="user", content=message), Turn(role="assistant", content=reply.strip(),
                                                                       name=who.name)][-HISTORY_TURNS:]
            prompt = _prompt(b, follower, message, heard, follow_up=who.name)
            who, after_seq = follower, int(kept["seq"])

    async def body() -> AsyncIterator[bytes]:
        try:
            async with frames() as chunks:
                async for chunk in chunks:
                    yield chunk
        finally:
            replies.ended(claim.attempt)
            release()

    response = Response(body(), 200, dict(SSE_HEADERS))
    response.timeout = None
    return response


@api_route(bp, "POST", "/api/classroom-chat/{stage_id}/messages", body=ChatBody, sse=True,
           media_type="text/event-stream", errors=(400, 429, 503), **_STYLE)
@owner_writes
async def ask(call: Call, stage_id: str) -> Response:
    """Ask the course's agents (or answer a discussion): your message is kept, and the agent's reply streams as
    it is written (message, agent, delta…, then done or error) and is kept when it ends."""
    b: ChatBody = call.body
    stage_id = required_text(stage_id, "stageId")
    message = required_text(b.message, "message")
    speaker = _speaker(b)
    provider, model = await classroom_model(call)
    release = classroom_calls.admit(call.user, call.services.config.limits.classroom_calls_per_owner)
    try:
        session_id = session_id_of(stage_id)
        await _open_session(call, stage_id, session_id)
        history = await _tail(call, session_id)
        # Who was asked, and about what, goes with the question: a reply answered again after a crash is the same.
        asked: dict[str, Any] = {"role": "user", "content": message, "askedAgentId": speaker.id}
        if (b.topic or "").strip():
            asked["topic"] = b.topic.strip()
        mine = await _append(call, session_id, asked, b)
        claim = await replies.claim(call, session_id, mine, provider, model)
    except BaseException:
        release()
        raise
    return _stream(call, session_id, b, speaker, message, _turns(history), claim, release,
                   [_frame("message", _message(mine))])


@api_route(bp, "POST", "/api/classroom-chat/{stage_id}/pending", body=ReplyContext, sse=True,
           media_type="text/event-stream", errors=(400, 409, 429, 503), **_STYLE)
@owner_writes
async def answer_pending(call: Call, stage_id: str) -> Response:
    """Have your last question answered when no reply follows it and none is being written (a reply lost when
    the server stopped): the reply streams (agent, delta…, done or error) and is kept, once, however many of
    your devices ask. 204 when nothing waits; 409 ``REPLY_IN_PROGRESS`` while a reply is being written."""
    b: ReplyContext = call.body
    session_id = session_id_of(required_text(stage_id, "stageId"))
    records = await _tail(call, session_id)
    waiting = replies.pending(records)
    if waiting is None:
        return Response("", 204)
    replies.refuse_if_live(waiting.claim, await replies.database_now(call.services.log.db))
    question = waiting.question
    asked = question["payload"]
    context = b
    if not b.agent_id and isinstance(asked.get("askedAgentId"), str) and any(
            a.id == asked["askedAgentId"] for a in b.agents):
        context = msgspec.structs.replace(context, agent_id=asked["askedAgentId"])
    if not b.topic and isinstance(asked.get("topic"), str):
        context = msgspec.structs.replace(context, topic=asked["topic"])
    speaker = _speaker(context)
    provider, model = await classroom_model(call)
    release = classroom_calls.admit(call.user, call.services.config.limits.classroom_calls_per_owner)
    try:
        # Conditional on the session's last record: of two devices asking at once, one claims, the other is 409.
        claim = await replies.claim(call, session_id, question, provider, model, after_seq=waiting.last_seq)
    except BaseException:
        release()
        raise
    return _stream(call, session_id, context, speaker, asked["content"], _turns(records[:records.index(question)]),
                   claim, release, [])
