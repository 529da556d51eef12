"""How many classroom model calls (a question's or a discussion's reply, a short answer's grade) each owner has
running in this process, held within ``limits.classroom_calls_per_owner``.

A call is admitted before its response starts, so that one past the limit is a plain 429 naming the key rather
than an error frame in a stream, and its slot is given back when the call ends: for a streamed reply, when its
stream ends (written, failed or left by its reader). The count is this process's: a learner's page talks to one
API process per request, and a bound per process keeps one owner from holding all of its model calls.
"""

from __future__ import annotations

from collections.abc import Callable

from openmaic.quotas import QuotaFull

__all__ = ["admit", "running"]

_running: dict[str, int] = {}


def running(owner: str) -> int:
    """The classroom model calls ``owner`` has running in this process."""
    return _running.get(owner, 0)


def admit(owner: str, limit: int) -> Callable[[], None]:
    """Take one of ``owner``'s ``limit`` slots, or refuse (429 naming ``limits.classroom_calls_per_owner``); answers
    the function that gives it back (calling it again does nothing)."""
    held = _running.get(owner, 0)
    if held >= limit:
        raise QuotaFull(
            f"you have {held} classroom model calls running, the most allowed at once "
            f"(limits.classroom_calls_per_owner is {limit}); wait for one to end, then try again",
            key="limits.classroom_calls_per_owner", limit=limit,
        )  # fmt: skip
    _running[owner] = held + 1
    released = False

    def release() -> None:
        nonlocal released
        if released:
            return
        released = True
        left = _running.get(owner, 1) - 1
        if left > 0:
            _running[owner] = left
        else:
            _running.pop(owner, None)

    return release
