"""OpenAI's media endpoints: images, speech and videos (and servers that speak them).

``base_url`` includes the version (``https://api.openai.com/v1``), as for chat:

* **images** — ``POST {base}/images/generations`` ``{model, prompt, n: 1, size}``; the answer's ``data[0]`` holds
  ``b64_json`` (the GPT image models) or a ``url`` (DALL·E), which is fetched without our credentials (it points
  at the vendor's storage). ``response_format`` is not sent: the GPT image models refuse it.
* **speech** — ``POST {base}/audio/speech`` ``{model, input, voice, response_format: "mp3", speed}``; the body is
  the clip. Input over 4,096 characters (the endpoint's limit) is spoken in pieces cut at sentence ends, and
  the MP3 pieces are joined (MPEG audio is a sequence of self-contained frames).
* **videos** — ``POST {base}/videos`` as multipart form fields ``model, prompt, seconds, size`` (as the SDKs send
  it) answers a video object ``{id, status: queued|in_progress|completed|failed, progress, error}``;
  ``GET {base}/videos/{id}`` polls it; ``GET {base}/videos/{id}/content`` downloads the MP4 and
  ``…/content?variant=thumbnail`` its poster frame. The submit is never re-sent once it may have reached the
  provider (see ``Transport.send(idempotent=False)``).

What a body turns out to be is judged by its bytes; a provider's error text is never kept, only its status and
its error code when that is a plain token.
"""

from __future__ import annotations

import base64
import binascii
import re
from typing import Any
from urllib.parse import quote

import httpx

from openmaic.models.errors import ProviderError
from openmaic.models.media import (
    AUDIO_BYTES, IMAGE_BYTES, VIDEO_BYTES, AspectRatio, GeneratedMedia, HttpDriver, VideoTask, failure_code,
    media_of, read_body, read_json,
)  # fmt: skip
from openmaic.models.retry import MalformedResponse

__all__ = ["OpenAIImages", "OpenAISpeech", "OpenAIVideos", "speech_pieces"]

DEFAULT_BASE_URL = "https://api.openai.com/v1"
SPEECH_INPUT_CHARS = 4096
DEFAULT_VOICE = "alloy"

_IMAGE_SIZES: dict[str, str] = {"16:9": "1536x1024", "4:3": "1536x1024", "1:1": "1024x1024", "9:16": "1024x1536"}
_VIDEO_SIZES: dict[str, str] = {"16:9": "1280x720", "4:3": "1280x720", "1:1": "1280x720", "9:16": "720x1280"}
_VIDEO_SECONDS = (4, 8, 12)
_STATUSES = {"queued": "queued", "in_progress": "in_progress", "processing": "in_progress",
             "completed": "completed", "succeeded": "completed", "failed": "failed"}  # fmt: skip
_TASK_ID = re.compile(r"^[A-Za-z0-9_.:-]{1,200}$")
_SENTENCE_END = re.compile(r"(?<=[.!?。！？])\s+")


class _OpenAIMedia(HttpDriver):
    default_base_url = DEFAULT_BASE_URL


class OpenAIImages(_OpenAIMedia):
    """The ``image`` slot on ``POST /v1/images/generations``."""

    label = "image provider"

    async def generate_image(self, model: str, prompt: str, *, aspect_ratio: AspectRatio = "16:9") -> GeneratedMedia:
        body = {"model": model, "prompt": prompt, "n": 1, "size": _IMAGE_SIZES.get(aspect_ratio, "1024x1024")}
        doc = await self._transport.send("POST", f"{self.base_url}/images/generations", self._headers(), read_json,
                                         json_body=body)  # fmt: skip
        data = doc.get("data")
        first = data[0] if isinstance(data, list) and data and isinstance(data[0], dict) else {}
        if isinstance(first.get("b64_json"), str):
            try:
                raw = base64.b64decode(first["b64_json"], validate=True)
            except (binascii.Error, ValueError):
                raw = b""
            return self._image(raw)
        if isinstance(first.get("url"), str) and first["url"].startswith(("https://", "http://")):
            # The URL is the vendor's storage, not its API: it gets no Authorization header.
            async def download(response: httpx.Response) -> bytes:
                return await read_body(response, IMAGE_BYTES)

            raw = await self._transport.send("GET", first["url"], {}, download)
            return self._image(raw)
        return self._image(b"")

    def _image(self, raw: bytes) -> GeneratedMedia:
        try:
            return media_of(raw, ("image/",), "an image")
        except MalformedResponse as exc:
            # Raised outside the transport's attempt, so it is turned into the provider's error here.
            raise ProviderError(f"the {self.label} {self.name!r} sent a malformed response ({exc.reason})",
                                provider=self.name) from None


def speech_pieces(text: str, limit: int = SPEECH_INPUT_CHARS) -> list[str]:
    """``text`` in pieces of at most ``limit`` characters, cut at sentence ends where possible."""
    text = " ".join(text.split())
    pieces: list[str] = []
    current = ""
    for sentence in _SENTENCE_END.split(text):
        while len(sentence) > limit:  # a sentence longer than the limit is cut at a space, else anywhere
            cut = sentence.rfind(" ", 0, limit)
            cut = cut if cut > 0 else limit
            if current:
                pieces.append(current)
                current = ""
            pieces.append(sentence[:cut].strip())
            sentence = sentence[cut:].strip()
        joined = f"{current} {sentence}".strip()
        if len(joined) > limit:
            pieces.append(current)
            current = sentence
        else:
            current = joined
    if current:
        pieces.append(current)
    return [p for p in pieces if p]


class OpenAISpeech(_OpenAIMedia):
    """The ``tts`` slot on ``POST /v1/audio/speech`` (MP3)."""

    label = "speech provider"

    def __init__(self, name: str, cfg: Any, **kw: Any) -> None:
        super().__init__(name, cfg, **kw)
        options = getattr(cfg, "options", None) or {}
        self.default_voice = str(options.get("voice") or DEFAULT_VOICE) if isinstance(options, dict) else DEFAULT_VOICE

    async def synthesize(self, model: str, text: str, *, voice: str | None = None, speed: float = 1.0) -> GeneratedMedia:
        async def clip(response: httpx.Response) -> bytes:
            raw = await read_body(response, AUDIO_BYTES)
            media_of(raw, ("audio/mpeg",), "an MP3 clip")
            return raw

        parts = []
        for piece in speech_pieces(text) or ["."]:
            body = {"model": model, "input": piece, "voice": voice or self.default_voice,
                    "response_format": "mp3", "speed": min(4.0, max(0.25, speed))}  # fmt: skip
            parts.append(await self._transport.send("POST", f"{self.base_url}/audio/speech", self._headers(), clip,
                                                    json_body=body))  # fmt: skip
        return GeneratedMedia(media_type="audio/mpeg", data=b"".join(parts))


class OpenAIVideos(_OpenAIMedia):
    """The ``video`` slot on ``/v1/videos``: submit, poll, download."""

    label = "video provider"

    def __init__(self, name: str, cfg: Any, **kw: Any) -> None:
        super().__init__(name, cfg, **kw)
        options = getattr(cfg, "options", None) or {}
        interval = options.get("poll_interval_s") if isinstance(options, dict) else None
        self.poll_interval_s = float(interval) if isinstance(interval, (int, float)) and interval > 0 else 5.0

    async def submit_video(self, model: str, prompt: str, *, aspect_ratio: AspectRatio = "16:9",
                           seconds: int = 4) -> str:
        seconds = min(_VIDEO_SECONDS, key=lambda s: abs(s - seconds))
        form = {"model": model, "prompt": prompt, "seconds": str(seconds),
                "size": _VIDEO_SIZES.get(aspect_ratio, "1280x720")}  # fmt: skip
        doc = await self._transport.send("POST", f"{self.base_url}/videos", self._headers(json=False), read_json,
                                         form=form, idempotent=False)  # fmt: skip
        return self._task(doc, None).task_id

    async def poll_video(self, model: str, task_id: str) -> VideoTask:
        doc = await self._transport.send("GET", self._url(task_id), self._headers(json=False), read_json)
        return self._task(doc, task_id)

    async def download_video(self, model: str, task_id: str) -> GeneratedMedia:
        async def video(response: httpx.Response) -> GeneratedMedia:
            return media_of(await read_body(response, VIDEO_BYTES), ("video/",), "a video")

        return await self._transport.send("GET", self._url(task_id, "/content"), self._headers(json=False), video)

    async def download_poster(self, model: str, task_id: str) -> GeneratedMedia | None:
        async def poster(response: httpx.Response) -> GeneratedMedia:
            return media_of(await read_body(response, IMAGE_BYTES), ("image/",), "an image")

        url = self._url(task_id, "/content") + "?variant=thumbnail"
        return await self._transport.send("GET", url, self._headers(json=False), poster)

    def _url(self, task_id: str, suffix: str = "") -> str:
        return f"{self.base_url}/videos/{quote(task_id, safe='')}{suffix}"

    def _task(self, doc: dict[str, Any], expected: str | None) -> VideoTask:
        task_id, status = doc.get("id"), _STATUSES.get(str(doc.get("status")))
        if not isinstance(task_id, str) or not _TASK_ID.match(task_id) or status is None:
            raise ProviderError(f"the {self.label} {self.name!r} sent a malformed response (not a video task)",
                                provider=self.name)
        if expected is not None and task_id != expected:
            raise ProviderError(f"the {self.label} {self.name!r} answered for another task", provider=self.name)
        progress = doc.get("progress")
        return VideoTask(task_id=task_id, status=status,  # type: ignore[arg-type]
                         progress=int(progress) if isinstance(progress, (int, float)) else 0,
                         error_code=failure_code(doc) if status == "failed" else None)
