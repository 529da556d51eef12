"""Media, narration and research inside a run, against fake providers speaking each protocol over real sockets:
every element reaches done; a failing image leaves a placeholder, a completed run and a warning, and its retry
regenerates exactly that element; a worker SIGKILLed while a video task is in flight never submits it again; a
narration failure pauses the run and retry resumes that step only; every slot off gives a text-only course; and
the key is never in an event, a log line or an asset row.

Run as a module (``python -m tests.integration.test_media_lane URL JSON``) it is a worker process for the kill
test.
"""

from __future__ import annotations

import json
import logging
import re
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import msgspec
import pytest
import trio

from openmaic import errors
from openmaic.config import Config, ProviderConfig, Secret
from openmaic.courses import format as fmt
from openmaic.courses.document import asset_url, document_of
from openmaic.courses.events import CourseDocument
from openmaic.events.log import EventLog
from openmaic.media.assets import read_asset_head, read_asset_range
from openmaic.media.commands import media_states, media_warning, retry_media
from openmaic.events.core import SessionCreated, SessionEnded
from openmaic.events.log import NewStream, StreamAppend
from openmaic.media.lane import lane_id, tell_run
from openmaic.media.slots import MediaRouter
from openmaic.models.media import sniff
from openmaic.runs.events import RunInput, Voice
from openmaic.runs.fold import RunState, evolve
from openmaic.runs.service import RunService
from openmaic.runs.views import job_view
from tests.fakes.media_server import FakeMediaServer, Status, open_fake_media
from tests.integration.test_generation import (
    OWNER, assert_complete_course, config, course_doc, decoded, events, open_generation_worker, requirement,
    step_completions, wait_state,
)  # fmt: skip
from tests.runtime import wait_for

ROOT = Path(__file__).resolve().parents[2]
KEY = "sk-test-SECRET-media-lane-91c"


def vendor(kind: str, url: str, retries: int = 0) -> ProviderConfig:
    return ProviderConfig(kind=kind, base_url=url, api_key=Secret(KEY), max_retries=retries,  # type: ignore[arg-type]
                          timeout_s=5.0)


def fake_routes(fake: FakeMediaServer, *, retries: int = 0) -> dict[str, Any]:
    """Every media slot routed to the fake, each by its own protocol."""
    return {
        "image": ("vendor", vendor("openai-images", fake.url, retries), "gpt-image-1"),
        "video": ("vendor", vendor("sora", fake.url, retries), "sora-2"),
        "tts": ("vendor", vendor("openai-speech", fake.url, retries), "gpt-4o-mini-tts"),
        "webSearch": ("search", vendor("tavily", fake.tavily_url, retries), "basic"),
    }


async def run_state(log: EventLog, run_id: str) -> RunState:
    state, _ = await log.fold(run_id, RunState(), evolve)
    return state


def media_refs(state: RunState) -> tuple[str, str]:
    """The run's one picture and one video, by the refs its confirmed outline gave them: ``gen_img_``/``gen_vid_``
    and 8 hex digits, unique to the run."""
    asked = [m for item in state.confirmed for m in item.mediaGenerations or []]
    (image,) = [m.elementId for m in asked if m.type == "image"]
    (video,) = [m.elementId for m in asked if m.type == "video"]
    assert re.fullmatch(r"gen_img_[0-9a-f]{8}", image) and re.fullmatch(r"gen_vid_[0-9a-f]{8}", video)
    return image, video


def placed(course_id: str, doc: CourseDocument) -> dict[str, tuple[Any, Any]]:
    """Each generated medium as the served document shows it, by its ref: ``(src, poster)`` of its element (the
    stored scenes keep the ref: an image's ``src``, a video's ``mediaRef``)."""
    def elements(scenes: Any) -> dict[tuple[str, str], Any]:
        return {(s.id, e.id): e for s in scenes if isinstance(s.content, fmt.SlideContent)
                for e in s.content.canvas.elements}

    stored = elements(s for s in doc.scenes if s.id in doc.ready)
    out: dict[str, tuple[Any, Any]] = {}
    for key, e in elements(document_of(course_id, doc).scenes).items():
        if isinstance(e, fmt.ImageElement) and stored[key].src.startswith("gen_img_"):
            out[stored[key].src] = (e.src, None)
        elif isinstance(e, fmt.VideoElement) and isinstance(e.mediaRef, str):
            out[e.mediaRef] = (e.src, e.poster)
    return out


def speeches(doc: CourseDocument) -> list[fmt.SpeechAction]:
    """Every speech action of the course's scenes that says something (each one is narrated by itself)."""
    return [a for s in doc.scenes for a in s.actions or [] if isinstance(a, fmt.SpeechAction) and a.text.strip()]


async def wait_media_pass(log: EventLog, run_id: str, n: int, timeout: float = 30.0) -> RunState:
    async def reached() -> bool:
        return (await run_state(log, run_id)).media_passes >= n

    await wait_for(reached, timeout=timeout)
    return await run_state(log, run_id)


async def test_a_run_started_without_web_search_searches_nothing_though_a_search_slot_is_set(db_url, db):
    log = EventLog(db)
    cfg = config()
    svc = RunService(log, cfg)
    async with open_fake_media() as fake:
        inp = RunInput(requirement=requirement(), outline_review="auto", enable_web_search=False)
        snap = await svc.create_run(OWNER, "c-no-search", inp)
        async with open_generation_worker(db_url, cfg, media=fake_routes(fake)):
            await wait_state(svc, snap.id, "completed")
    (done,) = await decoded(log, snap.id, "run.research_done")
    assert done.skipped and not done.sources
    assert fake.counts["search"] == 0


async def test_every_media_element_and_narration_is_done_through_the_real_protocols(db_url, db):
    log = EventLog(db)
    cfg = config()
    svc = RunService(log, cfg)
    async with open_fake_media() as fake:
        snap = await svc.create_run(OWNER, "c1", RunInput(requirement=requirement(), outline_review="auto"))
        async with open_generation_worker(db_url, cfg, media=fake_routes(fake)):
            await wait_state(svc, snap.id, "completed")
        assert not fake.errors
        doc = await assert_complete_course(log, svc, snap.id)
        state = await run_state(log, snap.id)
        # research: the search's sources, before the outline
        (done,) = await decoded(log, snap.id, "run.research_done")
        assert [s.url for s in done.sources] == ["https://example.org/r1", "https://example.org/r2",
                                                 "https://example.org/r3"]
        assert fake.of("search")[0].body["query"] == requirement()
        assert state.research_sources == tuple(done.sources)
        # media: one image and one video, done, their assets in the owner's store
        image, video_ref = media_refs(state)
        assert {k: v["status"] for k, v in media_states(state).items()} == {image: "done", video_ref: "done"}
        assert media_warning(state, f"/api/generation-runs/{snap.id}") is None
        assert fake.counts["images"] == 1 and fake.counts["videos.submit"] == 1 and fake.counts["search"] == 1
        video = state.media[video_ref]
        assert (await read_asset_head(db, OWNER, video.asset_id)).media_type == "video/mp4"
        assert (await read_asset_head(db, OWNER, video.poster_asset_id)).media_type == "image/png"
        assert {k: (m.status, m.asset_id) for k, m in doc.media.items()} == \
            {k: ("done", m.asset_id) for k, m in state.media.items()}
        # ... and put in their places in the document the course is served as
        assert placed(snap.course_id, doc) == {
            image: (asset_url(state.media[image].asset_id), None),
            video_ref: (asset_url(video.asset_id), asset_url(video.poster_asset_id)),
        }
        # narration: one clip per speech action, named by its audioId, in the course
        spoken = speeches(doc)
        assert spoken and fake.counts["speech"] == len(spoken)
        assert sorted(r.body["input"] for r in fake.of("speech")) == sorted(" ".join(a.text.split()) for a in spoken)
        for action in spoken:
            assert isinstance(action.audioId, str)
            head = await read_asset_head(db, OWNER, action.audioId)
            assert head.media_type == "audio/mpeg" and head.course_id == snap.course_id
            assert sniff(await read_asset_range(db, OWNER, action.audioId, 0, 16)) == "audio/mpeg"
        # the run completed only after the media pass
        types = [e.type for e in await events(log, snap.id)]
        assert types.index("run.media_pass_done") < types.index("session.ended")


async def test_the_runs_voice_speaks_when_it_names_the_speech_provider_and_is_left_out_when_not(db_url, db):
    """OpenMAIC's start body chooses a voice ``{providerId, voiceId, speed}``: the narration is spoken with it when
    ``providerId`` is the provider serving the tts slot; a voice of another provider is not sent to this one (it
    would refuse it), so the slot's provider speaks with its default voice."""
    log = EventLog(db)
    cfg = config()
    svc = RunService(log, cfg)
    async with open_fake_media() as fake:
        ours = await svc.create_run(OWNER, "c-voice", RunInput(
            requirement=requirement(), outline_review="auto", voice=Voice(provider_id="vendor", voice_id="nova",
                                                                          speed=1.5)))  # fmt: skip
        theirs = await svc.create_run(OWNER, "c-other", RunInput(
            requirement=requirement(), outline_review="auto", voice=Voice(provider_id="azure-tts",
                                                                          voice_id="zh-CN-XiaoxiaoNeural")))
        async with open_generation_worker(db_url, cfg, media=fake_routes(fake)):
            await wait_state(svc, ours.id, "completed")
            await wait_state(svc, theirs.id, "completed")
        assert not fake.errors
        spoken = {(r.body["voice"], r.body["speed"]) for r in fake.of("speech")}
        assert spoken == {("nova", 1.5), ("alloy", 1.0)}, spoken
        said = [len(speeches(await course_doc(log, run.course_id))) for run in (ours, theirs)]
        assert len(fake.of("speech")) == sum(said) and all(said)


async def test_a_failing_image_is_a_placeholder_and_its_retry_regenerates_only_it(db_url, db):
    log = EventLog(db)
    cfg = config()
    svc = RunService(log, cfg)
    async with open_fake_media() as fake:
        fake.fail("images", Status(500, {"error": {"message": f"upstream said {KEY}"}}))
        snap = await svc.create_run(OWNER, "c1", RunInput(requirement=requirement(), outline_review="auto"))
        async with open_generation_worker(db_url, cfg, media=fake_routes(fake)):
            await wait_state(svc, snap.id, "completed")
            state = await run_state(log, snap.id)
            image, video = media_refs(state)
            assert media_states(state)[image] == {"mediaType": "image", "status": "failed",
                                                  "message": "Image generation failed", "retryable": True}
            assert media_states(state)[video]["status"] == "done"
            path = f"/api/generation-runs/{snap.id}"
            assert media_warning(state, path) == f"1 of 2 images and videos could not be generated; see GET {path} " \
                                                 "for each one"
            job = job_view(snap.id, state, "http://h")
            assert (job.status, job.result.warning, job.message) == ("succeeded", media_warning(state, path),
                                                                     media_warning(state, path))
            doc = await course_doc(log, snap.course_id)
            assert (doc.media[image].status, doc.media[image].asset_id) == ("failed", None)
            assert placed(snap.course_id, doc)[image] == (image, None)  # the placeholder stays in its place
            before = Counter(fake.counts)
            with pytest.raises(errors.Conflict, match="only a failed element can be retried"):
                await retry_media(log, OWNER, snap.id, "r0", video)
            with pytest.raises(errors.StreamNotFound):
                await retry_media(log, "mallory", snap.id, "r0", image)
            first = await retry_media(log, OWNER, snap.id, "r1", image)
            assert (await retry_media(log, OWNER, snap.id, "r1", image)).seq == first.seq  # replayed
            state = await wait_media_pass(log, snap.id, 2)
        assert media_states(state)[image]["status"] == "done"
        assert media_warning(state, path) is None
        after = Counter(fake.counts)
        assert after - before == Counter({"images": 1})  # nothing else was generated again
        doc = await course_doc(log, snap.course_id)
        assert (doc.media[image].status, doc.media[image].asset_id) == ("done", state.media[image].asset_id)
        assert placed(snap.course_id, doc)[image] == (asset_url(state.media[image].asset_id), None)
        lane = await events(log, lane_id(snap.id))
        settled = Counter(log.decode(e).element_id for e in lane if e.type == "media.element_settled")
        assert settled == Counter({image: 2, video: 1})


async def test_narration_failure_pauses_the_run_and_retry_resumes_that_step_only(db_url, db):
    log = EventLog(db)
    cfg = config(step_retries=2)
    svc = RunService(log, cfg)
    async with open_fake_media() as fake:
        fake.fail("speech", *[Status(503)] * 3)  # the first narration step's three attempts
        snap = await svc.create_run(OWNER, "c1", RunInput(requirement=requirement(), outline_review="auto"))
        async with open_generation_worker(db_url, cfg, media=fake_routes(fake)):
            s = await wait_state(svc, snap.id, "paused")
            assert s.step == "scene:0:narration"
            assert s.error == "the speech provider 'vendor' failed after 1 attempt (HTTP 503)"
            paused_at = len(await events(log, snap.id))
            await svc.retry(OWNER, snap.id, "retry-1")
            await wait_state(svc, snap.id, "completed")
        await assert_complete_course(log, svc, snap.id)
        evs = await events(log, snap.id)
        resumed = [log.decode(e).step for e in evs[paused_at:] if e.type == "run.step_started"]
        assert resumed[0] == "scene:0:narration"
        assert set(step_completions(evs, log).values()) == {1}


async def test_every_slot_off_gives_a_text_only_course_without_a_warning(db_url, db):
    log = EventLog(db)
    cfg = config()
    svc = RunService(log, cfg)
    off = {"image": None, "video": None, "tts": None, "webSearch": None}
    assert MediaRouter(cfg, overrides=off).capabilities() == {"image": False, "video": False, "tts": False,
                                                              "webSearch": False}
    snap = await svc.create_run(OWNER, "c1", RunInput(requirement=requirement(), outline_review="auto"))
    async with open_generation_worker(db_url, cfg, media=off):
        await wait_state(svc, snap.id, "completed")
    doc = await assert_complete_course(log, svc, snap.id)
    state = await run_state(log, snap.id)
    # With no picture or video slot the outline asks for none (as OpenMAIC's does): no placeholder, no media lane.
    assert state.confirmed and not any(item.mediaGenerations for item in state.confirmed)
    assert media_states(state) == {} and placed(snap.course_id, doc) == {} and not doc.media
    assert await log.stream_row(lane_id(snap.id)) is None
    assert media_warning(state, "/x") is None
    assert speeches(doc) and not any(a.audioId for a in speeches(doc))
    (research,) = await decoded(log, snap.id, "run.research_done")
    assert research.skipped and not research.sources


async def test_keys_are_never_in_events_logs_or_asset_rows(db_url, db, caplog):
    caplog.set_level(logging.DEBUG)
    log = EventLog(db)
    cfg = config()
    svc = RunService(log, cfg)
    async with open_fake_media() as fake:
        echo = {"error": {"code": "bad", "message": f"your key {KEY} was rejected"}}
        fake.fail("images", Status(401, echo))
        fake.fail("search", Status(400, echo))
        snap = await svc.create_run(OWNER, "c1", RunInput(requirement=requirement(), outline_review="auto"))
        async with open_generation_worker(db_url, cfg, media=fake_routes(fake)):
            await wait_state(svc, snap.id, "completed")
        assert all(r.headers.get("authorization") == f"Bearer {KEY}" for r in fake.requests)  # it was sent ...
    for stream in (snap.id, snap.course_id, lane_id(snap.id)):
        for e in await events(log, stream):
            assert KEY.encode() not in bytes(e.data)  # ... and kept nowhere
    assert KEY not in caplog.text
    state = await run_state(log, snap.id)
    assert "check its API key" not in json.dumps(media_states(state))  # an element's message is the fixed one
    for m in state.media.values():
        for asset in (m.asset_id, m.poster_asset_id):
            if asset:
                head = await read_asset_head(db, OWNER, asset)
                assert KEY not in msgspec.json.encode(head).decode()


# -- a worker killed while a video task is in flight -------------------------------------------------------------


async def test_a_worker_killed_while_a_video_task_is_in_flight_never_submits_it_again(db_url, db):
    log = EventLog(db)
    cfg = config()
    svc = RunService(log, cfg)
    async with open_fake_media(video_polls=2) as fake:
        fake.hold("videos.poll")  # the task is submitted; its first poll hangs until released
        snap = await svc.create_run(OWNER, "c1", RunInput(requirement=requirement(), outline_review="auto"))
        args = {"image": fake.url, "tavily": fake.tavily_url}
        proc = subprocess.Popen([sys.executable, "-m", "tests.integration.test_media_lane", db_url, json.dumps(args)],
                                cwd=ROOT, stdout=subprocess.PIPE, text=True)
        try:
            with trio.fail_after(30):
                assert (await trio.to_thread.run_sync(proc.stdout.readline)).strip()

            async def in_flight() -> bool:
                lane = await events(log, lane_id(snap.id))
                return fake.waiting["videos.poll"] >= 1 and any(e.type == "media.video_submitted" for e in lane)

            await wait_for(in_flight, timeout=40)
            proc.send_signal(signal.SIGKILL)
            proc.wait()
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            proc.stdout.close()
        fake.release("videos.poll")
        (submitted,) = await decoded(log, lane_id(snap.id), "media.video_submitted")
        async with open_generation_worker(db_url, cfg, media=fake_routes(fake)):
            await wait_state(svc, snap.id, "completed", timeout=60)
        state = await run_state(log, snap.id)
        assert state.media[media_refs(state)[1]].status == "done"
        assert fake.counts["videos.submit"] == 1  # paid for once
        assert fake.counts["images"] == 1  # the picture settled before the kill is not generated again
        polled = {r.path.rsplit("/", 1)[-1] for r in fake.of("videos.poll")}
        assert polled == {submitted.task_id}  # the new attempt waited on the same task
        claims = [log.decode(e) for e in await events(log, lane_id(snap.id)) if e.type == "lease.claimed"]
        assert [c.reason for c in claims][-1] == "orphaned"


def _routes_from_args(args: dict[str, str]) -> dict[str, Any]:
    fake = FakeMediaServer()
    fake.port = int(args["image"].split(":")[2].split("/")[0])
    return fake_routes(fake)


async def _worker_main(url: str, args: dict[str, str]) -> None:
    cfg: Config = config(lease_ttl_s=1.0, heartbeat_s=0.2)
    async with open_generation_worker(url, cfg, media=_routes_from_args(args)) as worker:
        print(worker.id, flush=True)
        await trio.sleep_forever()


if __name__ == "__main__":
    trio.run(_worker_main, sys.argv[1], json.loads(sys.argv[2]))


async def test_a_full_asset_store_fails_the_media_not_reached_and_leaves_scenes_unvoiced(db_url, db):
    log = EventLog(db)
    base = config()
    cfg = msgspec.structs.replace(base, limits=msgspec.structs.replace(base.limits, asset_bytes_per_owner=100))
    svc = RunService(log, cfg)
    async with open_fake_media() as fake:
        snap = await svc.create_run(OWNER, "c1", RunInput(requirement=requirement(), outline_review="auto"))
        async with open_generation_worker(db_url, cfg, media=fake_routes(fake)):
            await wait_state(svc, snap.id, "completed")
    state = await run_state(log, snap.id)
    views = media_states(state)
    image, video = media_refs(state)
    # The picture (73 bytes) fits; the video's poster (73 more) does not, nor does any narration clip.
    assert views[image]["status"] == "done"
    assert views[video] == {"mediaType": "video", "status": "failed", "errorCode": "ASSET_QUOTA_EXCEEDED",
                                  "message": "Asset storage is full; the video was not generated", "retryable": True}
    n = len(state.scenes)
    assert all(s.unvoiced for s in state.scenes)
    doc = await course_doc(log, snap.course_id)
    assert speeches(doc) and not any(a.audioId for a in speeches(doc))
    path = f"/api/generation-runs/{snap.id}"
    assert media_warning(state, path) == (f"1 of 2 images and videos could not be generated; see GET {path} for "
                                          f"each one; {n} speech clip(s) were left without narration")


async def test_a_run_that_has_ended_is_not_told_its_media_pass_is_done(db):
    # The lane settles its last element just as the run ends (deleted course, cancel): the run's history is closed.
    log = EventLog(db)
    await log.append(StreamAppend(stream_id="run-ended", events=[SessionCreated(kind="generation", owner_id="o")],
                                  create=NewStream("generation", "o")))
    await log.append(StreamAppend(stream_id="run-ended", events=[SessionEnded(status="ended")], status="terminal"))
    await tell_run(log, "run-ended", lane_id("run-ended"), 1)
    assert [e.type for e in await log.read_stream("run-ended", 0)] == ["session.created", "session.ended"]
