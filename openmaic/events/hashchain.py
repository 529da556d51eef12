"""The audit hash chain, computed the same way as the database does (openmaic_event_hash in 0001).

    hash(n) = sha256( hash(n-1) ‖ int64_be(seq) ‖ int32_be(len(type_utf8)) ‖ type_utf8 ‖ data_bytes )

with hash(0) = 32 zero bytes, where ``data_bytes`` are the exact stored JSON bytes of the event's data.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Iterable

GENESIS = bytes(32)


def event_hash(prev: bytes, seq: int, type_: str, data: bytes) -> bytes:
    t = type_.encode()
    return hashlib.sha256(prev + struct.pack(">qi", seq, len(t)) + t + data).digest()


class ChainBreak(Exception):
    def __init__(self, seq: int, reason: str) -> None:
        self.seq = seq
        self.reason = reason
        super().__init__(f"seq {seq}: {reason}")


def verify_chain(events: Iterable[tuple[int, str, bytes, bytes]], prev: bytes = GENESIS, first_seq: int = 1) -> bytes:
    """Check ``(seq, type, data, hash)`` tuples in order; returns the head hash or raises :class:`ChainBreak`."""
    expected_seq = first_seq
    for seq, type_, data, stored in events:
        if seq != expected_seq:
            raise ChainBreak(seq, f"expected seq {expected_seq}: an event is missing or out of order")
        h = event_hash(prev, seq, type_, data)
        if h != stored:
            raise ChainBreak(seq, "hash mismatch: the event's data, type or position was altered")
        prev = h
        expected_seq += 1
    return prev
