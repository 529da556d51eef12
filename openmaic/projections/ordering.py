"""Deliver the global log so that every stream's events arrive in seq order, each exactly once.

The global log is read in ``(epoch, tx, position)`` order below the visibility horizon (see ``read_all``): a prefix
that only grows at its end. That order is not always a stream's seq order. A transaction's id is assigned at its
first write; an append that touches two streams (a run step commits to its run and its course) takes its id when
it locks the first stream, and may then wait for the second stream's row lock held by a *younger* transaction.
The younger one commits seq n; the older one then appends seq n+1 with the smaller tx. Read by ``(tx,
position)``, seq n+1 comes first.

A projection folding a stream must see n before n+1. So, when an event arrives whose predecessors in its stream
have not been delivered yet, those predecessors are *pulled forward*: fetched by ``(stream_id, seq)`` and
delivered right before it. They are committed (seq order is commit order), so they can be read. Their own
``(tx, position)`` lies beyond the batch (else they would be in it), so they are recorded as *early* (table
``projection_early``, in the batch's transaction) and skipped when the tail reaches them.

Whether a predecessor was delivered is known from memory (the last seq delivered per stream, kept for recently
seen streams) or, for a stream not in memory, by a probe: walk back from seq-1 while the predecessor's cursor
lies beyond the event's and it is not early. Both cases are rare; the common path costs no query at all (a
stream's first event is seq 1, and a stream in memory continues from its last seq).
"""

from __future__ import annotations

import collections
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from openmaic.events.log import RecordedEvent
from openmaic.store.queries import Q

Fetch = Callable[..., Awaitable[list[RecordedEvent]]]
"""Reads events by an event-read statement and its arguments (:meth:`openmaic.events.log.EventLog.events`)."""
Key = tuple[str, int]


@dataclass
class Plan:
    """One batch's delivery: the events in order, and what to record when the batch commits."""

    events: list[RecordedEvent] = field(default_factory=list)
    early_added: list[Key] = field(default_factory=list)
    """Pulled forward from beyond the batch: skip them when the tail reaches them."""
    early_reached: list[Key] = field(default_factory=list)
    """Early events the tail reached in this batch (skipped now, forgotten at commit)."""
    last: dict[str, int] = field(default_factory=dict)


class StreamOrder:
    """Per-stream seq order over the ``(tx, position)`` tail. One instance per checkpoint (not shared)."""

    def __init__(self, capacity: int = 200_000) -> None:
        self._last: collections.OrderedDict[str, int] = collections.OrderedDict()
        self._capacity = capacity
        self.early: set[Key] = set()
        self.probes = 0
        self.pulled = 0

    def reset(self, early: set[Key]) -> None:
        """Forget everything (after a failed batch or a reload); ``early`` comes from the database."""
        self._last.clear()
        self.early = set(early)

    def commit(self, plan: Plan) -> None:
        """The batch's transaction committed: remember what it delivered."""
        last = self._last
        for sid, seq in plan.last.items():
            last[sid] = seq
            last.move_to_end(sid)
        while len(last) > self._capacity:
            last.popitem(last=False)
        self.early.difference_update(plan.early_reached)
        self.early.update(plan.early_added)
        self.pulled += len(plan.early_added)

    async def arrange(self, fetch: Fetch, page: Sequence[RecordedEvent]) -> Plan:
        """The delivery of ``page`` (a read_all page): its events in per-stream seq order, pulled-forward
        predecessors included, already-delivered (early) events left out."""
        plan = Plan()
        early = self.early
        known = self._last
        fast = self._in_order(page)
        if fast is not None:
            plan.events, plan.last = list(page), fast
            return plan
        last: dict[str, int | None] = {}
        probes: list[RecordedEvent] = []
        for e in page:
            sid = e.stream_id
            if sid in last or (sid, e.seq) in early:
                continue
            d = known.get(sid)
            if d is not None:
                last[sid] = d
            elif e.seq == 1:
                last[sid] = 0
            else:
                last[sid] = None
                probes.append(e)

        pulled: dict[Key, RecordedEvent] = {}
        if probes:
            self.probes += len(probes)
            found = await fetch(
                Q.projection_predecessors,
                [e.stream_id for e in probes], [e.seq for e in probes], [e.epoch for e in probes],
                [str(e.tx) for e in probes], [e.position for e in probes],
            )
            chains: dict[str, list[RecordedEvent]] = {}
            for ev in found:
                chains.setdefault(ev.stream_id, []).append(ev)
            for e in probes:
                # Walk down from seq-1: undelivered predecessors until the first delivered one (an early one is
                # delivered, and so is everything before it).
                chain = sorted(chains.get(e.stream_id, ()), key=lambda x: x.seq, reverse=True)
                d = e.seq - 1
                for ev in chain:
                    if ev.seq != d or (ev.stream_id, ev.seq) in early:
                        break
                    pulled[(ev.stream_id, ev.seq)] = ev
                    d -= 1
                last[e.stream_id] = d

        in_page = {(e.stream_id, e.seq): e for e in page}
        # Predecessors that are neither in the page nor already fetched: fetch them in one query.
        sim: dict[str, int] = {sid: d for sid, d in last.items() if d is not None}
        gaps: list[tuple[str, int, int]] = []
        for e in page:
            key = (e.stream_id, e.seq)
            if key in early:
                continue
            d = sim[e.stream_id]
            if e.seq <= d:
                continue
            for m in range(d + 1, e.seq):
                k = (e.stream_id, m)
                if k not in in_page and k not in pulled:
                    gaps.append((e.stream_id, m, m))
            sim[e.stream_id] = e.seq
        if gaps:
            for ev in await fetch(
                Q.projection_gaps, [g[0] for g in gaps], [g[1] for g in gaps], [g[2] for g in gaps]
            ):
                pulled[(ev.stream_id, ev.seq)] = ev

        delivered_here: set[Key] = set()
        cur: dict[str, int] = {sid: d for sid, d in last.items() if d is not None}
        out = plan.events
        for e in page:
            key = (e.stream_id, e.seq)
            if key in early:
                plan.early_reached.append(key)
                continue
            sid = e.stream_id
            d = cur[sid]
            if key in delivered_here or e.seq <= d:
                continue
            for m in range(d + 1, e.seq):
                k = (sid, m)
                ev = in_page.get(k)
                if ev is not None:
                    delivered_here.add(k)
                else:
                    ev = pulled.get(k)
                    if ev is None:
                        raise RuntimeError(f"event {sid}#{m} precedes a visible event but could not be read")
                    plan.early_added.append(k)
                out.append(ev)
            out.append(e)
            cur[sid] = e.seq
        plan.last = cur
        return plan

    def _in_order(self, page: Sequence[RecordedEvent]) -> dict[str, int] | None:
        """The common case, checked cheaply: every event continues its stream from what was delivered, and none
        is early. Returns the last seq per stream, or None when the page needs arranging."""
        if self.early:
            early = self.early
            if any((e.stream_id, e.seq) in early for e in page):
                return None
        known = self._last
        cur: dict[str, int] = {}
        for e in page:
            sid = e.stream_id
            d = cur.get(sid)
            if d is None:
                d = known.get(sid, 0)
            if e.seq != d + 1:
                return None
            cur[sid] = e.seq
        return cur

    def statistics(self) -> dict[str, Any]:
        return {"streams_remembered": len(self._last), "early": len(self.early), "probes": self.probes,
                "pulled_forward": self.pulled}
