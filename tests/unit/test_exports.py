"""A classroom's exports built from fixture course documents (tests/fixtures/courses) with a fake asset reader:
the PowerPoint file opens with python-pptx and holds every slide's text, pictures, tables, charts and notes; the
offline page embeds the document, the player and the media it was given."""

from __future__ import annotations

import io
import json
import re

import pytest
from pptx import Presentation
from pptx.util import Emu

from openmaic.exports import export_html, export_pptx, referenced_assets
from openmaic.exports.document import plain_text
from openmaic.exports.html_file import bundle_modules
from openmaic.exports.pptx_file import PX
from tests.e2e.classroom_fixtures import course, png, wav

PICTURE = "asset_" + "a" * 32
NARRATION = "asset_" + "b" * 32


def classroom(name: str) -> dict:
    doc = course(name)
    return {"id": "course-x", **doc, "media": {}, "pendingScenes": [], "generatingRunId": None, "seq": 3}


def reader(store: dict[str, tuple[bytes, str]], asked: list[str] | None = None):
    async def read(asset_id: str) -> tuple[bytes, str] | None:
        if asked is not None:
            asked.append(asset_id)
        return store.get(asset_id)

    return read


def texts_of(slide) -> list[str]:
    found = []
    for shape in slide.shapes:
        if shape.has_text_frame and shape.text_frame.text.strip():
            found.append(shape.text_frame.text)
        if shape.has_table:
            found += [cell.text for row in shape.table.rows for cell in row.cells]
    return found


async def test_the_pptx_holds_every_slide_with_its_text_at_its_place_and_the_speech_as_notes():
    doc = classroom("generated_every_element")
    asked: list[str] = []
    data = await export_pptx(doc, reader({PICTURE: (png(160, 90), "image/png")}, asked))
    assert NARRATION not in asked  # narration is not put in a PowerPoint file
    prs = Presentation(io.BytesIO(data))
    assert len(prs.slides) == len(doc["scenes"])
    assert (prs.slide_width, prs.slide_height) == (Emu(12_192_000), Emu(6_858_000))
    for slide, scene in zip(prs.slides, doc["scenes"], strict=True):
        texts = "\n".join(texts_of(slide))
        canvas = scene["content"].get("canvas")
        for el in (canvas or {}).get("elements", []):
            if el["type"] == "text":
                for line in plain_text(el["content"]).split("\n"):
                    assert line.lstrip("• ") in texts, (scene["id"], line)
        speeches = [a["text"] for a in scene["actions"] if a["type"] == "speech"]
        if speeches:
            notes = slide.notes_slide.notes_text_frame.text
            assert all(s in notes for s in speeches)
        if scene["type"] == "quiz":
            for q in scene["content"]["questions"]:
                assert q["question"] in texts
                assert all(o["label"] in texts for o in q.get("options", []))

    first = prs.slides[0]
    title = next(s for s in first.shapes if s.has_text_frame and "What plants need" in s.text_frame.text)
    assert (title.left, title.top, title.width) == (Emu(int(50 * PX)), Emu(int(40 * PX)), Emu(int(900 * PX)))
    assert title.text_frame.paragraphs[0].runs[0].font.bold
    assert title.text_frame.paragraphs[0].runs[0].font.size.pt == pytest.approx(32 * 0.96, abs=0.1)
    pictures = [s for s in first.shapes if s.shape_type == 13]  # MSO_SHAPE_TYPE.PICTURE
    assert len(pictures) == 1 and pictures[0].left == Emu(int(700 * PX))
    # Pictures the store does not have (pending, failed) are labelled boxes.
    assert sum(1 for t in texts_of(first) if t == "Picture") == 2
    assert {"Input", "From", "Water", "Roots", "CO<2>", "Air"} <= set(texts_of(first))
    assert sum(1 for s in first.shapes if s.has_chart) == 2
    assert sum(1 for s in prs.slides[1].shapes if s.has_chart) == 6
    assert any("def rate(light):" in t for t in texts_of(prs.slides[1]))


async def test_the_golden_course_exports_too():
    data = await export_pptx(classroom("ohm_golden"), reader({}))
    prs = Presentation(io.BytesIO(data))
    assert len(prs.slides) == 3
    assert "Ohm's law" in "\n".join(texts_of(prs.slides[0]))
    assert "Ohm's law explorer" in "\n".join(texts_of(prs.slides[2]))


async def test_the_offline_page_embeds_the_document_the_player_and_the_media():
    doc = classroom("generated_every_element")
    doc["scenes"][0]["title"] = "Ends a script? </script><script>alert(1)</script>"
    assert referenced_assets(doc) == [PICTURE, "asset_" + "c" * 32, NARRATION, "asset_" + "d" * 32,
                                      "asset_" + "e" * 32]
    page = (await export_html(doc, reader({PICTURE: (png(), "image/png"), NARRATION: (wav(0.2), "audio/wav")}))).decode()
    assert page.count("</script>") == 3  # the data, the assets and the player: nothing closes them early
    data = json.loads(re.search(r'id="classroom-data">(.*?)</script>', page, re.S).group(1))
    assert data["scenes"][0]["title"] == doc["scenes"][0]["title"]
    assert data["generatingRunId"] is None
    assets = json.loads(re.search(r'id="classroom-assets">(.*?)</script>', page, re.S).group(1))
    assert set(assets) == {PICTURE, NARRATION} and assets[PICTURE].startswith("data:image/png;base64,")
    # Media it could not carry keep no address: the audio element, the video and its poster.
    slide2 = data["scenes"][1]["content"]["canvas"]["elements"]
    video = next(e for e in slide2 if e["type"] == "video")
    assert "src" not in video and "poster" not in video
    assert '<link rel="stylesheet"' not in page and 'src="/static/' not in page
    assert "const __module_main = " in page and not re.search(r'^import \{', page, re.M)


def test_the_bundle_refuses_a_module_it_cannot_resolve():
    with pytest.raises(ValueError, match="missing ./b.js"):
        bundle_modules({"main": 'import { x } from "./b.js";\n'})
    with pytest.raises(ValueError, match="cycle"):
        bundle_modules({"main": 'import { x } from "./b.js";\n', "b": 'import { y } from "./main.js";\n'})
    out = bundle_modules({"main": 'import { x } from "./b.js";\nconsole.log(x);\n',
                          "b": "const y = 1;\nexport const x = y;\nexport function f() {}\nexport { y };\n"})
    assert out.index("__module_b =") < out.index("__module_main =")
    assert "return { x, f, y };" in out and "const { x } = __module_b;" in out


async def test_a_document_of_another_shape_still_exports_its_scenes():
    odd = {"id": "c", "title": "Old shape", "scenes": [
        {"id": "s1", "title": "One", "kind": "slide", "content": "not an object", "actions": {"actions": []}},
        {"id": "s2", "title": "Two", "type": "quiz", "content": {"questions": ["?", {"question": "Why?"}]},
         "actions": ["speech", {"type": "speech", "text": "Hello."}]},
    ]}
    prs = Presentation(io.BytesIO(await export_pptx(odd, reader({}))))
    assert len(prs.slides) == 2 and "Why?" in "\n".join(texts_of(prs.slides[1]))
    assert prs.slides[1].notes_slide.notes_text_frame.text == "Hello."
    assert "Old shape" in (await export_html(odd, reader({}))).decode()
