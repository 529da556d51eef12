"""The base of every type the public API sends or receives: :class:`Wire`.

OpenMAIC's wire is camelCase (``materialIds``, ``outlineRevision``); Python is snake_case. A :class:`Wire`
subclass is written in Python's spelling and travels in OpenMAIC's (msgspec's ``rename="camel"``), and every
field is keyword-only, so required and defaulted fields may come in any order and a base's fields never constrain
a subclass's. It lives here, below every layer, because the read views of runs and sessions
(:mod:`openmaic.runs.views`) *are* wire shapes: they are built where the state is folded and sent as they are.

Decoding ignores fields a type does not know, as OpenMAIC's routes ignore them.
"""

from __future__ import annotations

from typing import Any

import msgspec

__all__ = ["Wire"]


class _WireMeta(msgspec.StructMeta):
    """Makes every field of a :class:`Wire` subclass keyword-only unless the class says otherwise (msgspec does
    not inherit ``kw_only``; without it a required field could not follow a base's defaulted one)."""

    def __new__(mcls, name: str, bases: tuple[type, ...], namespace: dict[str, Any], **kwargs: Any) -> Any:
        kwargs.setdefault("kw_only", True)
        return super().__new__(mcls, name, bases, namespace, **kwargs)


class Wire(msgspec.Struct, metaclass=_WireMeta, rename="camel", frozen=True):
    """Base of the API's request and response types: camelCase on the wire, keyword-only, immutable."""
