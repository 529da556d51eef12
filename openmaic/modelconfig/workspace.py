"""An owner's workspace layer as the model calls see it: their saved settings under the deployment's policy.

Under ``policy.allowWorkspaceProviders: false`` the owner's own providers are dormant: they stay saved (the
policy may change back) but no call uses them, so the assignments that name one are left out and those slots
follow their parents again. Assignments of deployment providers still apply.
"""

from __future__ import annotations

from openmaic.modelconfig.layer import ModelLayer, Policy, SlotValue, parse_ref
from openmaic.modelconfig.secret_box import InstanceKey
from openmaic.modelconfig.store import read_settings
from openmaic.store.database import Database

__all__ = ["names_provider", "under_policy", "workspace_layer"]


def names_provider(value: SlotValue, providers: set[str] | frozenset[str]) -> bool:
    """Whether an assignment names one of ``providers`` (as its model or its fallback)."""
    if value is None:
        return False
    refs = [value] if isinstance(value, str) else [value.model, *([value.fallback] if value.fallback else [])]
    return any(parse_ref(ref)[0] in providers for ref in refs)


def under_policy(layer: ModelLayer, policy: Policy, deployment_providers: dict[str, object]) -> ModelLayer:
    """``layer`` as the calls see it under ``policy`` (see the module docstring)."""
    if policy.allow_workspace_providers:
        return layer
    own = frozenset(p for p in layer.providers if p not in deployment_providers)
    slots = {k: v for k, v in layer.slots.items() if not names_provider(v, own)}
    return ModelLayer(source="workspace", providers={}, slots=slots)


async def workspace_layer(db: Database, owner: str, key: InstanceKey, policy: Policy,
                          deployment_providers: dict[str, object]) -> ModelLayer | None:
    """The owner's workspace layer under ``policy``, or ``None`` when they saved no settings."""
    stored = await read_settings(db, owner, key)
    return None if stored is None else under_policy(stored.layer, policy, deployment_providers)

