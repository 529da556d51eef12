"""The building blocks every struct of the course document shares: the struct bases, numbers, ids.

Attribute names are the wire names (camelCase, as OpenMAIC spells them), so a field reads the same in Python,
in JSON and in OpenMAIC's TypeScript. Optional members default to ``msgspec.UNSET`` and are then left out of the
JSON: OpenMAIC's strict schema rejects ``null`` for an optional member, so "absent" is never written as ``null``.
Unknown members are ignored on decode, as OpenMAIC's validators ignore them.
"""

from __future__ import annotations

import secrets
from typing import TypeAlias, TypeVar

import msgspec
from msgspec import UNSET, UnsetType

__all__ = ["UNSET", "Num", "Opt", "Struct", "TaggedStruct", "new_id"]

Num: TypeAlias = int | float
"""A JSON number. ``int | float`` keeps integers integers, so ``60`` comes back as ``60``, not ``60.0``."""

T = TypeVar("T")
Opt: TypeAlias = T | UnsetType  # type: ignore[valid-type]
"""An optional member: absent (``UNSET``, not written) or a value of its type."""


class Struct(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """A record of the course document."""


class TaggedStruct(Struct, tag_field="type"):
    """A member of a union told apart by its ``type`` (elements, actions, scene contents).

    The tag is not a field (msgspec writes and reads it); ``.type`` gives it back for code that branches on it.
    """

    @property
    def type(self) -> str:
        return self.__struct_config__.tag  # type: ignore[return-value]


_ID_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"


def new_id(prefix: str, length: int = 8) -> str:
    """``<prefix>_<8 url-safe characters>``: ``new_id("text")`` → ``text_Ab3dE9xZ`` (OpenMAIC's convention)."""
    return f"{prefix}_" + "".join(secrets.choice(_ID_ALPHABET) for _ in range(length))

