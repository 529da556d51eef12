"""The ``demo`` provider's media: every media slot served offline and deterministically.

* image — a PNG card drawn from the prompt (:func:`~openmaic.models.demo_render.picture`);
* video — a task whose id carries its prompt (so a takeover in another process finds the same task), complete at
  once; its poster is the prompt's picture and its video a 3-second MP4 of that poster when ``ffmpeg`` is on the
  PATH. Without an encoder the video *is* the poster frame (a PNG), which the classroom page shows in its place;
* tts — a WAV clip whose length follows the script (:func:`~openmaic.models.demo_render.narration`);
* webSearch — three sources drawn from the query, on ``example.org`` (reserved for examples, never fetched).

Rendering is CPU work and runs in a worker thread, so a course's media never stalls the event loop.
"""

from __future__ import annotations

import base64
import hashlib
import shutil
import subprocess
import tempfile
from pathlib import Path

import trio

from openmaic.models import demo_course
from openmaic.models.demo_render import narration, picture
from openmaic.models.errors import ProviderError
from openmaic.models.media import AspectRatio, GeneratedMedia, SearchSource, VideoTask

__all__ = ["DemoMedia"]

_TASK_PREFIX = "demo-"
_PROMPT_BYTES = 140


def _encode_mp4(png: bytes, seconds: int) -> bytes | None:
    """A still MP4 of ``png`` with ffmpeg, or None when there is no encoder (or it fails)."""
    ffmpeg = shutil.which("ffmpeg")
    if ffmpeg is None:
        return None
    with tempfile.TemporaryDirectory(prefix="openmaic-demo-") as tmp:
        src, out = Path(tmp, "poster.png"), Path(tmp, "video.mp4")
        src.write_bytes(png)
        try:
            subprocess.run(
                [ffmpeg, "-nostdin", "-loglevel", "error", "-loop", "1", "-i", str(src), "-t", str(seconds),
                 "-r", "10", "-pix_fmt", "yuv420p", "-c:v", "libx264", "-movflags", "+faststart", str(out)],
                check=True, timeout=60, capture_output=True,
            )  # fmt: skip
        except (OSError, subprocess.SubprocessError):
            return None
        return out.read_bytes()


class DemoMedia:
    """A ``demo`` provider serving image, video, tts and webSearch (see the module docstring)."""

    poll_interval_s = 0.05

    def __init__(self, name: str = "demo", *, latency_ms: int = 0) -> None:
        self.name = name
        self.latency_ms = latency_ms

    def __repr__(self) -> str:
        return f"<DemoMedia {self.name!r}>"

    async def _latency(self) -> None:
        if self.latency_ms > 0:
            await trio.sleep(self.latency_ms / 1000)
        else:
            await trio.lowlevel.checkpoint()

    async def generate_image(self, model: str, prompt: str, *, aspect_ratio: AspectRatio = "16:9") -> GeneratedMedia:
        await self._latency()
        data = await trio.to_thread.run_sync(picture, prompt)
        return GeneratedMedia(media_type="image/png", data=data)

    async def submit_video(self, model: str, prompt: str, *, aspect_ratio: AspectRatio = "16:9",
                           seconds: int = 4) -> str:
        await self._latency()
        raw = " ".join(prompt.split()).encode()[:_PROMPT_BYTES]
        return _TASK_PREFIX + base64.urlsafe_b64encode(raw).decode().rstrip("=")

    def _prompt(self, task_id: str) -> str:
        if not task_id.startswith(_TASK_PREFIX):
            raise ProviderError(f"the video provider {self.name!r} has no task {task_id!r}", provider=self.name)
        packed = task_id[len(_TASK_PREFIX):]
        try:
            return base64.urlsafe_b64decode(packed + "=" * (-len(packed) % 4)).decode("utf-8", "replace")
        except ValueError:
            raise ProviderError(f"the video provider {self.name!r} has no task {task_id!r}",
                                provider=self.name) from None

    async def poll_video(self, model: str, task_id: str) -> VideoTask:
        self._prompt(task_id)
        await self._latency()
        return VideoTask(task_id=task_id, status="completed", progress=100)

    async def download_video(self, model: str, task_id: str) -> GeneratedMedia:
        poster = await trio.to_thread.run_sync(picture, self._prompt(task_id))
        video = await trio.to_thread.run_sync(_encode_mp4, poster, 3)
        if video is None:
            return GeneratedMedia(media_type="image/png", data=poster)
        return GeneratedMedia(media_type="video/mp4", data=video)

    async def download_poster(self, model: str, task_id: str) -> GeneratedMedia | None:
        data = await trio.to_thread.run_sync(picture, self._prompt(task_id))
        return GeneratedMedia(media_type="image/png", data=data)

    async def synthesize(self, model: str, text: str, *, voice: str | None = None, speed: float = 1.0) -> GeneratedMedia:
        await self._latency()
        data = await trio.to_thread.run_sync(narration, text)
        return GeneratedMedia(media_type="audio/wav", data=data)

    async def search(self, query: str, *, max_results: int = 5) -> list[SearchSource]:
        await self._latency()
        topic = demo_course.topic_of(query) or "the topic"
        topic = topic[:1].upper() + topic[1:]
        slug = "-".join(w for w in "".join(c if c.isalnum() else " " for c in topic.lower()).split())[:60] or "topic"
        tag = hashlib.sha256(query.encode()).hexdigest()[:8]
        sources = [
            SearchSource(title=f"{topic}: an overview", url=f"https://example.org/{slug}/overview-{tag}",
                         content=f"An introduction to {topic}: the key ideas, the words used, and why it matters.",
                         score=0.9),
            SearchSource(title=f"{topic} explained with examples", url=f"https://example.org/{slug}/examples-{tag}",
                         content=f"Worked examples of {topic}, from the simplest case to a realistic one.", score=0.8),
            SearchSource(title=f"Common misconceptions: {topic}",
                         url=f"https://example.org/{slug}/misconceptions-{tag}",
                         content=f"What learners often get wrong about {topic}, and how to check understanding.",
                         score=0.7),
        ]  # fmt: skip
        return sources[: max(1, max_results)]
