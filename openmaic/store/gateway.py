"""The statements every road to the database answers, and rows as typed structs.

Two roads lead to PostgreSQL: a unit of work on the pool (:class:`~openmaic.store.database.Database`) and a
connection held across several units (:class:`~openmaic.store.database.Connection`, for a caller's transaction or
a session lock). Both answer the same four statement methods, written once here over the one primitive each road
implements (``_statement``: run one statement by the driver method's name), so that they cannot drift apart.

Above the log a row is a typed struct, never the driver's record indexed by column name: ``fetch_as(Row, sql,
…)`` hands back instances of a frozen :class:`msgspec.Struct` whose fields are the statement's columns, so a
column renamed in a ``.sql`` file fails where the row is built (an unexpected or missing column is a
``TypeError`` naming it), not as a ``KeyError`` deep in a fold. The conversion is a keyword call per row, no
validation pass: the columns' types are PostgreSQL's own, already decoded by the driver.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypeVar

import msgspec

T = TypeVar("T", bound=msgspec.Struct)


def typed(type_: type[T], row: Mapping[str, Any]) -> T:
    """One row as ``type_`` (its fields named as the statement's columns)."""
    return type_(**row)


def typed_rows(type_: type[T], rows: Iterable[Mapping[str, Any]]) -> list[T]:
    return [type_(**r) for r in rows]


class Gateway:
    """``fetch``, ``fetchrow``, ``fetchval``, ``execute`` and their typed forms over one ``_statement`` primitive."""

    __slots__ = ()

    async def _statement(self, method: str, sql: str, args: Sequence[Any]) -> Any:
        """Run ``sql`` with ``args`` by the driver's ``method`` (``fetch``, ``fetchrow``, ``fetchval``,
        ``execute``) and return its answer."""
        raise NotImplementedError

    async def fetch(self, sql: str, *args: Any) -> list[Any]:
        return await self._statement("fetch", sql, args)

    async def fetchrow(self, sql: str, *args: Any) -> Any | None:
        return await self._statement("fetchrow", sql, args)

    async def fetchval(self, sql: str, *args: Any) -> Any:
        return await self._statement("fetchval", sql, args)

    async def execute(self, sql: str, *args: Any) -> str:
        return await self._statement("execute", sql, args)

    async def fetch_values(self, sql: str, *args: Any) -> list[Any]:
        """The first column of every row of ``sql`` (a statement that selects one)."""
        return [r[0] for r in await self._statement("fetch", sql, args)]

    async def fetch_as(self, type_: type[T], sql: str, *args: Any) -> list[T]:
        """Every row of ``sql`` as ``type_``."""
        return typed_rows(type_, await self._statement("fetch", sql, args))

    async def fetchrow_as(self, type_: type[T], sql: str, *args: Any) -> T | None:
        """The first row of ``sql`` as ``type_``, or None."""
        row = await self._statement("fetchrow", sql, args)
        return None if row is None else type_(**row)
