"""The provider interface, the factory for configured providers, and the slot router."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any, Protocol, TypeVar

import httpx
import trio

from openmaic.errors import ConfigError
from openmaic.models.errors import MissingApiKey, MissingModel
from openmaic.models.retry import Sleep
from openmaic.models.types import Message, ToolSpec, TurnResult

T = TypeVar("T")


class Provider(Protocol):
    """A model provider. Every method may raise ``ProviderError`` (after its own retries)."""

    name: str

    async def stream_turn(
        self,
        model: str,
        messages: list[Message],
        tools: list[ToolSpec],
        *,
        on_delta: Callable[[str], None],
        on_retry: Callable[[], None] | None = None,
    ) -> TurnResult:
        """Run one model turn with ``tools`` available, streaming its text to ``on_delta``.

        The result's ``tool_calls`` hold decoded but unvalidated arguments. ``on_retry`` is called when a
        failed attempt is about to be repeated: text already passed to ``on_delta`` should be discarded.
        """
        ...

    async def complete(
        self,
        model: str,
        messages: list[Message],
        output_type: type[T],
        *,
        on_delta: Callable[[str], None] | None = None,
        on_retry: Callable[[], None] | None = None,
    ) -> T:
        """A structured output of ``output_type`` (a msgspec Struct), validated with ``msgspec.convert``.

        The JSON text streams to ``on_delta`` as it is generated. A reply that does not validate is asked for
        again (twice at most, showing the model its error); then ``OutputInvalid`` names the type and the
        failing path. ``on_retry`` as for ``stream_turn`` (also called before each new attempt at validity).
        """
        ...


def build_provider(
    name: str,
    cfg: Any,
    *,
    http: httpx.AsyncClient | None = None,
    sleep: Sleep | None = None,
    rng: random.Random | None = None,
) -> Provider:
    """The provider configured as ``name`` by ``cfg`` (a ``ProviderConfig``).

    ``http`` is a shared client its owner closes (without one each request opens its own). ``sleep`` replaces
    ``trio.sleep`` for retry backoff (tests pass a recorder); ``rng`` seeds the jitter.
    """
    kind = cfg.kind
    if kind == "openai":
        from openmaic.models.openai import OpenAIProvider

        return OpenAIProvider(name, cfg, http=http, sleep=sleep, rng=rng)
    if kind == "anthropic":
        from openmaic.models.anthropic import AnthropicProvider

        return AnthropicProvider(name, cfg, http=http, sleep=sleep, rng=rng)
    if kind == "demo":
        from openmaic.models.demo import DemoProvider

        return DemoProvider(name, latency_ms=int(getattr(cfg, "latency_ms", 0) or 0))
    raise ConfigError(f"provider {name!r} has an unknown kind {kind!r} (expected openai, anthropic or demo)")


class ModelRouter:
    """Slot → ``(provider, model)`` from the configuration, building each provider once."""

    def __init__(
        self,
        config: Any,
        *,
        http: httpx.AsyncClient | None = None,
        sleep: Sleep | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self._config = config
        self._http = http
        self._sleep = sleep
        self._rng = rng
        self._providers: dict[str, Provider] = {}

    def provider(self, name: str) -> Provider:
        """The provider configured as ``name``."""
        cached = self._providers.get(name)
        if cached is not None:
            return cached
        cfg = self._config.providers.get(name)
        if cfg is None:
            raise ConfigError(f"no provider named {name!r} is configured", provider=name)
        built = self._providers[name] = build_provider(name, cfg, http=self._http, sleep=self._sleep, rng=self._rng)
        return built

    def for_slot(self, slot: str) -> tuple[Provider, str]:
        """``(provider, model)`` for a slot such as ``course.outline`` (routing and inheritance by the config)."""
        route = self._config.route(slot)
        return self.provider(route.provider), route.model


_KEY_HEADERS = frozenset({"authorization", "x-api-key", "api-key"})
"""Headers that carry a credential in place of ``api_key`` (a proxy's own scheme, Azure's ``api-key``)."""


def check_slot(config: Any, slot: str) -> None:
    """Whether ``slot`` can run now: returns, or raises :class:`MissingModel` (no model is assigned to it) or
    :class:`MissingApiKey` (its provider needs a key and has none).

    This is what a request checks before it starts work that needs the slot (a run needs ``course.outline``), so
    that a misconfiguration is refused at once instead of pausing the run later. A provider needs a key when it is
    Anthropic's API, or OpenAI's own endpoint; an OpenAI-compatible server elsewhere (Ollama, vLLM) may need none.
    """
    try:
        route = config.route(slot)
    except (ConfigError, ValueError) as exc:
        raise MissingModel(f"no model is assigned to {slot}: set slots.{slot} (or slots.llm) in openmaic.yml",
                           slot=slot) from exc
    provider = config.providers.get(route.provider)
    if provider is None or not route.model:
        raise MissingModel(f"{slot} is routed to {route}, which is not a configured model", slot=slot)
    if provider.kind == "demo" or provider.api_key is not None:
        return
    if any(name.lower() in _KEY_HEADERS for name in provider.headers):
        return
    default = (provider.base_url or "").rstrip("/") in ("", "https://api.openai.com/v1")
    if provider.kind == "anthropic" or (provider.kind == "openai" and default):
        raise MissingApiKey(
            f"the provider {route.provider!r} of {slot} needs an API key: set providers.{route.provider}.api_key "
            "(or api_key_file) in openmaic.yml", slot=slot, provider=route.provider)


@asynccontextmanager
async def open_model_router(config: Any, *, sleep: Sleep | None = None) -> AsyncIterator[ModelRouter]:
    """A ``ModelRouter`` whose providers share one pooled HTTP client, closed on exit."""
    client = httpx.AsyncClient(limits=httpx.Limits(max_connections=100, max_keepalive_connections=20))
    try:
        yield ModelRouter(config, http=client, sleep=sleep)
    finally:
        # Closing must finish even when the owner is being cancelled, or sockets leak.
        with trio.CancelScope(shield=True), trio.move_on_after(5):
            await client.aclose()
