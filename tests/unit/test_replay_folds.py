"""``openmaic replay`` folds a stream with the fold its actors use, found in the registry of session kinds."""

from __future__ import annotations

import pytest

from openmaic.actors.kind import Core
from openmaic.courses.events import CourseDocument
from openmaic.kinds import KIND_NAMES, get_kind
from openmaic.runs.fold import RunState
from openmaic.tools.replay import fold_for
from openmaic.workbench.fold import SessionState


@pytest.mark.parametrize("kind", KIND_NAMES)
def test_every_registered_kind_replays_with_its_own_fold(kind):
    initial, evolve, source = fold_for(kind)
    assert source == "actors"
    assert evolve.__func__ is type(get_kind(kind)).evolve  # the kind's own method, not a copy
    assert type(initial) is type(get_kind(kind).initial())


def test_the_session_kinds_fold_their_own_states():
    assert isinstance(fold_for("generation")[0], RunState)
    assert isinstance(fold_for("workbench")[0], SessionState)


def test_a_course_has_its_registered_fold_and_an_unknown_kind_the_core():
    assert fold_for("course")[2] == "registered" and isinstance(fold_for("course")[0], CourseDocument)
    initial, _, source = fold_for("no-such-kind")
    assert source == "core" and isinstance(initial, Core)
