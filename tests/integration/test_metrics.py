"""The documented metrics move when the runtime does what they count: a run, a takeover, a lost lease.

Each test reads the process-wide registry (the one ``/metrics`` serves) before and after, and asserts the
difference: exactly what happened, not merely "non-zero".
"""

from __future__ import annotations

import pytest
import trio

from openmaic.events.log import EventLog
from openmaic.metrics import sample as sample_value
from tests.runtime import ended, new_stream, open_worker, settings, wait_for


@pytest.fixture
def log(db):
    return EventLog(db)


value = sample_value


class Delta:
    """The change of some samples since construction."""

    def __init__(self, *samples: tuple[str, dict[str, str]]) -> None:
        self.samples = samples
        self.start = [value(n, **lb) for n, lb in samples]

    def __call__(self) -> list[float]:
        return [value(n, **lb) - s for (n, lb), s in zip(self.samples, self.start, strict=True)]


def sample(name: str, **labels: str) -> tuple[str, dict[str, str]]:
    return name, labels


async def test_a_run_moves_appends_claims_actors_and_step_durations(db_url, log):
    moved = Delta(
        sample("openmaic_appends_total"),
        sample("openmaic_claims_total", kind="test", reason="queued"),
        sample("openmaic_takeovers_total", kind="test"),
        sample("openmaic_step_duration_seconds_count", kind="test", step="step", outcome="completed"),
        sample("openmaic_claim_duration_seconds_count"),
        sample("openmaic_append_duration_seconds_count", outcome="ok"),
    )
    await new_stream(log, "s1", steps=3, sleep=0.3)
    async with open_worker(db_url):
        await wait_for(lambda: _active(1))  # while its step runs, the actor is counted
        await wait_for(lambda: _eq(ended(log, "s1"), "completed"))
        await wait_for(lambda: _active(0))
    events = len(await log.read_stream("s1"))
    appends, claims, takeovers, steps, claim_queries, append_calls = moved()
    assert appends == events, "every event of the stream was appended by this process, and nothing else"
    assert (claims, takeovers, steps) == (1, 0, 3)
    assert claim_queries >= 1 and append_calls >= 5  # creation, claim, three steps (the end may share a call)
    assert value("openmaic_step_duration_seconds_sum", kind="test", step="step", outcome="completed") >= 0.9


async def test_a_takeover_and_a_lost_lease_are_counted(db_url, log, db):
    moved = Delta(
        sample("openmaic_claims_total", kind="test", reason="orphaned"),
        sample("openmaic_takeovers_total", kind="test"),
        sample("openmaic_lease_losses_total", kind="test"),
        sample("openmaic_step_duration_seconds_count", kind="test", step="step", outcome="aborted"),
    )
    await new_stream(log, "s1", steps=1, sleep=30)
    # A worker that vanished holding s1: running, with an expired lease.
    await db.execute("UPDATE streams SET status = 'running', attempt = 1, lease_worker = 'gone',"
                     " lease_expires_at = now() - interval '1 second' WHERE id = 's1'")  # fmt: skip
    async with open_worker(db_url, settings(shutdown_grace_s=0.2)) as worker:
        await wait_for(lambda: _true("s1" in worker.actors))
        assert moved()[:2] == [1, 1]
        # Another worker takes s1 over from this one (as if our lease had expired): the actor is fenced out.
        await db.execute("UPDATE streams SET attempt = attempt + 1, lease_worker = 'thief' WHERE id = 's1'")
        await wait_for(lambda: _true(not worker.actors), timeout=5)
    assert moved() == [1, 1, 1, 1]


async def _active(n: int) -> bool:
    return value("openmaic_active_actors", kind="test") == n


async def _eq(awaitable, expected) -> bool:
    return (await awaitable) == expected


async def _true(x: bool) -> bool:
    await trio.lowlevel.checkpoint()
    return x
