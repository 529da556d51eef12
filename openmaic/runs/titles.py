"""What a run names before its outline does: the course's language and its provisional title, from the
requirement alone."""

from __future__ import annotations

import unicodedata

__all__ = ["course_title", "infer_language"]


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
