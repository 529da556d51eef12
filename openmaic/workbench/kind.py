"""The ``workbench`` kind: the Pro agent loop on the durable runtime.

A session decides, from its folded state, one of:

* ``repair`` — tool calls left open by an attempt that is gone get an explicit interrupted ``tool.result``
  (see :mod:`openmaic.workbench.fold`), so the next model call sees a valid transcript;
* ``tool:<call_id>`` — run the next tool call of the last committed turn: ``tool.called`` (for clients), then
  the result and its course change committed together;
* ``turn:<n>`` — one model call (slot ``agent``) with the committed history, the follow-ups it delivers and
  the tools; output deltas are committed coalesced while it streams, and the turn (text, tool calls and the
  seqs it ``delivered``, the delivery cursor) is committed in one append;
* ``Wait(idle)`` — the model stopped calling tools (or asked the user): the session holds no worker until a
  follow-up re-queues it.

Follow-ups are delivered at the next model call: a ``steer`` message joins the next call even inside a tool
loop; a ``queued`` one waits until the model has finished its current exchange. A message reaches the model
history exactly once because a committed turn names the seqs it delivered and the runtime drops them from the
pending set; a turn that did not commit delivered nothing, and the next attempt delivers them again.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import trio

from openmaic.actors.kind import Core, Finish, Message, Outcome, Step, StepContext, Wait, settle
from openmaic.concurrency import collapse_groups
from openmaic.config import Config
from openmaic.events.core import ModelOutputDelta, ModelTurnCompleted, SessionEnded, ToolCalled
from openmaic.events.types import Event
from openmaic.models.provider import fallback_events
from openmaic.models.types import Message as ModelMessage
from openmaic.models.types import SystemMessage, ToolCall, TurnResult, UserMessage
from openmaic.workbench import fold
from openmaic.workbench.events import ModelOutputReset
from openmaic.workbench.fold import SessionState
from openmaic.workbench.tools import TOOL_SPECS, ToolEnv, interrupted_result, result_event, run_tool

SYSTEM_PROMPT = (
    "You are the course-building agent of the OpenMAIC workbench. You edit one course through the tools you "
    "are given. Read the course (read_course) before changing it, make only the changes the user asks for, "
    "and use generate_scene to write a scene's content. When a request is ambiguous, call ask_user with one "
    "short question instead of guessing. When you are done, reply briefly with what you changed. A tool error "
    "means nothing was changed by that call; read the error and decide what to do."
)

MAX_ROUNDS = 25
"""Model turns per exchange with tools available; past it the model is asked to answer without tools, so a
model that keeps calling tools cannot loop forever."""

OVER_CAP_ERROR = "interrupted too many times; send a new message to retry"

_QUICK_TOOL_S = 30.0


class _Coalescer:
    """Commits a streaming turn's text deltas at most every ``interval`` seconds (the first at once).

    ``on_delta`` and ``on_retry`` are the provider's synchronous callbacks; ``run`` is the task that commits.
    Text of an attempt the provider discards (``on_retry``) is dropped, and if some of it was already
    committed a ``model.output_reset`` tells clients to clear it.
    """

    def __init__(self, ctx: StepContext, interval: float, *, reset: bool) -> None:
        self._ctx = ctx
        self._interval = interval
        self._buf: list[str] = []
        self._reset = reset
        self._shown = False
        self._wake = trio.Event()
        self._closed = trio.Event()

    def on_delta(self, text: str) -> None:
        if text:
            self._buf.append(text)
            self._wake.set()

    def on_retry(self) -> None:
        self._buf.clear()
        if self._shown:
            self._reset = True
            self._shown = False
            self._wake.set()

    def close(self) -> None:
        self._closed.set()
        self._wake.set()

    def take(self) -> list[Event]:
        """What is not committed yet: a pending reset, then the buffered text as one delta."""
        events: list[Event] = []
        if self._reset:
            events.append(ModelOutputReset(reason="retry"))
            self._reset = False
        if self._buf:
            events.append(ModelOutputDelta(text="".join(self._buf)))
            self._buf.clear()
            self._shown = True
        return events

    async def run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake = trio.Event()
            if self._closed.is_set():
                # What is left goes out with the turn's own commit, in the same append.
                return
            events = self.take()
            if events:
                await self._ctx.emit(events)
                with trio.move_on_after(self._interval):
                    await self._closed.wait()


def _call_dicts(result: TurnResult, turn: int) -> list[dict[str, Any]]:
    """The turn's tool calls as stored, each with an id unique within the turn (a provider may omit them)."""
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    for i, c in enumerate(result.tool_calls, 1):
        cid = c.id if c.id and c.id not in seen else f"call_{turn}_{i}"
        seen.add(cid)
        out.append({"id": cid, "name": c.name, "arguments": c.arguments})
    return out


class WorkbenchKind:
    """The ``workbench`` session kind. ``ctx.services`` must provide ``models`` (a ModelRouter) and ``log``
    (the EventLog), see :mod:`openmaic.workbench`."""

    name = "workbench"

    def __init__(self, config: Config) -> None:
        self.config = config
        self.interval = config.runtime.delta_coalesce_ms / 1000
        self.turn_deadline = config.runtime.step_deadlines.turn
        self.content_deadline = config.runtime.step_deadlines.content

    def initial(self) -> SessionState:
        return fold.initial()

    def evolve(self, state: SessionState, event: Event, seq: int) -> SessionState:
        return fold.evolve(state, event, seq)

    # -- deciding ---------------------------------------------------------------------------------------------

    def decide(self, state: SessionState, core: Core) -> Step | Wait | Finish:
        if core.ended is not None and not core.pending:
            # Nothing revived the session (no follow-up since it ended): it stays as it ended.
            return Finish(events=[SessionEnded(status=core.ended, error=state.error)])
        if state.course_id is None:
            return settle("failed", "this session has no course")
        if state.to_repair:
            return self._repair_step(state)
        if state.open_calls:
            return self._tool_step(state, state.open_calls[0])
        deliver = deliverable(state, core)
        if deliver or state.needs_model:
            return self._turn_step(state, deliver)
        return Wait(reason="idle")

    def step_failed(self, state: SessionState, core: Core, step: str, error: str) -> Outcome | Wait | Finish:
        if step.startswith("tool:"):
            call = next((c for c in state.open_calls if f"tool:{c.id}" == step), None)
            if call is None:
                return Outcome()
            # A tool's failure is the model's to handle: its error becomes the result and the turn goes on.
            return Outcome(events=[result_event(call, ok=False, error=f"the tool failed: {error}")])
        if step.startswith("turn:"):
            # The streamed text of the failed call will never be committed.
            return settle("failed", error, ModelOutputReset(reason="failed"))
        return settle("failed", error)

    def over_cap(self, state: SessionState, core: Core) -> Finish:
        return settle("failed", OVER_CAP_ERROR, *_reset_if_shown(state, "interrupted"))

    def cancelled(self, state: SessionState, core: Core) -> Finish:
        return settle("cancelled", None, *_reset_if_shown(state, "cancelled"))

    # -- steps ------------------------------------------------------------------------------------------------

    def _repair_step(self, state: SessionState) -> Step:
        calls = [c for c in state.open_calls if c.id in state.to_repair]

        async def repair(ctx: StepContext) -> Outcome:
            # Not progress: a worker that dies on every resume must still reach the unattended cap.
            events = [interrupted_result(c, cancelled=state.cancelled_calls) for c in calls]
            return Outcome(events=events, progress=False)

        return Step(name="repair", handler=repair, deadline=_QUICK_TOOL_S)

    def _tool_step(self, state: SessionState, call: ToolCall) -> Step:
        course_id = state.course_id
        assert course_id is not None
        announced = call.id in state.started

        async def tool(ctx: StepContext) -> Outcome:
            if not announced:
                await ctx.emit([ToolCalled(call_id=call.id, name=call.name, arguments=call.arguments)])
            env = ToolEnv(session_id=ctx.stream_id, course_id=course_id, log=ctx.services.log,
                          models=ctx.services.models, owner=ctx.owner_id)
            result = await run_tool(env, call, ctx.emit)
            return Outcome(events=[result] if result is not None else [])

        deadline = self.content_deadline + _QUICK_TOOL_S if call.name == "generate_scene" else _QUICK_TOOL_S
        return Step(name=f"tool:{call.id}", handler=tool, deadline=deadline)

    def _turn_step(self, state: SessionState, deliver: Sequence[Message]) -> Step:
        n = state.turns + 1
        messages = transcript(state, deliver)
        tools = TOOL_SPECS if deliver or state.rounds < MAX_ROUNDS else []
        interval = self.interval

        async def turn(ctx: StepContext) -> Outcome:
            provider, model = await ctx.services.models.for_owner(ctx.owner_id, "agent")
            co = _Coalescer(ctx, interval, reset=state.partial_output)
            with collapse_groups():
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(co.run)
                    result = await provider.stream_turn(
                        model, messages, tools, on_delta=co.on_delta, on_retry=co.on_retry
                    )
                    co.close()
            calls = _call_dicts(result, n) if tools else []
            done = ModelTurnCompleted(text=result.text, tool_calls=calls, delivered=[m.seq for m in deliver])
            return Outcome(events=[*co.take(), *fallback_events([provider]), done])

        return Step(name=f"turn:{n}", handler=turn, deadline=self.turn_deadline)


def deliverable(state: SessionState, core: Core) -> list[Message]:
    """The follow-ups the next model call delivers: all pending ones between exchanges; only ``steer`` ones
    while the model is in the middle of a tool loop."""
    if state.needs_model:
        return [m for m in core.pending if m.delivery == "steer"]
    return list(core.pending)


def transcript(state: SessionState, deliver: Sequence[Message]) -> list[ModelMessage]:
    """What the provider is given: instructions, the committed history, then the newly delivered messages."""
    return [SystemMessage(text=SYSTEM_PROMPT), *fold.history_messages(state),
            *[UserMessage(text=m.text) for m in deliver]]


def _reset_if_shown(state: SessionState, reason: str) -> list[Event]:
    return [ModelOutputReset(reason=reason)] if state.partial_output else []
