"""An environment-only deployment (no model sections in ``openmaic.yml``), translated as OpenMAIC 1.2 does.

What carries over:

* providers from the environment — ``<PREFIX>_API_KEY``, ``<PREFIX>_BASE_URL``, ``<PREFIX>_MODELS`` for each
  known prefix (``OPENAI``, ``ANTHROPIC``, ``TTS_OPENAI``, ``IMAGE_SEEDREAM``, ``TAVILY`` …) — and from
  ``server-providers.yml`` in the working directory (sections ``providers``, ``tts``, ``asr``, ``pdf``, ``image``,
  ``video``, ``web-search``; the environment wins field by field). A provider is on with a key, or with a base
  URL alone where it needs no key (Ollama, VoxCPM); a document provider needs its base URL;
* ``DEFAULT_MODEL`` (``provider:model``, or a bare model of OpenAI) as the ``llm`` root, with ``agent`` off (the
  agent never used ``DEFAULT_MODEL``), and ``MODEL_FALLBACK`` as its fallback;
* the first configured TTS, ASR, image, video and document providers fill their slots
  (``DEFAULT_IMAGE_PROVIDER`` picks the image one; web search goes tavily > exa > bocha > baidu > minimax > claude).

The providers form a deployment layer that locks nothing; the slots form the ``default`` layer, below an owner's
own settings, as ``DEFAULT_MODEL`` used to rank below a model the user picked. ``MODEL_ROUTES`` does not carry
over: its stages do not map one to one onto slots, so it stops the boot with what to write instead. Whatever
else does not carry over is a notice logged at boot; a notice never repeats a configured value.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from openmaic.errors import ConfigError
from openmaic.modelconfig.layer import Assignment, ModelLayer, ProviderSpec, SlotValue
from openmaic.modelconfig.presets import preset
from openmaic.secret import Secret

__all__ = ["LEGACY_ROUTES_MESSAGE", "SERVER_PROVIDERS_FILE", "LegacyTranslation", "has_legacy_configuration",
           "legacy_variables", "translate_environment"]  # fmt: skip

SERVER_PROVIDERS_FILE = "server-providers.yml"

LEGACY_ROUTES_MESSAGE = (
    "MODEL_ROUTES does not carry over to the model configuration: write the per-stage models as slots in "
    "openmaic.yml (or the file named by OPENMAIC_CONFIG) and remove MODEL_ROUTES — for example "
    "`slots: {llm: openai:gpt-4o-mini, course.outline: {model: anthropic:claude-sonnet-4-5, fallback: "
    "openai:gpt-4o}}` with the providers under `providers:`"
)

#: Section of server-providers.yml -> (capability, {env prefix: registry id}).
_SECTIONS: dict[str, tuple[str, dict[str, str]]] = {
    "providers": ("chat", {
        "OPENAI": "openai", "ANTHROPIC": "anthropic", "GOOGLE": "google", "DEEPSEEK": "deepseek", "QWEN": "qwen",
        "KIMI": "kimi", "MINIMAX": "minimax", "GLM": "glm", "SILICONFLOW": "siliconflow", "DOUBAO": "doubao",
        "OPENROUTER": "openrouter", "GROK": "grok", "TENCENT": "tencent-hunyuan", "TENCENT_HUNYUAN": "tencent-hunyuan",
        "XIAOMI": "xiaomi", "MIMO": "xiaomi", "OLLAMA": "ollama",
    }),
    "tts": ("tts", {
        "TTS_OPENAI": "openai-tts", "TTS_AZURE": "azure-tts", "TTS_GLM": "glm-tts", "TTS_QWEN": "qwen-tts",
        "TTS_VOXCPM": "voxcpm-tts", "TTS_DOUBAO": "doubao-tts", "TTS_ELEVENLABS": "elevenlabs-tts",
        "TTS_MINIMAX": "minimax-tts",
    }),
    "asr": ("asr", {"ASR_OPENAI": "openai-whisper", "ASR_QWEN": "qwen-asr"}),
    "pdf": ("document", {"PDF_UNPDF": "unpdf", "PDF_MINERU": "mineru", "PDF_MINERU_CLOUD": "mineru-cloud"}),
    "image": ("image", {
        "IMAGE_OPENAI": "openai-image", "IMAGE_SEEDREAM": "seedream", "IMAGE_QWEN_IMAGE": "qwen-image",
        "IMAGE_NANO_BANANA": "nano-banana", "IMAGE_MINIMAX": "minimax-image", "IMAGE_GROK": "grok-image",
    }),
    "video": ("video", {
        "VIDEO_SEEDANCE": "seedance", "VIDEO_KLING": "kling", "VIDEO_VEO": "veo", "VIDEO_SORA": "sora",
        "VIDEO_MINIMAX": "minimax-video", "VIDEO_GROK": "grok-video",
    }),
    "web-search": ("webSearch", {
        "TAVILY": "tavily", "BOCHA": "bocha", "BRAVE": "brave", "BAIDU": "baidu", "WEB_SEARCH_MINIMAX": "minimax",
    }),
}  # fmt: skip
_KEYLESS = {"ollama", "voxcpm-tts"}
_BASE_URL_ONLY = {"pdf"}
_PRESET_IDS = {("webSearch", "minimax"): "minimax-search", ("image", "lemonade"): "lemonade-image"}
_MEDIA_SLOTS = (("tts", "tts"), ("asr", "asr"), ("image", "image"), ("video", "video"), ("web-search", "webSearch"),
                ("pdf", "document"))  # fmt: skip
_WEB_SEARCH_ORDER = ("tavily", "exa", "bocha", "baidu", "minimax", "claude")
_LEGACY_VARIABLES = ("DEFAULT_MODEL", "MODEL_ROUTES", "MODEL_FALLBACK")


@dataclass(frozen=True)
class LegacyTranslation:
    """The translated layers and what did not carry over."""

    deployment: ModelLayer
    defaults: ModelLayer
    notices: tuple[str, ...]


def _preset_id(capability: str, registry_id: str) -> str:
    return _PRESET_IDS.get((capability, registry_id), registry_id)


def _known(capability: str, registry_id: str) -> bool:
    p = preset(_preset_id(capability, registry_id))
    return p is not None and capability in p.capabilities


def _read_file(base_dir: Path) -> dict[str, Any]:
    file = base_dir / SERVER_PROVIDERS_FILE
    if not file.is_file():
        return {}
    try:
        raw = yaml.safe_load(file.read_text("utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as e:
        # Only the position: the parser's own message may quote a key from the file.
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise ConfigError(f"{file}: cannot be read{where}; fix it or remove it", source=str(file)) from None
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise ConfigError(f"{file}: the top level must be a mapping of sections", source=str(file))
    for section, value in raw.items():
        if section not in _SECTIONS:
            raise ConfigError(f"{file}: unknown section {section!r}; valid sections: {', '.join(_SECTIONS)}",
                              source=str(file))
        if value is not None and not isinstance(value, dict):
            raise ConfigError(f"{file}: {section} must be a mapping of provider id to settings", source=str(file))
    return raw


def _entries(section: str, from_file: Mapping[str, Any], env: Mapping[str, str]) -> dict[str, dict[str, Any]]:
    """The section's active entries: the file's, then the environment's, field by field (OpenMAIC's rules)."""
    _, prefixes = _SECTIONS[section]
    base_only = section in _BASE_URL_ONLY
    out: dict[str, dict[str, Any]] = {}
    for rid, entry in (from_file or {}).items():
        entry = entry if isinstance(entry, dict) else {}
        on = bool(entry.get("baseUrl")) if base_only else bool(entry.get("apiKey") or (entry.get("baseUrl")
                                                                                       and rid in _KEYLESS))
        if on:
            out[str(rid)] = {k: entry[k] for k in ("apiKey", "baseUrl", "models", "proxy") if entry.get(k)}
    for prefix, rid in prefixes.items():
        key = env.get(f"{prefix}_API_KEY") or None
        url = env.get(f"{prefix}_BASE_URL") or None
        models = [m.strip() for m in (env.get(f"{prefix}_MODELS") or "").split(",") if m.strip()] or None
        if rid in out:
            out[rid].update({k: v for k, v in (("apiKey", key), ("baseUrl", url), ("models", models)) if v})
            continue
        if not (url if base_only else (key or (url and rid in _KEYLESS))):
            continue
        out[rid] = {k: v for k, v in (("apiKey", key), ("baseUrl", url), ("models", models)) if v}
    return out


def legacy_variables(env: Mapping[str, str]) -> list[str]:
    """The names in ``env`` that configure models the legacy way (for tests and diagnostics)."""
    prefixes = [p for _, (_, table) in _SECTIONS.items() for p in table]
    names = {f"{p}_{suffix}" for p in prefixes for suffix in ("API_KEY", "BASE_URL", "MODELS")}
    names.update(_LEGACY_VARIABLES, {"DEFAULT_IMAGE_PROVIDER"})
    return [k for k in env if k in names]


def has_legacy_configuration(env: Mapping[str, str], base_dir: Path) -> bool:
    """Whether the environment (or ``server-providers.yml``) configures models the legacy way."""
    raw = _read_file(base_dir)
    return any(_entries(s, raw.get(s) or {}, env) for s in _SECTIONS) or any(
        (env.get(v) or "").strip() for v in _LEGACY_VARIABLES
    )


def translate_environment(env: Mapping[str, str], base_dir: Path) -> LegacyTranslation | None:
    """The layers an environment-only deployment describes, or ``None`` when it describes none.

    Raises :class:`ConfigError` for ``MODEL_ROUTES`` (see :data:`LEGACY_ROUTES_MESSAGE`) and for an unreadable
    ``server-providers.yml``.
    """
    if not has_legacy_configuration(env, base_dir):
        return None
    if (env.get("MODEL_ROUTES") or "").strip():
        raise ConfigError(LEGACY_ROUTES_MESSAGE, key="MODEL_ROUTES")
    raw = _read_file(base_dir)
    notices: list[str] = [
        "the model configuration comes from the legacy provider variables, server-providers.yml, DEFAULT_MODEL and "
        "MODEL_FALLBACK, which are deprecated; move it to openmaic.yml"
    ]
    providers: dict[str, ProviderSpec] = {}
    active: dict[str, dict[str, dict[str, Any]]] = {}
    chat: set[str] = set()
    for section, (capability, _) in _SECTIONS.items():
        active[section] = {}
        for rid, entry in _entries(section, raw.get(section) or {}, env).items():
            if not _known(capability, rid):
                notices.append(f"an entry in {section} has no matching preset and is not carried over")
                continue
            pid = _preset_id(capability, rid)
            p = preset(pid)
            assert p is not None
            if p.requires_base_url and not entry.get("baseUrl"):
                notices.append(f"{section}.{rid} is not carried over: it needs a base URL")
                continue
            models = entry.get("models")
            if models is not None and (not isinstance(models, list) or not all(isinstance(m, str) for m in models)):
                notices.append(f"{section}.{rid} is not carried over: invalid models")
                continue
            providers[pid] = ProviderSpec(
                preset=pid, api_key=Secret(str(entry["apiKey"])) if entry.get("apiKey") else None,
                base_url=str(entry["baseUrl"]).rstrip("/") if entry.get("baseUrl") else None,
                models=tuple(models or ()), proxy=str(entry["proxy"]) if entry.get("proxy") else None,
            )
            active[section][rid] = entry
            if capability == "chat":
                chat.add(pid)

    def chat_ref(text: str, what: str) -> str | None:
        pid, sep, model = text.partition(":")
        if not sep:
            pid, model = "openai", text
        named = f'provider "{pid}"' if _known("chat", pid) else "a provider"
        if pid not in chat or not model:
            notices.append(f"{what} uses {named} without server configuration, so it is not carried over; set the "
                           "llm slot in openmaic.yml or on the Models page")
            return None
        return f"{pid}:{model}"

    slots: dict[str, SlotValue] = {}
    default = (env.get("DEFAULT_MODEL") or "").strip()
    fallback_text = (env.get("MODEL_FALLBACK") or "").strip()
    primary = chat_ref(default, "DEFAULT_MODEL") if default else None
    fallback = chat_ref(fallback_text, "MODEL_FALLBACK") if fallback_text else None
    if primary:
        slots["llm"] = Assignment(model=primary, fallback=fallback) if fallback else primary
        slots["agent"] = None
    else:
        if fallback_text:
            notices.append("MODEL_FALLBACK is not carried over without DEFAULT_MODEL; set the llm slot with a "
                           "fallback in openmaic.yml")
        if chat:
            notices.append("no DEFAULT_MODEL: every language model slot is unassigned, so runs are refused with "
                           "MISSING_MODEL until slots are set in openmaic.yml or on the Models page")
    preferred_image = (env.get("DEFAULT_IMAGE_PROVIDER") or "").strip()
    for section, slot_id in _MEDIA_SLOTS:
        capability = _SECTIONS[section][0]
        usable = list(active[section].items())
        picked: tuple[str, dict[str, Any]] | None = None
        if section == "web-search":
            picked = next(((r, e) for name in _WEB_SEARCH_ORDER for r, e in usable if r == name and e.get("apiKey")),
                          None)
        elif section == "image" and preferred_image:
            picked = next(((r, e) for r, e in usable if r == preferred_image), None)
            if picked is None:
                notices.append("DEFAULT_IMAGE_PROVIDER has no usable configuration, so no image model is assigned; "
                               "set the image slot in openmaic.yml")
                continue
        picked = picked or (usable[0] if usable else None)
        if picked is None:
            continue
        rid, entry = picked
        models = entry.get("models") or []
        slots[slot_id] = _preset_id(capability, rid) + (f":{models[0]}" if models else "")
    return LegacyTranslation(
        deployment=ModelLayer(source="deployment", providers=providers),
        defaults=ModelLayer(source="default", slots=slots),
        notices=tuple(notices),
    )
