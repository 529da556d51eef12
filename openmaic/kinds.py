"""The session kinds this build runs, by stream kind."""

from __future__ import annotations

from typing import Any

from openmaic.actors.kind import Kind
from openmaic.config import Config


def session_kinds(config: Config) -> dict[str, Kind[Any]]:
    return {}
