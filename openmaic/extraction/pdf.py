"""The parent side of PDF extraction: one child process per document, killed at its budget, a bounded number at
once.

:meth:`Extractor.pdf_text` starts the child (:mod:`openmaic.extraction.child`), writes the document to its stdin,
reads its JSON result from stdout (bounded: the child can write no more than the text cap allows) and waits for
it under the wall clock of ``limits.extraction.wall_s``; the child limits its own CPU and memory. However the
call ends — a result, a kill, the caller cancelled — the child is dead and reaped when it returns, so nothing a
document does outlives its request.

Concurrency: ``concurrent`` children per process (the CPU is shared with every request this process serves);
callers beyond wait for a turn, at most ``queue`` of them (more is a 503 with ``Retry-After``). Per owner,
``concurrent_per_owner`` at once: an upload past it is refused at once (429: one owner cannot fill the queue),
while a run's material step (``wait_for_owner=True``) waits for its turn.

Errors are the user's to act on: :class:`UnreadableFile` (not a PDF we can read, or password-protected),
:class:`DocumentTooCostly` (it needs more CPU, memory, time or decompressed bytes than allowed;
``details.reason`` says which), :class:`ExtractionBusy` (429) and :class:`ExtractionQueueFull` (503).
"""

from __future__ import annotations

import json
import logging
import signal
import subprocess
import sys
from typing import Any, NoReturn

import msgspec
import trio

from openmaic import errors
from openmaic.config import ExtractionLimits

__all__ = [
    "DocumentTooCostly", "Extracted", "ExtractionBusy", "ExtractionQueueFull", "Extractor", "UnreadableFile",
]  # fmt: skip

log = logging.getLogger("openmaic.extraction")

_STDERR_TAIL = 4096
"""Bytes of the child's stderr kept for the log (a traceback's end says what happened)."""
_REAP_S = 5.0
"""How long reaping a killed child may take (SIGKILL cannot be ignored; this only bounds a stuck kernel)."""


class UnreadableFile(errors.InvalidInput):
    """The file could not be read."""

    code = "unreadable_file"


class DocumentTooCostly(errors.InvalidInput):
    """Reading this document needs more than this server allows; upload a smaller or simpler file."""

    code = "document_too_costly"


class ExtractionBusy(errors.TooManyRequests):
    """One of your documents is being read already; wait for it, then upload again."""

    code = "extraction_busy"

    def __init__(self, message: str | None = None, **details: Any) -> None:
        super().__init__(message, **details)
        self.headers = {"Retry-After": "2"}


class ExtractionQueueFull(errors.OpenMaicError):
    """The server is reading as many documents as it can; try again in a few seconds."""

    code = "extraction_queue_full"
    status = 503
    error_code = "SERVICE_UNAVAILABLE"

    def __init__(self, message: str | None = None, **details: Any) -> None:
        super().__init__(message, **details)
        self.headers = {"Retry-After": "5"}


class Extracted(msgspec.Struct, frozen=True, kw_only=True):
    """A document's text, and how much of it was read."""

    text: str
    pages_read: int
    pages_total: int
    truncated: bool
    """A cap (pages, characters, decompressed bytes) left part of the document out."""
    warnings: int = 0
    """Problems pypdf worked around while reading it (logged as one line)."""


class _Owner:
    __slots__ = ("slots", "users")

    def __init__(self, n: int) -> None:
        self.slots = trio.Semaphore(n)
        self.users = 0


class Extractor:
    """Extraction for one process: its limits, its turns, and statistics."""

    def __init__(self, limits: ExtractionLimits | None = None) -> None:
        self.limits = limits or ExtractionLimits()
        self._turns = trio.Semaphore(self.limits.concurrent)
        self._owners: dict[str, _Owner] = {}
        self._waiting = 0
        self.running = 0
        self.peak = 0
        """The most children that ran at once (for tests and diagnostics)."""
        self.outcomes: dict[str, int] = {}

    def statistics(self) -> dict[str, Any]:
        return {"running": self.running, "waiting": self._waiting, "peak": self.peak, "outcomes": dict(self.outcomes)}

    async def pdf_text(self, data: bytes, *, owner: str, filename: str, wait_for_owner: bool = False) -> Extracted:
        """The text of the PDF ``data`` (``filename`` names it in messages), read within the limits."""
        entry = self._owners.get(owner)
        if entry is None:
            entry = self._owners[owner] = _Owner(self.limits.concurrent_per_owner)
        entry.users += 1
        try:
            if wait_for_owner:
                await entry.slots.acquire()
            else:
                try:
                    entry.slots.acquire_nowait()
                except trio.WouldBlock:
                    raise ExtractionBusy(
                        f"{filename!r}: one of your documents is being read already; upload this one when it is "
                        "done", filename=filename,
                    ) from None
            try:
                return await self._in_turn(data, filename)
            finally:
                entry.slots.release()
        finally:
            entry.users -= 1
            if entry.users == 0:
                del self._owners[owner]  # no await since the check: nobody can be holding or waiting

    async def _in_turn(self, data: bytes, filename: str) -> Extracted:
        if self._turns.value == 0 and self._waiting >= self.limits.queue:
            raise ExtractionQueueFull(
                f"{filename!r}: this server is reading as many documents as it can; try again in a few seconds",
                filename=filename,
            )
        self._waiting += 1
        try:
            await self._turns.acquire()
        finally:
            self._waiting -= 1
        try:
            self.running += 1
            self.peak = max(self.peak, self.running)
            result = await self._run_child(data, filename)
        finally:
            self.running -= 1
            self._turns.release()
        return result

    def _count(self, outcome: str) -> None:
        self.outcomes[outcome] = self.outcomes.get(outcome, 0) + 1

    async def _run_child(self, data: bytes, filename: str) -> Extracted:
        limits = self.limits
        args = json.dumps({k: getattr(limits, k) for k in (
            "cpu_s", "memory_bytes", "max_pages", "max_decompressed_bytes", "max_chars")})  # fmt: skip
        # The child's output is bounded by its text cap (UTF-8, JSON escapes) plus a little for the rest.
        out_cap = limits.max_chars * 8 + 65536
        process = await trio.lowlevel.open_process(
            [sys.executable, "-I", "-m", "openmaic.extraction.child", args],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )  # fmt: skip
        out = bytearray()
        err = bytearray()
        timed_out = overflow = False
        try:
            with trio.move_on_after(limits.wall_s) as wall:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(_feed, process.stdin, data)
                    nursery.start_soon(_tail, process.stderr, err)
                    if not await _read_capped(process.stdout, out, out_cap):
                        overflow = True
                        process.kill()
                    await process.wait()
            timed_out = wall.cancelled_caught
        finally:
            # Whatever happened (a result, the wall clock, our caller cancelled): the child dies and is reaped
            # here. Shielded, so that a cancelled caller cannot leave a zombie or a running parser behind.
            with trio.CancelScope(shield=True):
                if process.returncode is None:
                    process.kill()
                with trio.move_on_after(_REAP_S):
                    await process.wait()
                for stream in (process.stdin, process.stdout, process.stderr):
                    if stream is not None:
                        await stream.aclose()
        return self._outcome(filename, process.returncode, bytes(out), bytes(err), timed_out, overflow)

    def _outcome(self, filename: str, rc: int | None, out: bytes, err: bytes, timed_out: bool,
                 overflow: bool) -> Extracted:
        limits = self.limits
        if timed_out:
            self._too_costly(filename, "time", f"reading it took longer than {limits.wall_s:g} s",
                                    limit=limits.wall_s)
        if rc in (-signal.SIGXCPU, -signal.SIGKILL) and not overflow:
            self._too_costly(filename, "cpu", f"reading it needs more than {limits.cpu_s} s of CPU",
                                    limit=limits.cpu_s)
        result: dict[str, Any] | None = None
        if rc == 0 and not overflow:
            try:
                result = json.loads(out)
            except ValueError:
                result = None
        if result is None:
            if b"MemoryError" in err:
                self._too_costly(filename, "memory", "reading it needs more memory than allowed",
                                        limit=limits.memory_bytes)
            self._count("failed")
            log.warning("reading %r failed (exit status %s): %s", filename, rc,
                        err.decode(errors="replace").strip().splitlines()[-1:] or "no output")
            raise UnreadableFile(f"{filename!r} could not be read", filename=filename)
        summary = result.get("warnings") or {}
        count = int(summary.get("count") or 0)
        if count:
            # One line however many objects were broken: the counts and the commonest messages.
            top = "; ".join(f"{n}× {message}" for message, n in summary.get("top") or [])
            log.warning("pypdf reported %d problems reading %r (commonest: %s)", count, filename, top)
        if not result.get("ok"):
            reason = str(result.get("reason"))
            message = str(result.get("message"))
            if reason in ("memory", "decompressed"):
                limit = limits.memory_bytes if reason == "memory" else limits.max_decompressed_bytes
                self._too_costly(filename, reason, message, limit=limit)
            self._count(reason)
            hint = "; upload an unprotected copy" if reason == "encrypted" else ""
            raise UnreadableFile(f"{filename!r}: {message}{hint}", filename=filename, reason=reason)
        self._count("truncated" if result["truncated"] else "read")
        return Extracted(text=result["text"], pages_read=result["pages_read"], pages_total=result["pages_total"],
                         truncated=result["truncated"], warnings=count)

    def _too_costly(self, filename: str, reason: str, what: str, *, limit: float) -> NoReturn:
        self._count(reason)
        log.warning("refused %r: %s (limit %s)", filename, what, limit)
        raise DocumentTooCostly(f"{filename!r}: {what}; upload a smaller or simpler file", filename=filename,
                                reason=reason, limit=limit)


async def _feed(stdin: Any, data: bytes) -> None:
    try:
        await stdin.send_all(data)
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        pass  # the child ended before reading everything (a limit, or a file it refused at once)
    finally:
        await stdin.aclose()


async def _read_capped(stream: Any, into: bytearray, cap: int) -> bool:
    """Read ``stream`` to its end into ``into``; False (and stop) once it exceeds ``cap`` bytes."""
    while chunk := await stream.receive_some(65536):
        into += chunk
        if len(into) > cap:
            return False
    return True


async def _tail(stream: Any, into: bytearray) -> None:
    """Read ``stream`` to its end, keeping only its last bytes."""
    while chunk := await stream.receive_some(65536):
        into += chunk
        if len(into) > _STDERR_TAIL:
            del into[: len(into) - _STDERR_TAIL]
