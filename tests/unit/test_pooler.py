"""What a pooler in front allows, decided without a database: the settings each mode sends and how, where a
session of its own goes, and the refusals that name what to change (the driver's part: tests/integration/test_pooler.py)."""

from __future__ import annotations

import pytest

from openmaic import errors
from openmaic.serve import describe_database
from openmaic.store.bounds import session_bounds
from openmaic.store.pooler import Pooler, refused_startup

SETTINGS, _ = session_bounds(None, 30.0)
DIRECT = "postgresql://openmaic:s3cret@db:5432/openmaic"


def test_the_mode_comes_from_the_environment_and_transaction_mode_needs_a_direct_url() -> None:
    assert Pooler.from_env({}) == Pooler("none")
    assert Pooler.from_env({"DATABASE_POOLER": " Session "}) == Pooler("session")
    assert Pooler.from_env({"DATABASE_POOLER": "transaction", "DATABASE_DIRECT_URL": DIRECT}).direct_url == DIRECT
    with pytest.raises(errors.ConfigError, match="DATABASE_POOLER=transaction needs DATABASE_DIRECT_URL"):
        Pooler.from_env({"DATABASE_POOLER": "transaction"})
    with pytest.raises(errors.ConfigError, match="DATABASE_POOLER must be one of session, transaction"):
        Pooler.from_env({"DATABASE_POOLER": "statement"})


def test_each_mode_sends_the_bounds_its_own_way() -> None:
    none, session, transaction = Pooler(), Pooler("session"), Pooler("transaction", DIRECT)
    assert none.startup_settings(SETTINGS) == SETTINGS and none.set_sql(SETTINGS) == ""
    # PgBouncer takes application_name at startup and refuses the rest, so session mode SETs them on the connection …
    assert session.startup_settings(SETTINGS) == transaction.startup_settings(SETTINGS) == {"application_name": "openmaic"}
    assert "SET statement_timeout = '30000';" in session.set_sql(SETTINGS)
    assert "SET idle_in_transaction_session_timeout = '5000';" in session.set_sql(SETTINGS)
    assert "application_name" not in session.set_sql(SETTINGS)
    assert Pooler("session").set_sql({"application_name": "x", "search_path": "a'b"}) == "SET search_path = 'a''b';"
    # … and transaction mode sends none: a SET would stay behind on a server session the next client gets.
    assert transaction.set_sql(SETTINGS) == ""


def test_a_connection_of_its_own_goes_to_postgresql_itself_when_it_is_known() -> None:
    assert Pooler().session_target("pg", SETTINGS) == ("pg", SETTINGS)
    assert Pooler("transaction", DIRECT).session_target("bouncer", SETTINGS) == (DIRECT, SETTINGS)
    assert Pooler("session").session_target("bouncer", SETTINGS) == ("bouncer", {"application_name": "openmaic"})
    assert not Pooler("transaction", DIRECT).sessions_on_pool and Pooler("session").sessions_on_pool


def test_a_refused_startup_parameter_names_the_setting_to_change() -> None:
    refusal = refused_startup(RuntimeError("unsupported startup parameter: idle_in_transaction_session_timeout"))
    assert refusal is not None and "refused the session setting idle_in_transaction_session_timeout" in refusal.message
    assert "DATABASE_POOLER=transaction (with DATABASE_DIRECT_URL" in refusal.message
    assert refused_startup(RuntimeError("password authentication failed")) is None


def test_the_start_names_the_pooler_and_hides_passwords(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DATABASE_URL", "postgresql://openmaic:s3cret@bouncer:6432/openmaic")
    assert describe_database("postgresql://openmaic:s3cret@bouncer:6432/openmaic") == \
        "DATABASE_URL postgresql://openmaic:***@bouncer:6432/openmaic"
    monkeypatch.setenv("DATABASE_POOLER", "transaction")
    with pytest.raises(errors.ConfigError, match="DATABASE_DIRECT_URL"):
        describe_database("postgresql://openmaic@bouncer:6432/openmaic")
    monkeypatch.setenv("DATABASE_DIRECT_URL", DIRECT)
    shown = describe_database("postgresql://openmaic:s3cret@bouncer:6432/openmaic")
    assert shown == ("DATABASE_URL postgresql://openmaic:***@bouncer:6432/openmaic (a connection pooler in transaction "
                     "mode; sessions of their own to postgresql://openmaic:***@db:5432/openmaic)")
    assert "s3cret" not in shown
