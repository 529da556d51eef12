"""Who is writing the reply to a learner's question, so that a reply lost with its process is written again, and
every reply is kept once.

Before a reply is asked of the model, its writer appends a **claim** to the conversation: a record of role
``system`` (no message of the conversation: :mod:`openmaic.api.classroom_chat` shows only ``user`` and
``assistant``) holding ``reply: {to, attempt, process, until}``: the question's id, the attempt's id, this
process's id and the instant, on the database's clock, after which the claim lapses (``limits.classroom_reply_s``
past its start: no reply of a live process runs longer). The claim is appended only while the question (or the
lapsed claim after it) is the session's last record (the runtime append's ``expectedLastSeq``), and the reply only
while the claim is: of two writers racing for one question, one claims and the other is refused, and a writer whose
claim was taken over keeps nothing.

The claim's instant is stamped before it is stored, and storing it may wait (for the owner's lock): a claim stored
after it lapsed is given up at once (409, ask again), and the reply is asked of the model only for what is left of
its claim (:attr:`Claim.deadline`), so a writer does not go on answering while another claims the question.

A question **waits** when no reply follows it; a claim after it is **live** until it lapses, and a claim of this
process only while its attempt runs (one that does not run was cut off with its request). A process killed
mid-reply leaves a claim that lapses; its question is answered again when the learner's page asks
(``POST /api/classroom-chat/{stageId}/pending``). A reply that failed (the model's error) keeps nothing either: its
question waits, and is asked again the next time the page shows the conversation.
"""

from __future__ import annotations

import datetime as dt
import uuid
from dataclasses import dataclass
from typing import Any

import trio

from openmaic import errors
from openmaic.browser_import import runtime
from openmaic.store.database import Database
from openmaic.store.queries import Q

__all__ = ["PROCESS", "Claim", "ReplyInProgress", "Waiting", "claim", "database_now", "ended", "live", "pending",
           "refuse_if_live"]

PROCESS = uuid.uuid4().hex
"""This process, as its claims name it."""

_running: set[str] = set()
"""The attempts this process is writing."""


class ReplyInProgress(errors.Conflict):
    """A reply to this question is being written; reload the conversation when it ends."""

    code = "reply_in_progress"
    error_code = "REPLY_IN_PROGRESS"


@dataclass(frozen=True)
class Claim:
    """A reply this request writes: its claim's ``seq`` and ``attempt``, and the model that writes it."""

    seq: int
    attempt: str
    provider: Any
    model: str
    deadline: float
    """When the claim lapses, on this process's trio clock: the model's answer must be in by then."""


@dataclass(frozen=True)
class Waiting:
    """The question no reply follows, the claim after it if any (``reply`` of its payload), and the session's last
    seq."""

    question: dict[str, Any]
    claim: dict[str, Any] | None
    last_seq: int


def _role(record: dict[str, Any]) -> Any:
    p = record.get("payload")
    return p.get("role") if isinstance(p, dict) else None


def _reply_claim(record: dict[str, Any]) -> dict[str, Any] | None:
    p = record.get("payload")
    reply = p.get("reply") if isinstance(p, dict) and p.get("role") == "system" else None
    return reply if isinstance(reply, dict) else None


def pending(records: list[dict[str, Any]]) -> Waiting | None:
    """The last question of ``records`` (in seq order, ending at the session's end) when no reply follows it."""
    question: dict[str, Any] | None = None
    claimed: dict[str, Any] | None = None
    for record in records:
        role = _role(record)
        if role == "user" and isinstance(record["payload"].get("content"), str):
            question, claimed = record, None
        elif role == "assistant":
            question, claimed = None, None
        elif question is not None and (found := _reply_claim(record)) is not None:
            claimed = found
    if question is None:
        return None
    return Waiting(question=question, claim=claimed, last_seq=int(records[-1]["seq"]))


def _instant(value: Any) -> dt.datetime | None:
    try:
        return dt.datetime.fromisoformat(value) if isinstance(value, str) else None
    except ValueError:
        return None


def live(claimed: dict[str, Any] | None, now: dt.datetime) -> bool:
    """Whether the reply ``claimed`` is being written (see the module doc); ``now`` on the database's clock."""
    if claimed is None:
        return False
    until = _instant(claimed.get("until"))
    if until is None or now >= until:
        return False  # lapsed: no reply of a live process runs this long
    # This process knows its own attempts: one that does not run was cut off with its request.
    return claimed.get("process") != PROCESS or claimed.get("attempt") in _running


def refuse_if_live(claimed: dict[str, Any] | None, now: dt.datetime) -> None:
    """409 ``REPLY_IN_PROGRESS`` (with ``retryAfter`` seconds when it lapses by then) while ``claimed`` is live."""
    if not live(claimed, now):
        return
    assert claimed is not None
    until = _instant(claimed.get("until"))
    wait = max(1, int((until - now).total_seconds()) + 1) if until is not None else 1
    raise ReplyInProgress("a reply to this question is being written; reload the conversation when it ends",
                          retryAfter=wait)


async def database_now(db: Database) -> dt.datetime:
    """The database's clock, which every process judges claims by."""
    now = await db.fetchval(Q.database_clock)
    assert isinstance(now, dt.datetime)
    return now


async def claim(call: Any, session_id: str, question: dict[str, Any], provider: Any, model: str, *,
                after_seq: int | None = None) -> Claim:
    """Claim the reply to ``question``, appended only while the session's last record is ``after_seq`` (the
    question's own seq by default); 409 ``REPLY_IN_PROGRESS`` when another writer claimed or answered first."""
    attempt = uuid.uuid4().hex
    start = await database_now(call.services.log.db)
    until = start + dt.timedelta(seconds=call.services.config.limits.classroom_reply_s)
    stamp = lambda t: t.astimezone(dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")  # noqa: E731
    record: dict[str, Any] = {
        "id": f"reply-{attempt}", "sessionId": session_id, "createdAt": stamp(start),
        "payload": {"role": "system", "content": "", "reply": {
            "to": question.get("id"), "attempt": attempt, "process": PROCESS, "until": stamp(until)}},
    }  # fmt: skip
    if isinstance(question.get("sceneId"), str):
        record["sceneId"] = question["sceneId"]
    expected = int(question["seq"]) if after_seq is None else after_seq
    try:
        stored, _ = await runtime.append_record(call.services.log, call.user, session_id, record,
                                                call.services.config.limits, expected_last_seq=expected)
    except runtime.AppendConflict as exc:
        raise ReplyInProgress("another request claimed this reply first; reload the conversation") from exc
    # Running from the moment it is claimed: a reader of this process must not take it for lost meanwhile.
    _running.add(attempt)
    # What is left of the claim once it is stored, on the database's clock: another writer may take the question
    # from its lapse on, so this one must not answer past it.
    try:
        left = (until - await database_now(call.services.log.db)).total_seconds()
    except BaseException:
        ended(attempt)  # its request fails: nothing writes the reply
        raise
    if left <= 0:
        ended(attempt)
        raise ReplyInProgress("this reply's claim lapsed before it was stored (the database was slow); reload the "
                              "conversation", retryAfter=1)
    return Claim(seq=int(stored["seq"]), attempt=attempt, provider=provider, model=model,
                 deadline=trio.current_time() + left)


def ended(attempt: str) -> None:
    """``attempt``'s reply ended (kept, failed or cut off)."""
    _running.discard(attempt)
