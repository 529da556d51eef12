"""Learner keys: the partition OpenMAIC's runtime sessions are filed under, one per owner."""

from __future__ import annotations

import hashlib

__all__ = ["learner_key"]


def learner_key(owner: str) -> str:
    """The key ``owner``'s runtime sessions are filed under (``GET /api/persistence/learner-key``): derived from the
    owner id, never the id itself (a browser keeps it in its storage and puts it in URLs)."""
    return "learner-" + hashlib.sha256(f"openmaic.learner-key:{owner}".encode()).hexdigest()[:32]
