"""The one read-decide-append loop: a lost race decides again, up to one budget, and nothing else is retried."""

from __future__ import annotations

import pytest

from openmaic import errors
from openmaic.actors.commands import RACE_BUDGET, until_decided


class Exhausted(errors.Conflict):
    pass


def _attempts(lost: int, result: str = "done"):
    calls = []

    async def attempt() -> str:
        calls.append(len(calls))
        if len(calls) <= lost:
            raise errors.WrongExpectedSeq("moved on")
        return result

    return attempt, calls


async def test_a_lost_race_is_decided_again_until_it_is_won():
    attempt, calls = _attempts(lost=RACE_BUDGET - 1)
    assert await until_decided(attempt, lambda: Exhausted("too fast")) == "done"
    assert len(calls) == RACE_BUDGET


async def test_after_the_budget_the_caller_names_the_conflict():
    attempt, calls = _attempts(lost=RACE_BUDGET)
    with pytest.raises(Exhausted, match="too fast"):
        await until_decided(attempt, lambda: Exhausted("too fast"))
    assert len(calls) == RACE_BUDGET


async def test_a_refusal_is_not_retried():
    calls = []

    async def attempt() -> None:
        calls.append(1)
        raise errors.StreamExists("taken")

    with pytest.raises(errors.StreamExists):
        await until_decided(attempt, lambda: Exhausted("too fast"))
    assert calls == [1]
    # ... unless the caller names it a race.
    with pytest.raises(Exhausted):
        await until_decided(attempt, lambda: Exhausted("too fast"), races=(errors.StreamExists,))
    assert len(calls) == 1 + RACE_BUDGET
