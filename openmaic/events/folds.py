"""Folded states of recently read streams, advanced from where they were.

A snapshot (``GET /api/generation-runs/{id}``, ``GET /api/agent/sessions/{id}``) is a fold of the whole stream.
Scripts poll them; without a cache each poll reads every event again. A :class:`FoldCache` keeps the last state
it folded for each of its most recently used streams and reads only the events appended since. It is safe because
folds are pure and states immutable: the state at seq N is a function of events 1..N alone, and events never change.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Generic, TypeVar

from openmaic.events.log import EventLog
from openmaic.events.types import Event

__all__ = ["FoldCache"]

S = TypeVar("S")


class FoldCache(Generic[S]):
    def __init__(
        self, log: EventLog, initial: Callable[[], S], evolve: Callable[[S, Event, int], S], *, size: int = 256
    ) -> None:
        self._log = log
        self._initial = initial
        self._evolve = evolve
        self._size = size
        self._states: OrderedDict[str, tuple[int, S]] = OrderedDict()
        self.events_read = 0
        """Events folded so far (diagnostics: a hit reads only what was appended since)."""

    async def state(self, stream_id: str, to_seq: int | None = None, *, floor: int | None = None) -> S:
        """The stream's state folded up to ``to_seq`` (its head when None); with ``floor``, read as a catch-up read
        (:meth:`EventLog.read_stream <openmaic.events.log.EventLog.read_stream>`)."""
        seq, state = self._states.get(stream_id) or (0, self._initial())
        if to_seq is not None and seq > to_seq:
            seq, state = 0, self._initial()  # asked for an earlier seq than the one kept: fold from the start
        state, last = await self._log.fold(stream_id, state, self._evolve, after=seq, to_seq=to_seq, floor=floor)
        self.events_read += last - seq  # a stream's seqs have no gaps
        # Concurrent callers may store in either order; any stored state is correct for its seq.
        self._states[stream_id] = (last, state)
        self._states.move_to_end(stream_id)
        while len(self._states) > self._size:
            self._states.popitem(last=False)
        return state
