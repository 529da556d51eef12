"""OpenMAIC's headless API as its skill calls it: health and capabilities, on a real socket."""

from __future__ import annotations

import msgspec
import pytest

from openmaic.api import headless
from openmaic.capabilities import server_version
from openmaic.models.errors import MissingApiKey, MissingModel
from openmaic.models.provider import check_slot
from openmaic.runs.service import RunService
from tests.integration.api_harness import make_config, running_api

ANONYMOUS = make_config("identity: {mode: anonymous}")


async def test_health_answers_without_an_owner_and_without_the_database(db):
    async with running_api(db, ANONYMOUS) as api, api.client() as client:
        r = await client.get("/api/health")
        assert r.status_code == 200
        assert r.json() == {"success": True, "status": "ok", "version": server_version(),
                            "capabilities": {"webSearch": True, "imageGeneration": True,
                                             "videoGeneration": True, "tts": True}}  # the demo serves them
        assert "set-cookie" not in r.headers  # no owner was made for it


async def test_capabilities_list_what_this_server_reads_with_openmaic_limits(db):
    config = make_config("limits: {upload_bytes: 4096}")
    async with running_api(db, config, blueprints=[headless.bp]) as api, api.client() as client:
        r = await client.get("/api/generate-classroom/capabilities")
        assert r.status_code == 200
        body = r.json()
        assert body["success"] is True
        assert body["capabilities"] == {"webSearch": True, "imageGeneration": True, "videoGeneration": True,
                                        "tts": True}
        materials = body["materials"]
        assert {k: v for k, v in materials.items() if k != "formats"} == {
            "maxCount": 5, "maxTotalBytes": 157286400, "maxDocumentBytes": 4096, "maxMediaBytes": 4096}
        formats = {f["id"]: f for f in materials["formats"]}
        assert {"pdf", "txt", "md"} <= set(formats)
        assert formats["pdf"] == {"id": "pdf", "mime": "application/pdf", "extensions": [".pdf"]}
        assert formats["md"]["mime"] == "text/markdown"


NO_KEY = make_config("""
providers:
  openai: {preset: openai}
slots: {llm: demo:course, course.outline: "openai:gpt-4o"}
""")


async def test_a_start_whose_outline_model_cannot_run_is_refused_before_any_job_exists(db):
    async with running_api(db, NO_KEY, blueprints=[headless.bp]) as api, api.client() as client:
        api.services.runs = RunService(api.log, NO_KEY)
        r = await client.post("/api/generate-classroom", json={"requirement": "Tides"})
        assert r.status_code == 400, r.text
        body = r.json()
        assert (body["errorCode"], body["details"]) == ("MISSING_API_KEY", {"slot": "course.outline",
                                                                           "provider": "openai"})
        assert "providers.openai.apiKey" in body["error"]
        assert await db.fetchval("SELECT count(*) FROM streams") == 0


def test_check_slot_says_whether_a_slot_can_run():
    base = make_config("""
providers:
  openai: {preset: openai}
  claude: {preset: anthropic}
  local: {preset: openai-compatible, baseUrl: "http://127.0.0.1:11434/v1"}
  ollama: {preset: ollama}
  keyed: {preset: openai, apiKey: sk-test}
slots: {llm: demo:course}
""")
    for provider, ok in [("demo", True), ("openai", False), ("claude", False), ("local", True), ("ollama", True),
                         ("keyed", True)]:
        config = msgspec.structs.replace(base, slots={"llm": "demo:course", "course.outline": f"{provider}:m"})
        if ok:
            check_slot(config, "course.outline")
        else:
            with pytest.raises(MissingApiKey):
                check_slot(config, "course.outline")
    with pytest.raises(MissingModel) as exc:
        check_slot(msgspec.structs.replace(base, slots={}), "course.outline")
    assert exc.value.error_code == "MISSING_MODEL" and exc.value.status == 400
