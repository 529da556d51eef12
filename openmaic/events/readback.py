"""Did an append call whose connection was lost commit? Read its streams back and see.

An append call is one statement, so one transaction: every request it carried committed, or none did. When the
connection goes while the call is out (the server ended the backend, a restart, a network cut), the client cannot
know which, and a group commit must not send the requests again (they may be in). Instead it reads each stream's
last events: if every batch of the call is there, byte for byte (the log keeps the exact JSON it was given), under
the batch's attempt, right after its expected head when it had one, and all of them in ONE transaction, the call
committed and each request is answered with its seqs. Otherwise the callers get the lost connection's error, as
they always did, and decide for themselves (an actor folds its stream and resumes from what it finds).

The limit: a call that did not commit, whose events are byte for byte those of the latest transaction on its one
stream (an append repeated with nothing between), reads as committed. Several requests in one call, or an
``expected_seq``, rule that out; an actor's appends are refolded after every commit in any case, so a repeat is
seen for what it is.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any, NamedTuple

import trio

from openmaic import errors
from openmaic.store.database import Database
from openmaic.store.queries import Q

log = logging.getLogger(__name__)

RETRY_S = (0.05, 0.2, 0.5)
"""Pauses between tries of the read-back while connections keep failing (about a second in all)."""

WINDOW = 16
"""Events read past a batch's own count: appends that came after the call (a command, another writer's) may have
pushed its events back from the head by that many."""


class Batch(NamedTuple):
    stream_id: str
    attempt: int | None
    expected_seq: int | None
    types: Sequence[str]
    datas: Sequence[str]


def call_batches(requests: Sequence[Any]) -> list[Batch]:
    """The batches of a call's requests (``AppendRequest``: its ``batches`` and encoded ``types``/``datas``)."""
    out: list[Batch] = []
    for r in requests:
        at = 0
        for b in r.batches:
            n = len(b.events)
            out.append(Batch(b.stream_id, b.attempt, b.expected_seq, r.types[at:at + n], r.datas[at:at + n]))
            at += n
    return out


async def committed_seqs(db: Database, batches: Sequence[Batch]) -> list[tuple[int, int]] | None:
    """Each batch's (first_seq, last_seq) if the call that carried them is found committed, else None."""
    if not batches or any(not b.types for b in batches):
        return None  # a batch of no events leaves nothing to find
    rows = await db.fetch(Q.append_readback, [b.stream_id for b in batches], [len(b.types) for b in batches],
                          WINDOW)
    tails: dict[int, list[tuple[int, str, str, int | None, str]]] = {}
    for row in rows:
        tails.setdefault(row[0], []).append((row[1], row[2], row[3], row[4], row[5]))
    found: list[tuple[int, int]] = []
    txs: set[str] = set()
    for i, b in enumerate(batches, start=1):
        match = _latest_match(tails.get(i, []), b)
        if match is None:
            return None
        txs.add(match[2])
        found.append((match[0], match[1]))
    return found if len(txs) == 1 else None


def _latest_match(tail: list[tuple[int, str, str, int | None, str]], b: Batch) -> tuple[int, int, str] | None:
    n = len(b.types)
    for start in range(len(tail) - n, -1, -1):
        window = tail[start:start + n]
        if len({e[4] for e in window}) != 1:
            continue
        if b.expected_seq is not None and window[0][0] != b.expected_seq + 1:
            continue
        if all(e[1] == t and e[2] == d and (b.attempt is None or e[3] == b.attempt)
               for e, t, d in zip(window, b.types, b.datas)):
            return window[0][0], window[-1][0], window[0][4]
    return None


async def read_back(requests: Sequence[Any]) -> list[list[tuple[str, int, int]]] | None:
    """Per request of a call whose connection was lost, each of its streams' ``(stream_id, first_seq, last_seq)``
    if the call is found committed; None when it is not found (or the read itself fails)."""
    batches = call_batches(requests)
    for pause in (*RETRY_S, None):
        try:
            seqs = await committed_seqs(requests[0].db, batches)
            break
        except (errors.DatabaseUnavailable, errors.DatabaseError) as exc:
            if pause is None or not isinstance(exc, errors.DatabaseUnavailable):
                log.info("could not read back an append call whose connection was lost: %s", exc)
                return None
            # The pool's other connections are often gone with the call's (a restart, a terminated backend):
            # each try takes another, and a fresh one once the dead are weeded out.
            await trio.sleep(pause)
    if seqs is None:
        return None
    log.info("an append call of %d request(s) lost its connection after it committed; answered from the log",
             len(requests))
    it = iter(zip(batches, seqs))
    return [[(b.stream_id, first, last) for b, (first, last) in (next(it) for _ in r.batches)] for r in requests]
