"""Slot resolution: which provider and model a slot's calls go to, from the layers of configuration.

``resolve(slot, layers)`` walks from the slot up to its capability root and takes the first assignment it
meets; at each node the layers are consulted in precedence order — ``deployment`` (``openmaic.yml``, which
locks what it sets), then ``workspace`` (the owner's Models page), then ``default`` (a legacy ``DEFAULT_MODEL``,
or the built-in demo). An explicit ``null`` stops the walk and turns the subtree off; reaching the root with no
assignment leaves the slot unassigned. There is no silent fallback to any provider.

A provider reference is looked up in the same order, so a workspace cannot shadow a provider the deployment
declares; ``demo`` is always declared. Pure: no clients are built here, and nothing here holds a key longer
than the :class:`Target` the caller asked for.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from openmaic.modelconfig.layer import DEMO, Assignment, ModelLayer, ProviderSpec, Source, parse_ref
from openmaic.modelconfig.presets import preset
from openmaic.modelconfig.slots import lineage, slot
from openmaic.secret import Secret

__all__ = ["Resolution", "SlotResolutionError", "Target", "in_precedence", "resolve", "target_for"]

_RANK = {"deployment": 0, "workspace": 1, "default": 2}


class SlotResolutionError(ValueError):
    """An assignment that cannot resolve (an undeclared provider, a preset without the capability). The message
    names the key path, never a value taken from the reference."""


@dataclass(frozen=True)
class Target:
    """One declared provider and one of its models, with what a driver needs to call it."""

    provider_id: str
    provider_source: Source | Literal["builtin"]
    preset_id: str
    protocol: str
    base_url: str | None
    requires_key: bool
    api_key: Secret | None
    model: str | None
    spec: ProviderSpec

    @property
    def route(self) -> str:
        """``provider:model`` (or ``provider``), as a reference names it."""
        return self.provider_id if self.model is None else f"{self.provider_id}:{self.model}"

    def __repr__(self) -> str:  # the key stays out of any repr
        return f"Target({self.route!r}, preset={self.preset_id!r}, source={self.provider_source!r})"


@dataclass(frozen=True)
class Resolution:
    """What a slot resolves to. ``status`` is ``assigned``, ``disabled`` (a ``null`` on the way) or
    ``unassigned``; ``resolved_at`` is the node that held the assignment, ``source`` its layer."""

    slot: str
    status: Literal["assigned", "disabled", "unassigned"]
    resolved_at: str | None = None
    source: Source | None = None
    locked: bool = False
    target: Target | None = None
    fallback: Target | None = None
    thinking: dict[str, Any] | None = None
    api: str | None = None
    context_window: int | None = None


def in_precedence(layers: Sequence[ModelLayer]) -> list[ModelLayer]:
    """Deployment, then workspace, then default layers, whatever order they were given in."""
    return sorted(layers, key=lambda layer: _RANK[layer.source])


def _provider(pid: str, layers: Sequence[ModelLayer]) -> tuple[ProviderSpec, Source | Literal["builtin"]] | None:
    for layer in layers:
        if pid in layer.providers:
            return layer.providers[pid], layer.source
    return (DEMO, "builtin") if pid == "demo" else None


def target_for(ref: str, capability: str, layers: Sequence[ModelLayer], at: str) -> Target:
    """The target a reference names, looked up in ``layers`` (in precedence order); ``at`` names it in errors."""
    try:
        pid, model = parse_ref(ref)
    except ValueError:
        raise SlotResolutionError(f"{at}: invalid model reference") from None
    if model is None and capability == "chat":
        raise SlotResolutionError(f'{at}: a chat model needs "providerId:modelId"')
    found = _provider(pid, layers)
    if found is None:
        raise SlotResolutionError(f"{at}: the provider is not declared")
    spec, source = found
    p = preset(spec.preset)
    if p is None:
        raise SlotResolutionError(f"{at}: the provider has an unknown preset")
    target = p.capabilities.get(capability)  # type: ignore[call-overload]
    if target is None:
        raise SlotResolutionError(f'{at}: the provider (preset "{p.id}") does not offer {capability}')
    return Target(provider_id=pid, provider_source=source, preset_id=p.id, protocol=target.protocol,
                  base_url=spec.base_url or target.base_url, requires_key=target.requires_key,
                  api_key=spec.api_key, model=model, spec=spec)


def resolve(name: str, layers: Sequence[ModelLayer]) -> Resolution:
    """Resolve slot ``name`` (``KeyError`` for an unknown slot, :class:`SlotResolutionError` when invalid)."""
    ordered = in_precedence(layers)
    capability = slot(name).capability
    locked = any(layer.source == "deployment" and name in layer.slots for layer in ordered)
    for node in lineage(name):
        layer = next((layer for layer in ordered if node in layer.slots), None)
        if layer is None:
            continue
        value = layer.slots[node]
        if value is None:
            return Resolution(name, "disabled", node, layer.source, locked)
        spec = Assignment(model=value) if isinstance(value, str) else value
        at = f"slots.{node}"
        target = target_for(spec.model, capability, ordered, at)
        fallback = target_for(spec.fallback, capability, ordered, f"{at}.fallback") if spec.fallback else None
        return Resolution(name, "assigned", node, layer.source, locked, target, fallback, spec.thinking, spec.api,
                          spec.context_window)
    return Resolution(name, "unassigned", locked=locked)
