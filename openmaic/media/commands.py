"""What the control plane asks of a run's media: retry one element, the snapshot's ``media``, the warning.

``retry_media`` is ``POST …/retry {commandId, media: {elementId}}``: the element must be ``failed`` and
retryable, or ``disabled`` (its slot may resolve now). It appends ``media.retry_requested`` to the run's lane
(re-queued if it was parked) and ``run.media {status: pending}`` to the run, in one transaction fenced by both
heads; repeating the command id returns the first result. Exactly that element is generated again: every other
one stays settled.
"""

from __future__ import annotations

from typing import Any

from openmaic import errors
from openmaic.actors.commands import CommandResult, owned_stream, previous_result, until_decided
from openmaic.events.log import EventLog, StreamAppend
from openmaic.media.events import MediaRetryRequested
from openmaic.media.lane import LaneState, evolve as evolve_lane, lane_id
from openmaic.runs.events import RunMediaState
from openmaic.runs.fold import RunState
from openmaic.runs.views import media_view, media_warning

__all__ = ["media_states", "media_warning", "retry_media"]



def media_states(state: RunState) -> dict[str, dict[str, Any]]:
    """The snapshot's ``media`` as plain data: each element's state by element id (OpenMAIC's field names)."""
    out = {}
    for element_id, m in state.media.items():
        view = media_view(m).to_dict()
        view.pop("elementId", None)
        out[element_id] = view
    return out


async def retry_media(log: EventLog, owner: str, run_id: str, command_id: str, element_id: str) -> CommandResult:
    """Generate one media element of a run again (see the module docstring). StreamNotFound for another owner's
    run or one without media; Conflict when the element is unknown, not failed, or final."""
    lane = lane_id(run_id)
    async def attempt() -> CommandResult:
        run_row = await owned_stream(log, owner, run_id, "generation")
        prev = await previous_result(log, lane, command_id, "media.retry_requested")
        if prev is not None:
            return prev
        lane_row = await log.stream_row(lane)
        if lane_row is None:
            raise errors.Conflict(f"the run has no media element {element_id!r}", element_id=element_id)
        lane_state, _ = await log.fold(lane, LaneState(), evolve_lane, to_seq=lane_row.head_seq)
        item = lane_state.item(element_id)
        settled = lane_state.settled.get(element_id)
        if item is None:
            raise errors.Conflict(f"the run has no media element {element_id!r}", element_id=element_id)
        if settled is None or settled.status == "done" or (settled.status == "failed" and not settled.retryable):
            what = "is still being generated" if settled is None else (
                "is done" if settled.status == "done" else f"failed for good ({settled.error_code})")
            raise errors.Conflict(f"media element {element_id!r} {what}; only a failed element can be retried",
                                  element_id=element_id)
        wake: dict[str, Any] = {}
        if lane_row.status in ("waiting", "queued"):
            wake = {"status": "queued", "wake_at": None, "progress": True}
        pending = RunMediaState(element_id=element_id, media_type=item.kind, status="pending")
        results = await log.append(
            StreamAppend(stream_id=lane, events=[MediaRetryRequested(element_id=element_id)],
                         command_id=command_id, expected_seq=lane_row.head_seq, **wake),
            # The command id on the run's event too: a repeat answers with the run as this command left it.
            StreamAppend(stream_id=run_id, events=[pending], expected_seq=run_row.head_seq, command_id=command_id),
        )
        r = next(x for x in results if x.stream_id == lane)
        return CommandResult(command_id, r.first_seq, r.replayed)
    return await until_decided(
        attempt, lambda: errors.Conflict("the run is changing too fast to retry its media now; retry"))
