"""Which page of a catch-up read a replica may answer (:func:`openmaic.events.log.reaches`): only one that gives the
reader everything up to the seq it must see, or a full page it reads on from."""

from __future__ import annotations

import datetime as dt

import msgspec

from openmaic.events.log import RecordedEvent, reaches

AT = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)


def page(*seqs: int, size: int = 10) -> list[RecordedEvent]:
    return [RecordedEvent("s", seq, "t", 1, msgspec.Raw(b"x" * size), None, None, AT, seq, 1, b"") for seq in seqs]


def test_a_page_short_of_the_floor_is_not_the_replicas_to_answer():
    assert not reaches(page(), after=0, target=3, limit=10, max_bytes=None)  # the stream is not there yet
    assert not reaches(page(1, 2), after=0, target=3, limit=10, max_bytes=None)
    assert not reaches(page(5, 6), after=4, target=7, limit=10, max_bytes=1000)


def test_a_page_that_reaches_the_floor_or_is_full_is():
    assert reaches(page(1, 2, 3), after=0, target=3, limit=10, max_bytes=None)
    assert reaches(page(1, 2, 3, 4), after=0, target=3, limit=10, max_bytes=None)  # committed since: as good
    assert reaches(page(1, 2), after=0, target=9, limit=2, max_bytes=None)  # full by count: the reader reads on
    assert reaches(page(1, 2, size=600), after=0, target=9, limit=10, max_bytes=1000)  # full by bytes


def test_nothing_asked_for_up_to_the_floor_is_complete_whatever_the_replica_has():
    assert reaches(page(), after=3, target=3, limit=10, max_bytes=None)
    assert reaches(page(), after=5, target=3, limit=10, max_bytes=None)
