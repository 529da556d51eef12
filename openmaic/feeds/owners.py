"""Owner feeds: one reader per owner's view (the library's cards, …) in an API process, however many clients.

An owner's live list (``/api/classrooms/events``, ``/api/classrooms/ws``) is a *view* read from a read model,
not a stream of events. Every client of that owner sees the same view, so one task per ``(view, owner)`` reads
it and every follower diffs the latest value against what it has sent. A change costs one query per owner,
whatever the number of their tabs, and nothing for other owners.

The reader wakes only on its own *hint* — a pseudo stream id (:func:`openmaic.events.wakeups.owner_hint`) that
whoever writes the view announces when it changed (the library projection, in the transaction that writes the
owner's cards, so the hint arrives after the change is visible) — and on a poll, the backstop for a lost
notification (a reconnected listener already wakes every watcher, see :mod:`openmaic.events.wakeups`).
Hints of other streams, however many, cost it nothing.

A follower holds no queue: it sees the latest value with a version number, so a slow client skips
intermediate values and catches up to the latest one (a view is state, not history), and memory is one value
per owner, not one per client.

The reader registers its watch before its first read, so a change landing between a read and the wait still
wakes it. A reader ends when its last follower leaves; one that fails (the database is gone) ends its
followers with a "reconnect" error, and the next follower starts a new one.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable, Hashable, Iterator
from typing import Any

import trio

from openmaic.errors import DatabaseUnavailable, OpenMaicError, ServiceUnavailable
from openmaic.events.wakeups import Wakeups
from openmaic.feeds.tasks import TaskHost

__all__ = ["Follower", "OwnerFeeds"]

log = logging.getLogger("openmaic.feeds")


class _Reader:
    def __init__(self, key: Hashable, hint: str, read: Callable[[], Awaitable[Any]]) -> None:
        self.key = key
        self.hint = hint
        self.read = read
        self.value: Any = None
        self.version = 0
        """0 until the first read; one more for each read that found a different value."""
        self.changed = trio.Event()
        self.error: OpenMaicError | None = None
        self.followers = 0
        self.scope = trio.CancelScope()
        self.reads = 0

    def publish(self) -> None:
        self.changed.set()
        self.changed = trio.Event()


class Follower:
    """One client's view of its owner's reader."""

    def __init__(self, reader: _Reader) -> None:
        self._reader = reader
        self.version = 0
        """The version this follower last took; :meth:`next` waits for a later one."""

    async def next(self, timeout: float) -> Any:
        """The reader's value once it is newer than what this follower last took (at once if it already is);
        ``None`` after ``timeout`` seconds without a change. Raises the reader's error if it ended."""
        r = self._reader
        with trio.move_on_after(timeout):
            while r.version <= self.version and r.error is None:
                await r.changed.wait()
        if r.error is not None:
            raise r.error
        if r.version <= self.version:
            return None
        self.version = r.version
        return r.value


class OwnerFeeds:
    """The owner feeds of one API process. :meth:`run` must be running (it owns the readers' tasks)."""

    def __init__(self, wakeups: Wakeups, poll_s: float) -> None:
        self._wakeups = wakeups
        self._poll_s = poll_s
        self._readers: dict[Hashable, _Reader] = {}
        self._tasks = TaskHost()

    @property
    def active(self) -> int:
        """Views with a running reader."""
        return len(self._readers)

    def reads(self, key: Hashable) -> int:
        """Reads the running reader of ``key`` has made (0 when none runs): for tests and diagnostics."""
        r = self._readers.get(key)
        return r.reads if r is not None else 0

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Run the readers until cancelled; their followers then get a "reconnect" error. Each app served on
        these services runs this once; new readers start under the latest run."""
        await self._tasks.run(task_status=task_status)

    @contextlib.contextmanager
    def follow(self, key: Hashable, hint: str, read: Callable[[], Awaitable[Any]]) -> Iterator[Follower]:
        """Follow the view ``key`` for the block's duration: its reader calls ``read()`` now and after every
        ``hint`` (or poll). The first follower of a key starts its reader, with its ``read``; later ones share
        it (so ``read`` must depend on the key only)."""
        reader = self._readers.get(key)
        if reader is None:
            new = _Reader(key, hint, read)
            self._tasks.start_soon(self._run, new)  # first: it refuses when no app runs the feeds
            reader = self._readers[key] = new
        reader.followers += 1
        try:
            yield Follower(reader)
        finally:
            reader.followers -= 1
            # No await from here to the removal: a follower arriving next either found this reader (and we are
            # not its last) or finds none and starts a new one.
            if reader.followers == 0 and self._readers.get(key) is reader:
                del self._readers[key]
                reader.scope.cancel()  # nobody reads its value any more

    async def _run(self, reader: _Reader) -> None:
        ending: OpenMaicError = ServiceUnavailable("the server is stopping; reconnect")
        try:
            with reader.scope, self._wakeups.watch(reader.hint) as watch:
                # Watching before the first read: a change between a read and the wait still wakes us.
                while True:
                    value = await reader.read()
                    reader.reads += 1
                    if reader.version == 0 or value != reader.value:
                        reader.value = value
                        reader.version += 1
                        reader.publish()
                    await watch.wait(self._poll_s)  # a hint, or the poll backstop: read either way
        except Exception as exc:  # a failed reader ends its followers (they reconnect), never the server
            if isinstance(exc, DatabaseUnavailable) or isinstance(exc.__cause__, DatabaseUnavailable):
                log.warning("owner feed %r stopped: %s", reader.key, exc)  # expected while the database restarts
            else:
                log.exception("owner feed %r failed", reader.key)
            ending = ServiceUnavailable("reading your live list failed; reconnect")
            ending.__cause__ = exc
        finally:
            if self._readers.get(reader.key) is reader:
                del self._readers[reader.key]
            if reader.followers:
                # Ended under its followers (a failure, or the server stopping): wake them with the reason.
                reader.error = ending
                reader.publish()
