"""OpenMAIC's headless API as its skill calls it: health and capabilities, on a real socket."""

from __future__ import annotations

from openmaic.api import headless
from openmaic.capabilities import server_version
from tests.integration.api_harness import make_config, running_api

ANONYMOUS = make_config("identity: {mode: anonymous, secret_key: a-long-enough-test-secret}")


async def test_health_answers_without_an_owner_and_without_the_database(db):
    async with running_api(db, ANONYMOUS) as api, api.client() as client:
        r = await client.get("/api/health")
        assert r.status_code == 200
        assert r.json() == {"success": True, "status": "ok", "version": server_version(),
                            "capabilities": {"webSearch": False, "imageGeneration": False,
                                             "videoGeneration": False, "tts": False}}
        assert "set-cookie" not in r.headers  # no owner was made for it


async def test_capabilities_list_what_this_server_reads_with_openmaic_limits(db):
    config = make_config("limits: {upload_bytes: 4096}")
    async with running_api(db, config, blueprints=[headless.bp]) as api, api.client() as client:
        r = await client.get("/api/generate-classroom/capabilities")
        assert r.status_code == 200
        body = r.json()
        assert body["success"] is True
        assert body["capabilities"] == {"webSearch": False, "imageGeneration": False, "videoGeneration": False,
                                        "tts": False}
        materials = body["materials"]
        assert {k: v for k, v in materials.items() if k != "formats"} == {
            "maxCount": 5, "maxTotalBytes": 157286400, "maxDocumentBytes": 4096, "maxMediaBytes": 4096}
        formats = {f["id"]: f for f in materials["formats"]}
        assert {"pdf", "txt", "md"} <= set(formats)
        assert formats["pdf"] == {"id": "pdf", "mime": "application/pdf", "extensions": [".pdf"]}
        assert formats["md"]["mime"] == "text/markdown"
