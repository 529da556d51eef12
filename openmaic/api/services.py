"""What the HTTP layer needs from the rest of openmaic: the store, the log, wake-ups, config, and command handles.

The API only serves. It never starts durable work itself: commands go to the control plane (``runs``: a
:class:`~openmaic.runs.service.RunService`, ``sessions``: a :class:`~openmaic.workbench.service.WorkbenchSessions`),
which appends events; workers and projectors, running elsewhere, react to them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from openmaic.actors.commands import CommandResult
from openmaic.feeds.live import LiveFeeds
from openmaic.feeds.owners import OwnerFeeds
from openmaic.config import Config
from openmaic.events.log import EventLog
from openmaic.events.wakeups import Wakeups
from openmaic.extraction.pdf import Extractor
from openmaic.store.database import Database

__all__ = ["ApiServices", "CommandResult", "Courses", "Delivery", "Runs", "Sessions"]

Delivery = Literal["steer", "queued"]
"""How a follow-up message reaches a running session: at the next turn boundary (``steer``) or after the
current turn settles (``queued``)."""


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
    reports the listener. A handle left as ``None`` makes the routes that need it answer 503. ``feeds`` and
    ``owner_feeds`` are made here; :func:`~openmaic.api.server.serve_api` runs them beside hypercorn.
    """

    db: Database
    log: EventLog
    wakeups: Wakeups
    config: Config
    runs: Runs | None = None
    sessions: Sessions | None = None
    courses: Courses | None = None
    metric_samplers: list[Callable[[], Awaitable[None]]] = field(default_factory=list)
    """Run before each ``/metrics`` answer, to set gauges that are read from the database (projection lag)."""
    models: Any = None
    """The process's model router (:class:`~openmaic.models.provider.ModelRouter`): what the classroom's own model
    calls go through (a short answer's grade, an agent's reply); None: those routes answer 503."""
    extractor: Extractor | None = None
    """The process's budget for reading uploaded documents (shared with its workers); made here when None."""
    feeds: LiveFeeds = field(init=False)
    owner_feeds: OwnerFeeds = field(init=False)

    def __post_init__(self) -> None:
        self.feeds = LiveFeeds(self.log, self.wakeups, self.config.runtime.wake_poll_s)
        self.owner_feeds = OwnerFeeds(self.wakeups, self.config.runtime.wake_poll_s)
        if self.extractor is None:
            self.extractor = Extractor(self.config.limits.extraction)
