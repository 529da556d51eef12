"""The named SQL in .sql files: every statement is used, every use names a statement, and no module writes its
own SQL inline."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from openmaic.store.queries import Q, load_sql

PACKAGE = Path(__file__).resolve().parents[2] / "openmaic"
READ_MODELS = ("library", "documents", "history", "sessions")


def _used(source: str, prefix: str) -> set[str]:
    return set(re.findall(rf"\b{prefix}\.([a-z_][a-z0-9_]*)\b", source)) - {"names"}


def test_every_statement_of_queries_sql_is_used_and_every_used_name_exists():
    used = _used("\n".join(p.read_text(encoding="utf-8") for p in PACKAGE.rglob("*.py")), "Q")
    assert set(Q.names()) - used == set(), "statements nobody runs"
    assert used - set(Q.names()) == set(), "names with no statement"


@pytest.mark.parametrize("model", READ_MODELS)
def test_every_statement_of_a_read_model_is_used_by_it(model):
    sql = load_sql("openmaic.projections", f"{model}.sql")
    used = _used((PACKAGE / "projections" / f"{model}.py").read_text(encoding="utf-8"), "SQL")
    assert set(sql.names()) == used


def test_no_module_writes_sql_inline():
    statement = re.compile(r"""["'](?:\s*)(SELECT|INSERT INTO|UPDATE|DELETE FROM|CREATE|DROP|ALTER|SET LOCAL)\s""")
    found = [f"{p.relative_to(PACKAGE)}:{n}" for p in PACKAGE.rglob("*.py")
             for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if statement.search(line)]
    assert found == []


def test_a_missing_name_says_which_file_lacks_it():
    with pytest.raises(AttributeError, match=r"no query named 'nope' in openmaic/store/queries\.sql"):
        _ = Q.nope
