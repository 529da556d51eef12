"""Background tasks of a database: services that serve every user of the database rather than one caller."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import trio


class Background:
    """The part of :class:`~openmaic.store.database.Database` that runs its background tasks (no driver here):
    :func:`~openmaic.store.database.open_database` sets ``_nursery`` for the block's lifetime."""

    _nursery: trio.Nursery | None = None

    def start_soon(self, fn: Callable[..., Any], *args: Any, name: str | None = None) -> bool:
        """Run ``fn(*args)`` as a background task of this database; False when that is not possible.

        The task belongs to :func:`open_database`'s nursery, beside the listener and the NOTIFY sender: it is
        cancelled when the database closes and never outlives the pool it uses. This is for services that serve
        every user of the database rather than one caller (the event log's group commit): whoever happens to
        need one first cannot own it, since its work outlives that caller's request. An exception escaping
        ``fn`` crashes the database's block, as a failing listener would, so ``fn`` handles its own errors.
        Returns False once the database is closing (or was not opened by :func:`open_database`); the caller
        then does the work itself.
        """
        nursery = self._nursery
        if nursery is None:
            return False
        try:
            nursery.start_soon(fn, *args, name=name)
        except RuntimeError:  # the nursery is closed to new tasks: the database is shutting down
            return False
        return True
