"""The composition root: what every role of a process shares (config, database, log, wake-ups, models)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import trio

from openmaic.config import Config
from openmaic.events.log import EventLog
from openmaic.events.wakeups import CHANNEL, Wakeups
from openmaic.models.provider import ModelRouter, open_model_router
from openmaic.store.database import Database, open_database


@dataclass
class Services:
    """Handed to roles, and to step handlers as ``ctx.services``."""

    config: Config
    db: Database
    log: EventLog
    wakeups: Wakeups
    models: ModelRouter
    stopping: trio.Event = field(default_factory=trio.Event)
    """Set on the first SIGTERM/SIGINT: every role winds down gracefully (the worker releases its leases)."""


@contextlib.asynccontextmanager
async def open_services(config: Config, url: str, *, pool_size: int = 20) -> AsyncIterator[Services]:
    async with open_database(url, max_size=pool_size, listen=[CHANNEL]) as db:
        wakeups = Wakeups()
        async with open_model_router(config) as models, trio.open_nursery() as nursery:
            await nursery.start(wakeups.run, db)
            yield Services(config=config, db=db, log=EventLog(db, wakeups), wakeups=wakeups, models=models)
            nursery.cancel_scope.cancel()
