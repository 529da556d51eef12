"""Reading JSON out of a model's answer (format §7.6), with the repairs models' mistakes call for.

Candidates, in order: the whole answer; the text after the last ``</think>``, ``</thinking>`` or
``</reasoning>``; then, in that text and in the whole answer, each fenced block that starts with ``{`` or
``[``, the first balanced ``{…}``/``[…]`` span (found with a string-aware scan) and the text from the first
bracket on. Each candidate is tried as is, then repaired:

* a property written as one quoted string (``"height: 76"``) is split back into key and value;
* a TeX command written with one backslash inside a string is doubled (``\\frac``, ``\\theta``: otherwise
  ``\\f``, ``\\t`` … would silently become control characters), as is any other backslash that is no JSON escape;
* trailing commas before ``]`` or ``}`` are removed;
* raw control characters inside strings are accepted (``\\n``, ``\\t`` … kept, as ``json``'s ``strict=False``);
* a truncated answer is cut after its last complete value and its open arrays and objects are closed.

The result is the first value that parses, or ``None``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

__all__ = ["parse_json_response"]

_REASONING_END = re.compile(r"</(?:think|thinking|reasoning)>\s*", re.I)
_FENCE = re.compile(r"```(?:json|JSON)?\s*(.*?)```", re.S)
_QUOTED_PROPERTY = re.compile(
    r'([,{]\s*)"([A-Za-z_][A-Za-z0-9_]*)\s*:\s*(true|false|null|[+-]?\d+(?:\.\d+)?)"(?=\s*[,}])'
)
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.S)
_TRAILING_COMMA = re.compile(r",(\s*[\]}])")
# TeX commands whose first letter is also a JSON escape (\b \f \n \r \t \u): written with one backslash they
# parse as control characters. Only these exact words are repaired, so "\nThe" stays a newline.
_TEX_ON_ESCAPES = frozenset("""
    b bar beta begin bf big Big bigg Bigg bigl bigr binom bmod boldsymbol bot boxed breve bullet
    f fbox flat forall frac frown
    n nabla natural ne nearrow neg neq nexists ni nleq ngeq nmid nolimits nonumber not notin nparallel nsubseteq
    nu nwarrow newline
    r rangle rbrace rbrack rceil Re rfloor rho rightarrow Rightarrow rightleftharpoons rm rVert rvert
    t tan tanh tau tbinom text textbf textit textrm textsf texttt tfrac therefore theta Theta thinspace tilde times
    to top triangle triangleleft triangleright
    u ulcorner underbrace underline underset unlhd unrhd uparrow Uparrow updownarrow uplus upsilon Upsilon
""".split())  # fmt: skip
_BACKSLASH_RUN = re.compile(r"(\\+)([A-Za-z]+)")


def _loads(text: str) -> Any:
    return json.loads(text, strict=False)


def _fix_string_escapes(literal: str) -> str:
    """Inside one JSON string literal: double a lone backslash that starts a TeX command or no JSON escape."""

    def fix(match: re.Match[str]) -> str:
        slashes, word = match.group(1), match.group(2)
        if len(slashes) % 2 == 0:
            return match.group(0)  # already escaped
        if word[0] not in "bfnrtu" or word in _TEX_ON_ESCAPES:
            return slashes + "\\" + word
        return match.group(0)

    body = _BACKSLASH_RUN.sub(fix, literal[1:-1])
    body = re.sub(r'(?<!\\)((?:\\\\)*)\\([^"\\/bfnrtuA-Za-z])', r"\1\\\\\2", body)
    return f'"{body}"'


def _textual_fixes(text: str) -> str:
    text = _QUOTED_PROPERTY.sub(lambda m: f'{m.group(1)}"{m.group(2)}": {m.group(3)}', text)
    text = _STRING.sub(lambda m: _fix_string_escapes(m.group(0)), text)
    pieces, last = [], 0
    for match in _STRING.finditer(text):  # trailing commas, outside strings only
        pieces.append(_TRAILING_COMMA.sub(r"\1", text[last:match.start()]))
        pieces.append(match.group(0))
        last = match.end()
    pieces.append(_TRAILING_COMMA.sub(r"\1", text[last:]))
    return "".join(pieces)


def _scan(text: str) -> tuple[list[str], bool, list[tuple[int, list[str]]]]:
    """The brackets still open at the end, whether the end is inside a string, and for each closing bracket
    outside strings, its position and the brackets still open after it."""
    stack: list[str] = []
    in_string = escaped = False
    closes: list[tuple[int, list[str]]] = []
    for index, char in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            stack.append("]" if char == "[" else "}")
        elif char in "]}":
            if stack:
                stack.pop()
            closes.append((index, list(stack)))
    return stack, in_string, closes


def _closed(text: str, stack: list[str]) -> str:
    return text.rstrip().rstrip(",").rstrip() + "".join(reversed(stack))


def _truncation_fixes(text: str) -> Iterator[str]:
    """``text`` closed where it stops (unless it stops inside a string: a cut-off text is not kept), then cut
    after each complete array or object (latest first) and closed."""
    stack, in_string, closes = _scan(text)
    if not stack and not in_string:
        return
    if not in_string:
        yield _closed(text, stack)
    for index, still_open in reversed(closes[-64:]):
        if still_open:
            yield _closed(text[: index + 1], still_open)


def _attempts(candidate: str) -> Iterator[str]:
    yield candidate
    fixed = _textual_fixes(candidate)
    yield fixed
    yield from _truncation_fixes(fixed)


def _parse(candidate: str) -> tuple[bool, Any]:
    candidate = candidate.strip()
    if not candidate:
        return False, None
    for attempt in _attempts(candidate):
        try:
            return True, _loads(attempt)
        except ValueError:
            continue
    return False, None


def _balanced_span(text: str) -> str | None:
    starts = [i for i in (text.find("["), text.find("{")) if i != -1]
    if not starts:
        return None
    start = min(starts)
    depth, in_string, escaped = 0, False, False
    for index in range(start, len(text)):
        char = text[index]
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
        elif char in "]}":
            depth -= 1
            if depth == 0:
                return text[start : index + 1]
    return None


def _candidates(text: str) -> Iterator[str]:
    for fence in _FENCE.finditer(text):
        block = fence.group(1).strip()
        if block.startswith(("{", "[")):
            yield block
    span = _balanced_span(text)
    if span is not None:
        yield span
    starts = [i for i in (text.find("["), text.find("{")) if i != -1]
    if starts:
        yield text[min(starts):]  # an answer cut off before its closing bracket (or its closing fence)
    yield text


def parse_json_response(text: str) -> Any | None:
    """The JSON value in a model's answer ``text``, repaired where needed; ``None`` if there is none."""
    whole = text.strip()
    try:
        return json.loads(whole)
    except ValueError:
        pass
    texts = []
    reasoning = list(_REASONING_END.finditer(whole))
    if reasoning:
        texts.append(whole[reasoning[-1].end() :].strip())
    texts.append(whole)
    seen: set[str] = set()
    for source in texts:
        for candidate in _candidates(source):
            if candidate in seen:
                continue
            seen.add(candidate)
            ok, value = _parse(candidate)
            if ok:
                return value
    return None
