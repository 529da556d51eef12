"""A lane's element in flight is aborted as soon as its run is asked to stop (discarded, its course deleted,
cancelled): a video's wait or a picture's call must not go on for minutes for a course nobody will see.

The run's stop command hints the run's cancel watcher (``~cancel:<run>``); this waits on the same hint (and polls,
as every waiter does) and reads the run's log for the request.
"""

from __future__ import annotations

from typing import Any

import trio

from openmaic import errors
from openmaic.events.wakeups import cancel_hint
from openmaic.store.queries import Q

DEFAULT_POLL_S = 5.0


async def until_run_stops(services: Any, run_id: str) -> None:
    """Return once the run ``run_id`` has been asked to stop (never, without wake-ups to wait on)."""
    wakeups = getattr(services, "wakeups", None)
    db = services.log.db
    config = getattr(services, "config", None)
    poll = float(getattr(getattr(config, "runtime", None), "wake_poll_s", DEFAULT_POLL_S))
    if wakeups is None:
        await trio.sleep_forever()
    # Registered before the first read, so a request landing in between still wakes us.
    with wakeups.watch(cancel_hint(run_id)) as w:
        while True:
            try:
                if await db.fetchval(Q.cancel_requested_after, run_id, 0):
                    return
            except (errors.DatabaseUnavailable, errors.DatabaseError):
                pass  # the element goes on; its own commit meets the same trouble
            await w.wait(poll)

