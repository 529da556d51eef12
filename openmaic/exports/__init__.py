"""Exports of a classroom: a PowerPoint file (:mod:`openmaic.exports.pptx_file`) and one self-contained HTML page
that plays offline (:mod:`openmaic.exports.html_file`).

Both are built from the classroom as ``GET /api/classrooms/{id}`` answers it (a JSON object: ``stage``, ``scenes``,
``media``, …; OPENMAIC-COURSE-FORMAT's document) and the bytes of the assets it names, which the caller reads from
the owner's asset store through ``read(asset_id) -> (bytes, media type) | None`` (None: missing, or too large to
carry). Building is synchronous CPU work and runs in a worker thread.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import trio

from openmaic.exports.document import AssetBytes, referenced_assets
from openmaic.exports.html_file import build_html
from openmaic.exports.pptx_file import build_pptx

__all__ = ["AssetBytes", "AssetReader", "export_html", "export_pptx", "gather_assets", "referenced_assets"]

AssetReader = Callable[[str], Awaitable[tuple[bytes, str] | None]]


async def gather_assets(classroom: Mapping[str, Any], read: AssetReader, *, audio: bool = True) -> AssetBytes:
    """The bytes of every asset the classroom names (narration too with ``audio``), by asset id; missing ones are
    left out (an export shows what it has)."""
    found: AssetBytes = {}
    for asset_id in referenced_assets(classroom, audio=audio):
        got = await read(asset_id)
        if got is not None:
            found[asset_id] = got
    return found


async def export_pptx(classroom: Mapping[str, Any], read: AssetReader) -> bytes:
    """The classroom as a .pptx file."""
    assets = await gather_assets(classroom, read, audio=False)
    return await trio.to_thread.run_sync(build_pptx, classroom, assets)


async def export_html(classroom: Mapping[str, Any], read: AssetReader) -> bytes:
    """The classroom as one HTML file that plays offline."""
    assets = await gather_assets(classroom, read)
    return await trio.to_thread.run_sync(build_html, classroom, assets)
