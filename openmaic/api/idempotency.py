"""The ``Idempotency-Key`` header of the create routes (this server's addition; see
:mod:`openmaic.actors.idempotency` for what a key guarantees)."""

from __future__ import annotations

import hashlib
import re

import msgspec

from openmaic import errors
from openmaic.actors.idempotency import IdempotencyKey
from openmaic.api.routing import Call

__all__ = ["HEADER", "idempotency_key"]

HEADER = "Idempotency-Key"
DESCRIPTION = (
    "This server's addition: makes the create safe to repeat. The same key from the same owner creates once and "
    "answers every repeat as it answered the first request (also after the resource has moved on); the same key "
    "with a different request is a 409 IDEMPOTENCY_KEY_REUSED. 1 to 255 visible ASCII characters, such as a UUID: "
    "a new one for each new request."
)
_KEY = re.compile(r"[\x21-\x7e]{1,255}")


def idempotency_key(call: Call) -> IdempotencyKey | None:
    """The request's key, with the digest of what it asks (its route and decoded body); None without one."""
    key = call.request.headers.get(HEADER)
    if key is None:
        return None
    if not _KEY.fullmatch(key):
        raise errors.InvalidInput(f"{HEADER} must be 1 to 255 visible ASCII characters (a UUID is a good one)",
                                  path=HEADER)
    what = f"{call.request.method} {call.request.path}\n".encode() + msgspec.json.encode(call.body)
    return IdempotencyKey(key=key, digest=hashlib.sha256(what).hexdigest())
