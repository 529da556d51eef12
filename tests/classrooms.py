"""What every finished classroom must be, as ``GET /api/classrooms/{id}`` answers it."""

from __future__ import annotations

from typing import Any

from openmaic.courses import format as fmt


def assert_classroom_ready(classroom: dict[str, Any]) -> None:
    """The course's run is over and every scene of it is in: none pending, no run writing it, each scene with its
    content and its script, and the stage with its scenes a document OpenMAIC's validator accepts."""
    assert classroom["generatingRunId"] is None and classroom["pendingScenes"] == [], classroom["pendingScenes"]
    scenes = classroom["scenes"]
    assert scenes and all(s["content"] and s["actions"] for s in scenes), scenes
    assert [s["order"] for s in scenes] == sorted(s["order"] for s in scenes)
    document = {"stage": classroom["stage"], "scenes": scenes, "dslVersion": classroom["dslVersion"]}
    assert fmt.validate_document(document, stage_id=classroom["id"]) == []
