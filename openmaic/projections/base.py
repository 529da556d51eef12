"""What a projection is: a name, read-model tables declared as DDL templates, and how a batch of events changes
them.

A projection never reads its own rows one event at a time. The projector hands it a batch of events (already in
per-stream seq order, see :mod:`openmaic.projections.ordering`); the projection loads the current value of every
row the batch touches with one query, folds the batch in memory, and returns the statements that write the
result — one statement per table, whatever the batch size. The projector runs those statements and the
checkpoint update in one transaction, so a batch is applied exactly once or not at all.

Table names are templated (``{library_cards}`` in a template is the physical name of the logical table
``library_cards``), so that a rebuild can build a fresh copy of the read model beside the live one and swap it in.
"""

from __future__ import annotations

import abc
import hashlib
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar, TypeVar

import msgspec

from openmaic import errors
from openmaic.events.log import RecordedEvent
from openmaic.events.types import Event, Registry, registry
from openmaic.store.database import Database, Op

log = logging.getLogger(__name__)

T = TypeVar("T", bound=msgspec.Struct)


class CheckpointRow(msgspec.Struct, frozen=True):
    """A projection's checkpoint as ``projection_checkpoint`` reads it: where it stands in the global order."""

    generation: int
    epoch: int
    tx: str
    position: int
    events_applied: int


class StreamSeq(msgspec.Struct, frozen=True):
    stream_id: str
    seq: int


class ProjectionPaused(errors.OpenMaicError):
    """A rebuild of this projection is swapping its tables in; the projector waits and retries."""

    code = "projection_paused"
    status = 503


class CheckpointMoved(errors.OpenMaicError):
    """The projection's checkpoint moved under this projector (a rebuild swapped it, or another projector wrote);
    the batch was rolled back and the projector reloads its checkpoint."""

    code = "checkpoint_moved"
    status = 409


class UnknownProjection(errors.NotFound):
    """No projection has this name."""

    code = "unknown_projection"


class RebuildRunning(errors.Conflict):
    """A rebuild of this projection is already running."""

    code = "rebuild_running"


def lock_key(purpose: str, name: str) -> int:
    """A stable, non-negative 63-bit advisory-lock key for ``purpose`` (``own``, ``apply``, ``rebuild``) of a
    projection. Non-negative so that ``pg_locks`` (classid = high half, objid = low half) maps back to it."""
    digest = hashlib.sha256(f"openmaic:projection:{purpose}:{name}".encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1


class Tables(Mapping[str, str]):
    """Logical table name → physical table name, and SQL templates rendered against them (cached)."""

    def __init__(self, names: Mapping[str, str]) -> None:
        self._names = dict(names)
        self._rendered: dict[str, str] = {}

    def __getitem__(self, key: str) -> str:
        return self._names[key]

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)

    def sql(self, template: str) -> str:
        """``template`` with every ``{logical}`` placeholder replaced by its physical table name."""
        out = self._rendered.get(template)
        if out is None:
            out = self._rendered[template] = template.format_map(self._names)
        return out


class Context:
    """What :meth:`Projection.apply` works with: the physical tables, a reader, and the event decoder."""

    def __init__(self, db: Database, tables: Tables, types: Registry = registry) -> None:
        self.db = db
        self.tables = tables
        self.types = types
        self._warned: set[str] = set()
        self.kept: dict[str, Any] = {}
        """What a projection keeps of the rows this applier committed, to read them from memory rather than from
        its tables. Only ever what committed (see :meth:`after_commit`), and forgotten whenever the applier
        reloads its checkpoint: after any failure, a lock handover or a rebuild's swap, the tables may hold what
        this process did not write."""
        self._on_commit: list[Callable[[], None]] = []

    def after_commit(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` once the batch's transaction has committed (never if it does not)."""
        self._on_commit.append(fn)

    def committed(self) -> None:
        """The applier's batch committed: run what its projection left for then."""
        pending, self._on_commit = self._on_commit, []
        for fn in pending:
            fn()

    def discard(self) -> None:
        """The batch's transaction did not commit: what its projection left for the commit is dropped."""
        self._on_commit = []

    def forget(self) -> None:
        """The applier reloads its checkpoint: drop everything kept."""
        self.kept.clear()
        self._on_commit = []

    def sql(self, template: str) -> str:
        return self.tables.sql(template)

    def op(self, template: str, *args: Any) -> Op:
        """One write statement for the batch's transaction."""
        return (self.tables.sql(template), args)

    async def fetch(self, row: type[T], template: str, *args: Any) -> list[T]:
        """Read current rows, each as ``row`` (a struct whose fields are the statement's columns), outside the
        write transaction: only this projector writes these tables, as the advisory lock and the checkpoint fence
        guarantee."""
        return await self.db.fetch_as(row, self.tables.sql(template), *args)

    def decode(self, e: RecordedEvent) -> Event | None:
        """The typed event, or None (logged once per type) when this version cannot decode it: a projection
        skips what it does not understand rather than stopping the whole read model."""
        try:
            return self.types.decode(e.type, e.v, e.data, stream_id=e.stream_id, seq=e.seq)
        except errors.UnknownEventType as exc:
            if e.type not in self._warned:
                self._warned.add(e.type)
                log.warning("projection skips events it cannot decode: %s", exc)
            return None


def lite_decode(decoder: msgspec.json.Decoder[Any], e: RecordedEvent) -> Any:
    """Decode ``e.data`` with a projection's own small Struct (fields it does not name are skipped, which is
    what makes it cheap); None, logged, when the stored data does not fit."""
    try:
        return decoder.decode(e.data)
    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
        log.warning("projection skips %s %s#%d: %s", e.type, e.stream_id, e.seq, exc)
        return None


class Projection(abc.ABC):
    """A read model derived from the global log.

    Subclasses set :attr:`name`, :attr:`tables` and :attr:`types`, and implement :meth:`apply`.
    """

    name: ClassVar[str]
    """Stable name: the checkpoint's key, the CLI's argument, the advisory locks' seed."""

    tables: ClassVar[Mapping[str, Sequence[str]]]
    """Logical table name → the DDL statements that create it, templated by physical table names
    (``CREATE TABLE {library_cards} (…)``, ``CREATE INDEX {library_cards}_owner ON {library_cards} …``). Index
    names must start with their table's placeholder, so that a swap can rename them with the table."""

    types: ClassVar[frozenset[str]]
    """The event types :meth:`apply` reads; the projector filters the others out before decoding anything."""

    def wants(self, type_: str) -> bool:
        return type_ in self.types

    def ddl(self, tables: Tables) -> list[str]:
        """Every statement creating this projection's tables under the given physical names."""
        return [tables.sql(stmt) for logical in self.tables for stmt in self.tables[logical]]

    @abc.abstractmethod
    async def apply(self, ctx: Context, events: Sequence[RecordedEvent]) -> list[Op]:
        """Fold a batch (only :attr:`types`, in per-stream seq order) and return the statements that write it.

        Load what the batch touches with as few queries as possible (one per table, keyed by ``= ANY($1)``),
        change it in memory, and write each table with one statement (``INSERT … SELECT FROM unnest(…) ON
        CONFLICT DO UPDATE``). The statements run in the same transaction as the checkpoint update.
        """


def live_tables(projection: Projection) -> Tables:
    """The projection's live tables: physical name = logical name."""
    return Tables({t: t for t in projection.tables})
