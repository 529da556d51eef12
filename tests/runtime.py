"""Helpers shared by runtime tests: a worker on the test kind, creating test streams, waiting on conditions."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import msgspec
import trio

from openmaic.actors.commands import create_session
from openmaic.actors.worker import Worker
from openmaic.config import Config, RuntimeConfig, default_config
from openmaic.events.log import EventLog
from openmaic.events.wakeups import Wakeups
from openmaic.media.slots import open_media_router
from openmaic.models.provider import open_model_router
from openmaic.services import Services
from openmaic.store.database import open_database
from tests.kinds import TestKind

FAST = RuntimeConfig(lease_ttl_s=2.0, heartbeat_s=0.3, claim_poll_s=0.2, wake_poll_s=0.5, shutdown_grace_s=2.0,
                     max_actors_per_owner=32)
"""Short runtime settings; the streams of most tests share one owner, so the per-owner cap is max_actors (the
tests of fair sharing set their own)."""


def settings(**kw: Any) -> RuntimeConfig:
    return msgspec.structs.replace(FAST, **kw)


@contextlib.asynccontextmanager
async def open_worker(
    url: str,
    rt: RuntimeConfig = FAST,
    *,
    kinds: dict[str, Any] | None = None,
    config: Config | None = None,
    listener_ping_s: float = 1.0,
    model_settings: Any = None,
    media: dict[str, Any] | None = None,
    **kw: Any,
) -> AsyncIterator[Worker]:
    """A worker (test kind unless ``kinds`` says otherwise) with its own pool, wake-ups and model router, wired
    like `openmaic serve` wires it (``ctx.services`` is a real :class:`~openmaic.services.Services`); on exit it
    shuts down gracefully. ``media`` pins media slots (``{"image": None}`` turns the image slot off; see
    :class:`~openmaic.media.slots.MediaRouter`)."""
    config = config or default_config()
    async with open_database(url, listen=["openmaic_events"], listener_ping_s=listener_ping_s,
                             max_size=20) as db, open_model_router(config, settings=model_settings and model_settings(db)) \
            as models, open_media_router(config, overrides=media, settings=model_settings and model_settings(db)) \
            as media_router:
        wakeups = Wakeups()
        log = EventLog(db, wakeups)
        services = Services(config=config, db=db, log=log, wakeups=wakeups, models=models, media=media_router)
        worker = Worker(log, wakeups, kinds or {"test": TestKind()}, rt, services=services, **kw)
        stopped = trio.Event()

        async def run_worker(*, task_status: trio.TaskStatus[None]) -> None:
            try:
                await worker.run(task_status=task_status)
            finally:
                stopped.set()

        async with trio.open_nursery() as nursery:
            await nursery.start(wakeups.run, db)
            await nursery.start(run_worker)
            try:
                yield worker
            finally:
                worker.shutdown()
                # Until the graceful shutdown has run its course (a claim in flight answered, every actor drained
                # and released), as `openmaic serve` waits for it; cancelling as soon as no actor is left would cut
                # off a claim still in flight.
                with trio.move_on_after(rt.shutdown_grace_s + 10):
                    await stopped.wait()
                nursery.cancel_scope.cancel()


async def new_stream(log: EventLog, sid: str, owner: str = "o", **inp: Any) -> None:
    await create_session(log, stream_id=sid, kind="test", owner_id=owner, command_id=f"create-{sid}", input=inp)


async def wait_for(predicate: Callable[[], Awaitable[bool]], timeout: float = 20.0, interval: float = 0.02) -> None:
    with trio.fail_after(timeout):
        while not await predicate():
            await trio.sleep(interval)


async def ended(log: EventLog, sid: str) -> str | None:
    for e in reversed(await log.read_stream(sid, limit=100_000)):
        if e.type == "session.ended":
            return log.decode(e).status
    return None


async def types_of(log: EventLog, sid: str) -> list[str]:
    return [e.type for e in await log.read_stream(sid, limit=100_000)]
