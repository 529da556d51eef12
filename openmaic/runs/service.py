"""The control plane of generation runs: start, read, confirm-outline, retry, hold-outline, discard, and deleting
a run's course. Every transport (the HTTP routes, the WebSocket commands) calls these and nothing else, so a
request is refused the same way whichever road it takes.

Every command is owner-checked (another owner's run or course is a StreamNotFound, identical to a missing one)
and idempotent by ``command_id``: repeating it returns the original result and writes nothing; a command that
was refused wrote nothing and may be sent again. Commands that depend on the run's state fold the run stream up
to the head seq they read (with the same fold the worker uses) and append with ``expected_seq`` set to that head,
deciding again when the stream moved on in between; so a confirmation can never race the run's own countdown,
nor a stop request a run that is just giving its worker back.

Starting a run (:meth:`RunService.start`) validates its input, checks that the outline slot can run
(:func:`openmaic.models.provider.check_run_for_owner`: through the owner's own model settings), then writes the run stream (kind ``generation``, queued) and its
course stream (kind ``course``, locked by the run) in one append, under the owner's run lock
(:mod:`openmaic.runs.admission`) together with the count of the owner's active and waiting runs: past
``limits.active_runs_per_owner`` active or ``limits.waiting_runs_per_owner`` waiting runs it is a 429
``ACTIVE_RUN_LIMIT``, as are the commands that make a run active again. Starting is not idempotent (OpenMAIC's
start has no command id): each start is a new run, ``run-`` and 16 base64url characters; except one repeated
with its Idempotency-Key (:mod:`openmaic.actors.idempotency`), whose run is named after the key.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable, Sequence
from typing import Any

import msgspec

from openmaic import errors
from openmaic.actors.commands import CommandResult, not_found, owned_stream, previous_result, until_decided
from openmaic.actors.idempotency import REQUEST, IdempotencyKey, as_created, created_under, read_committed
from openmaic.config import Config
from openmaic.courses.events import CourseCreated, CourseDeleted, CourseDocument, evolve_course
from openmaic.courses.document import dated
from openmaic.courses.format import SceneOutline
from openmaic.events.core import SessionCreated
from openmaic.events.folds import FoldCache
from openmaic.events.log import AppendResult, EventLog, NewStream, StreamAppend, StreamRow, StreamSummary
from openmaic.events.types import Event
from openmaic.events.wakeups import cancel_hint
from openmaic.materials import MAX_RUN_MATERIAL_BYTES, MAX_RUN_MATERIALS, material_sizes, valid_material_id
from openmaic.models.provider import check_run_for_owner
from openmaic.runs.admission import owner_transaction, run_counts
from openmaic.runs.agents import AGENT_ID, unknown_agents
from openmaic.runs.decide import check_outline, confirmation, same_outline
from openmaic.runs.events import (
    AgentsChoice, RunCreated, RunInput, RunOutlineHeld, RunRetryRequested, RunStateChanged,
    RunStopRequested, Voice,
)  # fmt: skip
from openmaic.runs.fold import RunState, evolve, next_step
from openmaic.runs.titles import course_title, infer_language, new_run_ids, run_ids, valid_run_id  # noqa: F401 (also here)
from openmaic.runs.views import COURSE_DELETED, DISCARDED, run_state
from openmaic.store.queries import Q

__all__ = [
    "CommandOutcome", "MAX_REQUIREMENT_CHARS", "RunService", "RunSnapshot", "RunStateConflict", "TooManyRuns",
    "course_title", "infer_language", "new_run_ids", "run_ids", "valid_run_id",
]  # fmt: skip

MAX_REQUIREMENT_CHARS = 20_000
MAX_AGENTS = 20
MAX_PROFILE_CHARS = 2_000
CREATE_EVENTS = 2
"""What a run's creation writes on its stream: ``session.created`` and ``run.created``."""


class TooManyRuns(errors.OpenMaicError):
    """You have as many runs in progress as you may; wait for one to finish, or discard one, then try again."""

    code = "too_many_runs"
    status = 429
    error_code = "ACTIVE_RUN_LIMIT"


class RunStateConflict(errors.Conflict):
    """The run is not in a state that takes this command."""

    code = "run_state_conflict"
    error_code = "RUN_STATE_CONFLICT"


class CommandOutcome(msgspec.Struct, frozen=True, kw_only=True):
    """What an accepted run command did: the seq of the event that recorded it and the run's state after it."""

    command_id: str
    seq: int
    replayed: bool
    state: str
    outline_revision: int


class RunSnapshot(msgspec.Struct, frozen=True, kw_only=True):
    """A run as of ``head_seq``: resume its event stream after that seq to follow it from there."""

    id: str
    state: str
    step: str | None
    course_id: str
    title: str
    outline_review: str
    outline_revision: int
    outline: list[SceneOutline]
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


def _refuse_stopping(s: RunState) -> None:
    if s.stop_requested and s.ended is None:
        why = {COURSE_DELETED: "its course was deleted", DISCARDED: "it was discarded"}.get(s.stop_reason or "",
                                                                                             "it was asked to stop")
        raise RunStateConflict(f"the run is ending ({why})", state=s.state)
    if s.state == "ended":
        raise RunStateConflict("the run has ended", state="ended")


def _requeue(row: StreamRow) -> dict[str, Any]:
    """Scheduling for a command that makes a parked run runnable (a running one is left as it is)."""
    if row.status in ("waiting", "queued"):
        return {"status": "queued", "wake_at": None, "progress": True}
    return {}


class RunService:
    """Run commands and reads for every transport (and tools); see the module docstring."""

    def __init__(self, log: EventLog, config: Config) -> None:
        self.log = log
        self.config = config
        self.runs = FoldCache(log, RunState, evolve)
        self.courses = FoldCache(log, CourseDocument, evolve_course)

    # -- reading ------------------------------------------------------------------------------------------------

    async def fold(self, run_id: str, to_seq: int | None = None, *, floor: int | None = None) -> RunState:
        """The run's state folded from its events (up to ``to_seq``; with ``floor``, a catch-up read)."""
        return await self.runs.state(run_id, to_seq, floor=floor)

    async def course(self, course_id: str, to_seq: int | None = None, *, floor: int | None = None) -> CourseDocument:
        """The course document folded from its events (up to ``to_seq``; with ``floor``, a catch-up read)."""
        return await self.courses.state(course_id, to_seq, floor=floor)

    async def owned_course(self, owner: str, course_id: str) -> CourseDocument:
        """The owner's course, folded to the head of its row; StreamNotFound for a missing, deleted or another
        owner's course (the same answer for all three)."""
        row = await owned_stream(self.log, owner, course_id, "course")
        if row.deleted_at is None:
            # Folded from the course stream (through the fold cache): authoritative and never behind, unlike a
            # projection; to the head of the row just read (on the primary), so the document and its seq agree. A
            # catch-up read: the replica may serve it once it holds that head.
            doc = await self.course(course_id, to_seq=row.head_seq, floor=row.head_seq)
            if not doc.deleted:
                return dated(doc, row)
        raise not_found(course_id)

    async def read(self, owner: str, run_id: str, *, catch_up: bool = False) -> tuple[StreamRow, RunState]:
        """The run's stream row and its state at that row's head; StreamNotFound for a missing run or another
        owner's. ``catch_up``: the fold is a catch-up read, which the replica may serve (a snapshot route's)."""
        row = await owned_stream(self.log, owner, run_id, "generation")
        # Folded to the head seq of the row just read (on the primary), so the state and the scheduling status agree.
        return row, await self.fold(run_id, to_seq=row.head_seq, floor=row.head_seq if catch_up else None)

    async def in_progress(self, owner: str) -> list[tuple[StreamSummary, RunState]]:
        """The owner's runs that have not completed or ended (nor are ending), oldest first."""
        return (await self.in_progress_page(owner))[0]

    async def in_progress_page(self, owner: str, limit: int | None = None, after: Sequence[Any] | None = None,
                               ) -> tuple[list[tuple[StreamSummary, RunState]], tuple[Any, str] | None]:
        """Of :meth:`in_progress`, those among the next ``limit`` runs after the one whose ``(created_at, id)``
        is ``after``; and the key of the last run looked at when more follow."""
        start = (None, None) if after is None else tuple(after)
        rows = await self.log.summaries(Q.runs_in_progress, owner, *start, None if limit is None else limit + 1)
        more = limit is not None and len(rows) > limit
        rows = rows[:limit] if more else rows
        out = []
        for row in rows:
            state = await self.fold(row.id, to_seq=row.head_seq)
            if state.state not in ("completed", "ended") and not state.stop_requested:
                out.append((row, state))
        return out, ((rows[-1].created_at, rows[-1].id) if more else None)

    async def snapshot(self, owner: str, run_id: str) -> RunSnapshot:
        """The run's snapshot (this server's own shape); StreamNotFound for a missing run or another owner's."""
        row, state = await self.read(owner, run_id)
        return self._snapshot(row, state)

    def _snapshot(self, row: StreamRow, s: RunState) -> RunSnapshot:
        review = s.input.outline_review if s.input is not None else "wait"
        awaiting = s.state == "awaiting_outline_confirmation"
        return RunSnapshot(
            id=row.id, state=s.state, step=s.step, course_id=s.course_id,
            title=s.title or (course_title(s.input.requirement) if s.input is not None else ""),
            outline_review=review, outline_revision=s.outline_revision, outline=list(s.outline),
            scenes_total=s.scenes_total, scenes_completed=s.scenes_completed, error=s.error,
            countdown_until=s.countdown_until if awaiting and review == "countdown" else None,
            status=row.status, head_seq=s.seq, created_at=row.created_at,
        )

    # -- start --------------------------------------------------------------------------------------------------

    async def start(self, owner: str, inp: RunInput, *, keyed: IdempotencyKey | None = None,
                    ) -> tuple[StreamRow, RunState]:
        """Start a run and its course (queued for a worker); every start is a new run, except a repeat of one
        ``keyed`` by the same Idempotency-Key (see :mod:`openmaic.actors.idempotency`). Returns the run as its
        creation left it: the same answer for a repeat, built from what was committed (never from a read after
        the commit, which a failover could fail though the run exists).

        Refusals, in this order (nothing is written): IdempotencyKeyReused (409) for a key used with another
        request; MissingField for a blank requirement; InvalidInput (400, ``details.path`` names the field) for
        a bad input or materials that are unavailable; ModelNotAllowed (400 VALIDATION_FAILED) for a model
        choice the owner's settings do not allow; MissingModel / MissingApiKey when a slot the run needs cannot
        run (outline, actions, agents, one scene content slot); TooManyRuns (429) at the owner's run limits.
        """
        if keyed is None:
            (run_id, course_id), command_id = new_run_ids(), None
        else:
            (run_id, course_id), command_id = run_ids(owner, keyed.command_id), keyed.command_id
            again = await self._created(owner, run_id, keyed)
            if again is not None:
                return again
        inp = await self._validated(owner, inp)
        inp = msgspec.structs.replace(inp, models=await check_run_for_owner(
            self.config, self.log.db, owner, agents_auto=inp.agents.mode == "auto", models=inp.models))
        try:
            created = await self._create(owner, run_id, course_id, command_id, inp,
                                         request=None if keyed is None else keyed.digest)
        except errors.StreamExists:
            created = None  # the same key, sent twice at once, and the other request made the run (or refused)
        except errors.DatabaseUnavailable:
            # The commit's answer was lost, not necessarily the commit: a run that exists was made by this request.
            if await read_committed(lambda: self.log.stream_row(run_id)) is None:
                raise
            created = None
        if created is not None:
            return created
        if keyed is None:
            return await read_committed(lambda: self._as_created(owner, run_id, CREATE_EVENTS))
        again = await read_committed(lambda: self._created(owner, run_id, keyed))
        if again is None:
            raise errors.StreamExists(f"stream {run_id} already exists", stream_id=run_id)
        return again

    async def _created(self, owner: str, run_id: str, keyed: IdempotencyKey) -> tuple[StreamRow, RunState] | None:
        """The run ``keyed`` created, as its creation left it; None when there is none."""
        last = await created_under(self.log, run_id, keyed)
        return None if last is None else await self._as_created(owner, run_id, last)

    async def _as_created(self, owner: str, run_id: str, last_seq: int) -> tuple[StreamRow, RunState]:
        row = await owned_stream(self.log, owner, run_id, "generation")
        return as_created(row, last_seq), await self.fold(run_id, to_seq=last_seq)

    async def create_run(self, owner: str, command_id: str, inp: RunInput) -> RunSnapshot:
        """Create a run whose ids derive from ``command_id``: repeating it returns the same run."""
        run_id, course_id = run_ids(owner, command_id)
        existing = await self._replayed(owner, run_id, command_id)
        if existing is not None:
            return existing
        inp = await self._validated(owner, inp)
        inp = msgspec.structs.replace(inp, models=await check_run_for_owner(
            self.config, self.log.db, owner, agents_auto=inp.agents.mode == "auto", models=inp.models))
        try:
            await self._create(owner, run_id, course_id, command_id, inp)
        except errors.StreamExists:
            # The same create, sent twice at once: the other one made the run.
            existing = await self._replayed(owner, run_id, command_id)
            if existing is None:
                raise
            return existing
        return await self.snapshot(owner, run_id)

    async def _create(self, owner: str, run_id: str, course_id: str, command_id: str | None, inp: RunInput,
                      request: str | None = None) -> tuple[StreamRow, RunState] | None:
        """Append the run and its course; returns the run as created (read in the same transaction), or None when
        the append was a repeat of the same command (it wrote nothing)."""
        keyed = {} if request is None else {REQUEST: request}
        run = StreamAppend(
            stream_id=run_id, create=NewStream("generation", owner), command_id=command_id, status="queued",
            events=[
                SessionCreated(kind="generation", owner_id=owner,
                               input={**msgspec.to_builtins(inp), "course_id": course_id, **keyed}),
                RunCreated(course_id=course_id, owner_id=owner, input=inp, run_id=run_id),
            ],
        )
        course = StreamAppend(
            stream_id=course_id, create=NewStream("course", owner), command_id=command_id,
            events=[CourseCreated(title=course_title(inp.requirement), language=inp.language,
                                  requirement=inp.requirement, locked_by=run_id, created_ms=int(time.time() * 1000),
                                  interactive=inp.interactive)],
        )
        async with self.log.appending(owner_transaction(self.log.db, owner)) as tx:
            if command_id is not None and await tx.conn.fetchrow(Q.command_previous, run_id, command_id):
                return None  # made by the same command, which committed while this one waited for the lock
            self._check_limits(await run_counts(tx.conn, owner), starting=True)
            results = await tx.append(run, course)
            if next(r for r in results if r.stream_id == run_id).replayed:
                return None
            # Read in the transaction that writes it: once the commit succeeds, the answer needs nothing more.
            row = await tx.conn.fetchrow_as(StreamRow, Q.stream, run_id)
        assert row is not None
        # Folded from the events as stored (encoded, then decoded as any read decodes them), so that this answer and
        # a repeat's, folded from the log, are the same to the byte.
        state = RunState()
        for seq, event in enumerate(run.events, 1):
            state = evolve(state, msgspec.json.decode(msgspec.json.encode(event), type=type(event)), seq)
        return row, state

    def _check_limits(self, counts: Any, *, starting: bool) -> None:
        limits = self.config.limits
        if counts.active >= limits.active_runs_per_owner:
            raise TooManyRuns(
                f"you already have {counts.active} runs in progress (limits.active_runs_per_owner is "
                f"{limits.active_runs_per_owner}); wait for one to finish, then try again", active=counts.active,
                key="limits.active_runs_per_owner", limit=limits.active_runs_per_owner)  # fmt: skip
        if starting and counts.waiting >= limits.waiting_runs_per_owner:
            raise TooManyRuns(
                f"you already have {counts.waiting} runs waiting for you (an outline to confirm, or a failed step "
                f"to retry; limits.waiting_runs_per_owner is {limits.waiting_runs_per_owner}); confirm, retry or "
                "discard some, then try again", waiting=counts.waiting, key="limits.waiting_runs_per_owner",
                limit=limits.waiting_runs_per_owner)  # fmt: skip

    async def _replayed(self, owner: str, run_id: str, command_id: str) -> RunSnapshot | None:
        row = await self.log.stream_row(run_id)
        if row is None:
            return None
        if row.owner_id != owner or row.kind != "generation":
            raise errors.CommandConflict(f"command_id {command_id!r} cannot create a run", command_id=command_id)
        await previous_result(self.log, run_id, command_id, "session.created")
        return self._snapshot(row, await self.fold(run_id, to_seq=row.head_seq))

    async def _validated(self, owner: str, inp: RunInput) -> RunInput:
        """``inp`` checked, with its requirement trimmed, its ids deduplicated and its language settled."""
        requirement = inp.requirement.strip()
        if not requirement:
            raise errors.MissingField("Missing required field: requirement", path="requirement")
        if len(requirement) > MAX_REQUIREMENT_CHARS:
            raise errors.InvalidInput(
                f"requirement is {len(requirement):,} characters long; at most {MAX_REQUIREMENT_CHARS:,} are allowed",
                path="requirement",
            )
        language = inp.language.strip() or infer_language(requirement)
        if len(language) > 35:
            raise errors.InvalidInput("language must be a language tag such as 'en' or 'zh-CN'", path="language")
        material_ids = list(dict.fromkeys(inp.material_ids))
        await self._check_materials(owner, material_ids)
        agents = await self._check_agents(owner, inp.agents)
        profile = inp.learner_profile
        for name, value in (("nickname", profile.nickname), ("bio", profile.bio)):
            if len(value) > MAX_PROFILE_CHARS:
                raise errors.InvalidInput(f"learnerProfile.{name} is at most {MAX_PROFILE_CHARS:,} characters",
                                          path=f"learnerProfile.{name}")
        _check_voice(inp.voice)
        return msgspec.structs.replace(inp, requirement=requirement, language=language, material_ids=material_ids,
                                       agents=agents)

    async def _check_materials(self, owner: str, material_ids: list[str]) -> None:
        for i, mid in enumerate(material_ids):
            if not valid_material_id(mid):
                raise errors.InvalidInput(f"materialIds[{i}]: {mid!r} is not a material id (mat_…)",
                                          path=f"materialIds[{i}]")
        if len(material_ids) > MAX_RUN_MATERIALS:
            raise errors.InvalidInput(f"at most {MAX_RUN_MATERIALS} materials per run", path="materialIds")
        sizes = await material_sizes(self.log.db, owner, material_ids)
        if len(sizes) < len(material_ids):
            # The same answer for unknown, deleted and other owners' ids: it must not tell which exist.
            raise errors.InvalidInput("One or more materials are unavailable; upload them with POST /api/materials",
                                      path="materialIds")
        total = sum(sizes.values())
        if total > MAX_RUN_MATERIAL_BYTES:
            raise errors.InvalidInput(f"the materials take {total:,} bytes; at most {MAX_RUN_MATERIAL_BYTES:,} are "
                                      "allowed per run", path="materialIds")

    async def _check_agents(self, owner: str, agents: AgentsChoice) -> AgentsChoice:
        for field, ids in (("agentIds", agents.agent_ids), ("presetAgentIds", agents.preset_agent_ids)):
            for i, aid in enumerate(ids):
                if not AGENT_ID.fullmatch(aid):
                    raise errors.InvalidInput(f"agents.{field}[{i}]: {aid!r} is not an agent id",
                                              path=f"agents.{field}[{i}]")
            if len(ids) > MAX_AGENTS:
                raise errors.InvalidInput(f"at most {MAX_AGENTS} agents per run", path=f"agents.{field}")
            unknown = await unknown_agents(self.log.db, owner, ids)
            if unknown:
                i = ids.index(unknown[0])
                raise errors.InvalidInput(f"agents.{field}[{i}]: no agent {unknown[0]!r}", path=f"agents.{field}[{i}]")
        if agents.mode == "preset" and not agents.agent_ids:
            raise errors.MissingField("Missing required field: agents.agentIds", path="agents.agentIds")
        return msgspec.structs.replace(agents, agent_ids=list(dict.fromkeys(agents.agent_ids)),
                                       preset_agent_ids=list(dict.fromkeys(agents.preset_agent_ids)))

    # -- commands -----------------------------------------------------------------------------------------------

    async def _command(
        self, owner: str, run_id: str, command_id: str, event_type: str,
        decide: Callable[[StreamRow, RunState], tuple[Sequence[Event], Sequence[StreamAppend]]],
        *, activates: bool = False,
    ) -> CommandOutcome:
        """Decide on the run folded to the head seq just read; append fenced by that seq; decide again on a race.

        ``activates``: the command makes the run count against the owner's active runs, so it is appended under
        the owner's run lock after a look at that limit.
        """

        async def attempt() -> CommandOutcome:
            row = await owned_stream(self.log, owner, run_id, "generation")
            state = await self.fold(run_id, to_seq=row.head_seq)
            try:
                events, also = decide(row, state)
            except errors.OpenMaicError:
                prev = await self._previous(run_id, command_id, event_type)
                if prev is not None:
                    return prev
                raise
            main = StreamAppend(stream_id=run_id, events=events, command_id=command_id,
                                expected_seq=row.head_seq, **_requeue(row))
            try:
                if activates:
                    results = await self._append_active(owner, run_id, [main, *also])
                else:
                    results = await self.log.append(main, *also)
            except errors.CommandConflict as exc:
                raise RunStateConflict(exc.message, **exc.details) from None
            r = next(x for x in results if x.stream_id == run_id)
            return await self._outcome(run_id, command_id, r.first_seq, r.last_seq, r.replayed)

        return await until_decided(
            attempt, lambda: RunStateConflict("the run is changing too fast to apply this command; retry it"))

    async def _append_active(self, owner: str, run_id: str, batches: list[StreamAppend]) -> list[AppendResult]:
        async with self.log.appending(owner_transaction(self.log.db, owner)) as tx:
            self._check_limits(await run_counts(tx.conn, owner, exclude=run_id), starting=False)
            return await tx.append(*batches)

    async def _previous(self, run_id: str, command_id: str, event_type: str) -> CommandOutcome | None:
        try:
            prev = await previous_result(self.log, run_id, command_id, event_type)
        except errors.CommandConflict as exc:
            raise RunStateConflict(exc.message, **exc.details) from None
        return None if prev is None else await self._outcome(run_id, command_id, prev.seq, prev.last_seq, True)

    async def _outcome(self, run_id: str, command_id: str, seq: int, last_seq: int, replayed: bool) -> CommandOutcome:
        # The run as the command left it (folded to the last seq it wrote), not as it is by now: a repeat of the
        # command answers exactly as the first time, however far the run has moved on since.
        state = await self.fold(run_id, to_seq=last_seq)
        return CommandOutcome(command_id=command_id, seq=seq, replayed=replayed, state=run_state(state.state),
                              outline_revision=state.outline_revision)

    async def confirm_outline(
        self, owner: str, run_id: str, command_id: str, outline_revision: int,
        outline: Sequence[SceneOutline] | None = None,
    ) -> CommandOutcome:
        """Confirm the proposed outline at ``outline_revision``; with ``outline``, an edit (revision + 1).

        RunStateConflict (409) unless the run awaits confirmation (also during a countdown) or when the revision
        is stale; InvalidInput (400) for an edited outline without scenes or with an untitled scene; TooManyRuns
        (429) when the owner already has as many active runs as allowed (a confirmed run is active).
        """
        edited = None if outline is None else list(outline)
        if edited is not None:
            check_outline(edited, what="outlines")

        def decide(row: StreamRow, s: RunState) -> tuple[Sequence[Event], Sequence[StreamAppend]]:
            _refuse_stopping(s)
            if s.state != "awaiting_outline_confirmation":
                raise RunStateConflict(f"the run is {s.state.replace('_', ' ')}; only a run awaiting outline "
                                       "confirmation can be confirmed", state=s.state)
            if outline_revision != s.proposed_revision:
                raise RunStateConflict(f"outline revision {outline_revision} is stale; the current revision is "
                                       f"{s.proposed_revision}", outline_revision=s.proposed_revision)
            if edited is not None and not same_outline(edited, s.proposed):
                revision, items = s.proposed_revision + 1, edited
            else:
                revision, items = s.proposed_revision, list(s.proposed)
            events, course = confirmation(s, revision, items, "user")
            return events, [course]

        return await self._command(owner, run_id, command_id, "run.outline_confirmed", decide, activates=True)

    async def retry(self, owner: str, run_id: str, command_id: str) -> CommandOutcome:
        """Re-run the step a paused run failed on (that step only); RunStateConflict (409) unless the run is
        paused; TooManyRuns (429) at the owner's limit of active runs."""

        def decide(row: StreamRow, s: RunState) -> tuple[Sequence[Event], Sequence[StreamAppend]]:
            _refuse_stopping(s)
            if s.state != "paused":
                raise RunStateConflict(f"the run is {s.state.replace('_', ' ')}; only a paused run can be retried",
                                       state=s.state)
            step = s.paused_step or next_step(s) or "admission"
            back = s.previous if s.previous not in (None, "paused") else "generating"
            return [RunRetryRequested(step=step), RunStateChanged(state=back, previous="paused", step=step)], []

        return await self._command(owner, run_id, command_id, "run.retry_requested", decide, activates=True)

    async def hold_outline(self, owner: str, run_id: str, command_id: str) -> CommandOutcome:
        """Stop a countdown: the outline then waits for a confirmation (``outlineReview: countdown`` becomes
        ``wait``). RunStateConflict (409) unless the run awaits confirmation under a countdown."""

        def decide(row: StreamRow, s: RunState) -> tuple[Sequence[Event], Sequence[StreamAppend]]:
            _refuse_stopping(s)
            countdown = s.input is not None and s.input.outline_review == "countdown" and not s.outline_held
            if s.state != "awaiting_outline_confirmation" or not countdown:
                raise RunStateConflict("only a run counting down to confirm its outline can be held",
                                       state=s.state)
            return [RunOutlineHeld(revision=s.proposed_revision)], []

        return await self._command(owner, run_id, command_id, "run.outline_held", decide)

    async def discard(self, owner: str, run_id: str) -> CommandOutcome:
        """Discard a run that has no course yet (its outline was never confirmed): it ends, and its course stream
        goes with it. Discarding it again is harmless (the same answer). RunStateConflict (409) when its course
        exists or it completed."""
        command_id = f"discard-{run_id}"

        def decide(row: StreamRow, s: RunState) -> tuple[Sequence[Event], Sequence[StreamAppend]]:
            if s.stop_requested or s.state == "ended":
                raise _AlreadyEnded()
            if s.state == "completed":
                raise RunStateConflict("the run has completed; delete its course instead", state=s.state)
            if s.confirmed_revision:
                raise RunStateConflict("the run's course exists (its outline was confirmed); delete the course "
                                       "instead", state=s.state, stage_id=s.course_id)
            course = StreamAppend(stream_id=s.course_id, events=[CourseDeleted()], command_id=command_id)
            return [RunStopRequested(reason=DISCARDED)], [course]

        try:
            out = await self._command(owner, run_id, command_id, "run.stop_requested", decide)
            # The step in flight (its provider call included) is aborted now, not at its end.
            self.log.hint([cancel_hint(run_id)])
        except _AlreadyEnded:
            # Stopped or ended otherwise (its course deleted, cancelled): the answer names the event that did it,
            # the same on every repeat (the head moves on as the run ends).
            row, s = await self.read(owner, run_id)
            seq = s.stop_seq or row.head_seq
            return CommandOutcome(command_id=command_id, seq=seq, replayed=True, state="ended",
                                  outline_revision=(await self.fold(run_id, to_seq=seq)).outline_revision)
        return msgspec.structs.replace(out, state="ended")

    async def delete_course(self, owner: str, course_id: str, command_id: str) -> CommandResult:
        """Delete a course; its run, if still live, is asked to stop (it settles ``ended`` at its next step
        boundary, at once when it was waiting). StreamNotFound for a missing, deleted or another owner's course."""

        async def attempt() -> CommandResult:
            crow = await owned_stream(self.log, owner, course_id, "course")
            prev = await previous_result(self.log, course_id, command_id, "course.deleted")
            if prev is not None:
                return prev
            doc = await self.course(course_id, to_seq=crow.head_seq)
            if doc.deleted:
                raise not_found(course_id)
            batches = [StreamAppend(stream_id=course_id, events=[CourseDeleted()], command_id=command_id,
                                    expected_seq=crow.head_seq)]
            run = await self.log.stream_row(doc.locked_by) if doc.locked_by else None
            if run is not None and run.owner_id == owner and run.status != "terminal":
                # Fenced by the run's head: had its actor just given the stream back, we must re-queue it.
                batches.append(StreamAppend(stream_id=run.id, events=[RunStopRequested(reason=COURSE_DELETED)],
                                            command_id=command_id, expected_seq=run.head_seq, **_requeue(run)))
            results = await self.log.append(*batches)
            if len(batches) > 1:
                self.log.hint([cancel_hint(batches[1].stream_id)])  # abort the run's step in flight now
            r = next(x for x in results if x.stream_id == course_id)
            return CommandResult(command_id, r.first_seq, r.replayed)

        return await until_decided(
            attempt, lambda: errors.Conflict("the course is changing too fast to delete it now; retry"))


class _AlreadyEnded(errors.OpenMaicError):
    """The run has ended, or is ending, already."""


def _check_voice(voice: Voice | None) -> None:
    if voice is None:
        return
    if voice.speed is not None and not 0 < voice.speed <= 4:
        raise errors.InvalidInput("voice.speed must be above 0 and at most 4", path="voice.speed")

