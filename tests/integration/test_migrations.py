"""Migrations: idempotent, and safe when several migrators start at once."""

from __future__ import annotations

import trio

from openmaic.store.database import open_database
from openmaic.store.migrations import load_migrations, migrate, pending

SCHEMA_QUERY = """
SELECT 'column' AS what, table_name || '.' || column_name || ' ' || data_type || ' ' || is_nullable
       || ' ' || coalesce(column_default, '') AS d
  FROM information_schema.columns WHERE table_schema = 'public'
UNION ALL
SELECT 'index', indexdef FROM pg_indexes WHERE schemaname = 'public'
UNION ALL
SELECT 'function', p.proname || '(' || pg_get_function_arguments(p.oid) || ') ' || md5(p.prosrc)
  FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = 'public'
UNION ALL
SELECT 'trigger', tgname || ' on ' || tgrelid::regclass::text FROM pg_trigger WHERE NOT tgisinternal
UNION ALL
SELECT 'constraint', conname || ' ' || pg_get_constraintdef(oid) FROM pg_constraint
 WHERE connamespace = 'public'::regnamespace
ORDER BY 1, 2
"""


async def schema(url: str) -> list[tuple[str, str]]:
    async with open_database(url) as db:
        return [tuple(r) for r in await db.fetch(SCHEMA_QUERY)]


async def fresh_database(pg) -> str:
    name = pg.new_database_name()
    async with open_database(pg.admin_url) as admin:
        await admin.execute(f"CREATE DATABASE {name}")
    return pg.url(name)


async def test_migrating_twice_changes_nothing(pg):
    url = await fresh_database(pg)
    async with open_database(url) as db:
        applied = await migrate(db)
        assert [m.version for m in applied] == [m.version for m in load_migrations()]
        first = await schema(url)
        assert await migrate(db) == []
        assert await pending(db) == []
    assert await schema(url) == first
    assert first, "the schema query must see the tables"


async def test_migrating_an_empty_database_gives_the_same_schema_every_time(pg, db_url):
    url = await fresh_database(pg)
    async with open_database(url) as db:
        await migrate(db)
    # db_url was cloned from a template migrated the same way, in another database
    assert await schema(url) == await schema(db_url)


async def test_concurrent_migrators_end_with_one_correct_schema(pg, db_url):
    url = await fresh_database(pg)
    applied: list[list[int]] = []

    async def migrator() -> None:
        async with open_database(url) as db:
            applied.append([m.version for m in await migrate(db)])

    async with trio.open_nursery() as nursery:
        for _ in range(4):
            nursery.start_soon(migrator)
    every = [m.version for m in load_migrations()]
    # each migration ran exactly once, across all migrators
    assert sorted(v for a in applied for v in a) == every
    assert await schema(url) == await schema(db_url)
    async with open_database(url) as db:
        rows = await db.fetch("SELECT version FROM openmaic_migrations ORDER BY version")
    assert [r["version"] for r in rows] == every
