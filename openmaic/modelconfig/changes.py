"""Every change of an owner's model settings is an event in the owner's log, committed with the settings.

The settings themselves are a row (:mod:`openmaic.modelconfig.store`); who changed what, and when, is history the
row does not keep. So each save appends ``model_settings.changed`` to the owner's stream ``model-settings:<owner>``
(kind ``model_settings``, terminal: no worker runs it) in the same transaction as the row's compare-and-swap: a
change is recorded exactly when it is stored, and two saves racing are recorded in the order they were stored (the
second waits for the first's row lock). The stream is the owner's, so ``openmaic audit export --owner`` carries it
and a claim moves it with the rest of an anonymous owner's work.

An event names the change (its kind, the provider or slots, the provider's preset and endpoint), the revision it
made, whose request it was (the owner, the identity mode, the client's address: in the shared mode every member
is the same owner, and the address is what tells them apart) and what became of the provider's key: ``set``,
``kept``, ``dropped`` (its endpoint or preset changed without a key), ``removed``. Never the key itself.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from typing import Literal

import msgspec

from openmaic.events.log import EventLog, NewStream, StreamAppend, StreamRow
from openmaic.events.types import Event, register
from openmaic.modelconfig.layer import ModelLayer
from openmaic.modelconfig.secret_box import InstanceKey
from openmaic.modelconfig.store import StoredSettings, save_settings
from openmaic.store.database import Connection, Database
from openmaic.store.queries import Q

__all__ = ["KIND", "KeyFate", "ModelSettingsChanged", "save_recorded", "settings_stream"]

KIND = "model_settings"
KeyFate = Literal["set", "kept", "dropped", "removed"]


def settings_stream(owner: str) -> str:
    """The stream holding ``owner``'s settings history."""
    return f"model-settings:{owner}"


@register
class ModelSettingsChanged(Event, tag="model_settings.changed"):
    """The owner's model settings changed (see the module docstring). ``revision`` is the one the change made."""

    change: Literal["slots", "provider", "remove-provider", "import"]
    revision: int = 0
    provider: str | None = None
    preset: str | None = None
    base_url: str | None = None
    slots_set: list[str] = []
    slots_cleared: list[str] = []
    key: KeyFate | None = None
    """What became of ``provider``'s key (never the key)."""
    imported: list[dict[str, str]] = []
    """An import: its ``{kind, id}`` items."""
    keys_set: list[str] = []
    """An import: the providers it brought a key for."""
    by: str = ""
    """The owner whose request it was."""
    mode: str = ""
    """The identity mode the request was resolved in."""
    client: str | None = None
    """The client's address (behind trusted proxies, the one they forwarded)."""


@asynccontextmanager
async def _transaction(db: Database) -> AsyncIterator[Connection]:
    async with db.connection() as conn, conn.transaction():
        yield conn


async def save_recorded(log: EventLog, owner: str, layer: ModelLayer, expected: int | None, key: InstanceKey,
                        record: ModelSettingsChanged, *, current: StoredSettings | None = None,
                        clear_keys: Iterable[str] = ()) -> int:
    """:func:`~openmaic.modelconfig.store.save_settings` and ``record`` (with the new revision) in one transaction;
    returns the revision. ``SettingsConflict`` as the save raises it: then nothing is stored or recorded."""
    sid = settings_stream(owner)
    async with log.appending(_transaction(log.db)) as tx:
        revision = await save_settings(tx.conn, owner, layer, expected, key, current=current,  # type: ignore[arg-type]
                                       clear_keys=clear_keys)
        # Serialized by the settings row: the save above holds its lock (or inserted it) until this commits.
        row = await tx.conn.fetchrow_as(StreamRow, Q.stream, sid)
        event = msgspec.structs.replace(record, revision=revision)
        await tx.append(StreamAppend(stream_id=sid, events=[event],
                                     create=NewStream(KIND, owner) if row is None else None,
                                     status="terminal" if row is None else None))
    return revision
