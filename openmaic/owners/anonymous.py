"""Anonymous owners: the ``anonymous_id`` cookie is a secret, and the owner id is derived from it.

The cookie holds a random UUID v4, as OpenMAIC's does. Unlike OpenMAIC, the owner id is *not* the cookie: it is
``anon:`` + an HMAC-SHA256 of the cookie under the instance secret (``OPENMAIC_SECRET_KEY`` or the instance
secret file, :mod:`openmaic.modelconfig.secret_box`), shaped as a UUID of version 8. Owner ids appear in events
(``run.created``, ``session.created``), in the operators' session list and in audit exports; none of them can be
turned back into a cookie, and a cookie set to an owner id seen there (a version-8 UUID, not a version 4) is simply
re-minted. The learner key of an owner (``GET /api/persistence/learner-key``) is derived from the owner id, so it
reveals neither. Keep the instance secret with the database: under another secret every cookie names a new,
empty owner.

**Legacy owners.** Before this, an anonymous owner's id was ``anon:<cookie>`` (a version-4 UUID). A request that
presents such a cookie while that raw owner still holds rows moves them, once, to the derived owner: an ordinary
claim (:func:`openmaic.owners.claims.claim_owner`, one transaction, ``stream.owner_changed`` on each stream) whose
target is the derived owner, which also retires the raw id, so work still in flight for it lands with the derived
owner (the owner fence) and a later claim of the derived owner into an account carries it along. Each process
looks at a cookie once (a bounded memory of cookies looked at). A legacy cookie is only as secret as it ever was:
its raw owner id is in the events written before the migration.
"""

from __future__ import annotations

import collections
import functools
import hashlib
import hmac
import re
import uuid
from collections.abc import Callable

from openmaic.events.log import EventLog
from openmaic.modelconfig.secret_box import InstanceKey
from openmaic.owners.claims import ClaimRefused, claimed_into, migrate_owner, owner_has_rows

__all__ = ["AnonymousOwners", "COOKIE_VALUE"]

COOKIE_VALUE = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")
"""What a well-formed ``anonymous_id`` cookie holds: a UUID v4 (lowercase)."""
_REMEMBERED = 100_000
"""How many cookies a process remembers having looked at for legacy rows (about 10 MB at most)."""


class AnonymousOwners:
    """Turns ``anonymous_id`` cookies into owner ids under one instance key (see the module's doc)."""

    def __init__(self, key: Callable[[], InstanceKey]) -> None:
        self._instance_key = key
        """Read on first use: a deployment without anonymous owners never needs (or creates) the secret file."""
        # cookie digest -> the account its legacy owner was claimed into before owner ids were derived, or None
        self._looked_at: collections.OrderedDict[str, str | None] = collections.OrderedDict()

    @functools.cached_property
    def _key(self) -> bytes:
        # A key of its own for this use: the AES key never meets another purpose's inputs.
        return hmac.new(self._instance_key().key, b"openmaic.anonymous-owner", hashlib.sha256).digest()

    def owner_of(self, cookie: str) -> str:
        """The owner id a well-formed cookie stands for: ``anon:`` + a version-8 UUID made of its HMAC."""
        raw = bytearray(hmac.new(self._key, cookie.encode(), hashlib.sha256).digest()[:16])
        raw[6] = (raw[6] & 0x0F) | 0x80  # version 8: never the version 4 a cookie (or a legacy owner id) has
        raw[8] = (raw[8] & 0x3F) | 0x80  # the RFC 4122 variant
        return f"anon:{uuid.UUID(bytes=bytes(raw))}"

    async def migrate_legacy(self, log: EventLog, cookie: str) -> str | None:
        """Move the rows of the legacy owner ``anon:<cookie>`` to the cookie's derived owner, if it holds any (once:
        the move retires the legacy id). Returns the account the legacy owner was claimed into before owner ids
        were derived (that cookie is spent), else None. A move that keeps losing lock races raises ``OWNER_BUSY``
        and is tried again on the next request."""
        digest = hashlib.sha256(cookie.encode()).hexdigest()
        if digest in self._looked_at:
            self._looked_at.move_to_end(digest)
            return self._looked_at[digest]
        legacy, derived = f"anon:{cookie}", self.owner_of(cookie)
        if await owner_has_rows(log.db, legacy):
            try:
                await migrate_owner(log, legacy, derived)
            except ClaimRefused as refused:
                if refused.error_code == "OWNER_BUSY":
                    raise  # nothing changed and nothing remembered: the next request tries again
        account = await claimed_into(log.db, legacy)
        spent = account if account not in (None, derived) else None
        self._looked_at[digest] = spent
        if len(self._looked_at) > _REMEMBERED:
            self._looked_at.popitem(last=False)
        return spent
