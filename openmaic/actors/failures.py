"""What a step's exception means to the runtime, read through any exception groups its nurseries wrapped it in.

* the database's trouble of the moment (out of reach, or a transient refusal: see
  :func:`openmaic.store.sqlstates.is_transient`): nothing is the step's fault, so it is never settled as failed
  and charges no retry; the actor stops and the stream resumes from its last checkpoint;
* the lease lost (``StaleAttempt``): the actor stops and writes nothing more;
* anything else: the step failed, and its user reads the cause in the project's own words (the provider and what
  failed), never a Python class name.
"""

from __future__ import annotations

import trio

from openmaic import errors
from openmaic.store.sqlstates import is_transient


def leaves(exc: BaseException) -> list[BaseException]:
    """The exceptions inside ``exc``: itself, or every leaf of a (nested) exception group."""
    if not isinstance(exc, BaseExceptionGroup):
        return [exc]
    out: list[BaseException] = []
    for e in exc.exceptions:
        out += leaves(e)
    return out


def database_trouble(exc: BaseException) -> BaseException | None:
    """The first leaf that is the database's trouble of the moment, if any. It wins over the other leaves: a
    nursery's sibling that failed because the database did (a pump whose commit was refused) is not the cause."""
    return next((e for e in leaves(exc) if is_transient(e)), None)


def stale_attempt(exc: BaseException) -> errors.StaleAttempt | None:
    return next((e for e in leaves(exc) if isinstance(e, errors.StaleAttempt)), None)


def only_cancelled(exc: BaseException) -> bool:
    return all(isinstance(e, trio.Cancelled) for e in leaves(exc))


def step_error(exc: BaseException, step: str) -> str:
    """The message a failed step leaves for its user: the project errors' own messages (a provider's name and what
    failed), one per distinct cause; a bug's is a fixed sentence (its traceback is in the server log)."""
    messages: list[str] = []
    for e in leaves(exc):
        if isinstance(e, trio.Cancelled):
            continue
        text = e.message if isinstance(e, errors.OpenMaicError) else f"step {step} failed unexpectedly; see the server log"
        if text not in messages:
            messages.append(text)
    return "; ".join(messages) or f"step {step} failed unexpectedly; see the server log"


def is_bug(exc: BaseException) -> bool:
    """Whether some leaf is not a project error (a bug: logged with its traceback)."""
    return any(not isinstance(e, errors.OpenMaicError | trio.Cancelled) for e in leaves(exc))
