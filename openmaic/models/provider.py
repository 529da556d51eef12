"""The provider interface, the drivers, the slot router with its fallback, and whether a slot can run.

``ModelRouter.for_slot(slot, workspace=...)`` resolves the slot through the configuration's layers (the
deployment, the owner's own settings, the defaults; :mod:`openmaic.modelconfig.resolve`) and returns a
:class:`RoutedProvider` and the model name. A routed provider calls the slot's primary model and, when that
fails after its own retries and the slot has a ``fallback``, calls the fallback instead: whatever the primary
had streamed is discarded first (``on_retry``), and :meth:`RoutedProvider.fallback_events` gives the
``model.fallback_used`` event the step commits with its result, so the log says which model answered. Every
call to a provider, primary or fallback, is observed in ``openmaic_provider_call_duration_seconds`` under that
provider's own label (:func:`provider_label`), and every fallback in ``openmaic_model_fallbacks_total``.

:func:`check_slot` says whether a slot can run before any work is queued: ``MISSING_MODEL`` (off, unassigned,
or assigned to a preset whose protocol has no driver here) or ``MISSING_API_KEY`` (its provider needs a key and
has none). :func:`check_run_slots` applies it to what a generation run needs.
"""

from __future__ import annotations

import logging
import random
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any, Protocol, TypeVar, cast

import httpx
import trio

from openmaic import metrics
from openmaic.config import Config, ProviderConfig
from openmaic.errors import ConfigError
from openmaic.events.types import Event
from openmaic.modelconfig.layer import ModelLayer
from openmaic.modelconfig.resolve import Resolution, SlotResolutionError, Target, resolve, target_for
from openmaic.modelconfig.slots import CHAT_CONTENT_SLOTS
from openmaic.modelconfig.slots import slot as slot_def
from openmaic.models.errors import MissingApiKey, MissingModel, ModelNotReady, ProviderError
from openmaic.models.events import ModelFallbackUsed
from openmaic.models.guard import owner_client
from openmaic.models.media import MEDIA_DRIVERS
from openmaic.models.retry import Sleep
from openmaic.models.types import Message, ToolSpec, TurnResult

log = logging.getLogger("openmaic.models")

DRIVERS: dict[str, frozenset[str]] = {"chat": frozenset({"openai", "anthropic", "demo"}), **MEDIA_DRIVERS}
"""Per capability, the protocols this server has a driver for (a preset's ``protocol``); the media drivers are
:mod:`openmaic.models.media`'s."""

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


OPERATOR_TIMEOUT_S, OPERATOR_MAX_RETRIES = 60.0, 4
"""A deployment's own providers (``openmaic.yml``, the environment, the built-ins): seconds an attempt may wait
without a byte, and retries, unless its ``options`` say otherwise."""
OWNER_TIMEOUT_S, OWNER_MAX_RETRIES = 30.0, 1
"""A provider an owner added on the Models page: shorter, and whatever its ``options`` say at most
:data:`OPERATOR_TIMEOUT_S` an attempt and one retry more than this. An owner may point a slot at an endpoint that
never answers, and a step waiting on it holds a worker's slot: 60 s an attempt and 4 retries held one for about
15 minutes a run."""


def endpoint(target: Target, *, allow_local: bool = False) -> ProviderConfig:
    """What the driver of ``target``'s protocol is given: its endpoint and transport settings (``options``). A
    provider of an owner's workspace is an ``owner_endpoint`` (checked at connect time unless ``allow_local``:
    ``server.allow_local_endpoints``), with the shorter timeouts above."""
    spec = target.spec
    timeout_s = float(spec.option("timeoutS", OPERATOR_TIMEOUT_S))
    retries = int(spec.option("maxRetries", OPERATOR_MAX_RETRIES))
    if target.provider_source == "workspace":
        timeout_s = min(float(spec.option("timeoutS", OWNER_TIMEOUT_S)), OPERATOR_TIMEOUT_S)
        retries = min(int(spec.option("maxRetries", OWNER_MAX_RETRIES)), OWNER_MAX_RETRIES + 1)
    return ProviderConfig(
        kind=target.protocol, base_url=target.base_url, api_key=target.api_key, timeout_s=timeout_s,
        max_retries=retries, latency_ms=int(spec.option("latencyMs", 0)), proxy=spec.proxy,
        owner_endpoint=target.provider_source == "workspace", allow_local=allow_local,
    )


def _unavailable(resolution: Resolution, capability: str) -> ModelNotReady | None:
    """Why ``resolution`` cannot run, or ``None``."""
    slot = resolution.slot
    if resolution.status == "unassigned":
        return MissingModel(f"no model is assigned to {slot} (nor to a slot it inherits from); assign one in "
                            "openmaic.yml or on the Models page", slot=slot)
    if resolution.status == "disabled":
        where = "" if resolution.resolved_at == slot else f" (through {resolution.resolved_at})"
        return MissingModel(f"{slot} is turned off{where}", slot=slot)
    assert resolution.target is not None
    for target in (resolution.target, resolution.fallback):
        if target is None:
            continue
        if target.protocol not in DRIVERS.get(capability, frozenset()):
            return MissingModel(f"{slot} is assigned to provider {target.provider_id!r} (preset {target.preset_id!r}), "
                                f"which this server cannot call for {capability}", slot=slot)
        if target.requires_key and target.api_key is None:
            where = ("enter it again on the Models page (the saved one cannot be read, or was removed)"
                     if target.provider_source == "workspace" else
                     f"set providers.{target.provider_id}.apiKey in openmaic.yml")
            return MissingApiKey(f"provider {target.provider_id!r} of {slot} needs an API key and has none: {where}",
                                 slot=slot, provider=target.provider_id)
    return None


def resolution(config: Config, slot: str, workspace: ModelLayer | None = None) -> Resolution:
    """``slot`` resolved through ``config``'s layers (and an owner's ``workspace``); ``MissingModel`` when the
    assignment does not resolve (an undeclared provider, a preset without the capability)."""
    try:
        return resolve(slot, config.layers(workspace))
    except SlotResolutionError as e:
        raise MissingModel(f"{slot} cannot be used: {e}", slot=slot) from None


def check_slot(config: Config, slot: str, workspace: ModelLayer | None = None) -> Resolution:
    """The slot's resolution if it can run; raises ``MissingModel`` or ``MissingApiKey`` otherwise."""
    found = resolution(config, slot, workspace)
    problem = _unavailable(found, slot_def(slot).capability)
    if problem is not None:
        raise problem
    return found


def check_run_slots(config: Config, workspace: ModelLayer | None = None, *, agents_auto: bool = True) -> None:
    """Whether a generation run can start: its outline, actions (and, with ``agents_auto``, agents) slots can run,
    and at least one scene content slot can. Raises the first problem (``MissingModel`` / ``MissingApiKey``)."""
    for slot in ("course.outline", "course.actions", *(("course.agents",) if agents_auto else ())):
        check_slot(config, slot, workspace)
    problems: list[ModelNotReady] = []
    for slot in CHAT_CONTENT_SLOTS:
        try:
            check_slot(config, slot, workspace)
            return
        except (MissingModel, MissingApiKey) as e:
            problems.append(e)
    raise problems[0]


class RoutedProvider:
    """A slot's primary provider, and its fallback when the slot has one (see the module docstring).

    One is made per :meth:`ModelRouter.for_slot` call, so its recorded fallback belongs to that call alone.
    """

    def __init__(self, slot: str, primary: Provider, primary_route: str,
                 fallback: tuple[Provider, str, str] | None = None, *,
                 labels: tuple[str, str | None] | None = None) -> None:
        self.slot = slot
        self.primary = primary
        self.primary_route = primary_route
        self.fallback = fallback
        self.name = primary.name
        # How each call is labelled in openmaic_provider_call_duration_seconds (see provider_label).
        self._labels = labels or (primary.name, None if fallback is None else fallback[0].name)
        self._events: list[Event] = []

    def fallback_events(self) -> list[Event]:
        """``model.fallback_used`` when the fallback answered the last call, else nothing."""
        return list(self._events)

    async def _call(self, kind: str, call: Callable[[Provider, str], Awaitable[T]], model: str,
                    on_retry: Callable[[], None] | None) -> T:
        self._events.clear()
        primary_label, fallback_label = self._labels
        try:
            # Each provider's call is observed on its own, so a fallback's latency is not charged to the primary.
            with metrics.timed(metrics.PROVIDER_SECONDS, provider=primary_label, call=kind):
                return await call(self.primary, model)
        except ProviderError as exc:
            if self.fallback is None:
                raise
            provider, fallback_model, route = self.fallback
            log.warning("slot %s: %s failed (%s); trying its fallback %s", self.slot, self.primary_route,
                        exc.message, route)
            if on_retry is not None:
                on_retry()  # what the primary streamed will never be committed
            try:
                with metrics.timed(metrics.PROVIDER_SECONDS, provider=fallback_label or provider.name, call=kind):
                    result = await call(provider, fallback_model)
            except ProviderError as second:
                metrics.MODEL_FALLBACKS.labels(slot=self.slot, outcome="failed").inc()
                raise type(second)(f"{exc.message}; its fallback {route} failed too: {second.message}",
                                   **second.details) from second
            metrics.MODEL_FALLBACKS.labels(slot=self.slot, outcome="answered").inc()
            self._events.append(ModelFallbackUsed(slot=self.slot, failed=self.primary_route, reason=exc.message,
                                                  answered=route))
            return result

    async def stream_turn(self, model: str, messages: list[Message], tools: list[ToolSpec], *,
                          on_delta: Callable[[str], None], on_retry: Callable[[], None] | None = None) -> TurnResult:
        return await self._call(
            "turn", lambda p, m: p.stream_turn(m, messages, tools, on_delta=on_delta, on_retry=on_retry), model,
            on_retry,
        )

    async def complete(self, model: str, messages: list[Message], output_type: type[T], *,
                       on_delta: Callable[[str], None] | None = None,
                       on_retry: Callable[[], None] | None = None) -> T:
        return await self._call(
            "complete", lambda p, m: p.complete(m, messages, output_type, on_delta=on_delta, on_retry=on_retry),
            model, on_retry,
        )


class ModelRouter:
    """Slot → ``(RoutedProvider, model)`` from the configuration, building each driver once per endpoint."""

    def __init__(
        self,
        config: Any,
        *,
        http: httpx.AsyncClient | None = None,
        sleep: Sleep | None = None,
        rng: random.Random | None = None,
        settings: Callable[[str], Awaitable[ModelLayer | None]] | None = None,
        owner_http: httpx.AsyncClient | None = None,
    ) -> None:
        self._config = cast(Config, config)
        self._http = http
        self._owner_http = owner_http
        self._sleep = sleep
        self._rng = rng
        self._settings = settings
        self._drivers: dict[tuple[Any, ...], Provider] = {}

    @property
    def config(self) -> Config:
        return self._config

    async def workspace(self, owner: str) -> ModelLayer | None:
        """The owner's own settings as the calls see them (``None`` without any, or without a settings store)."""
        return None if self._settings is None else await self._settings(owner)

    async def for_owner(self, owner: str, slot: str, *, choice: str | None = None) -> tuple[RoutedProvider, str]:
        """:meth:`for_slot` through ``owner``'s own settings, read now (a change applies from the next call); with
        ``choice`` (a run's model for this slot, :mod:`openmaic.models.choices`) assigned to the slot over them."""
        workspace = await self.workspace(owner)
        if choice:
            from openmaic.models.choices import with_choice

            workspace = with_choice(workspace, slot, choice)
        return self.for_slot(slot, workspace=workspace)

    async def check_run(self, owner: str, *, agents_auto: bool = True) -> None:
        """:func:`check_run_slots` for ``owner``: whether a generation run of theirs can start (raises
        ``MissingModel`` / ``MissingApiKey``)."""
        check_run_slots(self._config, await self.workspace(owner), agents_auto=agents_auto)

    def provider(self, name: str) -> Provider:
        """The driver of the deployment's provider ``name`` for chat."""
        try:
            target = target_for(f"{name}:_", "chat", self._config.layers(), name)
        except SlotResolutionError:
            raise ConfigError(f"no provider named {name!r} is configured", provider=name) from None
        return self._driver(target)

    def _driver(self, target: Target) -> Provider:
        cfg = endpoint(target, allow_local=self._config.server.allow_local_endpoints)
        key = (target.provider_id, target.provider_source, cfg.kind, cfg.base_url, cfg.key(), cfg.timeout_s,
               cfg.max_retries, cfg.latency_ms, cfg.proxy, cfg.allow_local)
        cached = self._drivers.get(key)
        if cached is None:
            # A provider behind its own proxy cannot share the pooled client: its transport opens its own. An
            # owner's endpoint goes through the guarded client (the transport refuses any other).
            guarded = cfg.owner_endpoint and not cfg.allow_local
            http = None if cfg.proxy else self._owner_http if guarded else self._http
            cached = self._drivers[key] = build_provider(target.provider_id, cfg, http=http, sleep=self._sleep,
                                                         rng=self._rng)
        return cached

    def for_slot(self, slot: str, *, workspace: ModelLayer | None = None) -> tuple[RoutedProvider, str]:
        """``(provider, model)`` for a chat slot such as ``course.outline``, through the owner's ``workspace``
        settings when given. Raises ``MissingModel`` / ``MissingApiKey`` when the slot cannot run."""
        found = check_slot(self._config, slot, workspace)
        assert found.target is not None and found.target.model is not None
        fallback = None
        fallback_label = None
        if found.fallback is not None and found.fallback.model is not None:
            fallback = (self._driver(found.fallback), found.fallback.model, found.fallback.route)
            fallback_label = provider_label(found.fallback)
        routed = RoutedProvider(slot, self._driver(found.target), found.target.route, fallback,
                                labels=(provider_label(found.target), fallback_label))
        return routed, found.target.model


def provider_label(target: Target) -> str:
    """``target``'s provider as a metric label: the id the deployment declares (``demo`` for the built-in one), or
    ``owner:<preset>`` for a provider an owner added on the Models page, whose ids are the owners' to choose and
    would make the label unbounded."""
    return f"owner:{target.preset_id}" if target.provider_source == "workspace" else target.provider_id


def fallback_events(providers: Sequence[Any]) -> list[Event]:
    """The ``model.fallback_used`` events of routed providers (none for a plain provider)."""
    return [e for p in providers if isinstance(p, RoutedProvider) for e in p.fallback_events()]


@asynccontextmanager
async def open_model_router(config: Any, *, sleep: Sleep | None = None,
                            settings: Callable[[str], Awaitable[ModelLayer | None]] | None = None,
                            ) -> AsyncIterator[ModelRouter]:
    """A ``ModelRouter`` whose providers share one pooled HTTP client (and owners' endpoints one guarded client,
    :func:`openmaic.models.guard.owner_client`), closed on exit; ``settings`` reads an owner's workspace layer (see
    :func:`settings_reader`)."""
    client = httpx.AsyncClient(limits=httpx.Limits(max_connections=100, max_keepalive_connections=20))
    owners = owner_client()
    try:
        yield ModelRouter(config, http=client, sleep=sleep, settings=settings, owner_http=owners)
    finally:
        # Closing must finish even when the owner is being cancelled, or sockets leak.
        with trio.CancelScope(shield=True), trio.move_on_after(5):
            await client.aclose()
            await owners.aclose()


def settings_reader(config: Config, db: Any, key: Any) -> Callable[[str], Awaitable[ModelLayer | None]]:
    """Reads an owner's workspace layer from the ``model_settings`` table, keys opened with the instance ``key``
    and the deployment's policy applied."""
    from openmaic.modelconfig.workspace import workspace_layer

    async def read(owner: str) -> ModelLayer | None:
        return await workspace_layer(db, owner, key, config.policy, dict(config.providers))

    return read


async def check_run_for_owner(config: Config, db: Any, owner: str, *, agents_auto: bool = True,
                              models: Mapping[str, str] | None = None) -> dict[str, str]:
    """Whether ``owner`` can start a generation run now, through their own model settings and the run's choice of
    ``models`` per slot: returns the choices checked (:func:`openmaic.models.choices.check_choices`: a disallowed
    one is ``ModelNotAllowed``), or raises ``MissingModel`` / ``MissingApiKey`` (the submit-time refusals, before
    any job exists)."""
    from openmaic.modelconfig.secret_box import process_instance_key
    from openmaic.models.choices import check_choices, with_choices

    key = process_instance_key(config.secret_key, config.server.data_dir)
    workspace = await settings_reader(config, db, key)(owner)
    chosen = check_choices(config, workspace, models or {})
    check_run_slots(config, with_choices(workspace, chosen), agents_auto=agents_auto)
    return chosen
