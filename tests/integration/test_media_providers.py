"""Media providers over their real HTTP protocols, against the fake media server on real sockets: OpenAI images
(b64_json and url), speech, videos (submit, poll, download), Tavily search; retries, final errors, a submit that
is never sent twice, and that the key never leaks into errors or logs."""

from __future__ import annotations

import base64
import logging
from dataclasses import dataclass, field
from typing import Any

import pytest
import trio

from openmaic.config import ProviderConfig, Secret
from openmaic.errors import ConfigError
from openmaic.models.errors import ProviderError
from openmaic.models.media import VideoTaskFailed, build_media_provider, sniff, wait_video
from openmaic.models.openai_media import SPEECH_INPUT_CHARS, speech_pieces
from tests.fakes.media_server import Status, open_fake_media, silent_mp3

KEY = "sk-test-SECRET-media-7f3"


@dataclass(frozen=True)
class Cfg:
    """Provider settings of any kind (what the media factory reads)."""

    kind: str
    base_url: str
    api_key: str | None = KEY
    timeout_s: float = 5.0
    max_retries: int = 2
    headers: dict[str, str] = field(default_factory=dict)
    options: dict[str, Any] = field(default_factory=dict)

    def key(self) -> str | None:
        return self.api_key


class Sleeps:
    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, delay: float) -> None:
        self.delays.append(delay)
        await trio.lowlevel.checkpoint()


def provider(fake: Any, capability: str, *, kind: str = "openai", sleep: Sleeps | None = None, **kw: Any) -> Any:
    url = fake.tavily_url if kind == "tavily" else fake.url
    return build_media_provider("vendor", Cfg(kind=kind, base_url=url, **kw), capability,  # type: ignore[arg-type]
                                sleep=sleep or Sleeps())


def no_key_in(*texts: str) -> None:
    for t in texts:
        assert KEY not in t


async def test_image_as_b64_json_with_the_request_openai_documents():
    async with open_fake_media() as fake:
        images = provider(fake, "image")
        media = await images.generate_image("gpt-image-1", "A leaf in the sun", aspect_ratio="16:9")
        assert media.media_type == "image/png" and sniff(media.data) == "image/png"
        (req,) = fake.of("images")
        assert req.path == "/v1/images/generations"
        assert req.body == {"model": "gpt-image-1", "prompt": "A leaf in the sun", "n": 1, "size": "1536x1024"}
        assert req.headers["authorization"] == f"Bearer {KEY}"


async def test_image_as_url_is_fetched_without_credentials():
    async with open_fake_media(image_as_url=True) as fake:
        media = await provider(fake, "image").generate_image("dall-e-3", "A cell", aspect_ratio="1:1")
        assert media.media_type == "image/png"
        assert [r.path for r in fake.requests][0] == "/v1/images/generations"
        (download,) = fake.of("files")
        assert "authorization" not in download.headers


async def test_image_retries_429_honouring_retry_after_then_succeeds():
    sleeps = Sleeps()
    async with open_fake_media() as fake:
        fake.fail("images", Status(429, {"error": {"code": "rate_limit_exceeded"}}, {"retry-after": "3"}),
                  Status(503))
        media = await provider(fake, "image", sleep=sleeps).generate_image("m", "p")
        assert media.media_type == "image/png"
        assert fake.counts["images"] == 3
        assert sleeps.delays[0] == 3.0 and 0 <= sleeps.delays[1] <= 1.0


async def test_image_rejection_is_final_and_key_free(caplog):
    caplog.set_level(logging.DEBUG)
    async with open_fake_media() as fake:
        fake.fail("images", Status(400, {"error": {"code": "content_policy_violation", "message": f"echo {KEY}"}}))
        with pytest.raises(ProviderError) as info:
            await provider(fake, "image").generate_image("m", f"secret prompt {KEY}")
        assert fake.counts["images"] == 1
        assert info.value.message == "the image provider 'vendor' rejected the request (HTTP 400, content_policy_violation)"
        no_key_in(info.value.message, repr(info.value.details), caplog.text)


async def test_image_provider_down_after_its_retries():
    async with open_fake_media() as fake:
        fake.fail("images", *[Status(500)] * 3)
        with pytest.raises(ProviderError, match=r"image provider 'vendor' failed after 3 attempts \(HTTP 500\)"):
            await provider(fake, "image").generate_image("m", "p")


async def test_image_that_is_not_an_image_is_refused():
    async with open_fake_media() as fake:
        fake.fail("images", Status(200, {"data": [{"b64_json": base64.b64encode(b"<html>no</html>").decode()}]}))
        with pytest.raises(ProviderError, match="malformed response"):
            await provider(fake, "image").generate_image("m", "p")


async def test_speech_returns_the_mp3_and_splits_long_scripts_at_sentences():
    async with open_fake_media() as fake:
        speech = provider(fake, "tts", options={"voice": "nova"})
        clip = await speech.synthesize("gpt-4o-mini-tts", "Hello class. Today: leaves.", speed=1.25)
        assert clip.media_type == "audio/mpeg" and sniff(clip.data) == "audio/mpeg"
        (req,) = fake.of("speech")
        assert req.body == {"model": "gpt-4o-mini-tts", "input": "Hello class. Today: leaves.", "voice": "nova",
                            "response_format": "mp3", "speed": 1.25}
        long = " ".join(f"Sentence number {i} says a little more." for i in range(300))
        clip = await speech.synthesize("tts-1", long, voice="alloy")
        pieces = [r.body["input"] for r in fake.of("speech")[1:]]
        assert len(pieces) > 1 and all(len(p) <= SPEECH_INPUT_CHARS for p in pieces)
        assert " ".join(pieces) == long and all(p.endswith(".") for p in pieces)
        assert clip.data == silent_mp3() * len(pieces)


def test_speech_pieces_cut_overlong_sentences():
    text = "word " * 3000
    pieces = speech_pieces(text, limit=100)
    assert all(0 < len(p) <= 100 for p in pieces) and " ".join(pieces) == " ".join(text.split())


async def test_video_submit_poll_download_and_poster():
    sleeps = Sleeps()
    async with open_fake_media(video_polls=2) as fake:
        videos = provider(fake, "video", sleep=sleeps, options={"poll_interval_s": 0.5})
        task_id = await videos.submit_video("sora-2", "A plant grows", aspect_ratio="16:9", seconds=5)
        (submit,) = fake.of("videos.submit")
        assert submit.headers["content-type"].startswith("multipart/form-data")
        assert submit.body == {"model": "sora-2", "prompt": "A plant grows", "seconds": "4", "size": "1280x720"}
        seen: list[str] = []

        async def progress(task: Any) -> None:
            seen.append(task.status)

        done = await wait_video(videos, "sora-2", task_id, on_progress=progress, sleep=sleeps)
        assert done.status == "completed" and seen == ["in_progress", "in_progress", "completed"]
        assert sleeps.delays == [0.5, 0.5]
        video = await videos.download_video("sora-2", task_id)
        poster = await videos.download_poster("sora-2", task_id)
        assert (video.media_type, poster.media_type) == ("video/mp4", "image/png")
        assert [r.path for r in fake.of("videos.content")] == [f"/v1/videos/{task_id}/content",
                                                               f"/v1/videos/{task_id}/content?variant=thumbnail"]


async def test_video_task_reported_failed_is_final():
    async with open_fake_media() as fake:
        videos = provider(fake, "video")
        task_id = await videos.submit_video("sora-2", "p")
        fake.fail("videos.poll", Status(200, {"id": task_id, "status": "failed",
                                              "error": {"code": "moderation_blocked", "message": "no"}}))
        with pytest.raises(VideoTaskFailed) as info:
            await wait_video(videos, "sora-2", task_id, sleep=Sleeps())
        assert info.value.error_code == "moderation_blocked"
        assert "reported the task as failed (moderation_blocked)" in info.value.message


async def test_video_submit_is_retried_on_5xx_but_never_resent_after_a_lost_answer():
    async with open_fake_media() as fake:
        videos = provider(fake, "video", max_retries=3)
        fake.fail("videos.submit", Status(503), Status(429))
        task_id = await videos.submit_video("sora-2", "p")
        assert fake.counts["videos.submit"] == 3
        fake.fail("videos.submit", Status(0))  # the provider got the request, the answer never came
        with pytest.raises(ProviderError, match="never sent twice"):
            await videos.submit_video("sora-2", "p")
        assert fake.counts["videos.submit"] == 4
        fake.fail("videos.poll", Status(0), Status(502))  # polling is safe to repeat
        assert (await videos.poll_video("sora-2", task_id)).task_id == task_id
        assert fake.counts["videos.poll"] == 3


async def test_video_answer_for_another_task_is_refused():
    async with open_fake_media() as fake:
        videos = provider(fake, "video")
        fake.fail("videos.poll", Status(200, {"id": "video_other", "status": "completed"}))
        with pytest.raises(ProviderError, match="another task"):
            await videos.poll_video("m", "video_mine")


async def test_tavily_search_request_and_results():
    async with open_fake_media() as fake:
        search = provider(fake, "webSearch", kind="tavily")
        sources = await search.search("  photosynthesis   for 8th graders " + "x" * 500, max_results=2)
        (req,) = fake.of("search")
        assert req.path == "/search" and req.headers["authorization"] == f"Bearer {KEY}"
        assert req.body["query"].startswith("photosynthesis for 8th graders") and len(req.body["query"]) == 400
        assert {k: req.body[k] for k in ("max_results", "search_depth", "include_answer")} == \
            {"max_results": 2, "search_depth": "basic", "include_answer": False}
        assert [s.url for s in sources] == ["https://example.org/r1", "https://example.org/r2"]
        assert sources[0].score == pytest.approx(0.9)


async def test_tavily_drops_results_that_are_not_web_pages():
    async with open_fake_media() as fake:
        fake.fail("search", Status(200, {"results": [
            {"title": "ok", "url": "https://a.example/x", "content": "c"},
            {"title": "script", "url": "javascript:alert(1)", "content": "c"},
            {"title": "", "url": "https://b.example/", "content": ""},
            "junk",
        ]}))
        sources = await provider(fake, "webSearch", kind="tavily").search("q")
        assert [s.url for s in sources] == ["https://a.example/x"]


async def test_tavily_bad_key_says_so_without_the_key():
    async with open_fake_media() as fake:
        fake.fail("search", Status(401, {"detail": {"error": f"Unauthorized: {KEY}"}}))
        with pytest.raises(ProviderError) as info:
            await provider(fake, "webSearch", kind="tavily").search("q")
        assert info.value.message == "the web search provider 'vendor' rejected the request (HTTP 401); check its API key"


def test_media_factory_refuses_a_kind_that_cannot_serve_the_slot():
    cfg = ProviderConfig(kind="anthropic", base_url="https://api.anthropic.com", api_key=Secret(KEY))
    with pytest.raises(ConfigError, match="cannot serve the image slot"):
        build_media_provider("claude", cfg, "image")
    with pytest.raises(ConfigError, match="cannot serve the webSearch slot; this server calls demo, tavily"):
        build_media_provider("oa", ProviderConfig(kind="openai", base_url="https://x.example/v1"), "webSearch")
    assert build_media_provider("demo", ProviderConfig(kind="demo"), "tts").name == "demo"
    for protocol, capability, cls in (("openai-images", "image", "OpenAIImages"), ("sora", "video", "OpenAIVideos"),
                                      ("openai-speech", "tts", "OpenAISpeech"), ("tavily", "webSearch", "TavilySearch")):
        built = build_media_provider("p", Cfg(kind=protocol, base_url="https://x.example/v1"), capability)  # type: ignore[arg-type]
        assert type(built).__name__ == cls
