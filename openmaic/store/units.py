"""The operations of pooled units of work: asyncio coroutines over one driver connection, each run whole inside
``Database._unit`` (one crossing from trio, see :mod:`openmaic.store.database`). Duck-typed: the driver stays in
that module."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

Op = tuple[str, Sequence[Any]]
"""One statement of a transaction: SQL and its arguments."""


async def statement(conn: Any, method: str, sql: str, args: Sequence[Any]) -> Any:
    """``conn.fetch`` / ``fetchrow`` / ``fetchval`` / ``execute`` (by ``method``) of one statement."""
    return await getattr(conn, method)(sql, *args)


async def executemany(conn: Any, sql: str, rows: Sequence[Sequence[Any]]) -> None:
    async with conn.transaction():
        await conn.executemany(sql, rows)


async def transaction(conn: Any, ops: Sequence[Op], isolation: str) -> list[list[Any]]:
    async with conn.transaction(isolation=isolation):
        return [await conn.fetch(sql, *args) for sql, args in ops]


async def copy_records(conn: Any, table: str, records: Sequence[Sequence[Any]], columns: Sequence[str]) -> None:
    await conn.copy_records_to_table(table, records=records, columns=list(columns))
