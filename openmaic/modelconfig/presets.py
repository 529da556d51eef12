"""Provider presets: what a provider's ``preset`` means (OpenMAIC 1.2's preset ids).

A provider in ``openmaic.yml`` is an account: ``{preset, apiKey, baseUrl, …}``. Its preset says which
capabilities that account covers and, per capability, the wire protocol, the default endpoint and whether a key
is needed. ``protocol`` names the wire a driver of this server must speak (:mod:`openmaic.models.provider`
keeps the drivers): ``openai`` is chat completions, ``anthropic`` the messages API, ``demo`` the offline
provider. A preset whose protocol has no driver here is still a valid preset (an OpenMAIC file naming it loads);
a slot assigned to it reports that it cannot run, naming the preset (see :mod:`openmaic.modelconfig.resolve`).

``demo`` is this project's own preset: offline and deterministic, it covers every capability, and it is what
every slot uses when nothing is configured. Gemini's chat is reached through its OpenAI-compatible endpoint.
"""

from __future__ import annotations

from dataclasses import dataclass

from openmaic.modelconfig.slots import CAPABILITIES, Capability

__all__ = ["PRESETS", "Preset", "Target", "preset"]


@dataclass(frozen=True)
class Target:
    """How one capability of a preset is served."""

    protocol: str
    base_url: str | None = None
    requires_key: bool = True


@dataclass(frozen=True)
class Preset:
    """A preset: its capabilities and what a provider of it must say."""

    id: str
    name: str
    capabilities: dict[Capability, Target]
    requires_base_url: bool = False
    """No usable default endpoint (an OpenAI-compatible server, an Azure resource)."""
    local: bool = False
    """Its default endpoint is on the server's own network (a local model server)."""
    kind: str = "single"
    trusts_catalogue: bool = True


def _chat(pid: str, name: str, base_url: str | None, protocol: str = "openai", *, key: bool = True,
          **kw: object) -> Preset:
    return Preset(pid, name, {"chat": Target(protocol, base_url, key)}, **kw)  # type: ignore[arg-type]


def _single(pid: str, name: str, capability: Capability, protocol: str, base_url: str | None = None, *,
            key: bool = True, **kw: object) -> Preset:
    return Preset(pid, name, {capability: Target(protocol, base_url, key)}, **kw)  # type: ignore[arg-type]


_PRESETS: list[Preset] = [
    Preset("demo", "Offline demo", {c: Target("demo", None, False) for c in CAPABILITIES}),
    # -- chat -----------------------------------------------------------------------------------------------
    _chat("openai", "OpenAI", "https://api.openai.com/v1"),
    # A server of one's own (vLLM, LM Studio …) may need no key; if it does, its 401 says so.
    _chat("openai-compatible", "OpenAI-compatible endpoint", None, key=False, requires_base_url=True,
          trusts_catalogue=False),
    _chat("azure", "Azure OpenAI", None, "azure", requires_base_url=True),
    _chat("anthropic", "Claude", "https://api.anthropic.com/v1", "anthropic"),
    _chat("bedrock", "Amazon Bedrock", None, "bedrock", key=False),
    _chat("google", "Gemini", "https://generativelanguage.googleapis.com/v1beta/openai"),
    _chat("atlascloud", "Atlas Cloud", "https://api.atlascloud.ai/v1"),
    _chat("glm", "GLM", "https://open.bigmodel.cn/api/paas/v4"),
    _chat("qwen", "Qwen", "https://dashscope.aliyuncs.com/compatible-mode/v1"),
    _chat("deepseek", "DeepSeek", "https://api.deepseek.com/v1"),
    _chat("kimi", "Kimi", "https://api.moonshot.cn/v1"),
    _chat("siliconflow", "SiliconFlow", "https://api.siliconflow.cn/v1"),
    _chat("doubao", "Doubao", "https://ark.cn-beijing.volces.com/api/v3"),
    _chat("openrouter", "OpenRouter", "https://openrouter.ai/api/v1"),
    _chat("grok", "Grok", "https://api.x.ai/v1"),
    _chat("tencent-hunyuan", "Tencent Hunyuan", "https://tokenhub.tencentmaas.com/v1"),
    _chat("xiaomi", "Xiaomi MiMo", "https://api.xiaomimimo.com/v1"),
    _chat("ollama", "Ollama", "http://localhost:11434/v1", key=False, local=True),
    _chat("lemonade", "Lemonade", "http://localhost:13305/v1", key=False, local=True),
    # -- token plans: one key, several capabilities -----------------------------------------------------------
    Preset("minimax", "MiniMax", {
        "chat": Target("anthropic", "https://api.minimaxi.com/anthropic/v1"),
        "image": Target("minimax-image", "https://api.minimaxi.com"),
        "video": Target("minimax-video", "https://api.minimaxi.com"),
        "tts": Target("minimax-tts", "https://api.minimaxi.com"),
        "webSearch": Target("minimax-search", "https://api.minimaxi.com"),
    }, kind="token-plan"),
    Preset("tokendance", "TokenDance", {
        "chat": Target("openai", "https://tokendance.space/gateway/v1"),
        "image": Target("seedream", "https://tokendance.space/gateway/ark/v3"),
        "video": Target("minimax-video", "https://tokendance.space/gateway/minimax"),
        "tts": Target("minimax-tts", "https://tokendance.space/gateway/minimax"),
        "webSearch": Target("bocha", "https://tokendance.space/gateway/bocha"),
    }, kind="token-plan"),
    # -- speech -----------------------------------------------------------------------------------------------
    _single("openai-tts", "OpenAI TTS", "tts", "openai-speech", "https://api.openai.com/v1"),
    _single("azure-tts", "Azure Speech", "tts", "azure-tts"),
    _single("glm-tts", "GLM TTS", "tts", "glm-tts", "https://open.bigmodel.cn/api/paas/v4"),
    _single("qwen-tts", "Qwen TTS", "tts", "qwen-tts", "https://dashscope.aliyuncs.com/api/v1"),
    _single("minimax-tts", "MiniMax TTS", "tts", "minimax-tts", "https://api.minimaxi.com"),
    _single("voxcpm-tts", "VoxCPM", "tts", "voxcpm-tts", "http://127.0.0.1:8000", key=False, local=True),
    _single("doubao-tts", "Doubao TTS", "tts", "doubao-tts", "https://openspeech.bytedance.com/api/v3/tts"),
    _single("elevenlabs-tts", "ElevenLabs", "tts", "elevenlabs-tts", "https://api.elevenlabs.io/v1"),
    _single("browser-native-tts", "Browser speech", "tts", "browser-native", key=False),
    _single("openai-whisper", "OpenAI Whisper", "asr", "openai-transcriptions", "https://api.openai.com/v1"),
    _single("qwen-asr", "Qwen ASR", "asr", "qwen-asr", "https://dashscope.aliyuncs.com/api/v1"),
    _single("browser-native", "Browser speech recognition", "asr", "browser-native", key=False),
    # -- images and video -------------------------------------------------------------------------------------
    _single("openai-image", "OpenAI Images", "image", "openai-images", "https://api.openai.com/v1"),
    _single("seedream", "Seedream", "image", "seedream"),
    _single("qwen-image", "Qwen Image", "image", "qwen-image"),
    _single("nano-banana", "Nano Banana", "image", "nano-banana"),
    _single("minimax-image", "MiniMax Image", "image", "minimax-image", "https://api.minimaxi.com"),
    _single("grok-image", "Grok Image", "image", "grok-image"),
    _single("lemonade-image", "Lemonade Image", "image", "lemonade-image", "http://localhost:13305/v1", key=False,
            local=True),
    _single("seedance", "Seedance", "video", "seedance"),
    _single("kling", "Kling", "video", "kling"),
    _single("veo", "Veo", "video", "veo"),
    _single("sora", "Sora", "video", "sora", "https://api.openai.com/v1"),
    _single("minimax-video", "MiniMax Video", "video", "minimax-video", "https://api.minimaxi.com"),
    _single("grok-video", "Grok Video", "video", "grok-video"),
    # -- web search and documents -----------------------------------------------------------------------------
    _single("tavily", "Tavily", "webSearch", "tavily", "https://api.tavily.com"),
    _single("exa", "Exa", "webSearch", "exa"),
    _single("bocha", "Bocha", "webSearch", "bocha"),
    _single("brave", "Brave Search", "webSearch", "brave"),
    _single("baidu", "Baidu Search", "webSearch", "baidu"),
    _single("minimax-search", "MiniMax Search", "webSearch", "minimax-search", "https://api.minimaxi.com"),
    _single("claude", "Claude web search", "webSearch", "claude-search"),
    _single("unpdf", "unpdf", "document", "unpdf", key=False),
    _single("mineru", "MinerU (self-hosted)", "document", "mineru", key=False, requires_base_url=True),
    _single("mineru-cloud", "MinerU Cloud", "document", "mineru-cloud"),
]

PRESETS: dict[str, Preset] = {p.id: p for p in _PRESETS}
assert len(PRESETS) == len(_PRESETS), "preset ids are unique"


def preset(pid: str) -> Preset | None:
    """The preset ``pid``, or ``None`` when this server does not know it."""
    return PRESETS.get(pid)
