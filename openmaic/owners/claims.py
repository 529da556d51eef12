"""Claims: an anonymous owner's work moves to the account that signs in holding its cookie.

A visitor who works anonymously (``anon:<uuid>``, OpenMAIC's ``anonymous_id`` cookie) and then signs in has two
owners. :func:`claim_owner` moves everything the anonymous one holds to the account in ONE transaction
(``openmaic_claim_owner``, migration 0010): its streams (runs, courses, workbench sessions, media lanes), its
materials, assets, agents and model settings. The move is in the log: every moved stream gets
``stream.owner_changed`` and the claim itself is ``owner.claimed`` on a stream of its own
(``owner-claim:<anonymous id>``, the account's), so the history says who owned what from which seq on. The
anonymous id is retired (``owner_claims``): a request still presenting it is refused (``OWNER_RETIRED``,
:mod:`openmaic.api.identity`), and work already under way for it lands with the account (the owner fence).

Why rows move rather than reads following a merge table: see docs/architecture.md ("Owners and claims").

Rules (OpenMAIC's): the source must be anonymous and the target not; claiming a pair already claimed succeeds and
changes nothing (``already-claimed``); an anonymous owner claimed by another account is refused
(``ALREADY_CLAIMED_ELSEWHERE``); claims never chain (``TARGET_RETIRED``): the one owner that absorbs another
and is itself claimable, an anonymous owner derived from a legacy cookie (:func:`migrate_owner`), hands what it
absorbed on to its account, so every claim stays one hop (``SOURCE_HAS_CLAIMS`` is no longer answered). Losing a lock race
to writers of the source (a run committing a step, an upload) is retried here for a few seconds, then answered
``OWNER_BUSY`` (503, ``Retry-After: 2``): nothing was changed and the claim may be sent again as it is.

A run in flight during a claim loses and repeats nothing: the claim appends to its stream like any control-plane
command (the lease and its attempt are untouched, so the worker's next commit goes through), the run's fold
follows ``stream.owner_changed`` from its next step on, and what a step already in flight writes or reads under
the old id is fenced (written under the account) or read through ``openmaic_owner``.
"""

from __future__ import annotations

import hashlib
import random
import re
from typing import Literal

import msgspec
import trio

from openmaic import errors
from openmaic.config import LimitsConfig
from openmaic.events.core import OwnerClaimed, StreamOwnerChanged
from openmaic.events.log import EventLog
from openmaic.owners.learners import learner_key
from openmaic.store.database import Database
from openmaic.store.queries import load_sql

__all__ = [
    "ANONYMOUS_OWNER", "ClaimQuotas", "ClaimRefused", "ClaimResult", "OwnerRetired", "claim_owner", "claim_stream_id",
    "claimed_into", "claims_into", "in_anonymous_namespace", "is_anonymous", "merged_from", "migrate_owner", "owner_has_rows",
]  # fmt: skip

SQL = load_sql("openmaic.owners", "claims.sql")

ANONYMOUS_OWNER = re.compile(r"^anon:[0-9a-f]{8}-[0-9a-f]{4}-[48][0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")
"""The owner ids anonymous cookies stand for: the only owners that can be claimed (and retired). A version-8 UUID
is an owner derived from its cookie (:mod:`openmaic.owners.anonymous`); a version 4 is a legacy one, whose id was
its cookie."""
LEGACY_ANONYMOUS_OWNER = re.compile(r"^anon:[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")
_STORABLE = re.compile(r"^[\x21-\x7e]{1,256}$")

LOCK_WAIT_MS = 2000
"""How long a claim waits for the two owners' identity locks (writes of the source hold it for a statement)."""
ROW_WAIT_MS = 200
"""How long it waits for any one row lock; well under PostgreSQL's deadlock_timeout (1 s), so that of a claim
and a writer that could deadlock, the claim is the one that gives up (see openmaic_claim_owner)."""
BUSY_FOR_S = 4.0
"""How long lost lock races are retried before the answer is OWNER_BUSY."""
_RACES = frozenset({"55P03", "40P01", "40001"})  # lock_not_available, deadlock_detected, serialization_failure

_STATUS = {
    "INVALID_OWNER": 400,
    "SAME_OWNER": 409,
    "SOURCE_NOT_ANONYMOUS": 403,
    "TARGET_ANONYMOUS": 403,
    "ALREADY_CLAIMED_ELSEWHERE": 409,
    "TARGET_RETIRED": 409,
    "SOURCE_HAS_CLAIMS": 409,
    "NO_PENDING_CLAIM": 409,
    "OWNER_BUSY": 503,
    "CLAIM_OVER_QUOTA": 409,
}
_MESSAGES = {
    "INVALID_OWNER": "claim owners must be storable owner ids",
    "SAME_OWNER": "an owner cannot claim itself",
    "SOURCE_NOT_ANONYMOUS": "only an anonymous owner can be claimed",
    "TARGET_ANONYMOUS": "sign in before claiming anonymous work",
    "ALREADY_CLAIMED_ELSEWHERE": "this anonymous owner was already claimed by another owner",
    "TARGET_RETIRED": "the claiming owner was itself merged away",
    "SOURCE_HAS_CLAIMS": "the claimed owner has absorbed other owners",
    "NO_PENDING_CLAIM": "this request presents no anonymous identity to claim",
    "OWNER_BUSY": "the owners are being written to; retry the claim shortly",
    "CLAIM_OVER_QUOTA": "the anonymous work does not fit within your limits",
}


class ClaimRefused(errors.OpenMaicError):
    """A claim the rules refuse; nothing was changed."""

    def __init__(self, refusal: str, message: str | None = None, **details: object) -> None:
        super().__init__(message or _MESSAGES[refusal], **details)
        self.error_code = refusal
        self.code = refusal.lower()
        self.status = _STATUS[refusal]
        self.headers = {"Retry-After": "2"} if refusal == "OWNER_BUSY" else {}


class OwnerRetired(errors.OpenMaicError):
    """This identity was merged into an account; sign in to continue."""

    code = "owner_retired"
    status = 403
    error_code = "OWNER_RETIRED"


class ClaimQuotas(msgspec.Struct, frozen=True):
    """The target's limits a claim keeps to (``None``: not enforced): what it adds must fit beside what the target
    holds, or the claim is refused (``CLAIM_OVER_QUOTA``) and changes nothing."""

    agents: int | None = None
    materials: int | None = None
    material_bytes: int | None = None
    asset_bytes: int | None = None

    @classmethod
    def of(cls, limits: LimitsConfig) -> ClaimQuotas:
        """The deployment's limits, unless ``limits.claims_over_quota`` lets claims exceed them."""
        if limits.claims_over_quota == "allow":
            return cls()
        return cls(agents=limits.agents_per_owner, materials=limits.materials_per_owner,
                   material_bytes=limits.material_bytes_per_owner, asset_bytes=limits.asset_bytes_per_owner)


class ClaimResult(msgspec.Struct, frozen=True, omit_defaults=True):
    """The answer of ``POST /api/identity/claim``: ``{status: "claimed", moved}`` or ``{status:
    "already-claimed"}``."""

    status: Literal["claimed", "already-claimed"]
    moved: dict[str, int] | None = None


def is_anonymous(owner: str) -> bool:
    return ANONYMOUS_OWNER.match(owner) is not None


def in_anonymous_namespace(owner: str) -> bool:
    """Whether ``owner`` lies in the namespace of anonymous owners (``anon:…``, in any case), which no signed-in
    owner may use: an account named ``anon:<uuid>`` would be claimable by whoever sends that cookie, and the owner
    fence and the legacy move take every ``anon:`` id for an anonymous one."""
    return owner[:5].lower() == "anon:"


def claim_stream_id(from_owner: str) -> str:
    """The stream recording the claim of ``from_owner`` (at most one: an anonymous owner is claimed once)."""
    return f"owner-claim:{from_owner}"


def _check(from_owner: str, to_owner: str) -> None:
    if not _STORABLE.match(from_owner) or not _STORABLE.match(to_owner):
        raise ClaimRefused("INVALID_OWNER")
    if from_owner == to_owner:
        raise ClaimRefused("SAME_OWNER")
    if not is_anonymous(from_owner):
        raise ClaimRefused("SOURCE_NOT_ANONYMOUS")
    if is_anonymous(to_owner):
        raise ClaimRefused("TARGET_ANONYMOUS")


async def claim_owner(log: EventLog, from_owner: str, to_owner: str, *, quotas: ClaimQuotas = ClaimQuotas(),
                      busy_for_s: float = BUSY_FOR_S) -> ClaimResult:
    """Move ``from_owner``'s work to ``to_owner`` and retire ``from_owner`` (see the module's doc), within the
    target's ``quotas`` (none unless given: :meth:`ClaimQuotas.of` gives the deployment's).

    Raises :class:`ClaimRefused` (with OpenMAIC's code) for a claim the rules refuse, one that would take the
    target past a quota (``CLAIM_OVER_QUOTA``, naming the limit), or one that kept losing lock races; then nothing
    was changed.
    """
    _check(from_owner, to_owner)
    return await _claim(log, from_owner, to_owner, busy_for_s, quotas)


async def migrate_owner(log: EventLog, legacy: str, derived: str, *, busy_for_s: float = BUSY_FOR_S) -> ClaimResult:
    """Move a legacy anonymous owner (whose id was its cookie) to the owner derived from that cookie: a claim
    whose target is anonymous, which only this move may have (see :mod:`openmaic.owners.anonymous`)."""
    if not LEGACY_ANONYMOUS_OWNER.match(legacy) or not is_anonymous(derived) or LEGACY_ANONYMOUS_OWNER.match(derived):
        raise ClaimRefused("INVALID_OWNER")
    # No quotas: the legacy owner's work was within them already, and refusing would strand it.
    return await _claim(log, legacy, derived, busy_for_s, ClaimQuotas())


async def _claim(log: EventLog, from_owner: str, to_owner: str, busy_for_s: float,
                 quotas: ClaimQuotas) -> ClaimResult:
    t, v, data = log.types.encode(StreamOwnerChanged(from_owner_id=from_owner, to_owner_id=to_owner))
    claimed_tag = OwnerClaimed.__struct_config__.tag
    args = (from_owner, to_owner, LOCK_WAIT_MS, ROW_WAIT_MS, claim_stream_id(from_owner), t, v, data.decode(),
            claimed_tag, OwnerClaimed.version, quotas.agents, quotas.materials, quotas.material_bytes,
            quotas.asset_bytes)
    deadline = trio.current_time() + busy_for_s
    pause = 0.01
    while True:
        try:
            row = await log.db.fetchrow_as(_Claimed, SQL.claim_owner, *args)
            break
        except errors.DatabaseError as exc:
            if exc.details.get("sqlstate") not in _RACES:
                raise
            # A writer of the source held a row (or the identity lock) longer than the claim may wait: nothing
            # changed; try again shortly, jittered so that two claims do not collide in step.
            if trio.current_time() + pause > deadline:
                raise ClaimRefused("OWNER_BUSY") from None
            await trio.sleep(random.uniform(pause / 2, pause))
            pause = min(pause * 2, 0.25)
    assert row is not None
    outcome = row.outcome
    if outcome == "already-claimed":
        return ClaimResult(status="already-claimed")
    if outcome == "CLAIM_OVER_QUOTA":
        over = msgspec.json.decode(row.moved or "{}")
        raise ClaimRefused(
            outcome, f"the anonymous work adds {over['adding']:,} to the {over['held']:,} you hold, past "
            f"{over['key']} ({over['limit']:,}); remove some of yours, or of the anonymous work before signing in, "
            "and claim again", key=over["key"], limit=over["limit"], held=over["held"], adding=over["adding"])
    if outcome != "claimed":
        raise ClaimRefused(outcome)
    # Written by a SQL function, outside the log's append path: its watchers (live feeds, folds) are told here.
    log.hint(row.stream_ids or [])
    return ClaimResult(status="claimed", moved=msgspec.json.decode(row.moved or "{}"))


class _Claimed(msgspec.Struct, frozen=True):
    """What ``openmaic_claim_owner`` answers: its outcome, what moved (JSON), and the streams it appended to."""

    outcome: str
    moved: str | None
    stream_ids: list[str] | None


async def claimed_into(db: Database, owner: str) -> str | None:
    """The account ``owner`` was claimed into (it is retired), or ``None``. Only anonymous owners can be."""
    if not is_anonymous(owner):
        return None
    return await db.fetchval(SQL.claimed_into, owner)


async def claims_into(db: Database, owner: str) -> list[str]:
    """The owners claimed into ``owner`` (one hop: a claim of an owner that absorbed others carries them along)."""
    return await db.fetch_values(SQL.claims_into, owner)


async def owner_has_rows(db: Database, owner: str) -> bool:
    """Whether ``owner`` holds any row a claim would move."""
    return bool(await db.fetchval(SQL.owner_has_rows, owner))


async def merged_from(db: Database, owner: str, salt: str, digest: str) -> bool:
    """Whether a claim merged into ``owner`` an owner whose id hashes to ``digest`` (sha256 hex of
    ``salt ‖ NUL ‖ owner id``, or of its learner key): OpenMAIC's check for a browser that recorded its first owner
    only as a digest."""
    for merged in await claims_into(db, owner):
        # The owner id, or the learner key a browser was given for it (what it can have recorded).
        for known in (merged, learner_key(merged)):
            if hashlib.sha256(f"{salt}\x00{known}".encode()).hexdigest() == digest:
                return True
    return False
