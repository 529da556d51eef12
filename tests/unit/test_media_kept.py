"""The media lane's kept provider results: bounded, dropped once their element settles or is retried."""

from __future__ import annotations

from openmaic.media.kept import KeptResults
from openmaic.models.media import GeneratedMedia


def media(n: int) -> GeneratedMedia:
    return GeneratedMedia(media_type="image/png", data=b"x" * n)


def test_kept_until_settled_or_retried():
    kept = KeptResults()
    kept.keep(("lane", "a", 0), media=media(3))
    kept.keep(("lane", "b", 0), task_id="t1")
    kept.keep(("other", "a", 0), media=media(3))
    kept.forget("lane", set(), {})
    assert kept.get(("lane", "a", 0)).media == media(3) and kept.get(("lane", "b", 0)).task_id == "t1"
    kept.forget("lane", {"a"}, {"b": 1})  # a settled, b retried since
    assert kept.get(("lane", "a", 0)).media is None and kept.get(("lane", "b", 0)).task_id is None
    assert kept.get(("other", "a", 0)).media == media(3)


def test_kept_is_bounded_in_entries_and_bytes_oldest_first():
    kept = KeptResults(max_entries=2, max_bytes=10)
    kept.keep(("l", "a", 0), media=media(4))
    kept.keep(("l", "b", 0), media=media(4))
    kept.keep(("l", "c", 0), media=media(4))
    assert len(kept) == 2 and kept.get(("l", "a", 0)).media is None
    kept.keep(("l", "d", 0), media=media(8))
    assert len(kept) == 1 and kept.get(("l", "d", 0)).media == media(8)
