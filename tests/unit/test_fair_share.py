"""The writers' fair share: an owner's next write gives way only while another owner is being served."""

from __future__ import annotations

import pytest

from openmaic.api import fair_share as fs


@pytest.fixture(autouse=True)
def fresh() -> None:
    fs._seen.clear()
    fs._next_write.clear()


def test_an_owner_alone_never_waits() -> None:
    fs.seen("a", now=100.0)
    fs.pause_after("a", 0.2, now=100.2)
    assert fs.wait_before_write("a", now=100.2) == 0.0


def test_a_writer_gives_way_while_another_owner_is_served() -> None:
    fs.seen("a", now=100.0)
    fs.seen("b", now=100.1)
    fs.pause_after("a", 0.2, now=100.2)
    assert fs.wait_before_write("a", now=100.25) == pytest.approx(0.2 * fs.GIVE_WAY - 0.05)
    # The wait is for the next write only.
    assert fs.wait_before_write("a", now=100.25) == 0.0


def test_the_other_owner_counts_only_within_the_window() -> None:
    fs.seen("b", now=100.0)
    fs.seen("a", now=100.5)
    fs.pause_after("a", 0.3, now=100.5 + fs.WINDOW)
    assert not fs.others_active("a", now=100.0 + fs.WINDOW)
    assert fs.wait_before_write("a", now=100.5 + fs.WINDOW) == 0.0


def test_the_wait_is_capped() -> None:
    fs.seen("b", now=100.0)
    fs.pause_after("a", 30.0, now=100.0)
    assert fs.wait_before_write("a", now=100.0) == fs.MAX_PAUSE


def test_the_table_of_writers_forgets_those_whose_time_has_passed() -> None:
    for i in range(5000):
        fs.pause_after(f"o{i}", 0.0, now=1.0)
    fs.pause_after("last", 0.0, now=2.0)
    assert len(fs._next_write) <= 4097
