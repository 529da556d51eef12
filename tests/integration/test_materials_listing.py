"""Materials over HTTP as the workbench uses them: the owner's list without a Pro session, and a damaged PDF
refused as unreadable, saying why."""

from __future__ import annotations

from openmaic.api import materials
from tests.security import pdfs
from tests.integration.api_harness import make_config, running_api


async def test_the_owner_lists_their_materials_without_a_session_and_a_damaged_pdf_is_refused(db):
    async with running_api(db, make_config(), blueprints=[materials.bp]) as api, api.client() as client:
        notes = await client.post("/api/materials", files={"file": ("notes.txt", b"Plants make glucose.", "text/plain")})
        assert notes.status_code == 201, notes.text
        # What was read is shown back: how much, and the first words.
        assert (notes.json()["characters"], notes.json()["excerpt"]) == (20, "Plants make glucose.")
        leaf = await client.post("/api/materials", files={"file": ("leaf.pdf", pdfs.text_pdf("Stomata open at dawn", pages=3),
                                                                    "application/pdf")})
        assert leaf.status_code == 201, leaf.text
        assert leaf.json()["pages"] == 3 and "Stomata open at dawn" in leaf.json()["excerpt"]
        # The list shows what the upload read (pages, characters, the first words), read back from where it is kept.
        listed = (await client.get("/api/materials", params={"limit": 10})).json()["materials"]
        assert [m["materialId"] for m in listed] == [leaf.json()["materialId"], notes.json()["materialId"]]
        shown = {k: listed[0][k] for k in ("pages", "characters", "excerpt")}
        assert shown == {k: leaf.json()[k] for k in ("pages", "characters", "excerpt")} and shown["pages"] == 3
        assert listed[1]["pages"] is None and listed[1]["excerpt"] == "Plants make glucose."
        paged = (await client.get("/api/materials", params={"limit": 1, "before": leaf.json()["materialId"]})).json()
        assert [m["materialId"] for m in paged["materials"]] == [notes.json()["materialId"]]
        await client.delete(f"/api/materials/{leaf.json()['materialId']}")
        listed = await client.get("/api/materials", params={"limit": 10})
        assert listed.status_code == 200, listed.text
        assert [m["materialId"] for m in listed.json()["materials"]] == [notes.json()["materialId"]]
        one = await client.get(f"/api/materials/{notes.json()['materialId']}")
        assert one.status_code == 200 and one.json()["material"]["originalName"] == "notes.txt"

        damaged = {"file": ("lesson.pdf", b"\x00\x01 not a pdf", "application/pdf")}
        broken = await client.post("/api/materials", files=damaged)
        assert broken.status_code == 400 and broken.json()["errorCode"] != "UNSUPPORTED_FILE_TYPE", broken.text
        message = broken.text
        assert "could not be read as a PDF" in message and "%PDF-" in message
        assert "unsupported file type" not in message
        # A file that starts as a PDF but cannot be parsed is refused as unreadable too, and nothing is kept.
        torn = {"file": ("torn.pdf", pdfs.text_pdf("Stomata")[:60], "application/pdf")}
        refused = await client.post("/api/materials", files=torn)
        assert refused.status_code == 400 and "torn.pdf" in refused.text, refused.text
        assert len((await client.get("/api/materials")).json()["materials"]) == 1  # nothing kept
