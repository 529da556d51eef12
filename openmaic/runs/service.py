"""The control plane of generation runs: create, snapshot, confirm-outline, retry, and deleting a run's course.

Every command is owner-checked (another owner's run or course is a StreamNotFound, identical to a missing one)
and idempotent by ``command_id``: repeating it returns the original result and writes nothing. Commands that
depend on the run's state fold the run stream up to the head seq they read (with the same fold the worker
uses) and append with ``expected_seq`` set to that head, deciding again when the stream moved on in between;
so a confirmation can never race the run's own countdown, nor a stop request a run that is just giving its
worker back.

Creating a run writes the run stream (kind ``generation``, queued) and its course stream (kind ``course``,
locked by the run) in one append. Both ids are derived from ``(owner, command_id)``, so a repeated create finds
the run it made. The owner's limit on waiting runs is checked under the owner's run lock (see
:mod:`openmaic.runs.admission`), in the same transaction as the creation.
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Callable, Sequence
from typing import Any

import msgspec

from openmaic import errors
from openmaic.actors.commands import CommandResult, owned_stream, previous_result
from openmaic.config import Config
from openmaic.courses.events import CourseCreated, CourseDeleted, CourseDocument, evolve_course
from openmaic.courses.schema import OutlineItem
from openmaic.events.core import SessionCreated
from openmaic.events.folds import FoldCache
from openmaic.events.log import EventLog, NewStream, StreamAppend
from openmaic.events.types import Event
from openmaic.events.wakeups import RUNNABLE
from openmaic.materials import missing_materials
from openmaic.runs.admission import owner_transaction, waiting_runs
from openmaic.runs.agents import unknown_agents
from openmaic.runs.decide import check_outline, confirmation
from openmaic.runs.events import RunCreated, RunInput, RunRetryRequested, RunStateChanged, RunStopRequested
from openmaic.runs.fold import RunState, evolve, next_step
from openmaic.store.database import Record
from openmaic.store.queries import Q

__all__ = ["MAX_REQUIREMENT_CHARS", "RunService", "RunSnapshot", "TooManyRuns", "course_title", "run_ids"]

MAX_REQUIREMENT_CHARS = 20_000
MAX_MATERIALS = 20
MAX_AGENTS = 8
MAX_PROFILE_CHARS = 5_000
_MAX_RACES = 50
_NAMESPACE = uuid.UUID("6f6d6169-632d-7275-6e73-2d6964730000")


class TooManyRuns(errors.OpenMaicError):
    """Too many runs are waiting to start; wait for some of them to start or finish, then try again."""

    code = "too_many_runs"
    status = 429


class RunSnapshot(msgspec.Struct, frozen=True, kw_only=True):
    """A run as of ``head_seq``: resume its event stream after that seq to follow it from there."""

    id: str
    state: str
    step: str | None
    course_id: str
    title: str
    outline_review: str
    outline_revision: int
    outline: list[OutlineItem]
    """The confirmed outline, else the proposed one, else the items streamed so far."""
    scenes_total: int
    scenes_completed: int
    error: str | None
    countdown_until: dt.datetime | None = None
    """With ``outline_review: countdown`` while awaiting confirmation: when the run confirms by itself."""
    status: str
    """The stream's scheduling status: queued, running, waiting or terminal."""
    head_seq: int
    created_at: dt.datetime


def run_ids(owner: str, command_id: str) -> tuple[str, str]:
    """``(run_id, course_id)`` for a create command: the same command of the same owner names the same run."""
    u = uuid.uuid5(_NAMESPACE, f"{owner}\x1f{command_id}").hex
    return f"run_{u}", f"course_{u}"


def course_title(requirement: str, words: int = 8, limit: int = 60) -> str:
    """A provisional course title: the requirement's first words (the outline gives the real one)."""
    first = next((line for line in requirement.splitlines() if line.strip()), "")
    parts = first.split()
    title = " ".join(parts[:words])
    cut = len(parts) > words
    if len(title) > limit:
        title, cut = title[:limit].rsplit(" ", 1)[0] or title[:limit], True
    title = title.rstrip(".,;:!?")
    return (title + "…" if cut else title) or "Untitled course"


def _refuse_stopping(s: RunState) -> None:
    if s.stop_requested and s.ended is None:
        why = "its course was deleted" if s.stop_reason == "course deleted" else "it was asked to stop"
        raise errors.Conflict(f"the run is stopping ({why})", state=s.state)


def _requeue(row: Record) -> dict[str, Any]:
    """Scheduling for a command that makes a parked run runnable (a running one is left as it is)."""
    if row["status"] in ("waiting", "queued"):
        return {"status": "queued", "wake_at": None, "progress": True}
    return {}


class RunService:
    """Run commands and snapshots for the HTTP layer (and tools); see the module docstring."""

    def __init__(self, log: EventLog, config: Config) -> None:
        self.log = log
        self.config = config
        self.runs = FoldCache(log, RunState, evolve)
        self.courses = FoldCache(log, CourseDocument, evolve_course)

    # -- reading ------------------------------------------------------------------------------------------------

    async def fold(self, run_id: str, to_seq: int | None = None) -> RunState:
        """The run's state folded from its events (up to ``to_seq``)."""
        return await self.runs.state(run_id, to_seq)

    async def course(self, course_id: str, to_seq: int | None = None) -> CourseDocument:
        """The course document folded from its events (up to ``to_seq``)."""
        return await self.courses.state(course_id, to_seq)

    async def snapshot(self, owner: str, run_id: str) -> RunSnapshot:
        """The run's snapshot; StreamNotFound for a missing run or another owner's."""
        row = await owned_stream(self.log, owner, run_id, "generation")
        # Folded to the head seq of the row just read, so the state and the scheduling status agree.
        return self._snapshot(row, await self.fold(run_id, to_seq=row["head_seq"]))

    def _snapshot(self, row: Record, s: RunState) -> RunSnapshot:
        review = s.input.outline_review if s.input is not None else "wait"
        awaiting = s.state == "awaiting_outline_confirmation"
        return RunSnapshot(
            id=row["id"], state=s.state, step=s.step, course_id=s.course_id,
            title=s.title or (course_title(s.input.requirement) if s.input is not None else ""),
            outline_review=review, outline_revision=s.outline_revision, outline=list(s.outline),
            scenes_total=s.scenes_total, scenes_completed=s.scenes_completed, error=s.error,
            countdown_until=s.countdown_until if awaiting and review == "countdown" else None,
            status=row["status"], head_seq=s.seq, created_at=row["created_at"],
        )

    # -- create -------------------------------------------------------------------------------------------------

    async def create_run(self, owner: str, command_id: str, inp: RunInput) -> RunSnapshot:
        """Create a run and its course (queued for a worker); repeating ``command_id`` returns the same run.

        InvalidInput (400, ``details.path`` names the field) for a bad input, an unknown material or agent;
        TooManyRuns (429) when the owner already has ``limits.waiting_runs_per_owner`` runs waiting to start.
        """
        run_id, course_id = run_ids(owner, command_id)
        existing = await self._replayed(owner, run_id, command_id)
        if existing is not None:
            return existing
        await self._validate(owner, inp)
        requirement = inp.requirement.strip()
        inp = msgspec.structs.replace(inp, requirement=requirement)
        run = StreamAppend(
            stream_id=run_id, create=NewStream("generation", owner), command_id=command_id, status="queued",
            events=[
                SessionCreated(kind="generation", owner_id=owner,
                               input={**msgspec.to_builtins(inp), "course_id": course_id}),
                RunCreated(course_id=course_id, owner_id=owner, input=inp, run_id=run_id),
            ],
        )
        course = StreamAppend(
            stream_id=course_id, create=NewStream("course", owner), command_id=command_id,
            events=[CourseCreated(title=course_title(requirement), language=inp.language, requirement=requirement,
                                  locked_by=run_id)],
        )
        limit = self.config.limits.waiting_runs_per_owner
        try:
            async with owner_transaction(self.log.db, owner) as conn:
                waiting = await waiting_runs(conn, owner)
                if waiting >= limit:
                    raise TooManyRuns(
                        f"you already have {waiting} runs waiting to start (the limit is {limit}); wait for some "
                        "of them to start or finish, then try again",
                        waiting=waiting, limit=limit,
                    )
                await conn.fetch(Q.append, *self.log.append_args([run, course]))
        except errors.StreamExists:
            # The same create, sent twice at once: the other one made the run.
            existing = await self._replayed(owner, run_id, command_id)
            if existing is None:
                raise
            return existing
        # Written outside the event log's append path (under the owner's lock), so watchers are told here.
        self.log.hint([run_id, course_id, RUNNABLE])
        return await self.snapshot(owner, run_id)

    async def _replayed(self, owner: str, run_id: str, command_id: str) -> RunSnapshot | None:
        row = await self.log.stream(run_id)
        if row is None:
            return None
        if row["owner_id"] != owner or row["kind"] != "generation":
            raise errors.CommandConflict(f"command_id {command_id!r} cannot create a run", command_id=command_id)
        await previous_result(self.log, run_id, command_id, "session.created")
        return self._snapshot(row, await self.fold(run_id, to_seq=row["head_seq"]))

    async def _validate(self, owner: str, inp: RunInput) -> None:
        requirement = inp.requirement.strip()
        if not requirement:
            raise errors.InvalidInput("requirement is required: describe the course you want", path="requirement")
        if len(requirement) > MAX_REQUIREMENT_CHARS:
            raise errors.InvalidInput(
                f"requirement is {len(requirement):,} characters long; at most {MAX_REQUIREMENT_CHARS:,} are allowed",
                path="requirement",
            )
        if not inp.language.strip() or len(inp.language) > 35:
            raise errors.InvalidInput("language must be a language tag such as 'en' or 'zh-CN'", path="language")
        if len(inp.learner_profile) > MAX_PROFILE_CHARS:
            raise errors.InvalidInput(f"learner_profile is at most {MAX_PROFILE_CHARS:,} characters",
                                      path="learner_profile")
        if len(inp.material_ids) > MAX_MATERIALS:
            raise errors.InvalidInput(f"at most {MAX_MATERIALS} materials per run", path="material_ids")
        missing = await missing_materials(self.log.db, owner, inp.material_ids)
        if missing:
            i = inp.material_ids.index(missing[0])
            raise errors.InvalidInput(f"no material {missing[0]!r}; upload it first with POST /api/materials",
                                      path=f"material_ids[{i}]")
        if isinstance(inp.agents, list):
            if not inp.agents:
                raise errors.InvalidInput('agents must be "auto" or a non-empty list of agent ids', path="agents")
            if len(inp.agents) > MAX_AGENTS:
                raise errors.InvalidInput(f"at most {MAX_AGENTS} agents per run", path="agents")
            unknown = await unknown_agents(self.log.db, owner, inp.agents)
            if unknown:
                i = inp.agents.index(unknown[0])
                raise errors.InvalidInput(f"no agent {unknown[0]!r}", path=f"agents[{i}]")

    # -- commands -----------------------------------------------------------------------------------------------

    async def _command(
        self, owner: str, run_id: str, command_id: str, event_type: str,
        decide: Callable[[Record, RunState], tuple[Sequence[Event], Sequence[StreamAppend]]],
    ) -> CommandResult:
        """Decide on the run folded to the head seq just read; append fenced by that seq; decide again on a race."""
        for _ in range(_MAX_RACES):
            row = await owned_stream(self.log, owner, run_id, "generation")
            state = await self.fold(run_id, to_seq=row["head_seq"])
            try:
                events, also = decide(row, state)
            except errors.OpenMaicError:
                prev = await previous_result(self.log, run_id, command_id, event_type)
                if prev is not None:
                    return prev
                raise
            main = StreamAppend(stream_id=run_id, events=events, command_id=command_id,
                                expected_seq=row["head_seq"], **_requeue(row))
            try:
                results = await self.log.append(main, *also)
            except errors.WrongExpectedSeq:
                continue
            r = next(x for x in results if x.stream_id == run_id)
            return CommandResult(command_id, r.first_seq, r.replayed)
        raise errors.Conflict("the run is changing too fast to apply this command; retry it")

    async def confirm_outline(
        self, owner: str, run_id: str, command_id: str, outline_revision: int,
        outline: Sequence[OutlineItem] | None = None,
    ) -> CommandResult:
        """Confirm the proposed outline at ``outline_revision``; with ``outline``, an edit (revision + 1).

        Conflict (409) unless the run awaits confirmation (also during a countdown) or when the revision is
        stale; InvalidInput (400) for an edited outline without scenes or with an untitled scene.
        """
        edited = None if outline is None else list(outline)
        if edited is not None:
            check_outline(edited)

        def decide(row: Record, s: RunState) -> tuple[Sequence[Event], Sequence[StreamAppend]]:
            _refuse_stopping(s)
            if s.state != "awaiting_outline_confirmation":
                raise errors.Conflict(f"the run is {s.state.replace('_', ' ')}; only a run awaiting outline "
                                      "confirmation can be confirmed", state=s.state)
            if outline_revision != s.proposed_revision:
                raise errors.Conflict(f"outline revision {outline_revision} is stale; the current revision is "
                                      f"{s.proposed_revision}", outline_revision=s.proposed_revision)
            if edited is not None and edited != list(s.proposed):
                revision, items = s.proposed_revision + 1, edited
            else:
                revision, items = s.proposed_revision, list(s.proposed)
            events, course = confirmation(s, revision, items, "user")
            return events, [course]

        return await self._command(owner, run_id, command_id, "run.outline_confirmed", decide)

    async def retry(self, owner: str, run_id: str, command_id: str) -> CommandResult:
        """Re-run the step a paused run failed on (that step only); Conflict (409) unless the run is paused."""

        def decide(row: Record, s: RunState) -> tuple[Sequence[Event], Sequence[StreamAppend]]:
            _refuse_stopping(s)
            if s.state != "paused":
                raise errors.Conflict(f"the run is {s.state.replace('_', ' ')}; only a paused run can be retried",
                                      state=s.state)
            step = s.paused_step or next_step(s) or "admission"
            back = s.previous if s.previous not in (None, "paused") else "generating"
            return [RunRetryRequested(step=step), RunStateChanged(state=back, previous="paused", step=step)], []

        return await self._command(owner, run_id, command_id, "run.retry_requested", decide)

    async def delete_course(self, owner: str, course_id: str, command_id: str) -> CommandResult:
        """Delete a course; its run, if still live, is asked to stop (it settles ``stopped`` at its next step
        boundary, at once when it was waiting). StreamNotFound for a missing, deleted or another owner's course."""
        for _ in range(_MAX_RACES):
            crow = await owned_stream(self.log, owner, course_id, "course")
            prev = await previous_result(self.log, course_id, command_id, "course.deleted")
            if prev is not None:
                return prev
            doc = await self.course(course_id, to_seq=crow["head_seq"])
            if doc.deleted:
                raise errors.StreamNotFound(f"no stream {course_id!r}", stream_id=course_id)
            batches = [StreamAppend(stream_id=course_id, events=[CourseDeleted()], command_id=command_id,
                                    expected_seq=crow["head_seq"])]
            run = await self.log.stream(doc.locked_by) if doc.locked_by else None
            if run is not None and run["owner_id"] == owner and run["status"] != "terminal":
                # Fenced by the run's head: had its actor just given the stream back, we must re-queue it.
                batches.append(StreamAppend(stream_id=run["id"], events=[RunStopRequested(reason="course deleted")],
                                            command_id=command_id, expected_seq=run["head_seq"], **_requeue(run)))
            try:
                results = await self.log.append(*batches)
            except errors.WrongExpectedSeq:
                continue
            r = next(x for x in results if x.stream_id == course_id)
            return CommandResult(command_id, r.first_seq, r.replayed)
        raise errors.Conflict("the course is changing too fast to delete it now; retry")
