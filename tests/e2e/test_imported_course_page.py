"""A course written through OpenMAIC's browser persistence routes (as its importer writes a 1.1.x browser's
course) is a classroom like any other: `openmaic serve` and headless Chromium show its scenes and its picture."""

from __future__ import annotations

import struct
import zlib

import httpx

from tests.e2e.test_workbench_ui import ARTIFACTS, Page, base_url, expect, in_browser, pytestmark  # noqa: F401


def png(width: int, height: int) -> bytes:
    """A real (decodable) grey PNG of ``width`` × ``height``."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    rows = b"".join(b"\x00" + b"\x80" * width for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")


async def test_an_imported_document_opens_in_the_classroom(base_url):  # noqa: F811
    async with httpx.AsyncClient(base_url=base_url, trust_env=False, timeout=10) as client:
        r = await client.post("/api/persistence/assets", files={
            "meta": ("metadata.json", "{}", "application/json"), "bytes": ("asset", png(48, 32), "image/png")})
        assert r.status_code == 201, r.text
        picture = r.json()["id"]
        document = {
            "stage": {"id": "legacy-stage", "name": "Tides", "description": "Why the sea rises and falls"},
            "scenes": [
                {"id": "one", "stageId": "legacy-stage", "type": "slide", "title": "The moon pulls", "order": 1,
                 "content": {"type": "slide", "canvas": {"elements": [
                     {"id": "t", "type": "text", "top": 0, "left": 0, "content": "<p>Gravity tugs the oceans</p>"},
                     {"id": "pic", "type": "image", "top": 50, "left": 0, "src": picture}]}},
                 "actions": [{"type": "speech", "text": "Look at the moon."}]},
                {"id": "two", "stageId": "legacy-stage", "type": "quiz", "title": "Check", "order": 2,
                 "content": {"type": "quiz", "questions": [
                     {"question": "What pulls the tides?", "options": [{"label": "The moon", "value": "A"},
                                                                      {"label": "The wind", "value": "B"}],
                      "answer": ["A"]}]}},
            ],
        }
        assert (await client.put("/api/persistence/documents/legacy-stage", json=document)).status_code == 204
        (stage,) = [s for s in (await client.get("/api/stages")).json()["stages"] if s["id"] == "legacy-stage"]
        course = stage["courseId"]

    def scenario(page: Page) -> None:
        page.goto(f"/classroom/{course}")
        expect(page.locator("main")).to_have_attribute("data-state", "complete")
        expect(page.get_by_role("heading", level=1)).to_have_text("Tides")
        expect(page.locator(".scene-panel:not([hidden])")).to_contain_text("Gravity tugs the oceans")
        image = page.locator('figure[data-element-id="pic"] img')
        expect(image).to_be_visible()
        width = image.evaluate("img => img.complete ? img.naturalWidth : new Promise(r => img.onload = () => "
                               "r(img.naturalWidth))")
        assert width == 48
        page.screenshot(path=str(ARTIFACTS / "classroom-imported.png"), full_page=True)
        page.goto(f"/classroom/{course}#scene-2")
        page.reload()
        expect(page.locator(".scene-panel:not([hidden])")).to_contain_text("What pulls the tides?")

    await in_browser(scenario, base_url)
