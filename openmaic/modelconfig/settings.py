"""The Models page: what an owner sees of the model configuration, and the changes they may make to their own.

:func:`settings_view` is ``GET /api/model-config``'s answer: every slot with the owner's own assignment, its
effective model and where that comes from, and whether the deployment locks it; the providers the owner can
use (deployment ones read-only and without anything about their credentials; the owner's own with the key shown
only as ``{set, mask, unreadable}``); the presets they may add providers from. :func:`apply_change` applies one
change — ``{kind: "slots", set?, clear?}``, ``{kind: "provider", id, preset, apiKey?, baseUrl?, models?}`` or
``{kind: "remove-provider", id}`` — and checks the whole result resolves before anything is stored.
:func:`import_proposal` merges settings a browser kept, item by item, where existing settings always win.

Keys are write-only: no function here returns one. Refusals are :class:`SettingsRefused` with OpenMAIC's codes.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping
from typing import Any

from openmaic.config import Config
from openmaic.errors import ConfigError, OpenMaicError
from openmaic.modelconfig.addresses import endpoint_problem
from openmaic.modelconfig.layer import (
    PROVIDER_ID, ModelLayer, ProviderSpec, SlotValue, assignment_document, parse_assignment, parse_provider,
)  # fmt: skip
from openmaic.modelconfig.presets import PRESETS, Preset, preset
from openmaic.modelconfig.resolve import Resolution, SlotResolutionError, Target, resolve
from openmaic.modelconfig.slots import SLOTS, is_slot, slot
from openmaic.modelconfig.store import StoredSettings
from openmaic.modelconfig.workspace import names_provider, under_policy
from openmaic.secret import Secret

__all__ = ["SettingsRefused", "apply_change", "import_proposal", "mask_key", "settings_view"]


class SettingsRefused(OpenMaicError):
    """A change the owner may not make, or one that would not resolve."""

    status = 400

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.error_code = code  # OpenMAIC's (UNKNOWN_SLOT, SLOT_LOCKED, …), what the API sends
        self.code = code.lower()
        self.status = 409 if code in ("SLOT_LOCKED", "CONFLICT") else 400


def mask_key(key: str) -> str:
    """What a view shows of a stored key: its last four characters, or nothing of a short one (OpenMAIC's)."""
    return f"…{key[-4:]}" if len(key) >= 12 else "…"


# --- the view ------------------------------------------------------------------------------------------------------


def _target_view(target: Target) -> dict[str, Any]:
    out: dict[str, Any] = {"providerId": target.provider_id, "providerSource": target.provider_source,
                           "presetId": target.preset_id}
    if target.model is not None:
        out["modelId"] = target.model
    # A deployment's endpoint may name internal hosts: only the owner's own endpoints are shown.
    if target.provider_source == "workspace" and target.spec.base_url:
        out["baseUrl"] = target.spec.base_url
    return out


def _effective(name: str, layers: list[ModelLayer]) -> dict[str, Any]:
    try:
        found: Resolution = resolve(name, layers)
    except SlotResolutionError as e:
        return {"status": "invalid", "message": str(e)}
    if found.status == "unassigned":
        return {"status": "unassigned"}
    if found.status == "disabled":
        return {"status": "disabled", "resolvedAt": found.resolved_at, "source": found.source}
    assert found.target is not None
    out = {"status": "assigned", "resolvedAt": found.resolved_at, "source": found.source, **_target_view(found.target)}
    if found.fallback is not None:
        out["fallback"] = _target_view(found.fallback)
    return out


def _capabilities(p: Preset | None, models: tuple[str, ...] = ()) -> dict[str, Any]:
    if p is None:
        return {}
    return {cap: {"models": [{"id": m} for m in models] if cap == "chat" else []} for cap in p.capabilities}


def _preset_problem(p: Preset) -> str | None:
    """Why an owner may not add a provider of this preset, or ``None`` (OpenMAIC's rules)."""
    if "chat" in p.capabilities and p.capabilities["chat"].protocol == "bedrock":
        return "Amazon Bedrock can only be configured by the deployment (openmaic.yml)"
    if p.requires_base_url and "chat" not in p.capabilities:
        return f"A custom endpoint for {p.name} can only be configured by the deployment (openmaic.yml)"
    if p.local and "chat" not in p.capabilities:
        return f"The {p.name} preset runs on the server's own network; only the deployment (openmaic.yml) can " \
               "configure it"
    return None


def _own_endpoint_needed(p: Preset) -> bool:
    return p.requires_base_url or p.local


def settings_view(config: Config, stored: StoredSettings | None) -> dict[str, Any]:
    """The owner's view of the model settings (``GET /api/model-config``)."""
    workspace = stored.layer if stored is not None else None
    layers = config.layers(None if workspace is None else under_policy(workspace, config.policy,
                                                                       dict(config.providers)))
    unreadable = stored.unreadable if stored is not None else frozenset()
    providers: list[dict[str, Any]] = [
        {"id": pid, "preset": spec.preset, "source": "deployment", **({"models": list(spec.models)} if spec.models
                                                                      else {}),
         "capabilities": _capabilities(preset(spec.preset), spec.models)}
        for pid, spec in {"demo": ProviderSpec(preset="demo"), **config.providers}.items()
    ]
    for pid, spec in (workspace.providers if workspace else {}).items():
        key: dict[str, Any] = {"set": spec.api_key is not None or pid in unreadable}
        if spec.api_key is not None:
            key["mask"] = mask_key(spec.api_key.reveal())
        if pid in unreadable:
            key["unreadable"] = True
        providers.append({"id": pid, "preset": spec.preset, "source": "workspace",
                          **({"baseUrl": spec.base_url} if spec.base_url else {}),
                          **({"models": list(spec.models)} if spec.models else {}),
                          "capabilities": _capabilities(preset(spec.preset), spec.models), "key": key})
    own = workspace.slots if workspace else {}
    slots = [
        {"slot": d.id, "parent": d.parent, "capability": d.capability, "configOnly": d.config_only,
         "locked": d.id in config.slots, **({"assignment": assignment_document(own[d.id])} if d.id in own else {}),
         "effective": _effective(d.id, layers)}
        for d in SLOTS
    ]
    allowed = config.policy.allow_workspace_providers
    presets = [
        {"id": p.id, "name": p.name, "kind": p.kind, "capabilities": _capabilities(p),
         "requiresBaseUrl": _own_endpoint_needed(p), "customEndpoint": "chat" in p.capabilities, "recommended": {}}
        for p in PRESETS.values() if allowed and p.id != "demo" and _preset_problem(p) is None
    ]
    return {"revision": stored.revision if stored else None, "policy": {"allowWorkspaceProviders": allowed},
            "presets": presets, "providers": providers, "slots": slots}


# --- changes ---------------------------------------------------------------------------------------------------------


def _refuse(code: str) -> Any:
    def error(path: str, what: str) -> ConfigError:
        raise SettingsRefused(code, f"{path}: {what}")
    return error


def _check_provider(config: Config, pid: str, spec: ProviderSpec) -> None:
    p = preset(spec.preset)
    if p is None:
        raise SettingsRefused("INVALID_PROVIDER", "Unknown preset")
    problem = _preset_problem(p)
    if problem:
        raise SettingsRefused("INVALID_PROVIDER", problem)
    if spec.proxy is not None:
        raise SettingsRefused("INVALID_PROVIDER", "A proxy can only be configured by the deployment (openmaic.yml)")
    if spec.credentials:
        raise SettingsRefused("INVALID_PROVIDER", f"{p.name} authenticates with a key pair, which only the "
                                                  "deployment (openmaic.yml) can configure")
    if spec.base_url and "chat" not in p.capabilities:
        raise SettingsRefused("INVALID_PROVIDER", f"A custom endpoint for {p.name} can only be configured by the "
                                                  "deployment (openmaic.yml)")
    if _own_endpoint_needed(p) and not spec.base_url:
        raise SettingsRefused("INVALID_PROVIDER", f"The {p.name} preset needs a base URL")
    if spec.base_url:
        # The endpoint was typed by an owner: it must not reach the server's own network (GHSA-g87c). This is the
        # check of its form; every address its host resolves to is checked again when the server connects
        # (openmaic.models.guard), which is what stops a name that resolves to an internal address.
        problem = endpoint_problem(spec.base_url, allow_local=config.server.allow_local_endpoints)
        if problem:
            raise SettingsRefused("INVALID_PROVIDER", problem)


def _check_resolves(config: Config, layer: ModelLayer) -> None:
    layers = config.layers(under_policy(layer, config.policy, dict(config.providers)))
    for name in layer.slots:
        try:
            found = resolve(name, layers)
        except SlotResolutionError as e:
            raise SettingsRefused("INVALID_ASSIGNMENT", str(e)) from None
        if found.status == "assigned" and slot(name).capability != "chat":
            for target in (found.target, found.fallback):
                if target is not None and target.provider_source == "workspace" and target.spec.base_url:
                    raise SettingsRefused("INVALID_ASSIGNMENT", f"{name} cannot use {target.provider_id}: a workspace "
                                                                "provider with its own endpoint serves chat slots only")


def apply_change(config: Config, current: ModelLayer | None, change: Any) -> tuple[ModelLayer, list[str]]:
    """The owner's settings after ``change`` (a decoded JSON object), and the providers whose stored key it removes:
    on purpose (an empty ``apiKey``, a removed provider), or because the provider's endpoint or preset changed and
    no key came with the change (the key stays bound to where it was entered; the slots keep their assignments and
    are refused ``MISSING_API_KEY`` until a key is entered again). Raises :class:`SettingsRefused`."""
    if not isinstance(change, dict) or change.get("kind") not in ("slots", "provider", "remove-provider"):
        raise SettingsRefused("INVALID_REQUEST", "Expected { revision, change }")
    providers = dict(current.providers) if current else {}
    slots: dict[str, SlotValue] = dict(current.slots) if current else {}
    allowed = config.policy.allow_workspace_providers
    clear: list[str] = []
    kind = change["kind"]
    if kind == "slots":
        unknown = set(change) - {"kind", "set", "clear"}
        if unknown:
            raise SettingsRefused("INVALID_SETTINGS", f"unknown field {sorted(unknown)[0]}")
        to_set = change.get("set") or {}
        to_clear = change.get("clear") or []
        if not isinstance(to_set, dict) or not isinstance(to_clear, list):
            raise SettingsRefused("INVALID_SETTINGS", "set is a mapping of slot to assignment and clear a list of slots")
        for name in [*to_set, *to_clear]:
            if not isinstance(name, str) or not is_slot(name):
                raise SettingsRefused("UNKNOWN_SLOT", f"Unknown slot {name}")
            if name in config.slots:
                raise SettingsRefused("SLOT_LOCKED", f"{name} is set by the deployment")
        parsed = {name: parse_assignment(name, value, f"set.{name}", _refuse("INVALID_ASSIGNMENT"))
                  for name, value in to_set.items()}
        if not allowed:
            own = frozenset(p for p in providers if p not in config.providers)
            for name, value in parsed.items():
                if names_provider(value, own):
                    raise SettingsRefused("INVALID_ASSIGNMENT", f"{name} cannot use a workspace provider: this "
                                                                "deployment does not allow them")
        for name in to_clear:
            slots.pop(name, None)
        slots.update(parsed)
    elif kind == "provider":
        pid = change.get("id")
        if not isinstance(pid, str) or not PROVIDER_ID.match(pid):
            raise SettingsRefused("INVALID_PROVIDER", "A provider id is lowercase letters, digits and dashes")
        if not allowed:
            raise SettingsRefused("PROVIDERS_NOT_ALLOWED", "This deployment does not let workspaces add providers")
        if pid in config.providers or pid == "demo":
            raise SettingsRefused("PROVIDER_RESERVED", "The deployment declares this provider id")
        unknown = set(change) - {"kind", "id", "preset", "apiKey", "baseUrl", "models"}
        if unknown:
            raise SettingsRefused("INVALID_PROVIDER", f"unknown field {sorted(unknown)[0]}")
        existing = providers.get(pid)
        raw: dict[str, Any] = {"preset": change.get("preset")}
        # A stored key is bound to the endpoint and preset it was entered for: a change of either without a key
        # drops it (the owner enters it again), or whoever may edit the settings could send it anywhere.
        moved = existing is not None and (change.get("preset") != existing.preset or (
            "baseUrl" in change and change["baseUrl"] != existing.base_url))
        emptied = change.get("apiKey") == ""  # an empty key removes the stored one
        if "apiKey" in change:
            key = change["apiKey"] or None
        else:
            key = None if moved or existing is None or existing.api_key is None else existing.api_key.reveal()
        if emptied or (moved and "apiKey" not in change):
            clear.append(pid)  # the sealed value goes too, even one that cannot be opened now
        if key is not None:
            raw["apiKey"] = key
        base = change["baseUrl"] if "baseUrl" in change else (existing.base_url if existing else None)
        if base is not None:
            raw["baseUrl"] = base
        models = change["models"] if "models" in change else (list(existing.models) if existing and existing.models
                                                               else None)
        if models:
            raw["models"] = models
        spec = parse_provider(raw, "provider", _refuse("INVALID_PROVIDER"))
        _check_provider(config, pid, spec)
        providers[pid] = spec
        if emptied:  # without its key it cannot serve what needs one: those slots follow their parents again
            p = preset(spec.preset)
            assert p is not None
            slots = {k: v for k, v in slots.items()
                     if not (names_provider(v, {pid}) and p.capabilities.get(slot(k).capability) is not None
                             and p.capabilities[slot(k).capability].requires_key)}
    else:
        pid = change.get("id")
        if not isinstance(pid, str) or pid not in providers:
            raise SettingsRefused("UNKNOWN_PROVIDER", "No such workspace provider")
        del providers[pid]
        clear.append(pid)
        slots = {k: v for k, v in slots.items() if not names_provider(v, {pid})}
    layer = ModelLayer(source="workspace", providers=providers, slots=slots)
    _check_resolves(config, layer)
    return layer, clear


def _same_secret(a: Secret | None, b: str | None) -> bool:
    if a is None or b is None:
        return a is None and b is None
    # Digests compared in constant time, so neither the length nor the first difference shows.
    return hmac.compare_digest(hashlib.sha256(a.reveal().encode()).digest(), hashlib.sha256(b.encode()).digest())


def import_proposal(config: Config, current: ModelLayer | None, proposal: Mapping[str, Any]
                    ) -> tuple[ModelLayer | None, list[dict[str, str]], list[dict[str, str]]]:
    """Merge ``{providers?, slots?}`` into the owner's settings, one item at a time under the checks of an edit;
    nothing already there is replaced. Returns the settings, what was imported and what was skipped (with why)."""
    layer = current
    imported: list[dict[str, str]] = []
    skipped: list[dict[str, str]] = []

    def attempt(item: dict[str, str], change: dict[str, Any]) -> None:
        nonlocal layer
        try:
            layer, _ = apply_change(config, layer, change)
            imported.append(item)
        except SettingsRefused as e:
            skipped.append({**item, "code": e.error_code, "reason": e.message})

    for pid, raw in (proposal.get("providers") or {}).items():
        item = {"kind": "provider", "id": pid}
        have = layer.providers.get(pid) if layer else None
        if have is not None:
            same = isinstance(raw, dict) and raw.get("preset") == have.preset and _same_secret(
                have.api_key, raw.get("apiKey")) and raw.get("baseUrl") == have.base_url and list(
                raw.get("models") or []) == list(have.models)
            skipped.append({**item, "code": "EXISTS_SAME" if same else "EXISTS_DIFFERENT",
                            "reason": "The workspace already holds this provider" if same else
                            "A provider with this id already exists with other settings"})
            continue
        if pid in config.providers or pid == "demo":
            skipped.append({**item, "code": "PROVIDER_RESERVED", "reason": "The deployment declares this provider id"})
            continue
        if not isinstance(raw, dict) or set(raw) - {"preset", "apiKey", "baseUrl", "models"}:
            skipped.append({**item, "code": "MALFORMED", "reason": "Malformed provider settings"})
            continue
        attempt(item, {"kind": "provider", "id": pid, **raw})
    for name, value in (proposal.get("slots") or {}).items():
        item = {"kind": "slot", "id": name}
        if layer is not None and name in layer.slots:
            skipped.append({**item, "code": "EXISTS", "reason": "The workspace already sets this slot"})
            continue
        attempt(item, {"kind": "slots", "set": {name: value}})
    return layer, imported, skipped
