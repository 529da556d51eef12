"""FoldCache on a real database: a cached fold reads only what was appended since, and equals a fresh fold."""

from __future__ import annotations

from openmaic.events.core import SessionCreated, SessionMessagePosted
from openmaic.events.folds import FoldCache
from openmaic.events.log import EventLog, NewStream, StreamAppend
from openmaic.events.types import Event


def texts(state: tuple[str, ...], event: Event, seq: int) -> tuple[str, ...]:
    return (*state, getattr(event, "text", event.__struct_config__.tag))


async def create(log: EventLog, sid: str, messages: int) -> None:
    await log.append(StreamAppend(stream_id=sid, events=[SessionCreated(kind="test", owner_id="o")],
                                  create=NewStream("test", "o")))  # fmt: skip
    await post(log, sid, messages)


async def post(log: EventLog, sid: str, n: int, start: int = 0) -> None:
    if n:
        await log.append_one(sid, [SessionMessagePosted(text=f"m{start + i}") for i in range(n)])


async def fresh(log: EventLog, sid: str, to_seq: int | None = None) -> tuple[str, ...]:
    return (await log.fold(sid, (), texts, to_seq=to_seq))[0]


async def test_a_cached_fold_reads_only_new_events_and_equals_a_fresh_fold(db):
    log = EventLog(db)
    cache = FoldCache(log, tuple, texts)
    await create(log, "s", 10)
    assert await cache.state("s") == await fresh(log, "s") and cache.events_read == 11
    await post(log, "s", 3, start=10)
    assert await cache.state("s") == await fresh(log, "s") and cache.events_read == 14  # only the 3 new ones
    assert await cache.state("s") == await fresh(log, "s") and cache.events_read == 14  # nothing new: no event
    # An earlier seq than the one kept is folded from the start, and is right.
    assert await cache.state("s", to_seq=4) == await fresh(log, "s", to_seq=4)
    assert await cache.state("s", to_seq=6) == await fresh(log, "s", to_seq=6)
    assert cache.events_read == 14 + 4 + 2


async def test_the_least_recently_used_stream_is_forgotten(db):
    log = EventLog(db)
    cache = FoldCache(log, tuple, texts, size=2)
    for sid in ("a", "b", "c"):
        await create(log, sid, 1)
    await cache.state("a")
    await cache.state("b")
    await cache.state("a")  # a is now the most recent
    await cache.state("c")  # evicts b
    read = cache.events_read
    await cache.state("a")
    assert cache.events_read == read  # still kept
    await cache.state("b")
    assert cache.events_read == read + 2  # folded again from the start
