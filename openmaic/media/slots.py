"""The media slot roots (``image``, ``video``, ``tts``, ``webSearch``): which driver serves each, or none (off).

``MediaRouter.route(capability)`` answers ``(driver, model)`` or None when the slot is off or unassigned; the
pipeline then records that the element is disabled, or that the step did nothing. A slot is resolved through
the layered model configuration (``openmaic.models.provider.resolution``: the deployment's slots, then the
defaults) when this build has it, else through ``config.route``; a configuration that knows no media slots
serves every media slot from its ``demo`` provider, so the whole pipeline runs with no key and no network. (An
owner's own model settings do not route media yet: the deployment's slots serve every owner.)
``overrides`` pin a slot to a route or to None (tests, and a deployment that turns media off).

Drivers are built once per provider and capability and share one pooled HTTP client.
"""

from __future__ import annotations

import random
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

import httpx
import trio

from openmaic import errors
from openmaic.errors import ConfigError
from openmaic.models.media import CAPABILITIES, Capability, build_media_provider
from openmaic.models.retry import Sleep

__all__ = ["MediaRouter", "MediaRoute", "open_media_router"]

MediaRoute = tuple[str, Any, str]
"""``(provider name, provider settings, model)``."""

_DEMO_MODELS = {"image": "image", "video": "video", "tts": "voice", "webSearch": "search"}


def _layered(config: Any, capability: Capability) -> MediaRoute | None:
    """Through the layered model configuration (``openmaic.yml`` slots, owners' settings, the defaults), when
    this build has it: None when the slot is off or unassigned; ConfigError when it cannot be used."""
    from openmaic.models import provider

    found = provider.resolution(config, capability)  # type: ignore[attr-defined]
    if found.target is None:
        return None
    if found.target.requires_key and found.target.api_key is None:
        raise ConfigError(f"provider {found.target.provider_id!r} of the {capability} slot needs an API key and has "
                          "none", provider=found.target.provider_id, slot=capability)
    cfg = provider.endpoint(found.target)  # type: ignore[attr-defined]
    return found.target.provider_id, cfg, found.target.model or _DEMO_MODELS[capability]


def _configured(config: Any, capability: Capability) -> MediaRoute | None:
    """The configuration's route for ``capability``, None when it is off or unassigned."""
    from openmaic.models import provider

    if hasattr(provider, "resolution") and hasattr(provider, "endpoint"):
        try:
            return _layered(config, capability)
        except errors.ProviderError as exc:  # the assignment does not resolve (an undeclared provider …)
            raise ConfigError(exc.message, slot=capability) from None
    try:
        route = config.route(capability)
    except ValueError:
        # A configuration that knows no media slots: the demo provider, when there is one, serves them all.
        demo = getattr(config, "providers", {}).get("demo")
        if demo is not None and getattr(demo, "kind", None) == "demo":
            return "demo", demo, _DEMO_MODELS[capability]
        return None
    except ConfigError:
        return None  # turned off, or unassigned
    cfg = getattr(config, "providers", {}).get(route.provider)
    if cfg is None:
        return None
    return route.provider, cfg, route.model or _DEMO_MODELS[capability]


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
    ) -> None:
        self._config = config
        self._http = http
        self._sleep = sleep
        self._rng = rng
        self._overrides = dict(overrides or {})
        self._drivers: dict[tuple[str, str], Any] = {}

    def pin(self, capability: Capability, driver: Any, model: str) -> None:
        """Serve ``capability`` with a ready ``driver`` (a benchmark's or an embedding's own)."""
        name = f"pinned:{capability}"
        self._overrides[capability] = (name, None, model)
        self._drivers[(name, capability)] = driver

    def resolve(self, capability: Capability) -> MediaRoute | None:
        """The slot's route, or None when it is off."""
        if capability in self._overrides:
            return self._overrides[capability]
        return _configured(self._config, capability)

    def available(self, capability: Capability) -> bool:
        """Whether the slot resolves to a driver this server has (what ``capabilities`` reports)."""
        try:
            return self.route(capability) is not None
        except ConfigError:
            return False

    def capabilities(self) -> dict[str, bool]:
        return {c: self.available(c) for c in CAPABILITIES}

    def route(self, capability: Capability) -> tuple[Any, str] | None:
        """``(driver, model)`` for the slot, or None when it is off; ConfigError when its provider has no
        driver for it."""
        found = self.resolve(capability)
        if found is None:
            return None
        name, cfg, model = found
        driver = self._drivers.get((name, capability))
        if driver is None:
            driver = self._drivers[(name, capability)] = build_media_provider(
                name, cfg, capability, http=self._http, sleep=self._sleep, rng=self._rng
            )
        return driver, model


@asynccontextmanager
async def open_media_router(config: Any, **kw: Any) -> AsyncIterator[MediaRouter]:
    """A ``MediaRouter`` whose drivers share one pooled HTTP client, closed on exit."""
    client = httpx.AsyncClient(limits=httpx.Limits(max_connections=50, max_keepalive_connections=10))
    try:
        yield MediaRouter(config, http=client, **kw)
    finally:
        # Closing must finish even when the owner is being cancelled, or sockets leak.
        with trio.CancelScope(shield=True), trio.move_on_after(5):
            await client.aclose()
