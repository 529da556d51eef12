"""Named SQL, loaded once from ``.sql`` files (blocks headed ``-- name: NAME``).

``Q`` holds ``openmaic/store/queries.sql``: the statements of the log, leases, identity, materials and the
services around them. A read model keeps its own statements in a file beside it (``load_sql(__package__,
"library.sql")``), since they name its own tables (``{library_cards}``, filled in per build, see
:mod:`openmaic.projections.base`).
"""

from __future__ import annotations

import re
from importlib import resources


def _load(package: str, filename: str) -> dict[str, str]:
    text = resources.files(package).joinpath(filename).read_text(encoding="utf-8")
    out: dict[str, str] = {}
    for block in re.split(r"^-- name: ", text, flags=re.M)[1:]:
        name, _, body = block.partition("\n")
        out[name.strip()] = body.strip().rstrip(";")
    return out


class SqlFile:
    """The named statements of one ``.sql`` file, as attributes."""

    def __init__(self, package: str, filename: str) -> None:
        self._where = f"{package.replace('.', '/')}/{filename}"
        self._q = _load(package, filename)

    def __getattr__(self, name: str) -> str:
        try:
            return self._q[name]
        except KeyError:
            raise AttributeError(f"no query named {name!r} in {self._where}") from None

    def names(self) -> list[str]:
        return sorted(self._q)


def load_sql(package: str, filename: str) -> SqlFile:
    return SqlFile(package, filename)


Q = load_sql("openmaic.store", "queries.sql")
