"""What PostgreSQL's refusals mean to us: a SQLSTATE (and the server's words) → the project's error.

The classification works over names only, so it serves both roads by which a refusal reaches us: an error the
driver raises (:func:`openmaic.store.database.translate` reads its SQLSTATE and hands it here), and one a SQL
function of ours reports as data (``openmaic_append_group`` returns each failed request's SQLSTATE, message and
detail in a row, so that the other requests of its group commit go through). Both end up as the same exception.
"""

from __future__ import annotations

from openmaic import errors
from openmaic.store.bounds import CONNECTION_LIMIT, CONNECTION_LIMIT_MESSAGE

#: SQLSTATEs raised on purpose by our own SQL functions (see migrations), and the input errors we own.
OWN_SQLSTATES: dict[str, type[errors.OpenMaicError]] = {
    "OM001": errors.StaleAttempt,
    "OM002": errors.WrongExpectedSeq,
    "OM003": errors.CommandConflict,
    "OM004": errors.StreamNotFound,
    "OM005": errors.StreamExists,
    "OM010": errors.DatabaseError,
    # Text PostgreSQL cannot store (a NUL character, a byte sequence invalid in UTF-8) is the caller's input.
    "22021": errors.InvalidInput,
    "22P05": errors.InvalidInput,
}

#: The server ended the session (admin shutdown, crash, "cannot connect now"): transient, like a lost connection.
_SERVER_GONE = ("57P01", "57P02", "57P03")

#: Refusals that say nothing about the statement, only about the moment, and pass by themselves: connection
#: exceptions (08), transaction rollbacks such as serialization failures and deadlocks (40), insufficient resources
#: such as too many clients (53), operator intervention such as a statement timeout, ``pg_cancel_backend`` or a
#: shutdown (57), and a lock timeout (55P03). Work refused this way is redone, never settled as failed.
TRANSIENT_CLASSES = ("08", "40", "53", "57")
TRANSIENT_STATES = frozenset({"55P03"})


def transient_sqlstate(state: str) -> bool:
    """Whether a refusal with SQLSTATE ``state`` passes by itself (see :data:`TRANSIENT_CLASSES`)."""
    return state.startswith(TRANSIENT_CLASSES) or state in TRANSIENT_STATES


def is_transient(exc: BaseException) -> bool:
    """Whether ``exc`` is the database's trouble of the moment rather than the work's fault: the database out of
    reach (:class:`errors.DatabaseUnavailable`), or a refusal whose SQLSTATE is transient."""
    if isinstance(exc, errors.DatabaseUnavailable):
        return True
    return isinstance(exc, errors.DatabaseError) and transient_sqlstate(exc.details.get("sqlstate") or "")


UNSTORABLE_TEXT = "the input contains text that cannot be stored (such as a NUL character); remove it and retry"


def error_for_sqlstate(
    state: str, message: str, detail: str | None = None, *, connection_lost: bool = False
) -> errors.OpenMaicError:
    """The project's exception for a refusal with SQLSTATE ``state`` and the server's ``message``.

    ``detail`` is the stream id our own functions put in the error's DETAIL; ``connection_lost`` says the driver
    saw the connection go (whatever the state), which makes it :class:`errors.DatabaseUnavailable`.
    """
    own = OWN_SQLSTATES.get(state)
    if own is errors.InvalidInput:
        return errors.InvalidInput(UNSTORABLE_TEXT)
    if own is not None:
        return own(message, stream_id=detail) if detail else own(message)
    if state == "53300":
        # "too many clients": the server is up but refuses new connections for now (max_connections, a role's or
        # database's connection limit). Transient, like a restart: callers retry. The server's own words stay in
        # __cause__ (and the logs); the message is one a client can act on.
        return errors.DatabaseUnavailable(CONNECTION_LIMIT_MESSAGE, reason=CONNECTION_LIMIT)
    if connection_lost or state.startswith("08") or state in _SERVER_GONE:
        return errors.DatabaseUnavailable(f"PostgreSQL connection lost: {message}")
    return errors.DatabaseError(f"PostgreSQL refused a statement ({state}): {message}", sqlstate=state)
