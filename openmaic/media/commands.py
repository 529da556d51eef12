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
from openmaic.actors.commands import CommandResult, previous_result
from openmaic.events.log import EventLog, StreamAppend
from openmaic.media.events import MediaRetryRequested
from openmaic.media.lane import LaneState, evolve as evolve_lane, lane_id
from openmaic.runs.events import RunMediaState
from openmaic.runs.fold import RunState

__all__ = ["media_states", "media_warning", "retry_media"]

_RACES = 20


def media_states(state: RunState) -> dict[str, dict[str, Any]]:
    """The snapshot's ``media``: each element's state by element id (OpenMAIC's field names)."""
    out: dict[str, dict[str, Any]] = {}
    for element_id, m in state.media.items():
        view: dict[str, Any] = {"mediaType": m.media_type, "status": m.status}
        if m.status == "done":
            view["assetId"] = m.asset_id
            if m.poster_asset_id:
                view["posterAssetId"] = m.poster_asset_id
        if m.status == "failed":
            view["message"] = m.message
            if m.error_code:
                view["errorCode"] = m.error_code
            view["retryable"] = bool(m.retryable)
        out[element_id] = view
    return out


def media_warning(state: RunState, run_path: str) -> str | None:
    """``result.warning`` as OpenMAIC words it (``run_path``: ``/api/generation-runs/<id>``), or None. Disabled
    elements are not counted; a scene whose clip the asset store refused is a speech clip left unvoiced."""
    counted = [m for m in state.media.values() if m.status != "disabled"]
    failed = sum(1 for m in counted if m.status == "failed")
    unvoiced = sum(1 for s in state.scenes if s.unvoiced)
    parts = []
    if failed:
        parts.append(f"{failed} of {len(counted)} images and videos could not be generated; see GET {run_path} for "
                     "each one")
    if unvoiced:
        parts.append(f"{unvoiced} speech clip(s) were left without narration")
    return "; ".join(parts) or None


async def retry_media(log: EventLog, owner: str, run_id: str, command_id: str, element_id: str) -> CommandResult:
    """Generate one media element of a run again (see the module docstring). StreamNotFound for another owner's
    run or one without media; Conflict when the element is unknown, not failed, or final."""
    lane = lane_id(run_id)
    for _ in range(_RACES):
        run_row = await log.stream(run_id)
        if run_row is None or run_row["owner_id"] != owner or run_row["kind"] != "generation":
            raise errors.StreamNotFound(f"no stream {run_id!r}", stream_id=run_id)
        prev = await previous_result(log, lane, command_id, "media.retry_requested")
        if prev is not None:
            return prev
        lane_row = await log.stream(lane)
        if lane_row is None:
            raise errors.Conflict(f"the run has no media element {element_id!r}", element_id=element_id)
        lane_state, _ = await log.fold(lane, LaneState(), evolve_lane, to_seq=lane_row["head_seq"])
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
        if lane_row["status"] in ("waiting", "queued"):
            wake = {"status": "queued", "wake_at": None, "progress": True}
        pending = RunMediaState(element_id=element_id, media_type=item.kind, status="pending")
        try:
            results = await log.append(
                StreamAppend(stream_id=lane, events=[MediaRetryRequested(element_id=element_id)],
                             command_id=command_id, expected_seq=lane_row["head_seq"], **wake),
                StreamAppend(stream_id=run_id, events=[pending], expected_seq=run_row["head_seq"]),
            )
        except errors.WrongExpectedSeq:
            continue
        r = next(x for x in results if x.stream_id == lane)
        return CommandResult(command_id, r.first_seq, r.replayed)
    raise errors.Conflict("the run is changing too fast to retry its media now; retry")
