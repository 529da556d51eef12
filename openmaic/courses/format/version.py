"""The document's version stamp and its migration ladder (OpenMAIC ``version.ts``; format §1.2).

The stamp is the root ``dslVersion`` (``x.y.z``, compared numerically per component); an unstamped document is
legacy and read as ``0.0.0``. Both steps of today's ladder only stamp: ``0.0.0 → 0.1.0 → 0.2.0``. A document
stamped newer than :data:`DSL_VERSION` is never downgraded; a stamp the ladder has no step from is refused
rather than half-migrated; an object carrying the runtime line's ``runtimeDslVersion`` but no ``dslVersion`` is
refused (a runtime session must never be walked as a legacy document).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from openmaic.courses.format.problems import FormatInvalid, Problem
from openmaic.courses.format.stage import DSL_VERSION

__all__ = ["UNVERSIONED", "compare_versions", "is_future", "migrate", "stamp_of", "version_problems"]

UNVERSIONED = "0.0.0"
"""The version an unstamped (legacy) document is read as."""

_WELL_FORMED = re.compile(r"\d+\.\d+\.\d+", re.ASCII)

_LADDER: tuple[tuple[str, str, Callable[[dict[str, Any]], dict[str, Any]]], ...] = (
    (UNVERSIONED, "0.1.0", lambda document: document),
    # 0.2.0 took `audioUrl` out of the contract but leaves stored ones alone: only the app's converter can tell
    # whether the URL is the last live handle to the narration.
    ("0.1.0", "0.2.0", lambda document: document),
)


def _parse(version: str) -> tuple[int, int, int]:
    if not isinstance(version, str) or _WELL_FORMED.fullmatch(version) is None:
        raise FormatInvalid([Problem("/dslVersion", f"invalid dslVersion stamp {version!r} (expected \"x.y.z\")")])
    major, minor, patch = (int(part) for part in version.split("."))
    return major, minor, patch


def compare_versions(a: str, b: str) -> int:
    """Negative, zero or positive as ``a`` is older than, equal to or newer than ``b`` (numeric per component).

    Raises :class:`FormatInvalid` for a version that is not ``x.y.z``.
    """
    pa, pb = _parse(a), _parse(b)
    return (pa > pb) - (pa < pb)


def is_future(version: str) -> bool:
    """Whether ``version`` is newer than the :data:`DSL_VERSION` this code reads and writes."""
    return compare_versions(version, DSL_VERSION) > 0


def stamp_of(document: dict[str, Any]) -> str:
    """The document's version: its ``dslVersion``, or ``0.0.0`` when unstamped. Raises :class:`FormatInvalid`."""
    raw = document.get("dslVersion")
    if raw is None:
        if document.get("runtimeDslVersion") is not None:
            raise FormatInvalid([Problem("/runtimeDslVersion", "object carries \"runtimeDslVersion\" but no "
                                         "\"dslVersion\": a runtime session, not a course document")])  # fmt: skip
        return UNVERSIONED
    _parse(raw)
    return raw


def migrate(value: Any) -> Any:
    """``value`` walked up the ladder to :data:`DSL_VERSION` and stamped; the input is never changed.

    A current or newer document comes back as it is (the same object); non-objects come back unchanged.
    Raises :class:`FormatInvalid` for a malformed stamp, a stamp with no migration path, or a runtime session.
    """
    if not isinstance(value, dict):
        return value
    version = stamp_of(value)
    if compare_versions(version, DSL_VERSION) >= 0:
        return value
    current = value
    while version != DSL_VERSION:
        step = next((s for s in _LADDER if s[0] == version), None)
        if step is None:
            raise FormatInvalid([Problem("/dslVersion", f"no migration path from \"{version}\" to \"{DSL_VERSION}\"")])
        current = {**step[2](current), "dslVersion": step[1]}
        version = step[1]
    return current


def version_problems(document: dict[str, Any]) -> list[Problem]:
    """What the storage gate says about the stamp: malformed, no path, or newer than this code."""
    try:
        version = stamp_of(document)
        migrate(document)
    except FormatInvalid as error:
        return error.problems
    if is_future(version):
        return [Problem("/dslVersion", f"written at DSL version {version}, newer than this server's {DSL_VERSION}")]
    return []
