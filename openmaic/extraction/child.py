"""The child that reads one PDF: ``python -I -m openmaic.extraction.child LIMITS_JSON < doc.pdf > result.json``.

Order matters. pypdf is imported first (our code, before any limit), then the process limits itself —
``RLIMIT_CPU`` (the kernel ends it with SIGXCPU, then SIGKILL one second later), ``RLIMIT_AS`` (an allocation past
it fails with MemoryError), ``RLIMIT_FSIZE`` 0 and ``RLIMIT_CORE`` 0 (it writes no file) — and only then reads
the document. The parent adds the wall clock and kills the child when it runs out.

Inside, caps stop the reading cleanly (what was read so far is kept and marked ``truncated``): pages, the bytes
of decompressed stream data read over the whole document (pypdf's own limits are per stream), and characters of
text. A cap is raised as :class:`_Cap`, a ``BaseException``: pypdf catches ``Exception`` in places to recover from
broken files, and a cap must not be recovered from.

pypdf logs a warning for each broken object it works around; one hostile file can make tens of thousands. They are
counted by message template here and reported in the result, for the parent to log as one line.

The result is one JSON object on stdout: ``{"ok": true, "text", "pages_read", "pages_total", "truncated",
"warnings": {"count", "top": [[message, count], ...]}}`` or ``{"ok": false, "reason", "message", "warnings"}``
(reason ``encrypted``, ``unreadable``, ``memory`` or ``decompressed``). Nothing but this module and
:mod:`openmaic.text` is imported from the project, so the child starts in about a third of a second.
"""

from __future__ import annotations

import io
import json
import logging
import os
import resource
import sys
import warnings
from collections import Counter
from typing import Any

from openmaic.text import clean

TOP_WARNINGS = 5
"""How many distinct warnings the result names (all are counted)."""


class _Cap(BaseException):
    """A cap was reached: stop reading, keep what was read."""


class _Warnings(logging.Handler):
    """Counts pypdf's log records (by unformatted message) and ``warnings.warn`` calls (by category)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.counts: Counter[str] = Counter()
        self.examples: dict[str, str] = {}

    def emit(self, record: logging.LogRecord) -> None:
        self._count(str(record.msg), record)

    def _count(self, key: str, record: logging.LogRecord | str) -> None:
        self.counts[key] += 1
        if key not in self.examples:
            try:
                text = record if isinstance(record, str) else record.getMessage()
            except Exception:  # a record whose arguments do not format: its template will do
                text = key
            self.examples[key] = clean(text)[:300]

    def showwarning(self, message: Any, category: Any, *_: Any, **__: Any) -> None:
        self._count(f"{getattr(category, '__name__', 'Warning')}: {message}", str(message))

    def summary(self) -> dict[str, Any]:
        top = [[self.examples[k], n] for k, n in self.counts.most_common(TOP_WARNINGS)]
        return {"count": sum(self.counts.values()), "top": top}


def _limit_self(limits: dict[str, Any]) -> None:
    cpu = int(limits["cpu_s"])
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    memory = int(limits["memory_bytes"])
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def _count_decompressed(generic: Any, budget: int) -> None:
    """Make every read of a compressed stream's data count against ``budget`` bytes for the whole document.

    Counted per read, not per decoding: pypdf decodes a stream once and caches it, and a document whose pages all
    share one huge content stream makes every page walk it again."""
    get_data = generic.EncodedStreamObject.get_data
    used = 0

    def counted(stream: Any) -> bytes:
        nonlocal used
        data: bytes = get_data(stream)
        used += len(data)
        if used > budget:
            raise _Cap("decompressed")
        return data

    generic.EncodedStreamObject.get_data = counted


def extract(data: bytes, limits: dict[str, Any], found: _Warnings) -> dict[str, Any]:
    """The result for ``data`` (see the module docstring)."""
    import pypdf
    from pypdf.errors import PyPdfError

    max_pages, max_chars = int(limits["max_pages"]), int(limits["max_chars"])
    pages: list[str] = []
    chars = read = total = 0
    truncated = False
    try:
        reader = pypdf.PdfReader(io.BytesIO(data))
        if reader.is_encrypted:
            # An owner-password-only PDF opens with the empty user password; anything else cannot be read.
            try:
                ok = reader.decrypt("")
            except Exception:  # pypdf raises several unrelated types for unsupported encryption
                ok = 0
            if not ok:
                return {"ok": False, "reason": "encrypted", "message": "the PDF is password-protected"}
        total = len(reader.pages)
        for i, page in enumerate(reader.pages):
            if i >= max_pages:
                truncated = True
                break
            text = clean(page.extract_text() or "").strip()
            read += 1
            if chars + len(text) > max_chars:
                text = text[: max_chars - chars]
                truncated = True
            if text:
                pages.append(text)
                chars += len(text) + 2
            if truncated:
                break
    except _Cap:
        if not pages:
            return {"ok": False, "reason": "decompressed",
                    "message": f"its streams decompress to more than {limits['max_decompressed_bytes']} bytes"}
        truncated = True
    except MemoryError:
        return {"ok": False, "reason": "memory", "message": "reading it needs more memory than allowed"}
    except (PyPdfError, ValueError, KeyError, TypeError, IndexError, AttributeError, RecursionError,
            UnicodeError, OSError, AssertionError) as exc:
        return {"ok": False, "reason": "unreadable", "message": f"it is not a readable PDF ({type(exc).__name__})"}
    return {"ok": True, "text": "\n\n".join(pages), "pages_read": read, "pages_total": total,
            "truncated": truncated}


def main() -> None:
    limits = json.loads(sys.argv[1])
    import pypdf.generic  # imported before the limits: loading it is ours to pay, not the document's

    found = _Warnings()
    pypdf_log = logging.getLogger("pypdf")
    pypdf_log.addHandler(found)
    pypdf_log.propagate = False
    pypdf_log.setLevel(logging.WARNING)
    warnings.showwarning = found.showwarning
    warnings.simplefilter("always")
    _count_decompressed(pypdf.generic, int(limits["max_decompressed_bytes"]))
    _limit_self(limits)
    data = sys.stdin.buffer.read()
    result = extract(data, limits, found)
    result["warnings"] = found.summary()
    out = json.dumps(result, ensure_ascii=False).encode("utf-8", "replace")
    sys.stdout.buffer.write(out)
    sys.stdout.buffer.flush()
    os._exit(0)  # nothing to tear down: skip the interpreter's (and the memory it would touch)


if __name__ == "__main__":
    main()
