"""What is wrong with a course document: :class:`Problem` and the error that carries them."""

from __future__ import annotations

import re
from collections.abc import Iterable

import msgspec

from openmaic.errors import InvalidInput

__all__ = ["FormatInvalid", "Problem", "child", "from_validation_error"]


class Problem(msgspec.Struct, frozen=True):
    """One problem: ``path`` is JSON-pointer-like (``/scenes/2/content/canvas/elements/0/left``; ``/`` is the
    value itself, as in OpenMAIC's validators), ``message`` says what is wrong there."""

    path: str
    message: str


class FormatInvalid(InvalidInput):
    """The course document is not valid."""

    code = "format_invalid"
    error_code = "VALIDATION_FAILED"

    def __init__(self, problems: Iterable[Problem], message: str | None = None) -> None:
        self.problems = list(problems)
        if message is None:
            if self.problems:
                first = self.problems[0]
                more = f" (and {len(self.problems) - 1} more)" if len(self.problems) > 1 else ""
                message = f"invalid course document at {first.path}: {first.message}{more}"
            else:
                message = "invalid course document"
        path = self.problems[0].path if self.problems else ""
        super().__init__(message, path=path, problems=[{"path": p.path, "message": p.message} for p in self.problems])


def child(path: str, key: str | int) -> str:
    """``path`` extended by one key, escaped as in a JSON pointer (``/`` is the root, as ``""`` is)."""
    return f"{'' if path == '/' else path}/{str(key).replace('~', '~0').replace('/', '~1')}"


_AT = re.compile(r"^(.*?)(?: - at `\$(.*)`)?$", re.S)
_STEP = re.compile(r"\.([^.\[]+)|\[(\d+)\]|\[(?:'|\")?(.*?)(?:'|\")?\]")


def from_validation_error(error: msgspec.ValidationError, base: str = "") -> Problem:
    """msgspec's ``Expected `int`, got `str` - at `$.a[0].b``` as a :class:`Problem` at ``base/a/0/b``."""
    match = _AT.match(str(error))
    assert match is not None
    message, where = match.group(1), match.group(2) or ""
    path = base
    for step in _STEP.finditer(where):
        key = next(group for group in step.groups() if group is not None)
        path = child(path, key)
    return Problem(path or "/", message)
