"""The serving loops' retry pacing: 0.1 s doubling to 1 s, and one line per thing said in an outage."""

from __future__ import annotations

import logging

import trio
import trio.testing

from openmaic import errors
from openmaic.store.backoff import Backoff


def test_the_pause_doubles_from_a_tenth_of_a_second_to_one_second_and_starts_again_after_a_success() -> None:
    b = Backoff("loop")
    assert [b.pause() for _ in range(7)] == [0.1, 0.2, 0.4, 0.8, 1.0, 1.0, 1.0]
    b.succeeded()
    assert b.pause() == 0.1


def test_an_outage_is_a_line_for_each_new_thing_it_says_even_when_they_alternate(caplog) -> None:
    caplog.set_level(logging.INFO, logger="openmaic.store.database")
    b = Backoff("loop")

    async def outage() -> None:
        for i in range(40):  # the hosts of a failover say one thing, then another, in turn
            b.note(errors.DatabaseUnavailable("h1 refused" if i % 2 else "h2 is not the primary"))
            await trio.sleep(b.pause())
        b.succeeded()

    trio.run(outage, clock=trio.testing.MockClock(autojump_threshold=0))
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 3, lines
    assert "h2 is not the primary" in lines[0] and "h1 refused" in lines[1]
    assert lines[2].startswith("loop: working again after 40 failed attempts")
