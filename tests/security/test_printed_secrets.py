"""A ``DATABASE_URL`` password is never printed in clear: not by ``db status``, not in ``serve``'s log, not in the
error a refused connection gives. Before, libpq's ``?password=`` form was printed as it was."""

from __future__ import annotations

import pytest

from openmaic.serve import describe_database, redact
from openmaic.store.postgres import free_port
from tests.integration.test_cli import _env, err, openmaic, out

SECRET = "hunter2-Secret"


@pytest.mark.parametrize("url", [
    f"postgresql://postgres:{SECRET}@db.example.org/openmaic",
    f"postgresql://postgres@db.example.org/openmaic?password={SECRET}&sslmode=require",
    f"postgresql://db.example.org/openmaic?sslmode=require&PASSWORD={SECRET}",
    f"postgresql://postgres@db.example.org/openmaic?sslpassword={SECRET}",
])  # fmt: skip
def test_every_password_form_is_redacted(url, monkeypatch):
    monkeypatch.setenv("DATABASE_URL", url)
    for text in (redact(url), describe_database(url)):
        assert SECRET not in text and "***" in text and "db.example.org/openmaic" in text


async def test_db_status_prints_the_url_without_its_password(db_url, tmp_path):
    # The test server trusts local connections, so the password is sent and ignored.
    env = _env(tmp_path, DATABASE_URL=f"{db_url}?password={SECRET}")
    r = await openmaic("db", "status", env=env)
    assert r.returncode == 0, err(r)
    assert "reachable: yes" in out(r) and "password=***" in out(r)
    assert SECRET not in out(r) + err(r)


@pytest.mark.parametrize("command", [["db", "status"], ["serve", "--role", "worker"]])
async def test_an_unreachable_database_is_reported_without_its_password(command, tmp_path):
    url = f"postgresql://postgres:{SECRET}@127.0.0.1:{free_port()}/nowhere?password={SECRET}"
    r = await openmaic(*command, env=_env(tmp_path, DATABASE_URL=url))
    assert r.returncode == 2, err(r)
    assert "cannot reach PostgreSQL" in err(r)
    assert SECRET not in out(r) + err(r)
