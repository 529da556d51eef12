"""JSON for the course document: encoding, and the JSON-safe rules of OpenMAIC's stores (format §6.8).

OpenMAIC's stores refuse any value that would not survive a JSON round trip unchanged: non-finite numbers,
negative zero, strings or keys holding U+0000 or an unpaired surrogate, and anything that is not plain JSON.
Python can hold each of these (``float("nan")``, ``-0.0``, ``"\\ud800"`` from ``surrogateescape``), so values
are checked before they leave (:func:`encode`) and when they come in (:func:`json_problems`,
:func:`raw_problems`). Negative zero is the one hazard :func:`encode` repairs instead of refusing: it carries no
meaning in a course, and OpenMAIC's own advice is to write ``0``.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

import msgspec

from openmaic.courses.format.problems import FormatInvalid, Problem, child

__all__ = ["decode_json", "encode", "json_problems", "raw_problems", "to_json"]

_SURROGATE = re.compile("[\ud800-\udfff]")


def _text_problem(text: str) -> str | None:
    if "\x00" in text:
        return "contains U+0000 (NUL)"
    if _SURROGATE.search(text):
        return "contains an unpaired UTF-16 surrogate"
    return None


def json_problems(value: Any, path: str = "", *, negative_zero: bool = True) -> list[Problem]:
    """Every place in the decoded value ``value`` that is not JSON-safe, with its path.

    ``negative_zero=False`` lets ``-0.0`` pass (for values :func:`encode` will repair).
    """
    # Nearly every value is clean: one walk that builds no paths says so, and only a value with a problem is
    # walked again to name where (the paths of a 20-scene document are tens of thousands of strings).
    if _json_safe(value, negative_zero):
        return []
    problems: list[Problem] = []
    stack: list[tuple[str, Any]] = [(path, value)]
    while stack:
        where, item = stack.pop()
        if item is None or isinstance(item, bool):
            continue
        if isinstance(item, str):
            if (why := _text_problem(item)) is not None:
                problems.append(Problem(where or "/", f"string {why}"))
        elif isinstance(item, int):
            continue
        elif isinstance(item, float):
            if not math.isfinite(item):
                problems.append(Problem(where or "/", f"{item!r} is not a JSON number"))
            elif negative_zero and item == 0 and math.copysign(1.0, item) < 0:
                problems.append(Problem(where or "/", "negative zero is not JSON-safe; write 0"))
        elif isinstance(item, dict):
            for key, member in reversed(list(item.items())):
                if not isinstance(key, str):
                    problems.append(Problem(where or "/", f"object key {key!r} is not a string"))
                    continue
                if (why := _text_problem(key)) is not None:
                    problems.append(Problem(where or "/", f"object key {key!r} {why}"))
                stack.append((child(where, key), member))
        elif isinstance(item, (list, tuple)):  # msgspec.to_builtins leaves a struct's tuples as tuples
            for index in range(len(item) - 1, -1, -1):
                stack.append((child(where, index), item[index]))
        else:
            problems.append(Problem(where or "/", f"a {type(item).__name__} is not a JSON value"))
    problems.sort(key=lambda p: p.path)
    return problems


def _json_safe(value: Any, negative_zero: bool) -> bool:
    """Whether :func:`json_problems` would find nothing in ``value`` (the same rules, no paths)."""
    stack: list[Any] = [value]
    pop, push, extend = stack.pop, stack.append, stack.extend
    while stack:
        item = pop()
        kind = type(item)
        if kind is str:
            if "\x00" in item or _SURROGATE.search(item):
                return False
        elif kind is dict:
            for key in item:
                if type(key) is not str or "\x00" in key or _SURROGATE.search(key):
                    return False
            extend(item.values())
        elif kind is list or kind is tuple:
            extend(item)
        elif kind is float:
            if not math.isfinite(item) or (negative_zero and item == 0 and math.copysign(1.0, item) < 0):
                return False
        elif item is None or kind is bool or kind is int:
            continue
        else:
            return False  # a subclass or another type: the full walk decides and names it
    return True


_NEGATIVE_ZERO = re.compile(rb"-0(?![0-9])")


def _signed_int(text: str) -> int | float:
    # JavaScript reads `-0` as negative zero; Python's int loses the sign, so keep it as a float to be found.
    return -0.0 if text.lstrip("-").strip("0") == "" and text.startswith("-") else int(text)


def _loose(raw: bytes) -> Any:
    """``raw`` decoded by ``json``, which keeps what msgspec refuses or hides (NaN, lone surrogates, ``-0``)."""
    return json.loads(raw, parse_int=_signed_int)


def raw_problems(raw: bytes) -> list[Problem]:
    """Every JSON-safe problem of the JSON text ``raw``, with its path, including the ones a decoder hides
    (``-0`` decodes to Python's ``0``; JavaScript keeps its sign), or ``[not JSON]`` if it does not parse."""
    try:
        value = _loose(raw)
    except ValueError as error:
        return [Problem("/", f"not valid JSON: {error}")]
    return json_problems(value)


def decode_json(raw: bytes | str) -> Any:
    """Strict, JSON-safe JSON into plain Python values; raises :class:`FormatInvalid` naming each problem."""
    if isinstance(raw, str):
        raw = raw.encode("utf-8", "surrogatepass")
    try:
        value = msgspec.json.decode(raw)
    except msgspec.DecodeError as error:
        # msgspec refuses NaN, Infinity and lone surrogate escapes without saying where; find them.
        problems = raw_problems(raw)
        raise FormatInvalid(problems or [Problem("/", f"not valid JSON: {error}")]) from error
    problems = json_problems(value)
    if not problems and _NEGATIVE_ZERO.search(raw) is not None:
        problems = raw_problems(raw)
    if problems:
        raise FormatInvalid(problems)
    return value


def _zero_negative_zeros(value: Any) -> Any:
    if isinstance(value, float) and value == 0:
        return 0.0
    if isinstance(value, dict):
        return {key: _zero_negative_zeros(member) for key, member in value.items()}
    if isinstance(value, (list, tuple)):
        return [_zero_negative_zeros(member) for member in value]
    return value


def to_json(value: Any) -> Any:
    """``value`` (any struct of the format, or plain data) as plain JSON data: dicts, lists, str, numbers.

    Raises :class:`FormatInvalid` for what no JSON store accepts (NaN, infinities, NUL, lone surrogates);
    negative zero becomes ``0.0``.
    """
    data = msgspec.to_builtins(value)
    problems = json_problems(data, negative_zero=False)
    if problems:
        raise FormatInvalid(problems)
    return _zero_negative_zeros(data)


def encode(value: Any) -> bytes:
    """``value`` as JSON bytes, checked as :func:`to_json` checks it."""
    return msgspec.json.encode(to_json(value))
