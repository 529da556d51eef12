"""The session kinds this build runs, by stream kind (the worker's table, and the operators' replay folds)."""

from __future__ import annotations

from typing import Any

from openmaic.actors.kind import Kind
from openmaic.config import Config, default_config
from openmaic.media.lane import MediaKind
from openmaic.runs.kind import GenerationKind
from openmaic.workbench.kind import WorkbenchKind


SESSION_KINDS: tuple[str, ...] = ("generation", "workbench")
"""The stream kinds that are sessions (a course, a material or a run's media lane is not)."""


def session_kinds(config: Config) -> dict[str, Kind[Any]]:
    kinds: dict[str, Kind[Any]] = {
        "generation": GenerationKind(config), "workbench": WorkbenchKind(config), "media": MediaKind(config),
    }
    assert set(SESSION_KINDS) <= set(kinds) and set(kinds) == set(KIND_NAMES)
    return kinds


KIND_NAMES: tuple[str, ...] = ("generation", "workbench", "media")
"""Every stream kind that has a kind here (the sessions and the media lanes)."""


def get_kind(kind: str, config: Config | None = None) -> Kind[Any]:
    """The kind of a stream, for folding it (``openmaic replay``); KeyError for a kind that is not a session."""
    return session_kinds(config or default_config())[kind]
