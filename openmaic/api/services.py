"""What the HTTP layer needs from the rest of openmaic: the store, the log, wake-ups, config, and command handles.

The API only serves. It never starts durable work itself: commands go to :class:`Commands` (implemented by the
control plane), whose implementations append events; workers and projectors, running elsewhere, react to them.
The ``runs`` / ``sessions`` / ``courses`` handles are used by the route modules of those resources; each such
module declares the methods it calls on its handle.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from openmaic.actors.commands import CommandResult
from openmaic.api.live_feeds import LiveFeeds
from openmaic.config import Config
from openmaic.events.log import EventLog
from openmaic.events.wakeups import Wakeups
from openmaic.extraction.pdf import Extractor
from openmaic.store.database import Database

__all__ = ["ApiServices", "CommandResult", "Commands", "Courses", "Delivery", "Runs", "Sessions"]

Delivery = Literal["steer", "queued"]
"""How a follow-up message reaches a running session: at the next turn boundary (``steer``) or after the
current turn settles (``queued``)."""


class Commands(Protocol):
    """Control-plane commands on a stream, all idempotent by ``command_id``.

    Each checks that ``owner`` owns the stream first and raises :class:`~openmaic.errors.StreamNotFound` when it
    does not (identical to a missing stream). Other failures are :class:`~openmaic.errors.OpenMaicError`
    subclasses carrying their own status and code (a terminal session is a 409, a stale outline revision a 409,
    a reused ``command_id`` for another command a 409 ``command_conflict``).
    """

    async def post_message(
        self, owner: str, stream_id: str, command_id: str, text: str, delivery: Delivery
    ) -> CommandResult:
        """Append ``session.message_posted {text, delivery}``."""
        ...

    async def cancel(self, owner: str, stream_id: str, command_id: str) -> CommandResult:
        """Append ``session.cancel_requested``."""
        ...

    async def confirm_outline(
        self, owner: str, stream_id: str, command_id: str, outline_revision: int, outline: Any | None
    ) -> CommandResult:
        """Confirm the run's outline at ``outline_revision`` (an edited ``outline`` becomes revision + 1)."""
        ...

    async def retry(self, owner: str, stream_id: str, command_id: str) -> CommandResult:
        """Re-run the step a paused run failed on."""
        ...


class Runs(Protocol):
    """Generation runs (create, snapshot). The runs route module declares the methods it calls."""


class Sessions(Protocol):
    """Workbench sessions (create, snapshot). The sessions route module declares the methods it calls."""


class Courses(Protocol):
    """Courses, materials and the library. Their route modules declare the methods they call."""


@dataclass
class ApiServices:
    """Everything a request handler may use. Built once by whoever starts the API and passed to ``create_app``.

    ``db`` must have been opened with ``listen=[openmaic.events.wakeups.CHANNEL]`` and ``wakeups.run(db)`` must be
    running in the same process: live streams wake on those hints (and poll as a backstop), and ``/readyz``
    reports the listener. A handle left as ``None`` makes the routes that need it answer 503. ``feeds`` is made
    here; :func:`~openmaic.api.server.serve_api` runs it beside hypercorn.
    """

    db: Database
    log: EventLog
    wakeups: Wakeups
    config: Config
    commands: Commands | None = None
    runs: Runs | None = None
    sessions: Sessions | None = None
    courses: Courses | None = None
    metric_samplers: list[Callable[[], Awaitable[None]]] = field(default_factory=list)
    """Run before each ``/metrics`` answer, to set gauges that are read from the database (projection lag)."""
    extractor: Extractor | None = None
    """The process's budget for reading uploaded documents (shared with its workers); made here when None."""
    feeds: LiveFeeds = field(init=False)

    def __post_init__(self) -> None:
        self.feeds = LiveFeeds(self.log, self.wakeups, self.config.runtime.wake_poll_s)
        if self.extractor is None:
            self.extractor = Extractor(self.config.limits.extraction)
