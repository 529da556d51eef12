"""What a 1.1.x browser kept, as its importer sends it: the records of OpenMAIC's IndexedDB (``MAIC-Database``).

Before 1.2 a browser held everything itself: ``stages`` (a course's name, description, language directive and the
agents picked for it), ``scenes`` (per stage, in ``order``: a slide canvas of positioned elements, a quiz, an
interactive page or a project, with the scene's ``actions``: speech, spotlights, discussions), ``mediaFiles`` (the
generated pictures and videos of a stage, keyed ``<stageId>:<elementId>``; a failed one has an ``error`` and no
bytes), ``audioFiles`` (the narration clips that speech actions name by ``audioId``), and in local storage the
custom agents and the model settings (imported through ``/api/agents/import`` and
``/api/model-config/import``). The importer reads them and sends them stage by stage; bytes travel as
base64 strings (JSON's only way to carry them), the records in their own camelCase.

Only what the import uses is typed strictly; the rest of a record passes through as JSON (``dict``), and unknown
fields are ignored, as OpenMAIC's routes ignore them. Bounds are here, where data enters: a request over them is
a 400 naming the field; the byte size of the whole body is the route's limit (``limits.upload_bytes``).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec

from openmaic.wire import Wire

__all__ = [
    "BROWSER_ID", "LegacyAudio", "LegacyMedia", "LegacyScene", "LegacyStage", "MAX_MEDIA", "MAX_SCENES",
    "StageImport",
]  # fmt: skip

BROWSER_ID = r"^[0-9a-f]{32}$"
"""A browser's import id: 32 lowercase hex characters, chosen once by the browser (OpenMAIC's)."""

MAX_SCENES = 200
MAX_MEDIA = 500

RecordId = Annotated[str, msgspec.Meta(min_length=1, max_length=200)]
Text = Annotated[str, msgspec.Meta(max_length=20_000)]


class LegacyStage(Wire):
    """A ``stages`` record."""

    id: RecordId
    name: Annotated[str, msgspec.Meta(max_length=500)] = ""
    description: Text = ""
    language_directive: Text | None = None
    agent_ids: list[RecordId] = []
    created_at: int | None = None
    updated_at: int | None = None


class LegacyScene(Wire):
    """A ``scenes`` record; ``content`` is ``{type: slide, canvas}``, ``{type: quiz, questions}``, ``{type:
    interactive, url, html?}`` or ``{type: pbl, projectConfig}``."""

    id: RecordId
    type: Literal["slide", "quiz", "interactive", "pbl"]
    title: Annotated[str, msgspec.Meta(max_length=500)] = ""
    order: int = 0
    content: dict[str, Any] = {}
    actions: list[dict[str, Any]] = []


class LegacyMedia(Wire):
    """A ``mediaFiles`` record: ``id`` is ``<stageId>:<elementId>`` (or the bare element id)."""

    id: RecordId
    type: Literal["image", "video"]
    mime_type: Annotated[str, msgspec.Meta(max_length=100)] = ""
    data: bytes = b""
    """The picture or video, base64 on the wire; empty for a failed element."""
    poster: bytes | None = None
    prompt: Text = ""
    error: Text | None = None


class LegacyAudio(Wire):
    """An ``audioFiles`` record: a narration clip a speech action names by ``audioId``."""

    id: RecordId
    format: Annotated[str, msgspec.Meta(max_length=20)] = "mp3"
    data: bytes = b""


class StageImport(Wire):
    """``POST /api/legacy-import/stages``: one stage with its scenes and the media they use."""

    stage: LegacyStage
    scenes: Annotated[list[LegacyScene], msgspec.Meta(max_length=MAX_SCENES)] = []
    media: Annotated[list[LegacyMedia], msgspec.Meta(max_length=MAX_MEDIA)] = []
    audio: Annotated[list[LegacyAudio], msgspec.Meta(max_length=MAX_MEDIA)] = []
