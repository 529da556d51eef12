"""The web pages' files, read as text: nothing in them turns a string into HTML, except the one document built to.

Every script builds its DOM with ``createElement`` and text nodes (``api.js``'s ``h``), so text from the server —
model-written titles, bullets, scripts — can never become markup in the page. The one place where HTML is meant
to be rendered is an interactive scene, and it is rendered only in ``scene_frame.html``: a document served with a
sandboxing, network-free policy (tests/integration/test_classroom_page.py checks that it is, and that it is
never served as a static file).
"""

from __future__ import annotations

import re
from importlib import resources

SINKS = re.compile(
    r"\.(?:inner|outer)HTML\b|insertAdjacentHTML|document\.write|\bsrcdoc\b|\beval\s*\(|\bnew\s+Function\b|"
    r"createContextualFragment|setHTMLUnsafe|parseFromString|javascript:"
)


def files(suffix: str) -> dict[str, str]:
    web = resources.files("openmaic.web")
    return {p.name: p.read_text() for p in web.iterdir() if p.name.endswith(suffix)}


def test_no_script_of_the_web_pages_turns_text_into_html():
    scripts = files(".js")
    assert {"api.js", "app.js", "classroom.js", "classroom_media.js", "events.js", "sandbox.js"} <= set(scripts)
    found = {name: SINKS.findall(text) for name, text in scripts.items() if SINKS.search(text)}
    assert found == {}


def test_only_the_scene_frame_writes_html_and_only_what_its_embedder_sends():
    pages = files(".html")
    writers = {name for name, text in pages.items() if SINKS.search(text)}
    assert writers == {"scene_frame.html"}
    frame = pages["scene_frame.html"]
    # It takes its HTML from the window that embeds it, and from no other.
    assert "event.source !== parent" in frame and "parent === window" in frame
    assert "<script src" not in frame and "<link" not in frame  # it loads nothing
