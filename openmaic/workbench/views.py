"""What clients see of a workbench (Pro) session: OpenMAIC's session meta, and its events in OpenMAIC's agent
runtime vocabulary.

Status. OpenMAIC's sessions are ``queued | running | succeeded | failed | cancelled``; the last three are
terminal, but a new message revives the session. This server's ``idle`` (the agent finished its turn and holds
no worker) is OpenMAIC's ``succeeded``.

Events. Each logged event of the session has at most one client event, at the logged seq (its ``eventId``), so
a client that resumes from the last id it saw gets every later one once, in order:

| logged | client |
|---|---|
| ``session.created`` | ``session_start {prompt, stageId}`` |
| ``lease.claimed`` after a crash (``orphaned``) | ``session_resumed {attempt}`` |
| ``session.message_posted`` | ``user_message {seq, text, delivery}`` |
| ``model.output_delta`` / ``model.output_reset`` | ``message_update {delta}`` / ``message_reset`` |
| ``model.turn_completed`` | ``turn_end {text, toolCalls, delivered}`` (the user messages' seqs it answered) |
| ``tool.called`` | ``tool_execution_start {toolCallId, toolName, args}`` |
| ``tool.result`` | ``tool_execution_end {toolCallId, toolName, isError, result, interrupted}``, or ``user_question {question}`` for ``ask_user`` |
| ``lease.released`` (the turn is done: ``idle``) | ``session_end {status: "succeeded"}`` |
| ``session.ended`` | ``session_end {status, error}`` |
| ``session.interrupted`` | ``session_interrupted {reason}`` |
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from openmaic.events.core import (
    LeaseClaimed, LeaseReleased, ModelOutputDelta, ModelTurnCompleted, SessionCreated, SessionEnded,
    SessionInterrupted, SessionMessagePosted, ToolCalled, ToolResult,
)  # fmt: skip
from openmaic.events.types import Event
from openmaic.wire import Wire
from openmaic.workbench.events import ModelOutputReset
from openmaic.workbench.fold import ASK_USER, SessionState, evolve

__all__ = ["SESSION_EVENT_TYPES", "SessionMeta", "TERMINAL", "pro_status", "session_event", "session_meta"]

TERMINAL = frozenset({"succeeded", "failed", "cancelled"})

SESSION_EVENT_TYPES = (
    "session_start", "session_resumed", "user_message", "message_update", "message_reset", "turn_end",
    "tool_execution_start", "tool_execution_end", "user_question", "session_end", "session_interrupted",
)  # fmt: skip


def pro_status(status: str) -> str:
    """A session status as OpenMAIC names it."""
    return "succeeded" if status == "idle" else status


def _ms(t: dt.datetime) -> int:
    return int(t.timestamp() * 1000)


class SessionMeta(Wire, omit_defaults=True):
    """OpenMAIC's session meta."""

    id: str
    owner_id: str
    prompt: str
    title: str | None = None
    stage_id: str | None
    """The course the session edits."""
    existing_course: bool
    status: str
    attempt: int
    delivered_user_message_seq: int
    created_at: int
    """Milliseconds since the epoch."""
    updated_at: int
    error: str | None = None
    question: str | None = None
    """This server's addition: the agent's question the session waits on (``ask_user``)."""


def session_meta(session_id: str, owner: str, s: SessionState, *, attempt: int, created_at: dt.datetime,
                 updated_at: dt.datetime) -> SessionMeta:
    return SessionMeta(
        id=session_id, owner_id=owner, prompt=s.prompt, title=s.title, stage_id=s.course_id,
        existing_course=not s.new_course, status=pro_status(s.status), attempt=attempt,
        delivered_user_message_seq=s.delivered_seq, created_at=_ms(created_at), updated_at=_ms(updated_at),
        error=s.error if s.status == "failed" else None, question=s.question,
    )  # fmt: skip


def session_event(before: SessionState, event: Event) -> tuple[str, dict[str, Any]] | None:
    """``(type, data)`` of the client event that ``event`` is, given the session's state before it."""
    match event:
        case SessionCreated(input=inp):
            return "session_start", {"prompt": inp.get("message") or "", "stageId": inp.get("course_id")}
        case LeaseClaimed(attempt=attempt, reason="orphaned"):
            return "session_resumed", {"attempt": attempt}
        case SessionMessagePosted(text=text, delivery=delivery):
            return "user_message", {"seq": None, "text": text, "delivery": delivery}
        case ModelOutputDelta(text=text):
            return "message_update", {"delta": text}
        case ModelOutputReset(reason=reason):
            return "message_reset", {"reason": reason}
        case ModelTurnCompleted(text=text, tool_calls=calls, delivered=delivered):
            return "turn_end", {"text": text, "toolCalls": calls, "delivered": delivered}
        case ToolCalled(call_id=call_id, name=name, arguments=args):
            return "tool_execution_start", {"toolCallId": call_id, "toolName": name, "args": args}
        case ToolResult(call_id=call_id, name=name, ok=ok, result=result, error=error, interrupted=interrupted):
            after = evolve(before, event, before.seq)
            if name == ASK_USER and ok and after.question is not None:
                return "user_question", {"toolCallId": call_id, "question": after.question}
            return "tool_execution_end", {"toolCallId": call_id, "toolName": name, "isError": not ok,
                                          "result": result if ok else error, "interrupted": interrupted}
        case LeaseReleased(reason="idle"):
            return "session_end", {"status": "succeeded"}
        case SessionEnded(status=status, error=error):
            return "session_end", {"status": pro_status(status), "error": error}
        case SessionInterrupted(reason=reason):
            return "session_interrupted", {"reason": reason}
    return None


class SessionView:
    """Follows one session from a seq: maps each next event to its client event and advances the state."""

    def __init__(self, state: SessionState) -> None:
        self.state = state

    def next(self, event: Event, seq: int) -> tuple[str, dict[str, Any]] | None:
        out = session_event(self.state, event)
        if out is not None and out[0] == "user_message":
            out[1]["seq"] = seq
        self.state = evolve(self.state, event, seq)
        return out
