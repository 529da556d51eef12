"""OpenMAIC's ``openmaic`` skill, request for request, against a real `openmaic serve` with one cookie jar.

The skill (``skills/openmaic/references/generate-flow.md``) checks health and capabilities, uploads its material
as a raw body, submits ``{requirement, materialIds}``, polls ``pollUrl`` until ``done`` and opens
``result.url``. Everything it may be refused is refused before any job exists, with OpenMAIC's codes.
"""

from __future__ import annotations

import re
import urllib.parse

import httpx
import pytest
import trio

from openmaic.capabilities import server_version
from openmaic.events.log import EventLog
from openmaic.runs.events import RunInput
from openmaic.runs.service import RunService
from openmaic.config import default_config
from openmaic.store.database import open_database
from tests.classrooms import assert_classroom_ready
from tests.serving import FAST_CONFIG, running_server

ANONYMOUS = FAST_CONFIG + "identity: {mode: anonymous}\n"
NOTES = b"# Photosynthesis\n\nPlants turn light, water and carbon dioxide into sugar and oxygen.\n"
RUN_ID = re.compile(r"run-[A-Za-z0-9_-]{16}")
MATERIAL_ID = re.compile(r"mat_[0-9A-HJKMNP-TV-Z]{26}")


@pytest.fixture
async def single_user(db_url, tmp_path):
    async with running_server(db_url, tmp_path) as (client, port):
        yield client, f"http://127.0.0.1:{port}"


@pytest.fixture
async def anonymous(db_url, tmp_path):
    config = ANONYMOUS + ("limits: {active_runs_per_owner: 1, materials_per_owner: 3, upload_bytes: 4096}\n"
                          "providers: {demo: {preset: demo, options: {latencyMs: 4}}}\n"
                          "slots: {llm: demo:course, agent: demo:agent, image: demo, video: demo, tts: demo, "
                          "webSearch: demo}\n")
    async with running_server(db_url, tmp_path, config) as (client, port):
        yield client, f"http://127.0.0.1:{port}"


def api_error(r: httpx.Response, status: int, code: str) -> str:
    assert r.status_code == status, r.text
    body = r.json()
    assert body["success"] is False and body["errorCode"] == code, body
    return body["error"]


async def upload(client: httpx.AsyncClient, name: str, data: bytes, mime: str = "text/markdown") -> httpx.Response:
    return await client.post("/api/materials", content=data,
                             headers={"Content-Type": mime, "X-Material-Filename": urllib.parse.quote(name)})


async def poll_until_done(client: httpx.AsyncClient, poll_url: str, timeout: float = 90) -> dict:
    seen = []
    with trio.fail_after(timeout):
        while True:
            r = await client.get(poll_url)
            assert r.status_code == 200, r.text
            job = r.json()
            seen.append((job["status"], job["step"]))
            assert 0 <= job["progress"] <= 100
            if job["done"]:
                assert ("running", "generating_scenes") in seen or job["status"] != "succeeded", seen
                return job
            assert job["status"] in ("queued", "running"), job
            await trio.sleep(0.2)


async def run_the_skill(client: httpx.AsyncClient, base: str) -> dict:
    """The skill's whole flow; returns the final job view."""
    r = await client.get("/api/health")
    assert r.status_code == 200 and r.json()["status"] == "ok" and r.json()["version"] == server_version()
    assert r.json()["capabilities"] == {"webSearch": True, "imageGeneration": True, "videoGeneration": True,
                                        "tts": True}  # the demo provider serves every media slot the file gives it
    caps = (await client.get("/api/generate-classroom/capabilities")).json()
    assert caps["success"] and "md" in {f["id"] for f in caps["materials"]["formats"]}

    r = await upload(client, "notes on plants.md", NOTES)
    assert r.status_code == 201, r.text
    material = r.json()
    assert MATERIAL_ID.fullmatch(material["materialId"])
    assert {k: material[k] for k in ("materialId", "originalName", "bytes", "mime", "extraction")} == {
        "materialId": material["materialId"], "originalName": "notes on plants.md", "bytes": len(NOTES),
        "mime": "text/markdown", "extraction": {"status": "done"}}
    # what was read, shown to the teacher: the characters and the first words
    assert material["characters"] > 0 and material["excerpt"] == " ".join(NOTES.decode().split())

    r = await client.post("/api/generate-classroom", json={
        "requirement": "Photosynthesis for 12-year-olds", "materialIds": [material["materialId"]],
        # every other field is ignored, the run's own options included
        "language": "zh-CN", "outlineReview": "wait", "enableImageGeneration": True, "agentMode": "generate",
    })
    assert r.status_code == 202, r.text
    job = r.json()
    assert RUN_ID.fullmatch(job["jobId"]) and job["runId"] == job["jobId"]
    assert {k: job[k] for k in ("success", "status", "step", "progress", "message", "scenesGenerated", "done",
                                "pollIntervalMs")} == {
        "success": True, "status": "queued", "step": "queued", "progress": 0,
        "message": "Classroom generation job queued", "scenesGenerated": 0, "done": False, "pollIntervalMs": 5000}
    assert job["pollUrl"] == f"{base}/api/generate-classroom/{job['jobId']}"
    assert "result" not in job and "error" not in job and "totalScenes" not in job

    final = await poll_until_done(client, job["pollUrl"])
    assert (final["status"], final["step"], final["progress"], final["done"]) == ("succeeded", "completed", 100, True)
    result = final["result"]
    assert result["url"] == f"{base}/classroom/{result['classroomId']}"
    assert result["scenesCount"] == final["totalScenes"] == final["scenesGenerated"] >= 4
    assert "warning" not in result and "error" not in final

    # result.url opens the classroom page (its owner's), which reads the classroom: every scene ready
    page = await client.get(result["url"])
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html"), page.text
    course = (await client.get(f"/api/classrooms/{result['classroomId']}")).json()["classroom"]
    assert len(course["scenes"]) == result["scenesCount"]
    assert_classroom_ready(course)

    # the material goes; deleting it again is the plain 404
    r = await client.delete(f"/api/materials/{material['materialId']}")
    assert (r.status_code, r.json()) == (200, {"materialId": material["materialId"], "deleted": True})
    r = await client.delete(f"/api/materials/{material['materialId']}")
    assert (r.status_code, r.text) == (404, "Not found")
    return final


async def test_the_skill_flow_in_single_user_mode(single_user, db_url):
    client, base = single_user
    final = await run_the_skill(client, base)
    assert "set-cookie" not in (await client.get(final["pollUrl"])).headers
    # another owner's job: the same JSON 404 as an unknown one
    async with open_database(db_url, max_size=2) as db:
        row, _ = await RunService(EventLog(db), default_config()).start("someone-else", RunInput(requirement="x"))
    theirs = await client.get(f"/api/generate-classroom/{row.id}")
    unknown = await client.get("/api/generate-classroom/run-AAAAAAAAAAAAAAAA")
    for r in (theirs, unknown):
        assert api_error(r, 404, "INVALID_REQUEST") == "Classroom generation job not found"
    assert theirs.content == unknown.content
    assert api_error(await client.get("/api/generate-classroom/not%20an%20id"), 400, "INVALID_REQUEST")


async def test_the_skill_flow_in_anonymous_mode_with_its_refusals(anonymous, db_url):
    client, base = anonymous
    r = await client.get("/api/health")
    assert "set-cookie" not in r.headers  # no owner is made for the health check
    final = await run_the_skill(client, base)

    # another owner (a second cookie jar) sees the job as unknown, and its classroom page as an unknown one's 404 page
    async with httpx.AsyncClient(base_url=base, trust_env=False, timeout=10) as stranger:
        r = await stranger.get(final["pollUrl"])
        assert api_error(r, 404, "INVALID_REQUEST") == "Classroom generation job not found"
        assert "set-cookie" in r.headers
        r = await stranger.get(final["result"]["url"])
        unknown = await stranger.get(f"{base}/classroom/c-nobody-has-this-one")
        assert r.status_code == unknown.status_code == 404 and r.text == unknown.text
        assert "Classroom not found" in r.text and r.headers["content-type"] == "text/html; charset=utf-8"

    async with open_database(db_url, max_size=2) as db:
        async def runs() -> int:
            return await db.fetchval("SELECT count(*) FROM streams WHERE kind = 'generation'")

        before = await runs()
        async with httpx.AsyncClient(base_url=base, trust_env=False, timeout=10) as fresh:
            # Every refusal resolves the owner first: even a 400 sets the cookie.
            r = await fresh.post("/api/generate-classroom", json={"materialIds": []})
            assert api_error(r, 400, "MISSING_REQUIRED_FIELD") == "Missing required field: requirement"
            assert "set-cookie" in r.headers
        for body, code, path in [
            ({"requirement": "   "}, "MISSING_REQUIRED_FIELD", "requirement"),
            ({"requirement": 5}, "INVALID_REQUEST", "requirement"),
            ({"requirement": "x", "pdfContent": "page one"}, "INVALID_REQUEST", "pdfContent"),
            ({"requirement": "x", "materialIds": "mat_1"}, "INVALID_REQUEST", "materialIds"),
            ({"requirement": "x", "materialIds": ["../etc"]}, "INVALID_REQUEST", "materialIds[0]"),
            ({"requirement": "x" * 20_001}, "INVALID_REQUEST", "requirement"),
        ]:
            r = await client.post("/api/generate-classroom", json=body)
            api_error(r, 400, code)
            assert r.json()["details"]["path"] == path, (body, r.text)
        assert "POST /api/materials" in api_error(
            await client.post("/api/generate-classroom", json={"requirement": "x", "pdfContent": "p"}), 400,
            "INVALID_REQUEST")
        api_error(await client.post("/api/generate-classroom", content=b"{nope",
                                    headers={"Content-Type": "application/json"}), 400, "INVALID_REQUEST")
        api_error(await client.post("/api/generate-classroom", content=b'{"requirement": "' + b"x" * 70_000 + b'"}',
                                    headers={"Content-Type": "application/json"}), 413, "INVALID_REQUEST")

        # Unavailable materials: unknown, deleted, another owner's: one answer.
        mine = (await upload(client, "a.md", b"alpha")).json()["materialId"]
        await client.delete(f"/api/materials/{mine}")
        async with httpx.AsyncClient(base_url=base, trust_env=False, timeout=10) as stranger:
            theirs = (await upload(stranger, "b.md", b"beta")).json()["materialId"]
        answers = set()
        for mid in (mine, theirs, "mat_00000000000000000000000000"):
            r = await client.post("/api/generate-classroom", json={"requirement": "x", "materialIds": [mid]})
            answers.add(api_error(r, 400, "INVALID_REQUEST"))
        assert answers == {"One or more materials are unavailable; upload them with POST /api/materials"}
        six = [(await upload(client, f"{i}.md", b"x")).json().get("materialId") for i in range(2)]
        r = await client.post("/api/generate-classroom", json={"requirement": "x", "materialIds": six * 3})
        assert r.status_code == 202, r.text  # duplicates count once: two materials
        assert await runs() == before + 1

        # The owner's active-run limit (1 here): the run just started is still in progress.
        r = await client.post("/api/generate-classroom", json={"requirement": "Volcanoes"})
        assert "in progress" in api_error(r, 429, "ACTIVE_RUN_LIMIT")
        assert await runs() == before + 1
        await poll_until_done(client, f"{base}/api/generate-classroom/{(await latest_run(db))}")


async def latest_run(db) -> str:
    return await db.fetchval("SELECT id FROM streams WHERE kind = 'generation' ORDER BY created_at DESC LIMIT 1")


async def test_material_uploads_are_refused_with_openmaic_statuses(anonymous):
    client, _ = anonymous
    r = await client.post("/api/materials", content=b"PK\x03\x04", headers={"Content-Type": "application/zip",
                                                                            "X-Material-Filename": "a.zip"})
    assert api_error(r, 415, "INVALID_REQUEST") == ("unsupported material mime type: application/zip; upload PDF, "
                                                    "plain text, Markdown or an image (PNG, JPEG, GIF, WebP)")
    api_error(await client.post("/api/materials", content=b"x" * 5000,
                                headers={"Content-Type": "text/plain", "X-Material-Filename": "big.txt"}),
              413, "INVALID_REQUEST")
    api_error(await client.post("/api/materials", content=b"",
                                headers={"Content-Type": "text/plain", "X-Material-Filename": "e.txt"}),
              400, "INVALID_REQUEST")
    api_error(await client.post("/api/materials", content=b"hi", headers={"Content-Type": "text/plain"}),
              400, "MISSING_REQUIRED_FIELD")
    # a browser's multipart upload
    r = await client.post("/api/materials", files={"file": ("../../x/notes.txt", b"hello", "text/plain")})
    assert r.status_code == 201 and r.json()["originalName"] == "notes.txt", r.text
    r = await client.post("/api/materials", content=b"# hi", headers={"Content-Type": "text/markdown",
                                                                      "X-Material-Filename": "%E7%AC%94%E8%AE%B0.md",
                                                                      "X-Request-Id": "req-7"})
    assert r.status_code == 201 and r.json()["originalName"] == "笔记.md" and r.headers["x-request-id"] == "req-7"
    # the quota (3 here)
    assert (await upload(client, "third.md", b"3")).status_code == 201
    assert "delete some" in api_error(await upload(client, "fourth.md", b"4"), 429, "INVALID_REQUEST")
    assert (await client.delete("/api/materials/mat_nope")).text == "Not found"
