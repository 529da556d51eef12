"""Named SQL, loaded once from ``queries.sql`` (blocks headed ``-- name: NAME``)."""

from __future__ import annotations

import re
from importlib import resources


def _load() -> dict[str, str]:
    text = resources.files("openmaic.store").joinpath("queries.sql").read_text(encoding="utf-8")
    out: dict[str, str] = {}
    for block in re.split(r"^-- name: ", text, flags=re.M)[1:]:
        name, _, body = block.partition("\n")
        out[name.strip()] = body.strip().rstrip(";")
    return out


class _Queries:
    def __init__(self) -> None:
        self._q = _load()

    def __getattr__(self, name: str) -> str:
        try:
            return self._q[name]
        except KeyError:
            raise AttributeError(f"no query named {name!r} in queries.sql") from None

    def names(self) -> list[str]:
        return sorted(self._q)


Q = _Queries()
