"""The web workbench: its page at ``/`` and its static files at ``/static/<name>``.

The files live in the package :mod:`openmaic.web` (plain HTML, CSS and ES modules; nothing is built). They are
public like the health routes: the page holds no data, and every API call it makes resolves the owner as usual
(in ``anonymous`` mode the first of them sets the owner cookie before any WebSocket opens). Only files that exist
in that package with a known type are served, and a name is a plain file name (letters, digits, ``-``, ``_``
and one extension), so nothing outside it can be reached.
"""

from __future__ import annotations

import re
from importlib import resources

from quart import Blueprint, Response

from openmaic.api.routing import Call, api_route
from openmaic.errors import NotFound

__all__ = ["bp"]

bp = Blueprint("web", __name__)

_TYPES = {
    "html": "text/html; charset=utf-8",
    "js": "text/javascript; charset=utf-8",
    "css": "text/css; charset=utf-8",
}
_NAME = re.compile(r"[A-Za-z0-9_-]+\.([a-z]+)")

# The page is never framed and loads no plugins. Scripts are not restricted further: an interactive scene is a
# generated HTML page with inline scripts, shown in a sandboxed frame (an opaque origin) that inherits this policy.
_CSP = "frame-ancestors 'none'; object-src 'none'; base-uri 'none'; form-action 'self'"


def _file(name: str) -> Response:
    m = _NAME.fullmatch(name)
    if m is None or m.group(1) not in _TYPES:
        raise NotFound(f"no file {name!r}")
    ext = m.group(1)
    path = resources.files("openmaic.web").joinpath(name)
    if not path.is_file():
        raise NotFound(f"no file {name!r}")
    response = Response(path.read_bytes(), 200, content_type=_TYPES[ext])
    response.headers["Cache-Control"] = "no-cache"  # small files: revalidate, so an upgrade is seen at once
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers["Referrer-Policy"] = "no-referrer"
    if ext == "html":
        response.headers["Content-Security-Policy"] = _CSP
    return response


@api_route(bp, "GET", "/", auth=False, media_type="text/html")
async def workbench_page(call: Call) -> Response:
    """The web workbench (an HTML page): the library, new courses, runs, courses and Pro sessions."""
    return _file("index.html")


@api_route(bp, "GET", "/static/{name}", auth=False, media_type="text/*", errors=(404,), plain_not_found=True)
async def workbench_file(call: Call, name: str) -> Response:
    """A static file of the web workbench (JavaScript module, stylesheet)."""
    return _file(name)
