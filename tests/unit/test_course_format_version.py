"""The document version ladder (OpenMAIC's version.test.ts cases, ported)."""

from __future__ import annotations

import copy

import pytest

from openmaic.courses import format as fmt


def speech(**extra: str) -> dict[str, str]:
    return {"id": "a1", "type": "speech", "text": "Hello", **extra}


def doc_with_actions(actions: list[dict[str, str]], stamp: str | None = None) -> dict[str, object]:
    doc: dict[str, object] = {
        "stage": {"id": "st", "name": "Course", "createdAt": 1, "updatedAt": 2},
        "scenes": [{"id": "s1", "stageId": "st", "type": "slide", "title": "Scene", "order": 0,
                    "content": {"type": "slide", "canvas": {"id": "c1", "elements": []}}, "actions": actions}],
    }  # fmt: skip
    if stamp:
        doc["dslVersion"] = stamp
    return doc


def test_stamps_a_legacy_document_up_to_the_current_version_and_keeps_the_payload() -> None:
    out = fmt.migrate({"id": "legacy", "name": "course"})
    assert out == {"id": "legacy", "name": "course", "dslVersion": "0.2.0"}


def test_idempotent_and_an_up_to_date_document_comes_back_as_is() -> None:
    once = fmt.migrate({"id": "x"})
    assert fmt.migrate(once) == once and fmt.migrate(once) is once


def test_does_not_change_its_input() -> None:
    value = {"id": "x"}
    out = fmt.migrate(value)
    assert out is not value and value == {"id": "x"}


def test_never_downgrades_a_newer_document() -> None:
    future = {"id": "x", "dslVersion": "99.0.0", "shinyNewField": True}
    assert fmt.migrate(future) is future
    assert fmt.is_future("99.0.0") and fmt.is_future("0.2.1") and not fmt.is_future("0.2.0")


def test_no_migration_path() -> None:
    with pytest.raises(fmt.FormatInvalid, match="no migration path"):
        fmt.migrate({"id": "x", "dslVersion": "0.0.5"})


@pytest.mark.parametrize("stamp", ["0.1", "0.1.0-beta", "legacy", "0.2.0\n", 2, ""])
def test_malformed_stamps(stamp: object) -> None:
    with pytest.raises(fmt.FormatInvalid, match="invalid dslVersion"):
        fmt.migrate({"id": "x", "dslVersion": stamp})


def test_non_objects_come_back_unchanged() -> None:
    assert fmt.migrate(42) == 42 and fmt.migrate(None) is None


def test_a_runtime_session_is_never_walked_as_a_legacy_document() -> None:
    with pytest.raises(fmt.FormatInvalid, match="runtimeDslVersion"):
        fmt.migrate({"id": "s", "runtimeDslVersion": "0.1.0"})
    both = {"id": "s", "runtimeDslVersion": "0.1.0", "dslVersion": "0.1.0"}
    assert fmt.migrate(both) == {**both, "dslVersion": "0.2.0"}


@pytest.mark.parametrize("stamp", ["0.1.0", None])
def test_the_audio_url_step_only_stamps(stamp: str | None) -> None:
    actions = [speech(audioUrl="https://cdn.example.com/a.mp3"),
               speech(audioId="tts_s0_a1", audioUrl="https://cdn.example.com/b.mp3"), speech(audioId="tts_s0_a1")]
    value = doc_with_actions(actions, stamp)
    snapshot = copy.deepcopy(value)
    out = fmt.migrate(value)
    assert value == snapshot
    assert out["dslVersion"] == "0.2.0" and out["scenes"][0]["actions"] == actions  # type: ignore[index]


def test_compare_versions_is_numeric_per_component() -> None:
    assert fmt.compare_versions("0.10.0", "0.9.9") > 0
    assert fmt.compare_versions("1.0.0", "1.0.0") == 0
    assert fmt.compare_versions("0.2.0", "0.10.0") < 0
    with pytest.raises(fmt.FormatInvalid):
        fmt.compare_versions("1.0", "1.0.0")
