"""The media slot roots (``image``, ``video``, ``tts``, ``webSearch``): which driver serves each, or none (off).

A media slot resolves like every slot, through the layered model configuration
(:func:`openmaic.models.provider.resolution`: the deployment's ``openmaic.yml``, then the owner's own Models
page settings, then the defaults, which with no configuration at all are the offline ``demo`` for every root).
``MediaRouter.for_owner(owner, capability)`` answers ``(driver, model)``, or None when the slot is off (a
``null`` on the way) or unassigned: the pipeline then records that the element is disabled, or that the step
did nothing. A slot that is assigned but cannot be used (its preset's protocol has no driver here, its provider
needs a key it lacks, the reference does not resolve) raises ``MissingModel`` / ``MissingApiKey`` — the same
answers :func:`openmaic.models.provider.check_slot` gives a chat slot — which the lane records as a failed
element with that message, and research as a search that failed.

``capabilities()`` answers for the deployment (it is asked without an owner, before anyone signs in).
``overrides`` pin a slot to a route or to None (tests, and a benchmark's own drivers).

Drivers are built once per endpoint (provider, protocol, base URL, key, transport settings) and share one
pooled HTTP client, so an owner's own key gets a driver of its own and never serves another owner.
"""

from __future__ import annotations

import random
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Any

import httpx
import trio

from openmaic.config import Config
from openmaic.modelconfig.layer import ModelLayer
from openmaic.models import provider as slots
from openmaic.models.errors import ModelNotReady
from openmaic.models.guard import owner_client
from openmaic.models.media import CAPABILITIES, Capability, build_media_provider
from openmaic.models.retry import Sleep

__all__ = ["MediaRoute", "MediaRouter", "open_media_router"]

MediaRoute = tuple[str, Any, str]
"""``(provider name, provider settings, model)``."""

_DEMO_MODELS = {"image": "image", "video": "video", "tts": "voice", "webSearch": "search"}
"""The model a media slot assigned to a provider alone (``image: demo``) is called with."""


def resolve_route(config: Config, capability: Capability, workspace: ModelLayer | None = None) -> MediaRoute | None:
    """The slot's route through ``config``'s layers (and an owner's ``workspace``): None when it is off or
    unassigned; ``MissingModel`` / ``MissingApiKey`` when it is assigned but cannot be used."""
    found = slots.resolution(config, capability, workspace)
    if found.status != "assigned":
        return None
    slots.check_slot(config, capability, workspace)  # no driver for its protocol, or no key: say which
    target = found.target
    assert target is not None
    cfg = slots.endpoint(target, allow_local=config.server.allow_local_endpoints)
    return target.provider_id, cfg, target.model or _DEMO_MODELS[capability]


class MediaRouter:
    """Media slot → ``(driver, model)``; see the module docstring."""

    def __init__(
        self,
        config: Any,
        *,
        http: httpx.AsyncClient | None = None,
        sleep: Sleep | None = None,
        rng: random.Random | None = None,
        overrides: Mapping[str, MediaRoute | None] | None = None,
        settings: Callable[[str], Awaitable[ModelLayer | None]] | None = None,
        owner_http: httpx.AsyncClient | None = None,
    ) -> None:
        self._config = config
        self._http = http
        self._owner_http = owner_http
        self._sleep = sleep
        self._rng = rng
        self._settings = settings
        self._overrides = dict(overrides or {})
        self._drivers: dict[tuple[Any, ...], Any] = {}

    def pin(self, capability: Capability, driver: Any, model: str) -> None:
        """Serve ``capability`` with a ready ``driver`` (a benchmark's or an embedding's own)."""
        name = f"pinned:{capability}"
        self._overrides[capability] = (name, None, model)
        self._drivers[(name, capability)] = driver

    def resolve(self, capability: Capability, workspace: ModelLayer | None = None) -> MediaRoute | None:
        """The slot's route, or None when it is off."""
        if capability in self._overrides:
            return self._overrides[capability]
        return resolve_route(self._config, capability, workspace)

    def available(self, capability: Capability) -> bool:
        """Whether the deployment's slot resolves to a driver this server has (what ``capabilities`` reports)."""
        try:
            return self.route(capability) is not None
        except ModelNotReady:
            return False

    def capabilities(self) -> dict[str, bool]:
        return {c: self.available(c) for c in CAPABILITIES}

    async def for_owner(self, owner: str, capability: Capability) -> tuple[Any, str] | None:
        """:meth:`route` through ``owner``'s own model settings, read now (a change applies from the next call)."""
        return self.route(capability, await self._workspace(owner))

    async def names_for_owner(self, owner: str, capability: Capability) -> frozenset[str]:
        """The names a client may give the provider serving ``owner``'s slot: its provider id and its preset's id
        (OpenMAIC's ``voice.providerId`` is one of them); none when the slot is off or unassigned."""
        if capability in self._overrides:
            route = self._overrides[capability]
            return frozenset() if route is None else frozenset({route[0]})
        found = slots.resolution(self._config, capability, await self._workspace(owner))
        if found.status != "assigned" or found.target is None:
            return frozenset()
        return frozenset({found.target.provider_id, found.target.preset_id})

    async def _workspace(self, owner: str) -> ModelLayer | None:
        return None if self._settings is None or not owner else await self._settings(owner)

    def route(self, capability: Capability, workspace: ModelLayer | None = None) -> tuple[Any, str] | None:
        """``(driver, model)`` for the slot, or None when it is off; ``ModelNotReady`` when it cannot be used."""
        found = self.resolve(capability, workspace)
        if found is None:
            return None
        name, cfg, model = found
        key: tuple[Any, ...] = (name, capability)
        if cfg is not None:
            key = (name, capability, cfg.kind, cfg.base_url, cfg.key(), cfg.timeout_s, cfg.max_retries,
                   cfg.latency_ms, cfg.proxy, getattr(cfg, "owner_endpoint", False), getattr(cfg, "allow_local", False))
        driver = self._drivers.get(key)
        if driver is None:
            # A provider behind its own proxy cannot share the pooled client: its transport opens its own. An
            # owner's provider goes through the guarded client (the transport refuses any other).
            http = None if getattr(cfg, "proxy", None) else \
                self._owner_http if getattr(cfg, "owner_endpoint", False) and not cfg.allow_local else self._http
            driver = self._drivers[key] = build_media_provider(
                name, cfg, capability, http=http, sleep=self._sleep, rng=self._rng
            )
        return driver, model


@asynccontextmanager
async def open_media_router(config: Any, **kw: Any) -> AsyncIterator[MediaRouter]:
    """A ``MediaRouter`` whose drivers share one pooled HTTP client (owners' providers one guarded client), closed
    on exit."""
    client = httpx.AsyncClient(limits=httpx.Limits(max_connections=50, max_keepalive_connections=10))
    owners = owner_client()
    try:
        yield MediaRouter(config, http=client, owner_http=owners, **kw)
    finally:
        # Closing must finish even when the owner is being cancelled, or sockets leak.
        with trio.CancelScope(shield=True), trio.move_on_after(5):
            await client.aclose()
            await owners.aclose()
