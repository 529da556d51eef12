"""Text PostgreSQL cannot store: found at the doors, cleaned where it must be kept.

PostgreSQL's ``text`` (and ``jsonb``) cannot hold U+0000, and no UTF-8 encoding exists for a lone surrogate
(U+D800–U+DFFF, which Python strings may carry). The event log stores ``json``, which keeps the escape
``\\u0000`` verbatim, so such a value is accepted by the log and refused only later, by the first read model that
copies it into a ``text`` column: one request could stop a projection for every owner. So:

* **Doors refuse it.** Request bodies, query strings, path parameters and WebSocket messages are checked where
  they are decoded (:func:`find_unstorable`, :func:`json_has_nul`), and the event log refuses an event whose data
  holds it; the answer names the field.
* **What must be kept is cleaned.** A model's output and text extracted from a document are not the user's
  typing to correct: :func:`clean` drops NUL and replaces lone surrogates with U+FFFD before they are appended or
  stored. Projections clean what they copy, so events already in a log written before these checks still
  project.

The checks cost nothing on ordinary input: JSON is scanned for the six bytes ``\\u0000`` (a raw NUL byte is not
valid JSON), and a string only by one regular-expression search.

This module imports nothing of the project's: every layer may use it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

__all__ = ["clean", "clean_value", "find_unstorable", "json_has_nul", "unstorable_message"]

_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
# An escape \u0000 preceded by an even number of backslashes (an odd number makes the first backslash literal).
_JSON_NUL = re.compile(rb"(?<!\\)(?:\\\\)*\\u0000")


def clean(text: str) -> str:
    """``text`` without U+0000 and with every lone surrogate replaced by U+FFFD."""
    if not _UNSTORABLE.search(text):
        return text
    return _LONE_SURROGATE.sub("\ufffd", text.replace("\x00", ""))


def clean_value(value: Any) -> Any:
    """:func:`clean` applied to every string in a JSON-like value (dict keys included); other values unchanged."""
    if isinstance(value, str):
        return clean(value)
    if isinstance(value, Mapping):
        return {clean_value(k): clean_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(clean_value(v) for v in value)
    return value


def find_unstorable(value: Any, path: str = "") -> str | None:
    """The path (``a.b[2]``, or ``""`` for the value itself) of the first string in a JSON-like value that holds
    text PostgreSQL cannot store, or None."""
    if isinstance(value, str):
        return path if _UNSTORABLE.search(value) else None
    if isinstance(value, Mapping):
        for k, v in value.items():
            sub = f"{path}.{k}" if path else str(k)
            if isinstance(k, str) and _UNSTORABLE.search(k):
                return sub
            found = find_unstorable(v, sub)
            if found is not None:
                return found
    elif isinstance(value, list | tuple):
        for i, v in enumerate(value):
            found = find_unstorable(v, f"{path}[{i}]")
            if found is not None:
                return found
    return None


def json_has_nul(data: bytes | str) -> bool:
    """Whether JSON text holds an escaped U+0000 (``\\u0000`` not itself escaped). Lone surrogates need no check
    here: msgspec refuses to decode or encode them."""
    raw = data.encode() if isinstance(data, str) else data
    if b"\\u0000" not in raw:  # the common case: one scan, no regular expression
        return False
    return _JSON_NUL.search(raw) is not None


def unstorable_message(where: str) -> str:
    """The message of a refusal: what is wrong with ``where`` and what to do."""
    return (f"{where}: contains a NUL character (U+0000) or an unpaired surrogate, which cannot be stored; "
            "remove it and send the text again")
