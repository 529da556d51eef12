"""Wake-ups: 'stream X changed' hints from this process (pokes) and from others (NOTIFY).

A hint is never the carrier: whoever waits here also polls with a timeout, so a lost notification delays work
but never loses it. A watcher registers *before* it reads, so a change that lands between its read and its
wait still wakes it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence

import trio

from openmaic.store.database import Database

CHANNEL = "openmaic_events"
ANY = "*"
RUNNABLE = "~runnable"
"""A pseudo stream id: hinted whenever some stream becomes claimable (status set to ``queued``)."""


def cancel_hint(stream_id: str) -> str:
    """A pseudo stream id hinted when a cancel request lands on ``stream_id``. An actor's cancel watcher waits on it
    rather than on the stream itself, which the actor's own appends (streamed output) hint many times a second."""
    return f"~cancel:{stream_id}"


def owner_hint(view: str, owner_id: str) -> str:
    """A pseudo stream id hinted when ``view`` (a read model's per-owner list, e.g. ``library``) changed for
    ``owner_id``: an owner's live list wakes on its own changes, not on every stream's (see
    :mod:`openmaic.feeds.owners`)."""
    return f"~{view}:{owner_id}"


class Watch:
    """One waiter's view: set when any watched stream changed since its last wait."""

    def __init__(self) -> None:
        self._dirty = False
        self._event = trio.Event()

    def _set(self) -> None:
        self._dirty = True
        self._event.set()

    async def wait(self, timeout: float) -> bool:
        """Wait for a hint, at most ``timeout`` seconds. True when hinted, False on timeout (poll anyway)."""
        if not self._dirty:
            with trio.move_on_after(timeout):
                await self._event.wait()
        hinted = self._dirty
        self._dirty = False
        self._event = trio.Event()
        return hinted


class Wakeups:
    def __init__(self) -> None:
        self._watches: dict[str, set[Watch]] = {}
        self.resyncs = 0

    @contextlib.contextmanager
    def watch(self, *stream_ids: str) -> Iterator[Watch]:
        """Watch the given streams (or every stream with :data:`ANY`) for the block's duration."""
        w = Watch()
        keys = stream_ids or (ANY,)
        for k in keys:
            self._watches.setdefault(k, set()).add(w)
        try:
            yield w
        finally:
            for k in keys:
                s = self._watches.get(k)
                if s is not None:
                    s.discard(w)
                    if not s:
                        del self._watches[k]

    def poke(self, stream_ids: Sequence[str]) -> None:
        for sid in stream_ids:
            for w in self._watches.get(sid, ()):
                w._set()
        if stream_ids:
            for w in self._watches.get(ANY, ()):
                w._set()

    def poke_all(self) -> None:
        for ws in self._watches.values():
            for w in ws:
                w._set()

    async def run(self, db: Database, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Feed NOTIFY hints from the database's listener into the watchers (runs until cancelled)."""
        sub = db.subscribe()
        try:
            task_status.started()
            while True:
                pending, resync = await sub.wait()
                if resync:
                    # The listener reconnected: notifications may have been missed, so everyone re-reads.
                    self.resyncs += 1
                    self.poke_all()
                    continue
                self.poke([payload for channel, payload in pending if channel == CHANNEL])
        finally:
            db.unsubscribe(sub)
