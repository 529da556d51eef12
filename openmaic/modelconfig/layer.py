"""The model sections of ``openmaic.yml`` — ``providers``, ``slots``, ``policy`` — exactly as OpenMAIC 1.2 writes
them, decoded into a :class:`ModelLayer`.

* ``providers.<id>`` (id ``[a-z0-9][a-z0-9-]{0,62}``): ``{preset, apiKey?, baseUrl?, models?, proxy?,
  credentials?, options?}``. ``options`` holds non-secret scalars passed to the provider's driver; this server
  reads ``timeoutS``, ``maxRetries`` and ``latencyMs`` (demo) from it.
* ``slots.<slot>``: ``null`` (off), ``"provider:model"``, ``"provider"`` (media and search: the provider's default
  model), or ``{model, thinking?, fallback? (chat slots), api?, contextWindow? (agent only)}``.
* ``policy.allowWorkspaceProviders``: whether owners may add providers of their own on the Models page.

Everything is checked in two phases, as OpenMAIC does: the shape of each value (at its own path), then the
references between entries (presets, declared providers, capabilities). Each error names its key. The provider
``demo`` (this project's offline provider) is always declared; a file may declare it too.

A layer is one source of assignments: ``deployment`` (this file, or the providers translated from a legacy
environment; it locks the slots it sets), ``workspace`` (an owner's Models page) or ``default`` (what a legacy
``DEFAULT_MODEL`` or the built-in demo assigns; it locks nothing and ranks below the workspace).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from typing import Any, Literal
from urllib.parse import urlsplit

import msgspec

from openmaic.errors import ConfigError
from openmaic.modelconfig.presets import PRESETS, preset
from openmaic.modelconfig.slots import SLOTS, is_slot, slot
from openmaic.secret import Secret

__all__ = [
    "DEMO", "DEMO_SLOTS", "Assignment", "ModelLayer", "Policy", "ProviderSpec", "SlotValue", "check_references",
    "parse_assignment", "parse_model_sections", "parse_model_shape", "parse_provider", "parse_ref", "to_document",
]  # fmt: skip

PROVIDER_ID = re.compile(r"^[a-z0-9][a-z0-9-]{0,62}$")
MODEL_REF = re.compile(r"^([a-z0-9][a-z0-9-]{0,62})(?::(.+))?$", re.S)
_OPTION = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,63}$")
THINKING_MODES = ("default", "disabled", "enabled", "auto")
THINKING_EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh", "max")
THINKING_LEVELS = ("minimal", "low", "medium", "high")

Source = Literal["deployment", "workspace", "default"]
Error = Callable[[str, str], ConfigError]
"""``error(key path, what is wrong)``: the loader's error, which adds where the value came from."""

#: Keys of this project's earlier provider format, and what replaced each.
_RENAMED = {
    "kind": "preset (e.g. preset: openai, preset: anthropic, preset: openai-compatible with a baseUrl, "
            "preset: demo)",
    "base_url": "baseUrl", "api_key": "apiKey", "api_key_file": "apiKey: ${VARIABLE}",
    "timeout_s": "options: {timeoutS: …}", "max_retries": "options: {maxRetries: …}",
    "latency_ms": "options: {latencyMs: …}", "headers": "apiKey (custom headers are not supported)",
}  # fmt: skip


class ProviderSpec(msgspec.Struct, frozen=True, kw_only=True):
    """One provider as declared: an account the server can call. Secrets are :class:`Secret`."""

    preset: str
    api_key: Secret | None = None
    base_url: str | None = None
    models: tuple[str, ...] = ()
    proxy: str | None = None
    credentials: dict[str, Secret] = {}
    options: dict[str, str | int | float | bool] = {}

    def option(self, name: str, default: Any) -> Any:
        """An option's value, or ``default``."""
        return self.options.get(name, default)


class Assignment(msgspec.Struct, frozen=True, kw_only=True):
    """A slot's assignment in its object form."""

    model: str
    fallback: str | None = None
    thinking: dict[str, Any] | None = None
    api: str | None = None
    context_window: int | None = None


SlotValue = str | Assignment | None
"""An assignment as written: ``None`` (off), a model reference, or an :class:`Assignment`."""


class Policy(msgspec.Struct, frozen=True, kw_only=True):
    """``policy``: what owners may do on the Models page."""

    allow_workspace_providers: bool = True


class ModelLayer(msgspec.Struct, frozen=True, kw_only=True):
    """One layer of model configuration."""

    source: Source
    providers: dict[str, ProviderSpec] = {}
    slots: dict[str, SlotValue] = {}


DEMO = ProviderSpec(preset="demo")
"""The always-declared offline provider (``demo``)."""

DEMO_SLOTS: dict[str, SlotValue] = {"llm": "demo:course", "agent": "demo:agent",
                                    **{s.id: "demo" for s in SLOTS if s.parent is None and s.capability != "chat"}}
"""What every slot uses when nothing is configured: the offline demo, for every capability root."""


def parse_ref(ref: str) -> tuple[str, str | None]:
    """``(provider, model)`` from ``"provider:model"`` or ``"provider"``; the model may contain colons."""
    m = MODEL_REF.match(ref)
    if m is None:
        raise ValueError('expected "providerId:modelId" (or "providerId" for its default model)')
    return m.group(1), m.group(2)


def _kind(value: Any) -> str:
    return {type(None): "null", bool: "true or false", int: "an integer", float: "a number", str: "a string",
            list: "a list", dict: "a mapping"}.get(type(value), "a " + type(value).__name__)  # fmt: skip


def _url(value: Any, at: str, error: Error) -> str:
    if not isinstance(value, str) or not value:
        raise error(at, f"expected an http(s) URL, got {_kind(value)}")
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise error(at, "expected an http(s) URL")
    if parts.username or parts.password:
        raise error(at, "must not contain credentials; put the key in apiKey")
    return value.rstrip("/")


def _mapping(value: Any, at: str, error: Error, what: str) -> dict[Any, Any]:
    if not isinstance(value, dict):
        raise error(at, f"expected {what}, got {_kind(value)}")
    return value


def parse_provider(value: Any, at: str, error: Error) -> ProviderSpec:
    """One ``providers.<id>`` entry (shape only)."""
    raw = _mapping(value, at, error, "a mapping with keys preset, apiKey, baseUrl, models, proxy, credentials, "
                                     "options")
    valid = ("preset", "apiKey", "baseUrl", "models", "proxy", "credentials", "options")
    for key in raw:
        if key in _RENAMED:
            raise error(f"{at}.{key}", f"not an openmaic.yml provider key; write {_RENAMED[key]} instead")
        if key not in valid:
            raise error(f"{at}.{key}", f"unknown key; valid keys: {', '.join(valid)}")
    if "preset" not in raw:
        raise error(f"{at}.preset", "required; expected a preset id such as openai, anthropic or demo")
    pid = raw["preset"]
    if not isinstance(pid, str) or not pid:
        raise error(f"{at}.preset", f"expected a preset id, got {_kind(pid)}")
    out: dict[str, Any] = {"preset": pid}
    if "apiKey" in raw:
        key = raw["apiKey"]
        if not isinstance(key, str) or not key:
            raise error(f"{at}.apiKey", f"expected a non-empty string, got {_kind(key) if key != '' else 'an empty one'}")
        out["api_key"] = Secret(key)
    if "baseUrl" in raw:
        out["base_url"] = _url(raw["baseUrl"], f"{at}.baseUrl", error)
    if "proxy" in raw:
        out["proxy"] = _url(raw["proxy"], f"{at}.proxy", error)
    if "models" in raw:
        models = raw["models"]
        if not isinstance(models, list) or not models or not all(isinstance(m, str) and m for m in models):
            raise error(f"{at}.models", "expected a non-empty list of model ids")
        out["models"] = tuple(models)
    if "credentials" in raw:
        creds = _mapping(raw["credentials"], f"{at}.credentials", error, "a mapping of name to secret")
        for k, v in creds.items():
            if not isinstance(k, str) or not k or not isinstance(v, str) or not v:
                raise error(f"{at}.credentials.{k}", "expected a non-empty string")
        out["credentials"] = {k: Secret(v) for k, v in creds.items()}
    if "options" in raw:
        opts = _mapping(raw["options"], f"{at}.options", error, "a mapping of option name to a scalar")
        for k, v in opts.items():
            where = f"{at}.options.{k}"
            if not isinstance(k, str) or not _OPTION.match(k):
                raise error(where, "invalid option name (a letter, then letters, digits, - or _)")
            if isinstance(v, str) and len(v) <= 1024 or isinstance(v, bool):
                continue
            if isinstance(v, int | float) and math.isfinite(v):
                continue
            raise error(where, f"expected a string (at most 1024 characters), a finite number or true/false, "
                               f"got {_kind(v)}")
        _check_known_options(opts, f"{at}.options", error)
        out["options"] = dict(opts)
    return ProviderSpec(**out)


def _check_known_options(opts: Mapping[str, Any], at: str, error: Error) -> None:
    for name, test, expected in (
        ("timeoutS", lambda v: isinstance(v, int | float) and not isinstance(v, bool) and v > 0, "a number > 0"),
        ("maxRetries", lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0, "an integer >= 0"),
        ("latencyMs", lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0, "an integer >= 0"),
    ):
        if name in opts and not test(opts[name]):
            raise error(f"{at}.{name}", f"expected {expected}, got {opts[name]!r}")


def _ref(value: Any, at: str, error: Error) -> str:
    if not isinstance(value, str):
        raise error(at, f'expected "providerId:modelId", got {_kind(value)}')
    try:
        parse_ref(value)
    except ValueError as e:
        raise error(at, str(e)) from None
    return value


def _thinking(value: Any, at: str, error: Error) -> dict[str, Any]:
    raw = _mapping(value, at, error, "a mapping")
    enums = {"mode": THINKING_MODES, "effort": THINKING_EFFORTS, "level": THINKING_LEVELS}
    for key, v in raw.items():
        where = f"{at}.{key}"
        if key in enums:
            if v not in enums[key]:
                raise error(where, f"expected one of {', '.join(enums[key])}, got {v!r}")
        elif key in ("enabled", "excludeReasoningOutput"):
            if not isinstance(v, bool):
                raise error(where, f"expected true or false, got {_kind(v)}")
        elif key == "budgetTokens":
            if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
                raise error(where, f"expected an integer > 0, got {v!r}")
        else:
            valid = "mode, effort, level, enabled, budgetTokens, excludeReasoningOutput"
            raise error(where, f"unknown key; valid keys: {valid}")
    return dict(raw)


def parse_assignment(name: str, value: Any, at: str, error: Error) -> SlotValue:
    """One slot's value (shape only): null, a reference, or the object form."""
    if value is None:
        return None
    if isinstance(value, str):
        return _ref(value, at, error)
    if not isinstance(value, dict):
        raise error(at, f'expected null, "providerId:modelId" or a mapping, got {_kind(value)}')
    valid = ("model", "thinking", "fallback", "api", "contextWindow")
    for key in value:
        if key not in valid:
            raise error(f"{at}.{key}", f"unknown key; valid keys: {', '.join(valid)}")
    if "model" not in value:
        raise error(f"{at}.model", 'required; expected "providerId:modelId"')
    out: dict[str, Any] = {"model": _ref(value["model"], f"{at}.model", error)}
    if "fallback" in value:
        out["fallback"] = _ref(value["fallback"], f"{at}.fallback", error)
    if "thinking" in value:
        out["thinking"] = _thinking(value["thinking"], f"{at}.thinking", error)
    if "api" in value:
        if not isinstance(value["api"], str) or not value["api"]:
            raise error(f"{at}.api", f"expected a non-empty string, got {_kind(value['api'])}")
        out["api"] = value["api"]
    if "contextWindow" in value:
        cw = value["contextWindow"]
        if not isinstance(cw, int) or isinstance(cw, bool) or cw <= 0:
            raise error(f"{at}.contextWindow", f"expected an integer > 0, got {cw!r}")
        out["context_window"] = cw
    return Assignment(**out)


def parse_model_sections(raw: Mapping[str, Any], error: Error, *, source: Source = "deployment",
                         shown: Callable[[str], str] = repr) -> tuple[ModelLayer, Policy]:
    """``providers``, ``slots`` and ``policy`` of a decoded file (each optional), shape then references."""
    layer, policy = parse_model_shape(raw, error, source=source)
    check_references(layer, [], error, shown=shown)
    return layer, policy


def parse_model_shape(raw: Mapping[str, Any], error: Error, *, source: Source) -> tuple[ModelLayer, Policy]:
    """The shape checks alone: for stored settings, whose references may point at another layer."""
    providers: dict[str, ProviderSpec] = {}
    if raw.get("providers") is not None:
        for pid, value in _mapping(raw["providers"], "providers", error, "a mapping of provider id to settings").items():
            if not isinstance(pid, str) or not PROVIDER_ID.match(pid):
                raise error(f"providers.{pid}", "invalid provider id: lowercase letters, digits and dashes, starting "
                                                "with a letter or digit, at most 63 characters")
            providers[pid] = parse_provider(value, f"providers.{pid}", error)
    slots: dict[str, SlotValue] = {}
    if raw.get("slots") is not None:
        for name, value in _mapping(raw["slots"], "slots", error, "a mapping of slot to assignment").items():
            if not is_slot(name):
                raise error(f"slots.{name}", f"unknown slot; valid slots: {', '.join(s.id for s in SLOTS)}")
            slots[name] = parse_assignment(name, value, f"slots.{name}", error)
    policy = Policy()
    if raw.get("policy") is not None:
        pol = _mapping(raw["policy"], "policy", error, "a mapping with the key allowWorkspaceProviders")
        for key, value in pol.items():
            if key != "allowWorkspaceProviders":
                raise error(f"policy.{key}", "unknown key; valid keys: allowWorkspaceProviders")
            if not isinstance(value, bool):
                raise error("policy.allowWorkspaceProviders", f"expected true or false, got {_kind(value)}")
        policy = Policy(allow_workspace_providers=pol.get("allowWorkspaceProviders", True))
    return ModelLayer(source=source, providers=providers, slots=slots), policy


def check_references(layer: ModelLayer, others: list[ModelLayer], error: Error, *,
                     shown: Callable[[str], str] = repr) -> None:
    """Presets exist and get what they need; every reference names a declared provider (in ``layer``, in
    ``others`` or the built-in demo) whose preset offers the slot's capability. ``shown`` renders a value for a
    message (the loader hides values that came from the environment)."""
    for pid, spec in layer.providers.items():
        p = preset(spec.preset)
        if p is None:
            raise error(f"providers.{pid}.preset", f"unknown preset {shown(spec.preset)}; this server knows: "
                                                   f"{', '.join(sorted(PRESETS))}")
        if p.requires_base_url and spec.base_url is None:
            raise error(f"providers.{pid}.baseUrl", f'preset "{p.id}" needs a baseUrl')

    def declared(pid: str) -> ProviderSpec | None:
        for source in (layer, *others):
            if pid in source.providers:
                return source.providers[pid]
        return DEMO if pid == "demo" else None

    def covers(ref: str, name: str, at: str) -> None:
        pid, model = parse_ref(ref)
        capability = slot(name).capability
        if model is None and capability == "chat":
            raise error(at, 'a chat model needs "providerId:modelId"')
        spec = declared(pid)
        if spec is None:
            raise error(at, f"provider {shown(pid)} is not declared under providers")
        p = preset(spec.preset)
        if p is not None and capability not in p.capabilities:
            raise error(at, f'provider {shown(pid)} (preset "{p.id}") does not offer {capability}')

    for name, value in layer.slots.items():
        at = f"slots.{name}"
        if value is None:
            continue
        if isinstance(value, str):
            covers(value, name, at)
            continue
        covers(value.model, name, f"{at}.model")
        if value.fallback is not None:
            if slot(name).capability != "chat":
                raise error(f"{at}.fallback", "only language model slots use a fallback")
            covers(value.fallback, name, f"{at}.fallback")
        if (value.api is not None or value.context_window is not None) and name != "agent":
            raise error(at, "api and contextWindow only apply to the agent slot")


def to_document(layer: ModelLayer, *, with_secrets: bool = False) -> dict[str, Any]:
    """The layer in ``openmaic.yml``'s own shape (camelCase), keys left out unless ``with_secrets``."""
    providers: dict[str, Any] = {}
    for pid, spec in layer.providers.items():
        doc: dict[str, Any] = {"preset": spec.preset}
        if with_secrets and spec.api_key is not None:
            doc["apiKey"] = spec.api_key.reveal()
        if spec.base_url is not None:
            doc["baseUrl"] = spec.base_url
        if spec.models:
            doc["models"] = list(spec.models)
        if spec.proxy is not None:
            doc["proxy"] = spec.proxy
        if with_secrets and spec.credentials:
            doc["credentials"] = {k: v.reveal() for k, v in spec.credentials.items()}
        if spec.options:
            doc["options"] = dict(spec.options)
        providers[pid] = doc
    out: dict[str, Any] = {}
    if providers:
        out["providers"] = providers
    if layer.slots:
        out["slots"] = {name: assignment_document(value) for name, value in layer.slots.items()}
    return out


def assignment_document(value: SlotValue) -> Any:
    """One assignment as ``openmaic.yml`` writes it."""
    if value is None or isinstance(value, str):
        return value
    doc: dict[str, Any] = {"model": value.model}
    if value.fallback is not None:
        doc["fallback"] = value.fallback
    if value.thinking is not None:
        doc["thinking"] = dict(value.thinking)
    if value.api is not None:
        doc["api"] = value.api
    if value.context_window is not None:
        doc["contextWindow"] = value.context_window
    return doc
