"""One read of the global log for the projections of a process that ask for the same page at once.

Every append hints every live projection of the process (they all watch the whole log), so they wake together and,
being caught up to the same cursor, would each read the same page: one statement, one horizon and one decoding of
its rows per projection. Here the first of them to ask yields once before reading, so the others woken by the same
hint join its read and share its page.

Safe: a projection joins only a read that has not been sent yet, so the page it gets was read after it asked and
holds everything a read of its own would have (a page is a prefix of the log after the cursor in commit-safe
order, ending at the horizon when the read was made). A read that fails or is cancelled is shared by no one: each
joiner then reads for itself and meets its own error. Each caller gets a list of its own, of immutable events.
"""

from __future__ import annotations

from typing import Any

import trio

from openmaic.events.log import Cursor, EventLog, RecordedEvent


class _Read:
    __slots__ = ("done", "page")

    def __init__(self) -> None:
        self.done = trio.Event()
        self.page: list[RecordedEvent] | None = None


class SharedReads:
    """``read_all`` of one :class:`EventLog`, shared by callers asking for the same ``(cursor, limit)`` together."""

    def __init__(self, log_: EventLog) -> None:
        self.log = log_
        self._open: dict[tuple[Cursor, int], _Read] = {}
        self.reads = 0
        self.shared = 0

    async def read_all(self, after: Cursor, limit: int) -> list[RecordedEvent]:
        key = (after, limit)
        joined = self._open.get(key)
        if joined is not None:
            await joined.done.wait()
            if joined.page is not None:
                self.shared += 1
                return list(joined.page)
            return await self.log.read_all(after, limit)
        read = self._open[key] = _Read()
        try:
            try:
                # One scheduling round for the projections woken by the same hint to ask; then the read is closed
                # to joiners before it is sent (a later asker may have been hinted of events it would not see).
                await trio.lowlevel.checkpoint()
            finally:
                del self._open[key]
            self.reads += 1
            read.page = await self.log.read_all(after, limit)
            return list(read.page)
        finally:
            read.done.set()

    def statistics(self) -> dict[str, Any]:
        return {"reads": self.reads, "shared": self.shared}
