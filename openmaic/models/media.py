"""Media providers: what the image, video, speech and web-search slots are served by, wire-neutral.

Four capabilities, one protocol each; a provider object serves one capability of one configured provider
(``build_media_provider``), the way a chat ``Provider`` serves the chat slots:

* :class:`ImageProvider` — a picture from a prompt (OpenAI ``POST /v1/images/generations``; ``demo``);
* :class:`VideoProvider` — an asynchronous task: ``submit_video`` answers a task id at once, ``poll_video``
  reads its status, ``download_video`` / ``download_poster`` fetch the result (OpenAI ``/v1/videos``; ``demo``).
  The task id is what a run checkpoints, so a takeover waits on the same task instead of paying for another;
* :class:`SpeechProvider` — a narration clip from text (OpenAI ``POST /v1/audio/speech``; ``demo``);
* :class:`SearchProvider` — web search results for a query (Tavily ``POST /search``; ``demo``).

Every method may raise ``ProviderError`` after the transport's retries (429/5xx with jittered backoff honouring
``Retry-After``, timeouts), with a fixed, key-free message. A video task the provider itself reports as failed is
a :class:`VideoTaskFailed`: final, a retry would pay for the same failure. Bytes are judged by their magic
numbers, never by the provider's label, and bodies are read up to a size limit.
"""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable
from typing import Any, Literal, Protocol

import httpx
import msgspec
import trio

from openmaic.errors import ConfigError
from openmaic.models.errors import ProviderError
from openmaic.models.retry import MalformedResponse, Sleep, Transport, error_token, unwind

__all__ = [
    "CAPABILITIES", "MEDIA_DRIVERS", "Capability", "GeneratedMedia", "HttpDriver", "ImageProvider", "SearchProvider", "SearchSource",
    "SpeechProvider", "VideoProvider", "VideoTask", "VideoTaskFailed", "build_media_provider", "read_body",
    "read_json", "sniff", "wait_video",
]  # fmt: skip

Capability = Literal["image", "video", "tts", "webSearch"]
CAPABILITIES: tuple[Capability, ...] = ("image", "video", "tts", "webSearch")

AspectRatio = Literal["16:9", "4:3", "1:1", "9:16"]

IMAGE_BYTES = 20 * 1024 * 1024
VIDEO_BYTES = 200 * 1024 * 1024
AUDIO_BYTES = 50 * 1024 * 1024
JSON_BYTES = 4 * 1024 * 1024

_MAGIC: tuple[tuple[int, bytes, str], ...] = (
    (0, b"\x89PNG\r\n\x1a\n", "image/png"),
    (0, b"\xff\xd8\xff", "image/jpeg"),
    (0, b"GIF87a", "image/gif"),
    (0, b"GIF89a", "image/gif"),
    (4, b"ftyp", "video/mp4"),  # ISO base media (MP4, MOV); audio-only MP4 is told apart below
    (0, b"\x1a\x45\xdf\xa3", "video/webm"),
    (0, b"ID3", "audio/mpeg"),
    (0, b"OggS", "audio/ogg"),
    (0, b"fLaC", "audio/flac"),
)


class GeneratedMedia(msgspec.Struct, frozen=True):
    """Bytes a provider made, and their media type as judged from the bytes."""

    media_type: str
    data: bytes


class VideoTask(msgspec.Struct, frozen=True):
    """A video task as its provider reports it."""

    task_id: str
    status: Literal["queued", "in_progress", "completed", "failed"]
    progress: int = 0
    error_code: str | None = None


class SearchSource(msgspec.Struct, frozen=True, kw_only=True):
    """One web search result."""

    title: str
    url: str
    content: str = ""
    score: float | None = None


class VideoTaskFailed(ProviderError):
    """The video provider reported the task as failed (final: retrying would pay for the same failure)."""

    code = "video_task_failed"

    def __init__(self, message: str, *, error_code: str | None = None, **details: Any) -> None:
        super().__init__(message, error_code=error_code, **details)
        self.error_code = error_code


class ImageProvider(Protocol):
    name: str

    async def generate_image(self, model: str, prompt: str, *, aspect_ratio: AspectRatio = "16:9") -> GeneratedMedia:
        """One picture for ``prompt``."""
        ...


class VideoProvider(Protocol):
    name: str
    poll_interval_s: float

    async def submit_video(self, model: str, prompt: str, *, aspect_ratio: AspectRatio = "16:9",
                           seconds: int = 4) -> str:
        """Submit a task; its id. Never retried past an answer: a retried submit could pay twice."""
        ...

    async def poll_video(self, model: str, task_id: str) -> VideoTask:
        """The task's status now."""
        ...

    async def download_video(self, model: str, task_id: str) -> GeneratedMedia:
        """The finished task's video."""
        ...

    async def download_poster(self, model: str, task_id: str) -> GeneratedMedia | None:
        """The finished task's poster frame, or None when the provider has none."""
        ...


class SpeechProvider(Protocol):
    name: str

    async def synthesize(self, model: str, text: str, *, voice: str | None = None, speed: float = 1.0) -> GeneratedMedia:
        """A narration clip that speaks ``text``."""
        ...


class SearchProvider(Protocol):
    name: str

    async def search(self, query: str, *, max_results: int = 5) -> list[SearchSource]:
        """Results for ``query``, best first."""
        ...


class HttpDriver:
    """What every HTTP media driver shares: its name, its ``base_url`` (``default_base_url`` unless configured)
    and a :class:`~openmaic.models.retry.Transport` whose messages name what it serves (``label``)."""

    label = "media provider"
    default_base_url = ""

    def __init__(
        self,
        name: str,
        cfg: Any,
        *,
        http: httpx.AsyncClient | None = None,
        sleep: Sleep | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self.name = name
        self.base_url = (getattr(cfg, "base_url", None) or self.default_base_url).rstrip("/")
        self._transport = Transport(name, cfg, http=http, sleep=sleep, rng=rng, label=self.label)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r} {self.base_url}>"

    def _headers(self, *, json: bool = True) -> dict[str, str]:
        return self._transport.bearer_headers(**({"content-type": "application/json"} if json else {}))


def sniff(data: bytes) -> str | None:
    """The media type ``data`` is, from its magic numbers (``audio/wav``, ``image/webp`` …); None if unknown."""
    if data[:4] == b"RIFF" and data[8:12] == b"WAVE":
        return "audio/wav"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    for offset, magic, kind in _MAGIC:
        if data[offset : offset + len(magic)] == magic:
            if kind == "video/mp4" and data[8:12] in (b"M4A ", b"M4B "):
                return "audio/mp4"
            return kind
    if len(data) > 1 and data[0] == 0xFF and data[1] & 0xE0 == 0xE0:
        return "audio/mpeg"  # an MPEG audio frame header without an ID3 tag
    return None


async def read_body(response: httpx.Response, limit: int) -> bytes:
    """The whole body, or ``MalformedResponse`` past ``limit`` bytes (the connection is then closed)."""
    declared = response.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise MalformedResponse(f"the body is over {limit} bytes")
    chunks: list[bytes] = []
    size = 0
    body = response.aiter_bytes()
    async for chunk in body:
        size += len(chunk)
        if size > limit:
            await unwind(body, cancel_now=True)
            raise MalformedResponse(f"the body is over {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


async def read_json(response: httpx.Response) -> dict[str, Any]:
    """The body as a JSON object, or ``MalformedResponse``."""
    raw = await read_body(response, JSON_BYTES)
    try:
        doc = msgspec.json.decode(raw)
    except msgspec.DecodeError:
        raise MalformedResponse("the body is not JSON") from None
    if not isinstance(doc, dict):
        raise MalformedResponse("the body is not a JSON object")
    return doc


def media_of(data: bytes, kinds: tuple[str, ...], what: str) -> GeneratedMedia:
    """``data`` as media of one of ``kinds`` (a prefix such as ``image/``), or ``MalformedResponse``."""
    kind = sniff(data)
    if kind is None or not kind.startswith(kinds):
        raise MalformedResponse(f"the body is not {what}")
    return GeneratedMedia(media_type=kind, data=data)


def failure_code(doc: dict[str, Any]) -> str | None:
    """A provider's error code from a JSON document (``{"error": {"code": …}}``), when it is a plain token."""
    return error_token(msgspec.json.encode(doc))


async def wait_video(
    provider: VideoProvider,
    model: str,
    task_id: str,
    *,
    on_progress: Callable[[VideoTask], Awaitable[None]] | None = None,
    sleep: Sleep | None = None,
) -> VideoTask:
    """Poll ``task_id`` until it completes (its final status) or fails (``VideoTaskFailed``)."""
    pause = sleep or trio.sleep
    while True:
        task = await provider.poll_video(model, task_id)
        if on_progress is not None:
            await on_progress(task)
        if task.status == "completed":
            return task
        if task.status == "failed":
            code = task.error_code
            raise VideoTaskFailed(
                f"the video provider {provider.name!r} reported the task as failed" + (f" ({code})" if code else ""),
                error_code=code, provider=provider.name,
            )
        await pause(provider.poll_interval_s)


#: Per media capability, the wire protocols (a preset's ``protocol``, or a provider's ``kind``) with a driver here.
MEDIA_DRIVERS: dict[str, frozenset[str]] = {
    "image": frozenset({"openai-images", "openai", "demo"}),
    "video": frozenset({"sora", "openai-videos", "openai", "demo"}),
    "tts": frozenset({"openai-speech", "openai", "demo"}),
    "webSearch": frozenset({"tavily", "demo"}),
}


def build_media_provider(
    name: str,
    cfg: Any,
    capability: Capability,
    *,
    http: httpx.AsyncClient | None = None,
    sleep: Sleep | None = None,
    rng: random.Random | None = None,
) -> Any:
    """The provider configured as ``name`` (``cfg``: its endpoint) serving ``capability``.

    ``cfg.kind`` is the wire protocol (:data:`MEDIA_DRIVERS`): ``openai-images``, ``openai-speech``, ``sora``
    (OpenAI's ``/v1/videos``; ``openai-videos`` is the same), or ``openai`` for any of the three; ``tavily`` for
    web search; ``demo`` for all four. Anything else is a ConfigError naming what this server can call.
    """
    kind = str(getattr(cfg, "kind", None) or getattr(cfg, "preset", None))
    if kind not in MEDIA_DRIVERS.get(capability, frozenset()):
        known = ", ".join(sorted(MEDIA_DRIVERS.get(capability, frozenset())))
        raise ConfigError(
            f"provider {name!r} (protocol {kind!r}) cannot serve the {capability} slot; this server calls "
            f"{known} for it", provider=name, slot=capability,
        )
    if kind == "demo":
        from openmaic.models.demo_media import DemoMedia

        return DemoMedia(name, latency_ms=int(getattr(cfg, "latency_ms", 0) or 0))
    if kind == "tavily":
        from openmaic.models.tavily import TavilySearch

        return TavilySearch(name, cfg, http=http, sleep=sleep, rng=rng)
    from openmaic.models import openai_media

    cls = {"image": openai_media.OpenAIImages, "video": openai_media.OpenAIVideos,
           "tts": openai_media.OpenAISpeech}[capability]  # fmt: skip
    return cls(name, cfg, http=http, sleep=sleep, rng=rng)
