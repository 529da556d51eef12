"""One owner's burst of writes takes at most about a third of this process while other owners are being served.

The persistence routes' writes take their owner's turn (:func:`openmaic.browser_import.store.owner_turn`), so one
owner has one write at a time in a process. That alone still lets an owner who writes as fast as it can keep one
write always running: its decoding, validation, folds, appends and their projections then take as much of the
process, and of the database, as every other owner's requests together, and those wait twice as long or more.

So an owner's next write waits, in its turn, :data:`GIVE_WAY` times as long as its last write took, whenever
another owner has been served in the last :data:`WINDOW` seconds: a writing owner then uses at most about a third
of the time, and all of it when it is alone (an importer replaying a browser's data on an idle server is not
slowed). The wait is capped at :data:`MAX_PAUSE`. Nothing is refused: the writes queue, in order, as their turn
already does.

Per process and in memory, as the turns are: with several API processes each shares its own time this way.
"""

from __future__ import annotations

import time
from collections import OrderedDict

__all__ = ["GIVE_WAY", "MAX_PAUSE", "WINDOW", "others_active", "pause_after", "seen", "wait_before_write"]

WINDOW = 1.0
"""How recently another owner must have been served (seconds) for a writing owner to give way."""

GIVE_WAY = 2.0
"""How many times its last write's duration an owner's next write waits while others are served: the writer's
share is at most ``1 / (1 + GIVE_WAY)``, so another owner's requests are not slowed past 1.5 times by it where the
process's time is what they share."""

MAX_PAUSE = 1.0
"""The longest an owner's next write waits (seconds), however long its last one took."""

_seen: OrderedDict[str, float] = OrderedDict()
"""Owners served in the last WINDOW, least recent first (older ones are dropped as they come up)."""

_next_write: dict[str, float] = {}
"""When each recently writing owner's next write may start (``time.monotonic``)."""


def _prune(now: float) -> None:
    while _seen and now - next(iter(_seen.values())) >= WINDOW:
        _seen.popitem(last=False)


def seen(owner: str, now: float | None = None) -> None:
    """``owner`` is being served (a request of theirs started)."""
    now = time.monotonic() if now is None else now
    _seen[owner] = now
    _seen.move_to_end(owner)
    _prune(now)


def others_active(owner: str, now: float | None = None) -> bool:
    """Whether an owner other than ``owner`` was served in the last :data:`WINDOW` seconds."""
    _prune(time.monotonic() if now is None else now)
    return len(_seen) > 1 or (len(_seen) == 1 and owner not in _seen)


def pause_after(owner: str, took: float, now: float | None = None) -> None:
    """``owner``'s write took ``took`` seconds: its next one may start :data:`GIVE_WAY` times that later (capped)."""
    now = time.monotonic() if now is None else now
    if len(_next_write) > 4096:  # owners who stopped writing: their time has passed
        for key in [k for k, t in _next_write.items() if t <= now]:
            del _next_write[key]
    _next_write[owner] = now + min(took * GIVE_WAY, MAX_PAUSE)


def wait_before_write(owner: str, now: float | None = None) -> float:
    """How long ``owner``'s next write waits before it starts: 0 when no other owner is being served."""
    now = time.monotonic() if now is None else now
    not_before = _next_write.pop(owner, None)
    if not_before is None or not others_active(owner, now):
        return 0.0
    return max(0.0, not_before - now)
