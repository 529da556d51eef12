"""What a run names before its outline does: its ids and its course's, the course's language and its provisional
title, from the request alone."""

from __future__ import annotations

import base64
import re
import secrets
import unicodedata
import uuid

__all__ = ["course_title", "infer_language", "new_run_ids", "run_ids", "valid_run_id"]

_NAMESPACE = uuid.UUID("6f6d6169-632d-7275-6e73-2d6964730000")
_RUN_ID = re.compile(r"run[-_][A-Za-z0-9_-]{1,64}")


def run_ids(owner: str, command_id: str) -> tuple[str, str]:
    """``(run_id, course_id)`` for a create command: the same command of the same owner names the same run."""
    u = uuid.uuid5(_NAMESPACE, f"{owner}\x1f{command_id}").hex
    return f"run_{u}", f"course_{u}"


def new_run_ids() -> tuple[str, str]:
    """``(run_id, course_id)`` of a new run: ``run-`` and 16 base64url characters (OpenMAIC's shape); the course
    shares the random part."""
    token = base64.urlsafe_b64encode(secrets.token_bytes(12)).decode()
    return f"run-{token}", f"course-{token}"


def valid_run_id(run_id: str) -> bool:
    """Whether ``run_id`` has a run id's shape (anything else cannot name a run: a 400 on the job poll)."""
    return bool(_RUN_ID.fullmatch(run_id))


def infer_language(requirement: str) -> str:
    """The language to write a course in when the caller named none: Chinese when the requirement is written in
    Chinese characters, else English (OpenMAIC infers it from the requirement too)."""
    han = sum(1 for c in requirement if unicodedata.name(c, "").startswith("CJK UNIFIED IDEOGRAPH"))
    return "zh-CN" if han * 4 >= sum(1 for c in requirement if c.isalpha()) and han else "en"


def course_title(requirement: str, words: int = 8, limit: int = 60) -> str:
    """A provisional course title: the requirement's first words (the outline gives the real one)."""
    first = next((line for line in requirement.splitlines() if line.strip()), "")
    parts = first.split()
    title = " ".join(parts[:words])
    cut = len(parts) > words
    if len(title) > limit:
        title, cut = title[:limit].rsplit(" ", 1)[0] or title[:limit], True
    title = title.rstrip(".,;:!?")
    return (title + "…" if cut else title) or "Untitled course"
