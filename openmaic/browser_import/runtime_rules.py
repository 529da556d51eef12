"""The rules of a learner runtime session and its records, as OpenMAIC's ``@openmaic/dsl`` states them
(``validateRuntimeSession``, ``validateRuntimeRecord``, ``isIsoTimestamp``) and its storage package gates payloads
(the ``chat`` and ``quizAttempt`` skeletons). Pure: no I/O.

A refusal is :class:`RuntimeInvalid` (400 ``VALIDATION_FAILED``) with the problem list as ``details`` and the
message OpenMAIC's stores throw (``@openmaic/storage: invalid runtime record "r1": /createdAt: expected ISO 8601
`createdAt```), since its clients show that message as it is.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

import msgspec

from openmaic import errors

__all__ = [
    "RUNTIME_DSL_VERSION", "STATUSES", "RuntimeInvalid", "check_learner_keys", "check_record", "check_session",
    "check_transition", "instant_of", "quoted",
]  # fmt: skip

RUNTIME_DSL_VERSION = "0.1.0"
"""The runtime line's version this server stamps on every session (OpenMAIC's ``RUNTIME_DSL_VERSION``)."""
STATUSES = ("active", "completed", "archived")

_ISO = re.compile(r"^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(\.\d+)?(Z|[+-](\d{2}):(\d{2}))$")
_CHAT_ROLES = ("user", "assistant", "system")
_QUIZ_PHASES = ("draft", "submitted", "reviewed")


class RuntimeInvalid(errors.InvalidInput):
    """A runtime session or record is not valid (``details.problems`` lists where and why)."""

    code = "runtime_invalid"
    error_code = "VALIDATION_FAILED"

    def __init__(self, label: str, problems: list[dict[str, str]]) -> None:
        detail = "; ".join(f"{p['path'] or '/'}: {p['message']}" for p in problems)
        super().__init__(f"@openmaic/storage: invalid {label}: {detail}", problems=problems)


def quoted(value: Any) -> str:
    """``value`` as JSON (how OpenMAIC's messages quote ids)."""
    return msgspec.json.encode(value).decode()


def _days(year: int, month: int) -> int:
    leap = year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)
    return (31, 29 if leap else 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)[month - 1]


def instant_of(value: str) -> dt.datetime | None:
    """The instant a zoned ISO 8601 timestamp names (``YYYY-MM-DDTHH:mm:ss[.f](Z|±hh:mm)``), or None when it is not
    one (no zone, an impossible date, a leap second …)."""
    m = _ISO.match(value)
    if m is None:
        return None
    year, month, day, hour, minute, second = (int(m.group(i)) for i in range(1, 7))
    if not 1 <= month <= 12 or not 1 <= day <= _days(year, month) or hour > 23 or minute > 59 or second > 59:
        return None
    if m.group(9) is not None and (int(m.group(9)) > 23 or int(m.group(10)) > 59):
        return None
    offset = dt.timedelta(0)
    if m.group(9) is not None:
        offset = dt.timedelta(hours=int(m.group(9)), minutes=int(m.group(10)))
        offset = -offset if m.group(8)[0] == "-" else offset
    micro = int((m.group(7) or ".0")[1:].ljust(6, "0")[:6])
    try:
        return dt.datetime(year, month, day, hour, minute, second, micro, tzinfo=dt.timezone(offset))
    except (ValueError, OverflowError):
        return None  # year 0 and its like


def _fields(doc: dict[str, Any], required: tuple[str, ...], problems: list[dict[str, str]]) -> None:
    for field in required:
        value = doc.get(field)
        if not isinstance(value, str):
            problems.append({"path": f"/{field}", "message": f"expected string `{field}`"})
        elif value == "":
            problems.append({"path": f"/{field}", "message": f"expected non-empty string `{field}`"})


def _stamps(doc: dict[str, Any], names: tuple[str, ...], problems: list[dict[str, str]]) -> None:
    for name in names:
        value = doc.get(name)
        if isinstance(value, str) and value and instant_of(value) is None:
            problems.append({"path": f"/{name}", "message": f"expected ISO 8601 `{name}`"})


def check_session(body: Any) -> dict[str, Any]:
    """A session as created: ``body`` (any ``runtimeDslVersion`` it carries ignored) stamped with this server's
    runtime version; RuntimeInvalid otherwise."""
    if not isinstance(body, dict):
        raise RuntimeInvalid("runtime session", [{"path": "/", "message": "runtime session must be an object"}])
    session = {k: v for k, v in body.items() if k != "runtimeDslVersion"}
    problems: list[dict[str, str]] = []
    _fields(session, ("id", "kind", "stageId", "learnerKey", "status", "createdAt", "updatedAt"), problems)
    status = session.get("status")
    if isinstance(status, str) and status not in STATUSES:
        problems.append({"path": "/status", "message": f"unknown session status: {quoted(status)}"})
    _stamps(session, ("createdAt", "updatedAt"), problems)
    if "dslVersion" in session:
        problems.append({"path": "/dslVersion", "message": "unexpected document-line `dslVersion` on a runtime "
                                                           "session; sessions version on `runtimeDslVersion`"})
    if problems:
        label = f"runtime session {quoted(session.get('id'))}" if isinstance(session.get("id"), str) else \
            "runtime session"
        raise RuntimeInvalid(label, problems)
    return {**session, "runtimeDslVersion": RUNTIME_DSL_VERSION}


def check_transition(status: Any, updated_at: Any, label: str) -> None:
    """A status change: a known status at a zoned ISO instant."""
    problems: list[dict[str, str]] = []
    if not isinstance(status, str) or status not in STATUSES:
        problems.append({"path": "/status", "message": f"unknown session status: {quoted(status)}"})
    if not isinstance(updated_at, str) or instant_of(updated_at) is None:
        problems.append({"path": "/updatedAt", "message": "expected ISO 8601 `updatedAt`"})
    if problems:
        raise RuntimeInvalid(label, problems)


def _payload_problem(kind: str, payload: Any) -> str | None:
    if kind == "chat":
        ok = (isinstance(payload, dict) and payload.get("role") in _CHAT_ROLES
              and isinstance(payload.get("content"), str))
        return None if ok else "chat payload must match ChatMessageSkeleton (role + content)"
    if kind == "quizAttempt":
        ok = (isinstance(payload, dict) and payload.get("phase") in _QUIZ_PHASES
              and isinstance(payload.get("answers"), dict))
        return None if ok else "quizAttempt payload must match QuizAttemptSkeleton (phase + answers)"
    return None  # other kinds carry payloads the store does not inspect


def check_record(body: dict[str, Any], kind: str | None) -> dict[str, Any]:
    """A record as appended (without ``seq``, ``expectedLastSeq`` and ``sessionTransition``), its payload checked
    against the session's ``kind`` when given; RuntimeInvalid otherwise."""
    record = {k: v for k, v in body.items() if k not in ("seq", "expectedLastSeq", "sessionTransition")}
    problems: list[dict[str, str]] = []
    _fields(record, ("id", "sessionId", "createdAt"), problems)
    for name in ("sceneId", "subAnchor"):
        if name in record and not isinstance(record[name], str):
            problems.append({"path": f"/{name}", "message": f"expected string `{name}`"})
    index = record.get("actionIndex")
    if "actionIndex" in record and (isinstance(index, bool) or not isinstance(index, int | float)):
        problems.append({"path": "/actionIndex", "message": "expected number `actionIndex`"})
    elif "actionIndex" in record and not (float(index).is_integer() and index >= 0):
        problems.append({"path": "/actionIndex", "message": "expected non-negative integer `actionIndex`"})
    _stamps(record, ("createdAt",), problems)
    if "payload" not in record:
        problems.append({"path": "/payload", "message": "expected `payload`"})
    elif kind is not None and (problem := _payload_problem(kind, record["payload"])) is not None:
        problems.append({"path": "/payload", "message": problem})
    if problems:
        label = f"runtime record {quoted(record.get('id'))}" if isinstance(record.get("id"), str) else \
            "runtime record"
        raise RuntimeInvalid(label, problems)
    return record


def check_learner_keys(*keys: Any) -> None:
    """Learner keys a merge names: non-empty strings."""
    if not all(isinstance(k, str) and k for k in keys):
        raise RuntimeInvalid("learner merge", [{"path": "/", "message": "learner keys must be non-empty strings"}])
