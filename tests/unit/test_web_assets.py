"""The web pages' files, read as text: nothing in them turns a string into HTML, except where the course format
says a string is HTML.

Every script builds its DOM with ``createElement`` and text nodes (``api.js``'s ``h``), so text from the server —
model-written titles, scripts, questions — can never become markup in the page. The course document does carry
HTML, and only the classroom player's two modules that draw it may render it: ``classroom/elements.js`` (a slide's
text, formula and table-cell HTML, which the server sanitizes on the way in, set with ``innerHTML``, which runs no
script) and ``classroom/interactive.js`` (an interactive scene's page, in a sandboxed ``srcdoc`` frame with a
network-free policy of its own). The workbench renders interactive pages only in ``scene_frame.html``: a document
served with a sandboxing, network-free policy (tests/integration/test_classroom_page.py checks that it is, and
that it is never served as a static file).
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
    found = {p.name: p.read_text() for p in web.iterdir() if p.name.endswith(suffix)}
    player = web.joinpath("classroom")
    found |= {f"classroom/{p.name}": p.read_text() for p in player.iterdir() if p.name.endswith(suffix)}
    return found


def test_no_script_of_the_web_pages_turns_text_into_html():
    scripts = files(".js")
    assert {"api.js", "app.js", "events.js", "sandbox.js", "classroom/main.js", "classroom/elements.js",
            "classroom/interactive.js"} <= set(scripts)
    found = {name: sorted(set(SINKS.findall(text))) for name, text in scripts.items() if SINKS.search(text)}
    assert found == {"classroom/elements.js": [".innerHTML"], "classroom/interactive.js": ["srcdoc"]}


def test_the_player_renders_only_the_documents_html_fields():
    elements = files(".js")["classroom/elements.js"]
    sinks = re.findall(r"(\w+(?:\.\w+)?)\.innerHTML = ([^;]+);", elements)
    assert sorted(v for _, v in sinks) == ['cell.text || ""', 'el.content || ""', "el.html"]


def test_only_the_scene_frame_writes_html_and_only_what_its_embedder_sends():
    pages = files(".html")
    writers = {name for name, text in pages.items() if SINKS.search(text)}
    assert writers == {"scene_frame.html"}
    frame = pages["scene_frame.html"]
    # It takes its HTML from the window that embeds it, and from no other.
    assert "event.source !== parent" in frame and "parent === window" in frame
    assert "<script src" not in frame and "<link" not in frame  # it loads nothing
