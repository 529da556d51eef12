"""The workbench session as a pure fold of its events: status, course, model history, open tool calls.

The model history is the provider-facing transcript and holds committed turns only: the user messages a turn
delivered (``model.turn_completed {delivered}`` names their seqs; their text comes from
``session.message_posted``), the assistant turns (text and tool calls), and the tool results. Streamed output
deltas are for clients and never enter it.

Repair. A tool call whose turn was committed but whose result was not is *open*. If a lease is claimed while
calls are open, the attempt that was running them is gone (crashed, cut off, stopped or cancelled), so those
calls are marked for repair: the next attempt appends an explicit interrupted ``tool.result`` for each (an
event, never a rewrite) before it calls the model again, and the provider always receives a valid transcript.
A tool's course change is committed in the same append as its result, so "no result" means "not applied".
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import msgspec

from openmaic.events.core import (
    REQUEUED,
    LeaseClaimed,
    LeaseReleased,
    ModelOutputDelta,
    ModelTurnCompleted,
    SessionCancelRequested,
    SessionCreated,
    SessionEnded,
    SessionInterrupted,
    SessionMessagePosted,
    ToolCalled,
    ToolResult,
)
from openmaic.events.types import Event
from openmaic.models.types import AssistantMessage, Message, ToolCall, ToolResultMessage, UserMessage
from openmaic.workbench.events import ModelOutputReset, SessionTitleSet

ASK_USER = "ask_user"


class Posted(msgspec.Struct, frozen=True):
    """A follow-up message posted and not yet delivered to a committed turn."""

    seq: int
    text: str
    delivery: str = "queued"


class SessionState(msgspec.Struct, frozen=True, kw_only=True):
    """Everything the workbench kind and its snapshot need, folded from the session's events."""

    course_id: str | None = None
    status: str = "queued"
    """queued | running | idle, or the status of the last ``session.ended`` (failed, cancelled)."""
    error: str | None = None
    """The error of the last ``session.ended``; cleared by the next committed turn."""
    history: tuple[Message, ...] = ()
    undelivered: tuple[Posted, ...] = ()
    open_calls: tuple[ToolCall, ...] = ()
    """Tool calls of the last committed turn that have no result yet, in the order the model made them."""
    started: frozenset[str] = frozenset()
    """Open calls whose ``tool.called`` was committed (the tool began running)."""
    to_repair: tuple[str, ...] = ()
    """Open call ids found open when a lease was claimed: their attempt is gone and they get interrupted results."""
    cancelled_calls: bool = False
    """The open calls were stopped by the teacher's cancel (the last end was ``cancelled`` and no turn has been
    committed since): their repair says so, instead of blaming a stopped worker."""
    needs_model: bool = False
    """Every tool call of the last turn has its result and the model has not answered them yet."""
    question: str | None = None
    """The question of an ``ask_user`` call the session is waiting on (the next delivered message answers it)."""
    turns: int = 0
    rounds: int = 0
    """Model turns since the last one that delivered user messages (bounds a runaway tool loop)."""
    partial_output: bool = False
    """Output deltas were committed since the last committed turn or reset (a client shows uncommitted text)."""
    prompt: str = ""
    """The first message, given when the session was created."""
    new_course: bool = True
    """The session made its course (rather than opening an existing one)."""
    title: str | None = None
    delivered_seq: int = 0
    """The seq of the last user message a committed turn delivered to the model."""
    seq: int = 0


def initial() -> SessionState:
    return SessionState()


def tool_calls_of(event: ModelTurnCompleted) -> list[ToolCall]:
    """The tool calls a committed turn recorded (``{id, name, arguments}`` objects)."""
    out: list[ToolCall] = []
    for c in event.tool_calls:
        if not isinstance(c, dict):
            continue
        args = c.get("arguments")
        out.append(ToolCall(id=str(c.get("id") or ""), name=str(c.get("name") or ""),
                            arguments=args if isinstance(args, dict) else {}))
    return out


def result_content(result: ToolResult) -> str:
    """The text a tool result shows the model: its JSON result, or its error."""
    if not result.ok:
        return result.error or "the tool failed"
    if isinstance(result.result, str):
        return result.result
    return msgspec.json.encode(result.result).decode()


def evolve(state: SessionState, event: Event, seq: int) -> SessionState:
    """Pure fold of one session event."""
    r = msgspec.structs.replace
    match event:
        case SessionCreated(input=inp):
            course = inp.get("course_id")
            prompt = inp.get("message")
            return r(state, course_id=course if isinstance(course, str) else None, status="idle",
                     prompt=prompt if isinstance(prompt, str) else "", new_course=inp.get("new_course") is not False,
                     seq=seq)
        case SessionTitleSet(title=title):
            return r(state, title=title, seq=seq)
        case SessionMessagePosted(text=text, delivery=delivery):
            status = "running" if state.status == "running" else "queued"
            return r(state, undelivered=(*state.undelivered, Posted(seq, text, delivery)), status=status, seq=seq)
        case LeaseClaimed():
            # Calls still open now belonged to an attempt that is gone: they are repaired, not run.
            repair = tuple(c.id for c in state.open_calls)
            return r(state, status="running", to_repair=repair, seq=seq)
        case LeaseReleased(reason=reason):
            return r(state, status="queued" if reason in REQUEUED else "idle", seq=seq)
        case SessionInterrupted():
            return r(state, status="queued", seq=seq)
        case SessionCancelRequested():
            # A waiting session is queued by the cancel so that a worker settles it.
            return r(state, status="queued" if state.status == "idle" else state.status, seq=seq)
        case SessionEnded(status=status, error=error):
            cancelled = state.cancelled_calls or (status == "cancelled" and bool(state.open_calls))
            return r(state, status=status, error=error, cancelled_calls=cancelled, seq=seq)
        case ModelOutputDelta():
            return r(state, partial_output=True, seq=seq)
        case ModelOutputReset():
            return r(state, partial_output=False, seq=seq)
        case ModelTurnCompleted(text=text, delivered=delivered):
            return _turn(state, event, text, delivered, seq)
        case ToolCalled(call_id=call_id):
            if any(c.id == call_id for c in state.open_calls):
                return r(state, started=state.started | {call_id}, seq=seq)
            return r(state, seq=seq)
        case ToolResult():
            return _result(state, event, seq)
        case _:
            return r(state, seq=seq)


def _turn(state: SessionState, event: ModelTurnCompleted, text: str, delivered: list[int], seq: int) -> SessionState:
    wanted = set(delivered)
    users = [UserMessage(text=p.text) for p in state.undelivered if p.seq in wanted]
    calls = tool_calls_of(event)
    history = (*state.history, *users, AssistantMessage(text=text, tool_calls=calls))
    return msgspec.structs.replace(
        state,
        history=history,
        undelivered=tuple(p for p in state.undelivered if p.seq not in wanted),
        open_calls=tuple(calls),
        started=frozenset(),
        to_repair=(),
        cancelled_calls=False,
        needs_model=False,
        question=None if users or calls else state.question,
        turns=state.turns + 1,
        rounds=1 if users else state.rounds + 1,
        delivered_seq=max([state.delivered_seq, *delivered]),
        partial_output=False,
        error=None,
        seq=seq,
    )


def _result(state: SessionState, event: ToolResult, seq: int) -> SessionState:
    r = msgspec.structs.replace
    call = next((c for c in state.open_calls if c.id == event.call_id), None)
    if call is None:
        # Not a call we are waiting on (answered already): the transcript takes one result per call.
        return r(state, seq=seq)
    message = ToolResultMessage(call_id=call.id, name=call.name, content=result_content(event), is_error=not event.ok)
    open_calls = tuple(c for c in state.open_calls if c.id != call.id)
    question = state.question
    if call.name == ASK_USER and event.ok:
        question = _question_of(event.result) or "(a question)"
    return r(
        state,
        history=(*state.history, message),
        open_calls=open_calls,
        started=state.started - {call.id},
        to_repair=tuple(i for i in state.to_repair if i != call.id),
        question=question,
        needs_model=not open_calls and question is None,
        seq=seq,
    )


def _question_of(result: Any) -> str | None:
    if isinstance(result, dict) and isinstance(result.get("question"), str):
        return result["question"]
    return None


def fold_session(events: Iterable[tuple[Event, int]], state: SessionState | None = None) -> SessionState:
    """Fold ``(event, seq)`` pairs onto ``state`` (the initial state when None)."""
    s = state or initial()
    for event, seq in events:
        s = evolve(s, event, seq)
    return s


def history_messages(state: SessionState) -> list[Message]:
    """The committed model history, as the provider is given it (without the system prompt)."""
    return list(state.history)
