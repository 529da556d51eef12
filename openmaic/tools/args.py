"""What the operator commands share: argument types, and how they show a duration."""

from __future__ import annotations

import argparse
from collections.abc import Callable

__all__ = ["at_least", "duration"]


def at_least(minimum: int) -> Callable[[str], int]:
    """An argparse type: an integer of at least ``minimum``."""

    def parse(text: str) -> int:
        try:
            n = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if n < minimum:
            raise argparse.ArgumentTypeError(f"must be {minimum} or more, got {n}")
        return n

    return parse


def duration(seconds: float | None) -> str:
    """``12.3 s``, ``4.5 min`` or ``2.0 h`` (the sign dropped: the caller says "ago" or "in"); ``-`` for None."""
    if seconds is None:
        return "-"
    seconds = abs(seconds)
    if seconds < 120:
        return f"{seconds:.1f} s"
    return f"{seconds / 60:.1f} min" if seconds < 7200 else f"{seconds / 3600:.1f} h"
