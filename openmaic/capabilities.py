"""What this server can do, as OpenMAIC's clients ask before they use it.

The skill reads ``GET /api/health`` and ``GET /api/generate-classroom/capabilities`` before it sends a request:
a feature flag is only worth setting when its capability is true, and an upload only worth sending when its
format and size are listed. So the answers here are facts about this server, never promises:

* a media capability (web search, image and video generation, speech) is true when its slot resolves to a
  provider this server has a driver for (:class:`~openmaic.media.slots.MediaRouter`): with no configuration
  the offline demo provider serves all four; a slot that is off or unassigned is false;
* the material formats are those :mod:`openmaic.materials` can read (see ``materials.FORMATS``), with the limits
  a run and an upload enforce.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import metadata

from openmaic.config import Config
from openmaic.media.slots import MediaRouter
from openmaic.materials import FORMATS, MAX_RUN_MATERIALS, MAX_RUN_MATERIAL_BYTES, MaterialFormat

__all__ = ["MaterialLimits", "MediaCapabilities", "material_limits", "media_capabilities", "server_version"]


def server_version() -> str:
    """This server's version (the installed package's)."""
    try:
        return metadata.version("openmaic")
    except metadata.PackageNotFoundError:
        return "0.0.0"


@dataclass(frozen=True)
class MediaCapabilities:
    web_search: bool = False
    image_generation: bool = False
    video_generation: bool = False
    tts: bool = False


@dataclass(frozen=True)
class MaterialLimits:
    formats: tuple[MaterialFormat, ...]
    max_count: int
    """Materials one run may use."""
    max_total_bytes: int
    """Their total size."""
    max_document_bytes: int
    """One document or image."""
    max_media_bytes: int
    """One audio or video file (none is accepted yet; the limit is the upload limit)."""


def media_capabilities(config: Config, media: MediaRouter | None = None) -> MediaCapabilities:
    """Which media this server generates: each media slot that resolves (through ``media``, the serving
    process's router, when given)."""
    caps = (media or MediaRouter(config)).capabilities()
    return MediaCapabilities(web_search=caps["webSearch"], image_generation=caps["image"],
                             video_generation=caps["video"], tts=caps["tts"])


def material_limits(config: Config) -> MaterialLimits:
    """The formats this server reads and the limits on materials."""
    upload = config.limits.upload_bytes
    return MaterialLimits(
        formats=FORMATS, max_count=MAX_RUN_MATERIALS, max_total_bytes=MAX_RUN_MATERIAL_BYTES,
        max_document_bytes=upload, max_media_bytes=upload,
    )
