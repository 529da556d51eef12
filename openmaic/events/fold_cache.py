"""The folded states of the streams a process read last, each with the seq it reflects, within a byte budget.

A stream is append-only and its seqs never change, so a state folded up to seq ``n`` stays the fold of events
``1..n`` for good: the next read folds only the events after ``n`` (:func:`openmaic.browser_import.store
.fold_cached`). That turns a read of a stream written over and over (a browser autosaving its document: one event
of the whole document per save) from a fold of its whole history into a fold of what was added since this process
last looked. The states are frozen structs, shared by every reader; the cache holds what THIS process folded with
THIS code, so it can never disagree with a fold from the first event. Each state is kept with the hash of the
event it was folded up to (the log's hash chain): a database restored to an earlier point and written on from
there has a different event at that seq, and the reader sees that the chain does not continue from it.

Bounded: at most ``budget`` bytes (a state's size is its JSON's), the least recently used dropped first, and a
state larger than a quarter of the budget is not kept at all.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Generic, TypeVar

__all__ = ["FoldCache"]

S = TypeVar("S")


class FoldCache(Generic[S]):
    """Stream id → (state, seq, hash of the event at seq), least recently used first out, within ``budget`` bytes."""

    def __init__(self, budget: int, sizeof: Callable[[S], int]) -> None:
        self.budget = budget
        self._sizeof = sizeof
        self._entries: OrderedDict[str, tuple[S, int, bytes, int]] = OrderedDict()
        self._bytes = 0

    def get(self, stream_id: str) -> tuple[S, int, bytes] | None:
        """The state kept for ``stream_id``, the seq it reflects and that event's hash, or None."""
        entry = self._entries.get(stream_id)
        if entry is None:
            return None
        self._entries.move_to_end(stream_id)
        return entry[0], entry[1], entry[2]

    def put(self, stream_id: str, state: S, seq: int, hash_: bytes) -> None:
        """Keep ``state`` as the fold of ``stream_id`` up to ``seq``, whose event's hash is ``hash_`` (replacing
        what was kept)."""
        self.drop(stream_id)
        size = self._sizeof(state)
        if size > self.budget // 4:
            return
        self._entries[stream_id] = (state, seq, hash_, size)
        self._bytes += size
        while self._bytes > self.budget:
            _, (_, _, _, dropped) = self._entries.popitem(last=False)
            self._bytes -= dropped

    def drop(self, stream_id: str) -> None:
        entry = self._entries.pop(stream_id, None)
        if entry is not None:
            self._bytes -= entry[3]

    def statistics(self) -> tuple[int, int]:
        """How many states are kept, and their bytes."""
        return len(self._entries), self._bytes
