"""OpenMAIC's owner modes from the environment, and the combinations that stop the boot."""

from __future__ import annotations

import pytest

from openmaic.errors import ConfigError
from openmaic.owner_env import read_owner_env
from openmaic.secret import Secret


def test_modes():
    assert read_owner_env({}).mode is None
    shared = read_owner_env({"PERSISTENCE_SHARED_OWNER_ID": "team-a", "ACCESS_CODE": "open sesame"})
    assert (shared.mode, shared.owner, shared.access_code) == ("shared", "team-a", Secret("open sesame"))
    single = read_owner_env({"OWNER_SINGLE_USER": "true"})
    assert (single.mode, single.owner) == ("single_user", "local") and single.notices
    named = read_owner_env({"OWNER_SINGLE_USER": "1", "OWNER_SINGLE_USER_ID": "ada", "ACCESS_CODE": "x"})
    assert (named.owner, named.notices) == ("ada", ())
    assert read_owner_env({"OWNER_SINGLE_USER": "false"}).mode is None
    assert read_owner_env({"ACCESS_CODE": "c"}).access_code == Secret("c")
    assert read_owner_env({}).claim_trigger is None
    auto = read_owner_env({"OWNER_CLAIM_TRIGGER": "Auto", "OWNER_SINGLE_USER": "true"})
    assert (auto.claim_trigger, auto.mode) == ("auto", "single_user")


@pytest.mark.parametrize(("env", "message"), [
    ({"PERSISTENCE_SHARED_OWNER_ID": "team"}, "PERSISTENCE_SHARED_OWNER_ID needs ACCESS_CODE"),
    ({"PERSISTENCE_SHARED_OWNER_ID": "a b", "ACCESS_CODE": "c"}, "PERSISTENCE_SHARED_OWNER_ID: expected 1 to 128"),
    ({"PERSISTENCE_SHARED_OWNER_ID": "x" * 129, "ACCESS_CODE": "c"}, "PERSISTENCE_SHARED_OWNER_ID: expected"),
    ({"PERSISTENCE_SHARED_OWNER_ID": "t", "OWNER_SINGLE_USER": "true", "ACCESS_CODE": "c"}, "are both set"),
    ({"OWNER_SINGLE_USER": "maybe"}, "OWNER_SINGLE_USER: expected true or false"),
    ({"OWNER_SINGLE_USER": "true", "OWNER_SINGLE_USER_ID": "ada/x"}, "OWNER_SINGLE_USER_ID: expected"),
    ({"OWNER_CLAIM_TRIGGER": "sometimes"}, "OWNER_CLAIM_TRIGGER: expected explicit or auto"),
])  # fmt: skip
def test_refused_combinations_name_the_variable(env, message):
    with pytest.raises(ConfigError, match=message):
        read_owner_env(env)
