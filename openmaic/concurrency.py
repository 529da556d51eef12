"""Trio helpers every layer may use (layer 0 of the module map: this module imports nothing of openmaic).

A nursery wraps whatever crosses it in an ExceptionGroup, even a single exception. A context manager or a serving
loop that happens to run a nursery inside should let its callers see the error that was raised, not a group of one,
so they can keep catching :class:`~openmaic.errors.OpenMaicError` subclasses by type. :func:`collapse_groups` does
that at each such boundary; a group of two or more real failures is left as it is, since picking one would hide the
other.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator


def single_exception(group: BaseExceptionGroup) -> BaseException | None:
    """The one leaf of a group that holds exactly one exception (nested or not), else None."""
    leaves: list[BaseException] = []

    def walk(g: BaseExceptionGroup) -> None:
        for e in g.exceptions:
            walk(e) if isinstance(e, BaseExceptionGroup) else leaves.append(e)

    walk(group)
    return leaves[0] if len(leaves) == 1 else None


@contextlib.contextmanager
def collapse_groups() -> Iterator[None]:
    """Re-raise a one-exception group as that exception.

    Nurseries wrap whatever crosses them in an ExceptionGroup; callers of a context manager that happens to
    use a nursery inside should see the error they raised (or the one we raised), not a group of one.
    """
    try:
        yield
    except BaseExceptionGroup as group:
        leaf = single_exception(group)
        if leaf is None:
            raise
        raise leaf from leaf.__cause__
