"""Per-stream seq order over an arbitrarily shuffled global order: each event delivered once, streams in order,
whatever the page sizes and however often the reader restarts (memory lost, early set reloaded)."""

from __future__ import annotations

import datetime as dt
import random

import msgspec
import pytest

from openmaic.events.log import RecordedEvent
from openmaic.projections.ordering import StreamOrder
from openmaic.store.queries import Q

NOW = dt.datetime(2025, 1, 1, tzinfo=dt.UTC)


def make_log(rng: random.Random, streams: int, events: int) -> list[RecordedEvent]:
    """A global order with arbitrary inversions: events dealt to streams, seqs assigned, then locally shuffled."""
    heads = [0] * streams
    out = []
    for _ in range(events):
        s = rng.randrange(streams)
        heads[s] += 1
        out.append((f"s{s}", heads[s]))
    # shuffle within windows: later seqs may come before earlier ones, by up to the window's size
    for i in range(0, len(out), 7):
        window = out[i:i + 7]
        rng.shuffle(window)
        out[i:i + 7] = window
    return [RecordedEvent(sid, seq, "t.e", 1, msgspec.Raw(b"{}"), None, None, NOW, pos, 1, b"")
            for pos, (sid, seq) in enumerate(out, 1)]


class FakeDb:
    """Answers the two event reads StreamOrder issues, from the whole log (as ``EventLog.events`` would)."""

    def __init__(self, log: list[RecordedEvent]) -> None:
        self.by_key = {(e.stream_id, e.seq): e for e in log}

    async def fetch(self, sql: str, *args):
        rows = []
        if sql == Q.projection_predecessors:
            for sid, q, epoch, tx, pos in zip(*args):
                m = q - 1
                while (e := self.by_key.get((sid, m))) is not None and e.cursor > (epoch, int(tx), pos):
                    rows.append(e)
                    m -= 1
        elif sql == Q.projection_gaps:
            for sid, lo, hi in zip(*args):
                rows += [self.by_key[(sid, m)] for m in range(lo, hi + 1)]
        else:
            raise AssertionError(sql)
        return rows


@pytest.mark.parametrize("seed", range(12))
async def test_every_event_once_and_in_seq_order(seed):
    rng = random.Random(seed)
    log = make_log(rng, streams=rng.randint(1, 6), events=300)
    db = FakeDb(log)
    order = StreamOrder(capacity=rng.choice([1, 3, 1000]))
    early_db: set = set()  # what the projection_early table would hold
    delivered = []
    i = 0
    while i < len(log):
        page = log[i:i + rng.randint(1, 20)]
        plan = await order.arrange(db.fetch, page)
        if rng.random() < 0.1:
            # the batch's transaction failed: nothing recorded, start over from the same place with a fresh memory
            order.reset(early_db)
            continue
        delivered += plan.events
        early_db |= set(plan.early_added)
        early_db -= set(plan.early_reached)
        order.commit(plan)
        i += len(page)
        if rng.random() < 0.2:
            order.reset(early_db)  # a restarted process: memory gone, early set from the database
    keys = [(e.stream_id, e.seq) for e in delivered]
    assert len(keys) == len(set(keys)) == len(log)
    last: dict[str, int] = {}
    for sid, seq in keys:
        assert seq == last.get(sid, 0) + 1
        last[sid] = seq
    assert early_db == set()
