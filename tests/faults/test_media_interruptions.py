"""The database interrupting a media element's commit never settles it failed and never pays the provider twice: a
picture whose asset write was cut off is stored from the bytes the interrupted attempt kept (the image provider is
asked once), and a video whose ``media.video_submitted`` was cut off is recorded and waited on, never submitted
again."""

from __future__ import annotations

from typing import Any

import trio

from openmaic.events.core import DATABASE_TROUBLE
from openmaic.events.log import EventLog
from openmaic.media.lane import lane_id
from openmaic.runs.events import RunInput
from openmaic.runs.service import RunService
from tests.fakes.media_server import open_fake_media
from tests.faults.blocking import held
from tests.integration.test_generation import OWNER, config, decoded, open_generation_worker, requirement, wait_state
from tests.integration.test_media_lane import fake_routes, run_state
from tests.runtime import wait_for

ASSET_LOCK = f"SELECT pg_advisory_xact_lock(hashtextextended('openmaic.assets:' || openmaic_owner('{OWNER}'), 0))"


def routes(fake: Any) -> dict[str, Any]:
    # Narration off: the lane's asset writes are then the only ones the owner's asset lock holds up.
    return {**fake_routes(fake), "tts": None}


def run_refs(state: Any) -> dict[str, str]:
    """The run's media refs by type (refs are unique to each run: ``gen_img_<8 hex>``)."""
    return {m.type: m.elementId for o in state.confirmed for m in o.mediaGenerations or []}


async def wait_lane_parked(log: EventLog, lane: str) -> None:
    """Wait until the lane has recorded telling the run and let go of its lease. The run may complete before the
    lane commits its report (the run is told first), and a worker shut down in between would interrupt the lane
    for ``shutdown``, an interruption that is the test's own doing."""
    async def parked() -> bool:
        row = await log.stream_row(lane)
        return (row is not None and row.status in ("waiting", "terminal") and row.lease_worker is None
                and await decoded(log, lane, "media.pass_reported") != [])

    await wait_for(parked, timeout=30)


async def assert_lane_uncharged(log: EventLog, lane: str) -> None:
    interrupted = await decoded(log, lane, "session.interrupted")
    assert [i.reason for i in interrupted] == [DATABASE_TROUBLE], interrupted
    claims = await decoded(log, lane, "lease.claimed")
    assert [c.reason for c in claims][1:] == ["queued"] * (len(claims) - 1), claims


async def test_a_pictures_asset_write_cut_off_is_stored_from_the_kept_bytes(db_url, db):
    log = EventLog(db)
    cfg = config()
    svc = RunService(log, cfg)
    async with open_fake_media() as fake, held(db_url, "SELECT 1") as blocker:
        # The owner's asset lock is held: the picture's asset write waits on it, and its backend is ended.
        await blocker.conn.execute(ASSET_LOCK)
        snap = await svc.create_run(OWNER, "c1", RunInput(requirement=requirement(), outline_review="auto"))
        async with open_generation_worker(db_url, cfg, media=routes(fake)):
            await blocker.terminate_blocked("%openmaic.assets:%", timeout=60)
            await blocker.conn.execute("ROLLBACK")
            await blocker.conn.execute("BEGIN")
            await wait_state(svc, snap.id, "completed", timeout=60)
            await wait_lane_parked(log, lane_id(snap.id))
        state = await run_state(log, snap.id)
        refs = run_refs(state)
        assert state.media[refs["image"]].status == "done", state.media
        assert fake.counts["images"] == 1  # not generated again: the interrupted attempt's bytes were kept
        lane = lane_id(snap.id)
        settled = await decoded(log, lane, "media.element_settled")
        assert [(s.element_id, s.status) for s in settled] == [(refs["image"], "done"), (refs["video"], "done")]
        await assert_lane_uncharged(log, lane)


async def test_a_video_whose_submission_record_is_cut_off_is_never_submitted_again(db_url, db):
    log = EventLog(db)
    cfg = config()
    svc = RunService(log, cfg)
    async with open_fake_media() as fake:
        fake.hold("videos.submit")
        snap = await svc.create_run(OWNER, "c1", RunInput(requirement=requirement(), outline_review="auto"))
        lane = lane_id(snap.id)
        async with open_generation_worker(db_url, cfg, media=routes(fake)):
            async def submitting() -> bool:
                return fake.waiting["videos.submit"] >= 1

            await wait_for(submitting, timeout=60)
            # The lane's row is held while the task is accepted: its record (media.video_submitted) waits on it,
            # and its backend is ended.
            async with held(db_url, f"SELECT 1 FROM streams WHERE id = '{lane}' FOR UPDATE") as blocker:
                fake.release("videos.submit")
                await blocker.terminate_blocked()
            await wait_state(svc, snap.id, "completed", timeout=60)
            await wait_lane_parked(log, lane)
        state = await run_state(log, snap.id)
        assert state.media[run_refs(state)["video"]].status == "done", state.media
        assert fake.counts["videos.submit"] == 1  # paid for once
        (submitted,) = await decoded(log, lane, "media.video_submitted")
        polled = {r.path.rsplit("/", 1)[-1] for r in fake.of("videos.poll")}
        assert polled == {submitted.task_id}
        await assert_lane_uncharged(log, lane)


async def test_deleting_the_course_aborts_the_lanes_video_wait_within_a_second(db_url, db):
    log = EventLog(db)
    cfg = config()
    svc = RunService(log, cfg)
    async with open_fake_media() as fake:
        fake.hold("videos.poll")  # the video's wait hangs (a long generation)
        snap = await svc.create_run(OWNER, "c1", RunInput(requirement=requirement(), outline_review="auto"))
        lane = lane_id(snap.id)
        async with open_generation_worker(db_url, cfg, media=routes(fake)):
            async def polling() -> bool:
                return fake.waiting["videos.poll"] >= 1

            await wait_for(polling, timeout=60)
            await svc.delete_course(OWNER, snap.course_id, "d1")
            with trio.fail_after(1.5):
                while (await decoded(log, lane, "session.ended")) == []:
                    await trio.sleep(0.02)
            polls = fake.counts["videos.poll"]
            await trio.sleep(1.5)
            assert fake.counts["videos.poll"] == polls  # nothing asked of the provider after the stop
        assert [e.status for e in await decoded(log, lane, "session.ended")] == ["stopped"]
        video = run_refs(await run_state(log, snap.id))["video"]
        assert video not in {s.element_id for s in await decoded(log, lane, "media.element_settled")}
        await wait_state(svc, snap.id, "ended")
