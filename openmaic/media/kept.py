"""What a media element's provider already gave, kept in this process until the element's checkpoint commits.

A provider call is paid for and slow; the commit after it can still meet the database's trouble (a lost
connection, a lock timeout). The step then stops without settling the element (see :mod:`openmaic.actors.actor`)
and the lane resumes from its last checkpoint under a new attempt, usually in this same process within a
second. That attempt finds here what the interrupted one had: a picture's bytes (and a video's, and its poster),
or a submitted video's task id whose ``media.video_submitted`` was not committed, and goes on from there instead of
calling the provider again. An attempt in another process calls the provider again, as after a crash (provider
calls are at least once; the same bytes are the same asset).

Entries are keyed by lane, element and the element's generation (a retry of the element starts a new one, which
must call the provider anew), dropped once the element is seen settled, and bounded in number and bytes (the
oldest go first).
"""

from __future__ import annotations

from collections import OrderedDict

import msgspec

from openmaic.models.media import GeneratedMedia

MAX_ENTRIES = 64
MAX_BYTES = 256 * 1024 * 1024

Key = tuple[str, str, int]
"""(lane stream id, element id, generation)"""


class Kept(msgspec.Struct, frozen=True, kw_only=True):
    media: GeneratedMedia | None = None
    poster: GeneratedMedia | None = None
    task_id: str | None = None

    def size(self) -> int:
        return sum(len(m.data) for m in (self.media, self.poster) if m is not None)


class KeptResults:
    """The process's kept provider results (one per worker process: the media kind holds it)."""

    def __init__(self, *, max_entries: int = MAX_ENTRIES, max_bytes: int = MAX_BYTES) -> None:
        self._entries: OrderedDict[Key, Kept] = OrderedDict()
        self.max_entries = max_entries
        self.max_bytes = max_bytes

    def get(self, key: Key) -> Kept:
        return self._entries.get(key) or Kept()

    def keep(self, key: Key, **what: object) -> None:
        kept = msgspec.structs.replace(self.get(key), **what)
        self._entries[key] = kept
        self._entries.move_to_end(key)
        total = sum(k.size() for k in self._entries.values())
        while len(self._entries) > self.max_entries or (total > self.max_bytes and len(self._entries) > 1):
            _, oldest = self._entries.popitem(last=False)
            total -= oldest.size()

    def forget(self, lane: str, settled: set[str], generations: dict[str, int]) -> None:
        """Drop what was kept for the lane's elements that are settled now (their checkpoint has committed), and
        for earlier generations of elements retried since."""
        for key in [k for k in self._entries
                    if k[0] == lane and (k[1] in settled or k[2] != generations.get(k[1], 0))]:
            del self._entries[key]

    def __len__(self) -> int:
        return len(self._entries)
