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

#: A statement the server cancelled (a statement timeout, a cancel request): it stopped at a point no one knows.
QUERY_CANCELED = "57014"

#: The server answers but is not the primary: a standby, or the old primary demoted in a failover (a proxy such as
#: HAProxy can still route new connections to it for a few seconds). 25006 is "cannot execute … in a read-only
#: transaction" and a hot standby's "cannot execute LISTEN/NOTIFY during recovery".
_NOT_PRIMARY_STATES = ("25006",)
#: What a hot standby says when refusing work under another SQLSTATE (advisory locks, WAL and xid functions).
_NOT_PRIMARY_WORDS = ("recovery is in progress", "during recovery", "read-only transaction")

NOT_PRIMARY = "not_primary"
"""``details["reason"]`` of the :class:`errors.DatabaseUnavailable` raised when the server that answered is not the
primary (a standby, or a demoted primary): that connection is discarded and a new one finds the primary."""
NOT_PRIMARY_MESSAGE = (
    "the PostgreSQL server that answered is not the primary (a standby, or demoted by a failover) and accepts no "
    "writes; reconnecting to find the primary"
)

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
    if not_primary(state, message):
        # Wrong server, not a wrong statement: discard the connection and reconnect (see discards_connection).
        return errors.DatabaseUnavailable(f"{NOT_PRIMARY_MESSAGE} ({state}: {message})", reason=NOT_PRIMARY)
    if connection_lost or state.startswith("08") or state in _SERVER_GONE:
        return errors.DatabaseUnavailable(f"PostgreSQL connection lost: {message}")
    return errors.DatabaseError(f"PostgreSQL refused a statement ({state}): {message}", sqlstate=state)


def not_primary(state: str, message: str) -> bool:
    """Whether a refusal says "this server is not the primary" (the statement itself was fine)."""
    return state in _NOT_PRIMARY_STATES or any(words in message for words in _NOT_PRIMARY_WORDS)


def discards_connection(state: str, message: str) -> bool:
    """Whether a connection that answered with this refusal must not be used again: the server is ending the session
    (08, 57P), or it is not the primary — a pool that kept the connection would hand the same refusal to the next
    caller for as long as the connection lives."""
    return state.startswith(("08", "57P")) or not_primary(state, message)
