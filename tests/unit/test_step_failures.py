"""What a step's exception means to the runtime, through nursery exception groups: the database's trouble of the
moment (never the step's failure), or the step's own failure in its cause's words."""

from __future__ import annotations

import pytest

from openmaic import errors
from openmaic.actors.failures import database_trouble, is_bug, step_error
from openmaic.models.errors import ProviderError
from openmaic.store.sqlstates import error_for_sqlstate, is_transient


@pytest.mark.parametrize("state", ["08006", "40001", "40P01", "53300", "53200", "55P03", "57014", "57P01"])
def test_transient_refusals(state):
    assert is_transient(error_for_sqlstate(state, "x"))


@pytest.mark.parametrize("state", ["23505", "42703", "22021", "55000", "OM001", "OM010"])
def test_refusals_that_are_the_statements_own(state):
    assert not is_transient(error_for_sqlstate(state, "x"))


def test_a_provider_error_wrapped_by_a_nursery_reads_as_itself():
    exc = ExceptionGroup("nursery", [ProviderError("the model provider 'local' failed after 3 attempts "
                                                   "(could not connect)")])
    assert step_error(exc, "outline") == "the model provider 'local' failed after 3 attempts (could not connect)"
    assert database_trouble(exc) is None and not is_bug(exc)


def test_the_databases_trouble_wins_over_what_it_caused_and_is_found_in_nested_groups():
    lost = errors.DatabaseUnavailable("PostgreSQL connection lost")
    exc = ExceptionGroup("outer", [ProviderError("p"), ExceptionGroup("inner", [lost])])
    assert database_trouble(exc) is lost


def test_a_bug_is_a_fixed_sentence_never_a_class_name():
    text = step_error(ExceptionGroup("n", [KeyError("k"), errors.InvalidInput("bad outline")]), "outline")
    assert text == "step outline failed unexpectedly; see the server log; bad outline"
    assert "KeyError" not in text and "Group" not in text


async def test_a_provider_that_cannot_be_asked_is_explained_in_words():
    from openmaic.models.retry import Transport

    class Cfg:
        timeout_s, max_retries, headers, proxy = 2.0, 0, None, None

        def key(self) -> None:
            return None

    with pytest.raises(ProviderError) as exc:
        await Transport("local", Cfg()).send("POST", "ftp://127.0.0.1/v1", {}, lambda r: None, json_body={})
    assert exc.value.message == ("the model provider 'local' could not be reached (its URL does not start with "
                                 "http:// or https://); check its base_url")
