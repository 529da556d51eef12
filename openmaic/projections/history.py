"""``model_history``: the provider-facing transcript of each workbench session, as committed.

Read model (what the API reads)::

    model_history(session_id, idx, role, message json, seq)   -- PRIMARY KEY (session_id, idx)

Rows of a session ordered by ``idx`` (0, 1, 2, …) form the transcript. ``role`` is ``user``, ``assistant`` or
``tool``; ``message`` is the msgspec JSON of :class:`UserMessage`, :class:`AssistantMessage` or
:class:`ToolMessage` (tagged by ``role``; decode with ``msgspec.json.decode(text, type=HistoryMessage)``);
``seq`` is the session event it came from.

From ``model.turn_completed {text, tool_calls, delivered}``: first the user messages it delivered (their text
comes from the earlier ``session.message_posted`` events at those seqs, staged in ``model_history_pending``
until delivered), then the assistant message. From ``tool.result``: a tool message; an ``interrupted`` result
(the repair of a call whose worker died) appears like any other.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import msgspec

from openmaic.events.core import ModelTurnCompleted, SessionMessagePosted, ToolResult
from openmaic.events.log import RecordedEvent
from openmaic.projections.base import Context, Projection
from openmaic.store.database import Op
from openmaic.store.queries import load_sql


class UserMessage(msgspec.Struct, frozen=True, kw_only=True, tag_field="role", tag="user"):
    text: str
    message_seq: int
    """The seq of the ``session.message_posted`` event that carried it."""


class AssistantMessage(msgspec.Struct, frozen=True, kw_only=True, tag_field="role", tag="assistant"):
    text: str
    tool_calls: list[dict[str, Any]] = []


class ToolMessage(msgspec.Struct, frozen=True, kw_only=True, tag_field="role", tag="tool"):
    call_id: str
    name: str
    ok: bool = True
    result: Any = None
    error: str | None = None
    interrupted: bool = False


HistoryMessage = UserMessage | AssistantMessage | ToolMessage
Role = Literal["user", "assistant", "tool"]

_encode = msgspec.json.Encoder().encode

SQL = load_sql(__package__, "history.sql")


class _Loaded(msgspec.Struct, frozen=True):
    """A session a batch touches (``load``): its last transcript index, and its stored pending messages."""

    id: str
    last_idx: int | None
    seqs: list[int] | None
    texts: list[str] | None


class ModelHistory(Projection):
    """The committed model transcript of each session."""

    name = "model_history"
    tables = {
        "model_history": (SQL.create_model_history,),
        "model_history_pending": (SQL.create_model_history_pending,),
    }
    types = frozenset({"session.message_posted", "model.turn_completed", "tool.result"})

    async def apply(self, ctx: Context, events: Sequence[RecordedEvent]) -> list[Op]:
        ids = list(dict.fromkeys(e.stream_id for e in events))
        next_idx: dict[str, int] = {}
        stored_pending: dict[str, dict[int, str]] = {}
        for r in await ctx.fetch(_Loaded, SQL.load, ids):
            next_idx[r.id] = -1 if r.last_idx is None else r.last_idx
            stored_pending[r.id] = dict(zip(r.seqs or (), r.texts or ()))
        new_pending: dict[tuple[str, int], str] = {}
        delivered_stored: list[tuple[str, int]] = []
        rows: list[tuple[str, int, str, str, int]] = []

        def emit(sid: str, role: str, message: HistoryMessage, seq: int) -> None:
            next_idx[sid] += 1
            rows.append((sid, next_idx[sid], role, _encode(message).decode(), seq))

        for e in events:
            ev = ctx.decode(e)
            sid = e.stream_id
            match ev:
                case SessionMessagePosted(text=text):
                    new_pending[(sid, e.seq)] = text
                case ModelTurnCompleted(text=text, tool_calls=calls, delivered=delivered):
                    for mseq in delivered:
                        text_of = new_pending.pop((sid, mseq), None)
                        if text_of is None:
                            text_of = stored_pending[sid].pop(mseq, None)
                            if text_of is None:
                                # Never posted here, or already delivered: a turn cannot deliver it twice.
                                continue
                            delivered_stored.append((sid, mseq))
                        emit(sid, "user", UserMessage(text=text_of, message_seq=mseq), e.seq)
                    emit(sid, "assistant", AssistantMessage(text=text, tool_calls=calls), e.seq)
                case ToolResult(call_id=call_id, name=name, ok=ok, result=result, error=error,
                                interrupted=interrupted):
                    emit(sid, "tool", ToolMessage(call_id=call_id, name=name, ok=ok, result=result, error=error,
                                                  interrupted=interrupted), e.seq)
        ops: list[Op] = []
        if rows:
            cols = list(zip(*rows))
            ops.append(ctx.op(SQL.insert_messages, *map(list, cols)))
        if delivered_stored:
            ops.append(ctx.op(
                SQL.delete_pending, [k[0] for k in delivered_stored], [k[1] for k in delivered_stored],
            ))
        if new_pending:
            ops.append(ctx.op(
                SQL.insert_pending,
                [k[0] for k in new_pending], [k[1] for k in new_pending], list(new_pending.values()),
            ))
        return ops
