"""Which media references a course touches, and which element ids a scene has (format §5.5, §1.3).

:func:`asset_refs` is OpenMAIC's ``enumerateAssetManifest`` walk, without the metadata callback: the stage
whiteboard pages; then per scene its slide canvas, its whiteboards and its speech actions' ``audioId`` s; then
the keys of ``stage.videoManifest``. Per page: an image background (``background``), then per element image
``src`` (``image``), audio ``src`` (``audio``), video ``src`` and ``mediaRef`` (``video``), video ``poster``
(``poster``). One entry per distinct (reference, kind) pair, in first-seen order; :func:`reference_counts`
counts each reference's owners (an element, a background or a speech action; a poster is an owner of its own).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Literal

import msgspec

from openmaic.courses.format.actions import SpeechAction
from openmaic.courses.format.base import UNSET
from openmaic.courses.format.elements import AudioElement, ImageElement, Slide, VideoElement, Whiteboard
from openmaic.courses.format.scenes import Scene, SlideContent
from openmaic.courses.format.stage import Document

__all__ = ["AssetKind", "asset_refs", "reference_counts", "scene_element_ids"]

AssetKind = Literal["image", "video", "audio", "poster", "background"]


def _page(page: Slide | Whiteboard, owner: str) -> Iterator[tuple[str, AssetKind, str]]:
    background = page.background
    if background is not UNSET and background.type == "image" and background.image is not UNSET:
        yield background.image.src, "background", f"{owner}:background"
    for index, element in enumerate(page.elements):
        key = f"{owner}:element:{index}"
        if isinstance(element, ImageElement):
            yield element.src, "image", key
        elif isinstance(element, AudioElement):
            yield element.src, "audio", key
        elif isinstance(element, VideoElement):
            for ref in (element.src, element.mediaRef):
                if ref is not UNSET:
                    yield ref, "video", key
            if element.poster is not UNSET:
                yield element.poster, "poster", f"{key}:poster"


def _slots(document: Document) -> Iterator[tuple[str, AssetKind, str | None]]:
    stage = document.stage
    for index, page in enumerate(stage.whiteboard or ()):
        yield from _page(page, f"stage-whiteboard:{index}")
    for scene_index, scene in enumerate(document.scenes):
        scope = f"scene:{scene_index}"
        if isinstance(scene.content, SlideContent):
            yield from _page(scene.content.canvas, f"{scope}:canvas")
        for index, page in enumerate(scene.whiteboards or ()):
            yield from _page(page, f"{scope}:whiteboard:{index}")
        for index, action in enumerate(scene.actions or ()):
            if isinstance(action, SpeechAction) and action.audioId:
                yield action.audioId, "audio", f"{scope}:speech:{index}"
    for ref in stage.videoManifest or {}:
        yield ref, "video", None  # an entry, but no owner


def _document(document: Document | dict[str, Any]) -> Document:
    return document if isinstance(document, Document) else msgspec.convert(document, Document)


def asset_refs(document: Document | dict[str, Any]) -> list[tuple[str, AssetKind]]:
    """Every (reference, kind) the document (typed, or a valid JSON document) names, each once, in the walk's
    order; empty references skipped."""
    seen: dict[tuple[str, AssetKind], None] = {}
    for ref, kind, _owner in _slots(_document(document)):
        if ref:
            seen.setdefault((ref, kind), None)
    return list(seen)


def reference_counts(document: Document | dict[str, Any]) -> dict[str, int]:
    """How many owners name each reference (a video's ``src`` and ``mediaRef`` count once)."""
    owners: dict[str, set[str]] = {}
    for ref, _kind, owner in _slots(_document(document)):
        if ref and owner is not None:
            owners.setdefault(ref, set()).add(owner)
    return {ref: len(keys) for ref, keys in owners.items()}


def scene_element_ids(scene: Scene | dict[str, Any]) -> set[str]:
    """The ids of the elements on a slide scene's canvas (what ``spotlight``, ``laser`` and ``play_video`` may
    name); empty for other scenes. ``scene`` is typed, or a valid JSON scene."""
    if not isinstance(scene, Scene):
        scene = msgspec.convert(scene, Scene)
    if not isinstance(scene.content, SlideContent):
        return set()
    return {element.id for element in scene.content.canvas.elements}
