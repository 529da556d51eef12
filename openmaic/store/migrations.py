"""Versioned schema migrations: ``migrations/NNNN_name.sql``, applied in order, each in one transaction.

Concurrent migrators (two ``serve`` processes starting at once) serialize on a transaction-level advisory lock
taken inside each migration's transaction, and re-check the applied set under it, so each file runs exactly once.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from importlib import resources

from openmaic import errors
from openmaic.store.database import Database
from openmaic.store.queries import Q

#: An arbitrary constant: the advisory-lock key all migrators agree on.
MIGRATION_LOCK_KEY = 0x6F6D6169_63_01

_NAME = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str

    @property
    def checksum(self) -> str:
        return hashlib.sha256(self.sql.encode()).hexdigest()


def load_migrations() -> list[Migration]:
    found = []
    for entry in resources.files("openmaic.store").joinpath("migrations").iterdir():
        m = _NAME.match(entry.name)
        if m:
            found.append(Migration(int(m.group(1)), m.group(2), entry.read_text(encoding="utf-8")))
    found.sort(key=lambda m: m.version)
    versions = [m.version for m in found]
    if versions != list(range(1, len(found) + 1)):
        raise errors.MigrationError(f"migration files must be numbered 0001, 0002, … without gaps; found {versions}")
    return found


async def applied_versions(db: Database) -> dict[int, str]:
    exists = await db.fetchval(Q.table_exists, "openmaic_migrations")
    if not exists:
        return {}
    rows = await db.fetch(Q.migrations_applied)
    return {r["version"]: r["checksum"] for r in rows}


async def pending(db: Database) -> list[Migration]:
    applied = await applied_versions(db)
    return [m for m in load_migrations() if m.version not in applied]


async def migrate(db: Database) -> list[Migration]:
    """Apply every pending migration; returns those this call applied (empty when already current)."""
    all_migrations = load_migrations()
    applied = await applied_versions(db)
    for m in all_migrations:
        if m.version in applied and applied[m.version] != m.checksum:
            raise errors.MigrationError(
                f"migration {m.version:04d}_{m.name} was changed after it was applied; "
                "add a new migration instead of editing an applied one"
            )
    if all(m.version in applied for m in all_migrations):
        return []
    done = []
    # A session of its own: a migration file is any SQL, and whatever session state it leaves (a SET, a lock) must
    # stay on a session of ours, never on one a transaction-mode pooler hands the next client.
    async with db.session() as conn:
        for m in all_migrations:
            async with conn.transaction():
                # The lock serializes migrators; the re-check under it makes each file run exactly once.
                await conn.execute(Q.migrations_lock, MIGRATION_LOCK_KEY)
                await conn.execute(Q.migrations_table)
                if await conn.fetchval(Q.migration_applied, m.version):
                    continue
                await conn.execute(Q.migration_unbounded)
                try:
                    await conn.execute(m.sql)
                except errors.DatabaseError as exc:
                    raise errors.MigrationError(f"migration {m.version:04d}_{m.name} failed: {exc}") from exc
                await conn.execute(Q.migration_record, m.version, m.name, m.checksum)
            done.append(m)
    return done
