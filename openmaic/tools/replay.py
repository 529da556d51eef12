"""``openmaic replay STREAM [--to-seq N] [--json]``: a stream's folded state at any seq.

The fold is the one the actors use: the stream's kind is looked up in the registry of session kinds,
:mod:`openmaic.kinds` (``get_kind(kind)`` → ``.initial()`` and ``.evolve(state, event, seq)``); otherwise in the
small registry here, which knows ``course`` (``CourseDocument`` folded with ``evolve_course``) and accepts others via
:func:`register_fold`; for a kind neither knows, the runtime's shared session core (``evolve_core``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec

from openmaic import errors
from openmaic.actors.kind import Core, evolve_core
from openmaic.courses.document import dated, document_of
from openmaic.courses.events import CourseDocument, evolve_course
from openmaic.events.log import EventLog
from openmaic.kinds import KIND_NAMES, get_kind

Evolve = Callable[[Any, Any, int], Any]

_FOLDS: dict[str, tuple[Any, Evolve]] = {"course": (CourseDocument(), evolve_course)}


def register_fold(kind: str, initial: Any, evolve: Evolve) -> None:
    """Make ``openmaic replay`` able to fold streams of ``kind``: ``initial`` is the state before the first event
    (or a callable returning it), ``evolve(state, event, seq)`` the pure fold."""
    _FOLDS[kind] = (initial, evolve)


def fold_for(kind: str) -> tuple[Any, Evolve, str]:
    """``(initial state, evolve, source)`` for a stream kind.

    ``source`` says which fold it is: ``actors`` (the kind's own, from the registry of session kinds,
    :mod:`openmaic.kinds`), ``registered`` (this module's registry), or ``core`` (no fold knows the kind: the
    runtime's shared fold of leases, messages and endings, :func:`openmaic.actors.kind.evolve_core`).
    """
    if kind in KIND_NAMES:
        k = get_kind(kind)
        return k.initial(), k.evolve, "actors"
    found = _FOLDS.get(kind)
    if found is not None:
        initial, evolve = found
        return (initial() if callable(initial) else initial), evolve, "registered"
    return Core(), evolve_core, "core"


class Replayed(msgspec.Struct, frozen=True):
    stream_id: str
    kind: str
    owner_id: str
    seq: int
    """The seq the state was folded to."""
    head_seq: int
    state: Any
    fold: str
    """Which fold produced ``state``: ``actors``, ``registered`` or ``core`` (see :func:`fold_for`)."""
    document: Any = None
    """For a course: OpenMAIC's document at that seq, as every door serves it (its ready scenes)."""


async def replay(log: EventLog, stream_id: str, to_seq: int | None = None) -> Replayed:
    """Fold ``stream_id``'s events up to ``to_seq`` (default: its head). Raises
    :class:`~openmaic.errors.StreamNotFound` for an unknown stream."""
    row = await log.stream_row(stream_id)
    if row is None:
        raise errors.StreamNotFound(f"no stream {stream_id!r}", stream_id=stream_id)
    if to_seq is not None and to_seq < 0:
        raise errors.InvalidInput(f"--to-seq must be 0 or more, got {to_seq}")
    state, evolve, source = fold_for(row.kind)
    state, seq = await log.fold(stream_id, state, evolve, to_seq=to_seq)
    document = document_of(stream_id, dated(state, row)) if isinstance(state, CourseDocument) else None
    return Replayed(stream_id, row.kind, row.owner_id, seq, row.head_seq, state, source, document)


def summary(r: Replayed) -> str:
    """A readable account of the folded state."""
    where = f"seq {r.seq} of {r.head_seq}" if r.seq != r.head_seq else f"seq {r.seq} (head)"
    lines = [f"stream {r.stream_id} (kind {r.kind}, owner {r.owner_id}) at {where}"]
    if r.fold == "core":
        lines.append(f"  (no fold knows kind {r.kind!r}: the session core only, as the runtime folds it)")
    state = r.state
    if isinstance(state, CourseDocument):
        lines.append(f"  title: {state.title!r}  language: {state.language}  outline revision: "
                     f"{state.outline_revision}{'  DELETED' if state.deleted else ''}")
        if state.locked_by:
            lines.append(f"  locked by run {state.locked_by}")
        lines.append(f"  scenes: {len(state.scenes)} written ({len(state.ready)} ready), {len(state.pending)} to write")
        for s in state.scenes:
            detail = f"{len(s.content.canvas.elements)} elements; " if s.type == "slide" else ""  # type: ignore[union-attr]
            status = "ready" if s.id in state.ready else "writing"
            lines.append(f"    {s.order}. [{status}] {s.title} ({s.type}; {detail}{len(s.actions or [])} actions)")
        for p in state.pending:
            lines.append(f"    {p.order}. [pending] {p.title} ({p.type})")
        lines.append(f"  agents: {', '.join(a.name for a in state.agents) or ', '.join(state.agent_ids) or 'none'}")
        return "\n".join(lines)
    built = msgspec.to_builtins(state)
    if isinstance(built, dict):
        for key, value in built.items():
            lines.append(f"  {key}: {_short(value)}")
    else:
        lines.append(f"  {_short(built)}")
    return "\n".join(lines)


def _short(value: Any, limit: int = 100) -> str:
    if isinstance(value, list):
        head = ", ".join(_short(v, 40) for v in value[:3])
        return f"[{len(value)} items] {head}{', …' if len(value) > 3 else ''}"
    text = msgspec.json.encode(value).decode() if not isinstance(value, str) else repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"
