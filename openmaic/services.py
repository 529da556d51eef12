"""The composition root: what every role of a process shares (config, database, log, wake-ups, models)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import trio

from openmaic.config import Config
from openmaic.events.log import EventLog
from openmaic.events.wakeups import CHANNEL, Wakeups
from openmaic.extraction.pdf import Extractor
from openmaic.media.slots import MediaRouter, open_media_router
from openmaic.modelconfig.secret_box import InstanceKey, instance_key
from openmaic.models.provider import ModelRouter, open_model_router, settings_reader
from openmaic.store.database import Database, lease_bounded_settings, open_database
from openmaic.store.replica import open_replica


@dataclass
class Services:
    """Handed to roles, and to step handlers as ``ctx.services``."""

    config: Config
    db: Database
    log: EventLog
    wakeups: Wakeups
    models: ModelRouter
    media: MediaRouter | None = None
    """The media slots (image, video, tts, webSearch); None: all off."""
    stopping: trio.Event = field(default_factory=trio.Event)
    """Set on the first SIGTERM/SIGINT: every role winds down gracefully (the worker releases its leases)."""
    instance_key: InstanceKey | None = None
    """Seals and opens the keys owners save (``OPENMAIC_SECRET_KEY`` or the instance secret file)."""
    extractor: Extractor = field(init=False)
    """Reads uploaded documents in child processes, a bounded number at once for the whole process."""

    def __post_init__(self) -> None:
        self.extractor = Extractor(self.config.limits.extraction)


@contextlib.asynccontextmanager
async def open_services(config: Config, url: str, *, pool_size: int = 20) -> AsyncIterator[Services]:
    # Read (or created) before anything serves: a damaged secret file stops the start with what to do.
    key = instance_key(config.secret_key, config.server.data_dir)
    database = config.database
    # The replica (DATABASE_REPLICA_URL) takes catch-up reads only: the log hands them to it (store.replica).
    async with open_database(url, max_size=pool_size, listen=[CHANNEL],
                             server_settings=lease_bounded_settings(config.runtime.lease_ttl_s)) as db, \
            open_replica(database.replica_url, wait_s=database.replica_wait_ms / 1000,
                         pool_size=database.replica_pool_size) as replica:
        wakeups = Wakeups()
        settings = settings_reader(config, db, key)  # owners' own Models page settings route chat and media
        async with open_model_router(config, settings=settings) as models, \
                open_media_router(config, settings=settings) as media, trio.open_nursery() as nursery:
            await nursery.start(wakeups.run, db)
            yield Services(config=config, db=db, log=EventLog(db, wakeups, replica=replica), wakeups=wakeups,
                           models=models, media=media, instance_key=key)
            nursery.cancel_scope.cancel()
