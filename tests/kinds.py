"""A minimal session kind for runtime tests: N steps, optional idling, message delivery, crashes on demand.

Its input (in ``session.created``) says how it behaves: ``steps`` (how many), ``sleep`` (seconds per step),
``idle`` (wait for a follow-up after the steps instead of finishing), ``crash_at`` (a step that SIGKILLs its
own worker process every time), ``deadline`` (per step), ``fail_at`` (a step that raises), ``emit`` (events each step commits with ``ctx.emit``
before its sleep), ``before`` (seconds each step waits before its emits), ``timeout_at`` (a step whose statement
the database cancels every time: 57014).
"""

from __future__ import annotations

import os
import signal
from typing import Any

import msgspec
import trio

from openmaic import errors
from openmaic.actors.kind import Core, Finish, Outcome, Step, Wait, settle
from openmaic.events.core import ModelTurnCompleted, SessionCreated
from openmaic.events.types import Event, register


@register
class StepDone(Event, tag="test.step_done"):
    n: int
    attempt: int


@register
class Emitted(Event, tag="test.emitted"):
    n: int


class TestState(msgspec.Struct, frozen=True, kw_only=True):
    steps: int = 0
    done: int = 0
    sleep: float = 0.0
    idle: bool = False
    crash_at: int | None = None
    fail_at: int | None = None
    deadline: float = 30.0
    emit: int = 0
    before: float = 0.0
    timeout_at: int | None = None
    turns: int = 0


class TestKind:
    name = "test"

    def initial(self) -> TestState:
        return TestState()

    def evolve(self, state: TestState, event: Event, seq: int) -> TestState:
        r = msgspec.structs.replace
        match event:
            case SessionCreated(input=inp):
                return r(state, steps=inp.get("steps", 1), sleep=inp.get("sleep", 0.0), idle=inp.get("idle", False),
                         crash_at=inp.get("crash_at"), fail_at=inp.get("fail_at"),
                         deadline=inp.get("deadline", 30.0), emit=inp.get("emit", 0),
                         before=inp.get("before", 0.0), timeout_at=inp.get("timeout_at"))
            case StepDone(n=n):
                return r(state, done=max(state.done, n))
            case ModelTurnCompleted():
                return r(state, turns=state.turns + 1)
            case _:
                return state

    def decide(self, state: TestState, core: Core) -> Step | Wait | Finish:
        if core.pending:
            pending = core.pending

            async def deliver(ctx: Any) -> Outcome:
                await trio.sleep(state.sleep)
                texts = [m.text for m in pending]
                return Outcome(events=[ModelTurnCompleted(text="ack: " + " | ".join(texts),
                                                          delivered=[m.seq for m in pending])])

            return Step(name="deliver", handler=deliver, deadline=state.deadline)
        if state.done < state.steps:
            n = state.done + 1

            async def step(ctx: Any) -> Outcome:
                if state.crash_at == n:
                    os.kill(os.getpid(), signal.SIGKILL)
                if state.fail_at == n:
                    raise RuntimeError("boom")
                if state.timeout_at == n:
                    raise errors.DatabaseError("PostgreSQL refused a statement (57014): canceling statement due "
                                               "to statement timeout", sqlstate="57014")
                await trio.sleep(state.before)
                for i in range(state.emit):  # output committed while the step runs, like a streaming turn
                    await ctx.emit([Emitted(n=i)])
                await trio.sleep(state.sleep)
                return Outcome(events=[StepDone(n=n, attempt=ctx.attempt)])

            return Step(name=f"step:{n}", handler=step, deadline=state.deadline)
        if state.idle:
            return Wait(reason="idle")
        return settle("completed")

    def step_failed(self, state: TestState, core: Core, step: str, error: str) -> Finish:
        return settle("failed", error)

    def over_cap(self, state: TestState, core: Core) -> Finish:
        return settle("failed", "interrupted too many times")

    def cancelled(self, state: TestState, core: Core) -> Finish:
        return settle("cancelled")
