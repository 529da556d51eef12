"""The media lane's fold and decisions, pure: order, passes, retries, kept video tasks, the crash cap."""

from __future__ import annotations

from openmaic.actors.kind import Core, Step, Wait
from openmaic.config import default_config
from openmaic.events.core import SessionCreated
from openmaic.media.events import (
    LaneItem, MediaElementSettled, MediaLaneClosed, MediaLaneOpened, MediaPassReported, MediaRetryRequested,
    MediaVideoSubmitted,
)  # fmt: skip
from openmaic.media.lane import LaneState, MediaKind, evolve

ITEMS = [LaneItem(element_id="a", kind="image", prompt="A", scene_index=0, scene_id="s0"),
         LaneItem(element_id="v", kind="video", prompt="V", scene_index=1, scene_id="s1")]


def fold(*events: object) -> LaneState:
    state = LaneState()
    for seq, e in enumerate([SessionCreated(kind="media", owner_id="o"),
                             MediaLaneOpened(run_id="r", course_id="c", items=ITEMS), *events], start=1):
        state = evolve(state, e, seq)  # type: ignore[arg-type]
    return state


def test_elements_go_in_outline_order_then_the_pass_is_reported_then_the_lane_waits():
    kind = MediaKind(default_config())
    assert kind.decide(fold(), Core()).name == "media:a"  # type: ignore[union-attr]
    done_a = MediaElementSettled(element_id="a", status="done", asset_id="x")
    assert kind.decide(fold(done_a), Core()).name == "media:v"  # type: ignore[union-attr]
    done_v = MediaElementSettled(element_id="v", status="failed", message="Video generation failed")
    step = kind.decide(fold(done_a, done_v), Core())
    assert isinstance(step, Step) and step.name == "media:report"
    assert isinstance(kind.decide(fold(done_a, done_v, MediaPassReported(media_pass=1)), Core()), Wait)


def test_a_retry_after_the_pass_starts_a_new_one_for_that_element_only():
    done = [MediaElementSettled(element_id="a", status="done"), MediaElementSettled(element_id="v", status="failed"),
            MediaPassReported(media_pass=1)]
    state = fold(*done, MediaRetryRequested(element_id="v"))
    assert (state.media_pass, state.reported, state.next_item().element_id) == (2, 1, "v")  # type: ignore[union-attr]
    assert "a" in state.settled


def test_a_video_task_is_kept_for_a_retry_unless_its_failure_was_final():
    submitted = MediaVideoSubmitted(element_id="v", task_id="t1")
    kept = fold(submitted, MediaElementSettled(element_id="v", status="failed", keep_task=True))
    assert kept.tasks == {"v": "t1"}
    dropped = fold(submitted, MediaElementSettled(element_id="v", status="failed", keep_task=False))
    assert dropped.tasks == {}


def test_over_the_crash_cap_the_element_in_hand_fails_and_the_lane_is_queued_again():
    decision = MediaKind(default_config()).over_cap(fold(), Core())
    assert isinstance(decision, Wait) and decision.wake_at is not None
    (settled,) = decision.events
    assert (settled.element_id, settled.status, settled.message) == ("a", "failed", "interrupted too many times")
    assert {a.stream_id for a in decision.also} == {"r", "c"}


def test_a_closed_lane_settles():
    assert MediaKind(default_config()).decide(fold(MediaLaneClosed()), Core()).events[-1].status == "stopped"  # type: ignore[union-attr]
