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
        leaf = await client.post("/api/materials", files={"file": ("leaf.pdf", pdfs.text_pdf("Stomata open at dawn"),
                                                                    "application/pdf")})
        assert leaf.status_code == 201, leaf.text
        assert leaf.json()["pages"] == 1 and "Stomata open at dawn" in leaf.json()["excerpt"]
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
        assert len((await client.get("/api/materials")).json()["materials"]) == 1  # nothing kept
