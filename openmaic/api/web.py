"""The web pages: the workbench at ``/``, the classroom at ``/classroom/<classroom id>``, the frame an interactive
scene runs in at ``/scene-frame``, and their scripts and stylesheets at ``/static/<name>`` (the classroom
player's modules at ``/static/classroom/<name>``).

The files live in the package :mod:`openmaic.web` (plain HTML, CSS and ES modules; nothing is built). Only files
that exist in that package (or its ``classroom`` folder) with a known type are served, and a name is a plain file
name (letters, digits, ``-``, ``_`` and one extension), so nothing outside it can be reached; ``/static/`` serves
scripts and stylesheets only, never a page (a page is served by its own route, with its own policy).

The classroom page loads its player as one file, ``/static/classroom/bundle.js``: the player's modules joined by
the offline export's bundler (:func:`openmaic.exports.html_file.bundle_modules`, made once per process at the
first request), so a first visit asks for one script instead of sixteen a few import levels deep (most of the
first render's time on a busy machine; docs/benchmarks.md). The modules stay served one by one as well.

Every file is sent with a strong ``ETag`` (a digest of the bytes sent) and ``Cache-Control: no-cache``: a browser
keeps it and revalidates, getting ``304 Not Modified`` until an upgrade changes it. A client that accepts gzip
gets it compressed (``Vary: Accept-Encoding``; the compressed copy is made once per file and process).

Who may see what:

* The workbench page holds no data, so it is public like the health routes; every API call it makes resolves
  the owner as usual (in ``anonymous`` mode the first of them sets the owner cookie before any WebSocket opens).
* The classroom page is owner-scoped like every route: it resolves the owner from the request and answers its
  not-found page (404, in English and Chinese) — the same for an unknown, deleted or another owner's classroom —
  before it sends the player.
  Two exceptions, where a browser's navigation cannot say who it is, get the page (which holds no data either)
  without a word about the classroom: a request that has not given the server's ``ACCESS_CODE`` (the page's API
  calls are refused until it does), and, because a browser cannot put a bearer token on a navigation, in
  ``token`` mode a request that presents no ``Authorization`` header at all (the page reads the classroom with
  the token the workbench stored); a request that does present one is checked.
* The scene frame is an empty, public document that holds nothing until its embedder posts it a scene.

Policies. The workbench and the classroom are never framed, load no plugins and frame only this origin
(``frame-src 'self'``): that last one is what keeps an interactive scene from navigating its frame to another
site, since a frame's navigations are checked against its embedder's policy. The classroom's policy is strict
beyond that (scripts, images, media and connections from this origin only), with two allowances the course
format needs: inline styles (a slide's text is HTML with ``style`` attributes), and inline scripts, because an
interactive scene runs in a ``srcdoc`` frame, which inherits this policy; that frame is sandboxed without
``allow-same-origin`` and its document carries a policy of its own that allows no network at all
(:mod:`openmaic.web` ``classroom/interactive.js``). Text HTML reaches the page sanitized and is set with
``innerHTML``, which never runs scripts. The scene frame's own policy
allows no network at all — no fetch, beacon, WebSocket, image, font, form, frame or worker from anywhere — and
sandboxes the document (``sandbox allow-scripts``: an opaque origin, no forms, popups, modals or top-level
navigation) even if it is opened on its own; the scene's inline scripts and styles run, and ``data:`` images.
"""

from __future__ import annotations

import gzip
import hashlib
import re
from importlib import resources

from quart import Blueprint, Response, request

from openmaic.api.access_code import AccessCodeRequired
from openmaic.api.headless import runs_of
from openmaic.api.routing import Call, api_route, app_state
from openmaic.errors import NotFound
from openmaic.exports.html_file import bundle_modules

__all__ = ["CLASSROOM_CSP", "SCENE_FRAME_CSP", "WORKBENCH_CSP", "bp"]

bp = Blueprint("web", __name__)

_STATIC_TYPES = {
    "js": "text/javascript; charset=utf-8",
    "css": "text/css; charset=utf-8",
}
_HTML = "text/html; charset=utf-8"
_NAME = re.compile(r"[A-Za-z0-9_-]+\.([a-z]+)")

WORKBENCH_CSP = "frame-ancestors 'none'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-src 'self'"
"""The workbench page: scripts are not restricted further (its modules come from this origin)."""

CLASSROOM_CSP = (
    "default-src 'none'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data: blob:; media-src 'self' data: blob:; font-src 'self' data:; connect-src 'self'; "
    "frame-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
"""The classroom page: everything from this origin only (its assets, its API); inline styles for the slides'
text and inline scripts for the interactive scenes' ``srcdoc`` frames (see the module docstring)."""

SCENE_FRAME_CSP = (
    "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:; media-src data:; "
    "font-src data:; connect-src 'none'; form-action 'none'; base-uri 'none'; frame-ancestors 'self'; "
    "sandbox allow-scripts"
)
"""The frame an interactive scene runs in: its own inline code, and nothing from any network."""


_NAME_MAX = 100
"""Longer names are no file of ours (and past the file system's limit a lookup fails with ENAMETOOLONG)."""


def _read(name: str, folder: str = "") -> bytes:
    if len(name) <= _NAME_MAX:
        path = resources.files("openmaic.web")
        if folder:
            path = path.joinpath(folder)
        path = path.joinpath(name)
        try:
            if path.is_file():
                return path.read_bytes()
        except OSError:
            # Whatever the file system refuses (a name too long, permissions) is as absent as a missing file:
            # a 404, never a 500.
            pass
    raise NotFound(f"no file {name[:40]!r}")


_GZIPPED: dict[bytes, bytes] = {}
"""sha256 of a file -> its gzip copy (the files are few and small; an upgrade changes the digest)."""


def _answer(body: bytes, content_type: str, csp: str | None = None, status: int = 200) -> Response:
    digest = hashlib.sha256(body).digest()
    compress = "gzip" in request.headers.get("Accept-Encoding", "").lower() and len(body) > 512
    if compress:
        if digest not in _GZIPPED:
            _GZIPPED[digest] = gzip.compress(body, compresslevel=9, mtime=0)
        body = _GZIPPED[digest]
    # One validator per representation: the compressed copy is another entity than the plain bytes.
    etag = f'"{digest[:16].hex()}{"-gz" if compress else ""}"'
    if status == 200 and etag in [t.strip().removeprefix("W/") for t in request.headers.get("If-None-Match", "").split(",")]:
        response = Response(b"", 304)
    else:
        response = Response(body, status, content_type=content_type)
        if compress:
            response.headers["Content-Encoding"] = "gzip"
    response.headers["ETag"] = etag
    response.headers["Vary"] = "Accept-Encoding"
    response.headers["Cache-Control"] = "no-cache"  # small files: revalidate, so an upgrade is seen at once
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers["Referrer-Policy"] = "no-referrer"
    if csp is not None:
        response.headers["Content-Security-Policy"] = csp
    return response


def _page(name: str, csp: str) -> Response:
    return _answer(_read(name), _HTML, csp)


NOT_FOUND_CSP = "default-src 'none'; style-src 'self'; img-src data:; base-uri 'none'; form-action 'none'; " \
    "frame-ancestors 'none'"


def not_found_page() -> Response:
    """The classroom's not-found page (404): English and Chinese, the reader's language first."""
    chinese_first = request.headers.get("Accept-Language", "").lower().lstrip().startswith("zh")
    body = _read("classroom_not_found.html")
    if chinese_first:
        body = body.replace(b'<html lang="en">', b'<html lang="zh-CN">').replace(b'class="nf-en"', b'class="nf-en later"')
    return _answer(body, _HTML, NOT_FOUND_CSP, status=404)


@api_route(bp, "GET", "/", auth=False, media_type="text/html")
async def workbench_page(call: Call) -> Response:
    """The web workbench (an HTML page): the library, new courses, runs, courses and Pro sessions."""
    return _page("index.html", WORKBENCH_CSP)


@api_route(bp, "GET", "/classroom/{id}", auth=False, media_type="text/html", errors=(401, 404), plain_not_found=True)
async def classroom_page(call: Call, id: str) -> Response:
    """The classroom a learner goes through (an HTML page): the course played scene by scene — slides with their
    narration and effects, quizzes, interactive pages — filling in while its run writes them; a not-found page
    (404) unless it is yours.

    In token mode a browser's navigation carries no token: without an Authorization header the page is sent,
    and it reads the classroom with the token the workbench stored.
    """
    req = call.request
    identity = app_state().identity
    try:
        await identity.check_access(req)
    except AccessCodeRequired:
        # Nothing is said about the classroom before the access code is given; the page asks for it.
        return _page("classroom.html", CLASSROOM_CSP)
    if not (identity.config.mode == "token" and "Authorization" not in req.headers):
        owner = await identity.resolve(req)
        try:
            await runs_of(call).owned_course(owner, id)
        except NotFound:
            return not_found_page()  # the same page for unknown, deleted and others'
    return _page("classroom.html", CLASSROOM_CSP)


@api_route(bp, "GET", "/scene-frame", auth=False, media_type="text/html")
async def scene_frame(call: Call) -> Response:
    """The document an interactive scene runs in (an HTML page): sandboxed, with no network at all; the page
    that embeds it posts it the scene."""
    response = _page("scene_frame.html", SCENE_FRAME_CSP)
    response.headers["X-DNS-Prefetch-Control"] = "off"  # no lookups of names the scene mentions
    return response


@api_route(bp, "GET", "/static/{name}", auth=False, media_type="text/*", errors=(404,), plain_not_found=True)
async def workbench_file(call: Call, name: str) -> Response:
    """A script (JavaScript module) or stylesheet of the web pages."""
    m = _NAME.fullmatch(name)
    if m is None or m.group(1) not in _STATIC_TYPES:
        raise NotFound(f"no file {name!r}")
    return _answer(_read(name), _STATIC_TYPES[m.group(1)])


_BUNDLE: list[bytes] = []
"""The classroom player as one module (made at the first request; the package's files do not change under a
running process)."""


def _bundle() -> bytes:
    if not _BUNDLE:
        folder = resources.files("openmaic.web").joinpath("classroom")
        sources = {p.name[:-3]: p.read_text("utf-8") for p in folder.iterdir() if p.name.endswith(".js")}
        _BUNDLE.append(("// The classroom player's modules in one file (openmaic.api.web).\n"
                        + bundle_modules(sources)).encode())
    return _BUNDLE[0]


@api_route(bp, "GET", "/static/classroom/{name}", auth=False, media_type="text/*", errors=(404,), plain_not_found=True)
async def classroom_file(call: Call, name: str) -> Response:
    """A module (JavaScript) of the classroom player, or all of them in one (bundle.js)."""
    if name == "bundle.js":
        return _answer(_bundle(), _STATIC_TYPES["js"])
    m = _NAME.fullmatch(name)
    if m is None or m.group(1) != "js":
        raise NotFound(f"no file {name!r}")
    return _answer(_read(name, "classroom"), _STATIC_TYPES["js"])
