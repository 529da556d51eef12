"""``Secret``: a string that never shows itself (API keys, the instance secret, access codes)."""

from __future__ import annotations

__all__ = ["Secret"]


class Secret:
    """A string that must never be shown: its repr and str are ``Secret('***')``; ``reveal()`` returns it."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        """The secret itself — pass it straight to the HTTP client or the cipher, never to a log."""
        return self._value

    def __repr__(self) -> str:
        return "Secret('***')"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(self._value)
