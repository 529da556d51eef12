"""A one-line progress bar on stderr, drawn only when stderr is a terminal (silent when piped or captured)."""

from __future__ import annotations

import sys
import time
from typing import TextIO


class Progress:
    """Count work done against an expected total and redraw at most ten times a second.

    Call the object with the amount just done; :meth:`close` ends the line. With ``enabled=None`` it draws only
    when ``stream`` is a terminal.
    """

    def __init__(self, label: str, total: int, *, unit: str = "events", stream: TextIO | None = None,
                 enabled: bool | None = None) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = self.stream.isatty() if enabled is None else enabled
        self.label = label
        self.total = max(total, 0)
        self.unit = unit
        self.done = 0
        self._started = time.perf_counter()
        self._drawn = 0.0

    def __call__(self, n: int) -> None:
        self.done += n
        if self.enabled:
            now = time.perf_counter()
            if now - self._drawn >= 0.1:
                self._drawn = now
                self._draw(now)

    def _draw(self, now: float) -> None:
        rate = self.done / max(now - self._started, 1e-9)
        if self.total:
            frac = min(self.done / self.total, 1.0)
            bar = "#" * int(frac * 30)
            text = f"{self.label} [{bar:<30}] {frac:4.0%} {self.done:,}/{self.total:,} {self.unit} {rate:,.0f}/s"
        else:
            text = f"{self.label} {self.done:,} {self.unit} {rate:,.0f}/s"
        self.stream.write("\r" + text[:200] + "\x1b[K")
        self.stream.flush()

    def close(self) -> None:
        if self.enabled:
            self._draw(time.perf_counter())
            self.stream.write("\n")
            self.stream.flush()

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
