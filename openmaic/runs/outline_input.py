"""An outline as a client sends it back (``confirm-outline``'s ``outlines``): OpenMAIC's ``SceneOutline``s
translated into outline items, or refused with the field that is wrong.

Nothing a client sends is repaired silently where the client relies on it: a media element's id is how the client
finds that element's state later, so a malformed or repeated one is refused, never renamed. The proposed outline's
entries come back unchanged, so confirming the outline as it was proposed is no edit.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from openmaic import errors
from openmaic.courses.schema import ASPECT_RATIOS, ELEMENT_ID, MediaRequest, OutlineItem

__all__ = ["outline_items"]


def outline_items(outlines: Sequence[Any]) -> list[OutlineItem]:
    """OpenMAIC ``SceneOutline``s (``{type, title, description, keyPoints, mediaGenerations}``, decoded into
    objects with those attributes) as outline items; InvalidInput naming the first that this server cannot build.

    A media entry keeps its ``elementId`` (the proposed outline's come back unchanged, so confirming it as it was
    proposed is no edit); one without an id gets the next free ``gen_img_<n>`` / ``gen_vid_<n>``. A malformed or
    repeated id is refused rather than renamed: it is how the client finds the element's state later."""
    items = []
    given = {m.element_id for o in outlines for m in o.media_generations if m.element_id}
    placed: set[str] = set()
    counts = {"image": 0, "video": 0}
    for i, o in enumerate(outlines):
        if o.type not in ("slide", "quiz", "interactive"):
            raise errors.InvalidInput(f"outlines[{i}].type: {o.type!r} scenes are not supported; use slide, quiz or "
                                      "interactive", path=f"outlines[{i}].type")
        media = []
        for j, m in enumerate(o.media_generations):
            at = f"outlines[{i}].mediaGenerations[{j}]"
            if m.type not in ("image", "video"):
                raise errors.InvalidInput(f"{at}.type: {m.type!r} is not a media type; use image or video",
                                          path=f"{at}.type")
            if not m.prompt.strip():
                raise errors.InvalidInput(f"{at}.prompt: say what the {m.type} should show", path=f"{at}.prompt")
            if m.aspect_ratio not in ASPECT_RATIOS:
                raise errors.InvalidInput(f"{at}.aspectRatio: {m.aspect_ratio!r} is not one of "
                                          f"{', '.join(ASPECT_RATIOS)}", path=f"{at}.aspectRatio")
            element_id = m.element_id
            if not element_id:
                while not element_id or element_id in given:
                    counts[m.type] += 1
                    element_id = f"gen_{'img' if m.type == 'image' else 'vid'}_{counts[m.type]}"
                given.add(element_id)
            elif not ELEMENT_ID.match(element_id):
                raise errors.InvalidInput(f"{at}.elementId: use 1 to 128 letters, digits and _ . : -",
                                          path=f"{at}.elementId")
            elif element_id in placed:
                raise errors.InvalidInput(f"{at}.elementId: {element_id!r} is used twice in the outline",
                                          path=f"{at}.elementId")
            placed.add(element_id)
            media.append(MediaRequest(kind=m.type, prompt=m.prompt.strip(), element_id=element_id,
                                      aspect_ratio=m.aspect_ratio))
        items.append(OutlineItem(title=o.title, goal=o.description, kind=o.type, key_points=list(o.key_points),
                                 media=media))
    return items
