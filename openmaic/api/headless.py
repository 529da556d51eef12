"""OpenMAIC's headless generation API, the one its ``openmaic`` skill drives with curl and one cookie jar.

``GET /api/generate-classroom/capabilities`` says what this server can do before the skill asks for it: which
media it generates (all false until media generation exists) and which materials it reads, with their limits.
It needs no owner.
"""

from __future__ import annotations

from quart import Blueprint

from openmaic.api.health import MediaCapabilities, media_view
from openmaic.api.routing import Call, api_route
from openmaic.api.wire import Success, Wire
from openmaic.capabilities import material_limits

__all__ = ["bp"]

bp = Blueprint("headless", __name__)


class MaterialFormatView(Wire):
    id: str
    mime: str
    extensions: list[str]


class MaterialLimitsView(Wire):
    formats: list[MaterialFormatView]
    max_count: int
    """Materials one generation may use."""
    max_total_bytes: int
    max_document_bytes: int
    max_media_bytes: int


class Capabilities(Success):
    capabilities: MediaCapabilities
    materials: MaterialLimitsView


@api_route(bp, "GET", "/api/generate-classroom/capabilities", response=Capabilities, auth=False)
async def capabilities(call: Call) -> Capabilities:
    """What this server can generate and which materials it reads (formats, counts, sizes). Needs no owner."""
    m = material_limits(call.services.config)
    formats = [MaterialFormatView(id=f.id, mime=f.mime, extensions=list(f.extensions)) for f in m.formats]
    return Capabilities(
        capabilities=media_view(call.services.config),
        materials=MaterialLimitsView(formats=formats, max_count=m.max_count, max_total_bytes=m.max_total_bytes,
                                     max_document_bytes=m.max_document_bytes, max_media_bytes=m.max_media_bytes),
    )
