"""Where a feed's tasks run: the nursery of the app serving the requests that started them.

A feed is started by a request handler but outlives it (its later followers share it), so its task cannot
belong to the handler. Each app served on a set of services runs :meth:`TaskHost.run` once beside hypercorn
(:func:`openmaic.api.server.serve_api`); feeds start under the latest such run and end with it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import trio

from openmaic.errors import ServiceUnavailable

__all__ = ["TaskHost"]


class TaskHost:
    def __init__(self) -> None:
        self._nurseries: list[trio.Nursery] = []

    async def run(
        self, *background: Callable[[], Awaitable[Any]], task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Host tasks (and run ``background``) until cancelled, which cancels every task started here."""
        async with trio.open_nursery() as nursery:
            for fn in background:
                nursery.start_soon(fn)
            self._nurseries.append(nursery)
            try:
                task_status.started()
                await trio.sleep_forever()
            finally:
                self._nurseries.remove(nursery)

    def start_soon(self, fn: Callable[..., Awaitable[Any]], *args: Any) -> None:
        """Start ``fn(*args)`` under the latest run; 503 when none is running in this process."""
        if not self._nurseries:
            raise ServiceUnavailable("live feeds are not running in this process")
        self._nurseries[-1].start_soon(fn, *args)
