"""The fold cache: within its byte budget, least recently used out first, an oversized state never kept."""

from __future__ import annotations

from openmaic.events.fold_cache import FoldCache


def cache(budget: int = 100) -> FoldCache[str]:
    return FoldCache(budget, len)


def test_a_kept_state_comes_back_with_its_seq() -> None:
    c = cache()
    c.put("s", "state", 7, b"h")
    assert c.get("s") == ("state", 7, b"h")
    assert c.get("other") is None


def test_putting_a_stream_again_replaces_it_and_its_bytes() -> None:
    c = cache()
    c.put("s", "x" * 20, 1, b"h")
    c.put("s", "y" * 10, 2, b"h")
    assert c.get("s") == ("y" * 10, 2, b"h")
    assert c.statistics() == (1, 10)


def test_the_least_recently_used_goes_first_once_the_budget_is_passed() -> None:
    c = cache(80)
    for s in "abcd":
        c.put(s, s * 20, 1, b"h")
    assert c.get("a") is not None  # a is now the most recently used
    c.put("e", "e" * 20, 1, b"h")
    assert c.get("b") is None
    assert [c.get(s) is not None for s in "acde"] == [True, True, True, True]
    assert c.statistics() == (4, 80)


def test_a_state_larger_than_a_quarter_of_the_budget_is_not_kept() -> None:
    c = cache(100)
    c.put("small", "s" * 25, 1, b"h")
    c.put("big", "b" * 26, 1, b"h")
    assert c.get("big") is None
    assert c.get("small") is not None
    c.put("small", "s" * 26, 2, b"h")  # grown past the cap: the old state goes too
    assert c.get("small") is None
    assert c.statistics() == (0, 0)


def test_a_dropped_stream_is_gone() -> None:
    c = cache()
    c.put("s", "state", 1, b"h")
    c.drop("s")
    c.drop("never")
    assert c.get("s") is None and c.statistics() == (0, 0)
