"""Per-owner quotas: how many things (and how many bytes of them) an owner, or one of its sessions, may hold.

One mechanism for every quota. A quota is a count followed by a write, and two requests at once would both
count ``limit - 1`` and both write; so :func:`within` reads the usage and hands back the connection the write
goes through in ONE transaction that holds the scope's advisory lock in the quota's own namespace
(:func:`openmaic.store.locks.owner_lock`): writes of one scope under one quota are serialized, and each count
sees every write committed before it. A write that is made elsewhere (the event log's own append) must commit
before the block ends; the lock is held until then.

Each quota names its ``limits`` key (``limits.agents_per_owner``), and so does its refusal, so that the person
refused knows what was reached and the operator which setting raises it. The refusal is OpenMAIC's answer where
OpenMAIC has one: 409 ``AGENT_LIMIT_REACHED`` for agents, 429 ``INVALID_REQUEST`` for materials (its owner
quota); 429 ``INVALID_REQUEST`` for the quotas it lacks. The runs' limits (``active_runs_per_owner``,
``waiting_runs_per_owner``) take the same lock in their own namespace (:mod:`openmaic.runs.admission`), since
they count two things at once and the worker's admission shares them.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

import msgspec

from openmaic import errors
from openmaic.store.database import Connection, Database
from openmaic.store.locks import owner_lock

__all__ = ["Quota", "QuotaFull", "Usage", "within"]


class QuotaFull(errors.TooManyRequests):
    """You hold as many of these as you may; remove some, then try again."""

    code = "quota_full"


@dataclass(frozen=True)
class Quota:
    """A count (and optionally a byte total) that a scope (an owner, a session) may not exceed."""

    key: str
    """The ``limits`` key of its count, e.g. ``agents_per_owner``."""
    namespace: int
    """The first key of its advisory lock (an int4 of its own)."""
    usage: str
    """A statement of one argument, the scope, answering ``count`` (and ``bytes`` when ``bytes_key`` is set)."""
    noun: str
    """What is counted, in the plural (``agents``)."""
    remedy: str
    """What the refused can do (``delete one (DELETE /api/agents/{id}) first``)."""
    error: type[errors.OpenMaicError] = QuotaFull
    bytes_key: str | None = None
    """The ``limits`` key of its byte total, if it has one."""


class Usage(msgspec.Struct, frozen=True):
    """What a quota's ``usage`` statement counts: things held, and their bytes (statements of a count-only quota
    select no ``bytes``)."""

    count: int
    bytes: int = 0


@asynccontextmanager
async def within(db: Database, scope: str, quota: Quota, limit: int, *, adding_bytes: int = 0,
                 byte_limit: int | None = None) -> AsyncIterator[Connection]:
    """A transaction holding ``scope``'s lock for ``quota``, once one more thing of ``adding_bytes`` fits:
    ``quota.error`` (naming the key) when ``limit`` things are held already or the bytes would pass
    ``byte_limit``. Committed when the block ends, rolled back when it raises."""
    async with owner_lock(db, scope, quota.namespace) as conn:
        counted = await conn.fetchrow_as(Usage, quota.usage, scope)
        assert counted is not None  # an aggregate always answers one row
        usage = Usage(int(counted.count), int(counted.bytes) if quota.bytes_key is not None else 0)
        check(quota, usage, limit, adding_bytes=adding_bytes, byte_limit=byte_limit)
        yield conn


def check(quota: Quota, usage: Usage, limit: int, *, adding_bytes: int = 0, byte_limit: int | None = None) -> None:
    """Refuse one more thing of ``adding_bytes`` beyond ``usage`` (see :func:`within`)."""
    if usage.count >= limit:
        raise quota.error(
            f"you have {usage.count} {quota.noun}, the most allowed (limits.{quota.key} is {limit}); {quota.remedy}",
            key=f"limits.{quota.key}", limit=limit,
        )  # fmt: skip
    if byte_limit is not None and usage.bytes + adding_bytes > byte_limit:
        raise quota.error(
            f"your {quota.noun} take {usage.bytes:,} bytes and this one {adding_bytes:,}; at most {byte_limit:,} are "
            f"allowed in all (limits.{quota.bytes_key}); {quota.remedy}", key=f"limits.{quota.bytes_key}",
            limit=byte_limit,
        )  # fmt: skip
