"""The one-way import of a 1.1.x browser's data, over real sockets against real `openmaic serve` processes with
PostgreSQL, the way the browser's importer does it: bind the browser, then send each import with
``X-OpenMAIC-Legacy-Import``. Every import is repeated and must change nothing the second time."""

from __future__ import annotations

import base64

import httpx
import msgspec

from openmaic.courses import format as fmt
from openmaic.browser_import.service import binding_stream
from openmaic.events.log import EventLog
from openmaic.store.database import open_database
from tests.serving import FAST_CONFIG, anonymous_then_signed_in, running_server

BROWSER = "0123456789abcdef0123456789abcdef"
JSON = {"Content-Type": "application/json"}
BOUND = {"X-OpenMAIC-Legacy-Import": BROWSER}
PNG = b"\x89PNG\r\n\x1a\n" + b"picture-bytes" * 10
MP3 = b"ID3" + b"narration" * 10
SMALL = FAST_CONFIG + "limits: {upload_bytes: 20000}\n"


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def stage_body(name: str = "Fractions", quiz_question: str = "Which is larger?") -> dict:
    """A stage as a 1.1.x browser kept it: a slide with a picture, a quiz, an interactive page, a project."""
    return {
        "stage": {"id": "stage-1", "name": name, "description": "Parts of a whole", "languageDirective": "en",
                  "createdAt": 1700000000000, "updatedAt": 1700000000000, "agentIds": ["default-1"]},
        "scenes": [
            {"id": "s-quiz", "type": "quiz", "title": "Check", "order": 2, "content": {"type": "quiz", "questions": [
                {"id": "q1", "type": "single", "question": f"<p>{quiz_question}</p>",
                 "options": [{"label": "1/2", "value": "A"}, {"label": "1/3", "value": "B"}], "answer": ["A"],
                 "analysis": "Halves are bigger"},
                {"id": "q2", "type": "short_answer", "question": "Why?"}]}},
            {"id": "s-slide", "type": "slide", "title": "What is a fraction", "order": 1, "content": {
                "type": "slide", "canvas": {"id": "c1", "elements": [
                    {"id": "t2", "type": "text", "top": 200, "left": 0, "content": "<p>A part of a whole</p>"},
                    {"id": "t1", "type": "text", "top": 10, "left": 0, "content": "<p>What is a fraction</p>"},
                    {"id": "img1", "type": "image", "top": 100, "left": 300, "src": "gen_img_1"},
                    {"id": "img2", "type": "image", "top": 100, "left": 500, "src": "gen_img_2"}]}},
             "actions": [{"id": "a1", "type": "speech", "text": "Today: fractions.", "audioId": "tts_1"},
                         {"id": "a2", "type": "spotlight", "elementId": "t1"}]},
            {"id": "s-page", "type": "interactive", "title": "Try it", "order": 3,
             "content": {"type": "interactive", "url": "", "html": "<html><body>Slice the pizza</body></html>"}},
            {"id": "s-pbl", "type": "pbl", "title": "Project", "order": 4,
             "content": {"type": "pbl", "projectConfig": {"title": "Bake a pie", "description": "Share it fairly"}}},
        ],
        "media": [
            {"id": "stage-1:gen_img_1", "type": "image", "mimeType": "image/png", "data": b64(PNG), "prompt": "a pie"},
            {"id": "stage-1:gen_img_2", "type": "image", "mimeType": "image/png", "data": "", "error": "failed"},
        ],
        "audio": [{"id": "tts_1", "format": "mp3", "data": b64(MP3)}],
    }


async def state(db_url: str, course_id: str | None = None) -> tuple:
    """What an import can change: the log's length, the assets, the agents, the model settings."""
    async with open_database(db_url, max_size=2) as db:
        return (
            await db.fetchval("SELECT count(*) FROM events"),
            await db.fetchval("SELECT count(*) FROM assets"),
            await db.fetchval("SELECT count(*) FROM agents"),
            await db.fetchval("SELECT coalesce(max(revision), 0) FROM model_settings"),
        )


async def test_a_browser_imports_its_courses_agents_and_settings_once(db_url, tmp_path):
    async with running_server(db_url, tmp_path, SMALL + "identity: {single_user_owner: alice}\n") as (alice, port):
        r = await alice.post("/api/identity/legacy-import-binding", json={"browserId": BROWSER})
        assert r.status_code == 200 and r.json() == {"bound": True}, r.text
        r = await alice.post("/api/identity/legacy-import-binding", json={"browserId": BROWSER})
        assert r.status_code == 200 and r.json() == {"bound": True}  # binding again changes nothing

        # A course with its scenes and media.
        r = await alice.post("/api/legacy-import/stages", json=stage_body(), headers=BOUND)
        assert r.status_code == 201, r.text
        done = r.json()
        assert done["imported"] is True and done["scenes"] == 4 and done["assets"] == 2, done
        assert done["dropped"] == {"missingMedia": 1}, done  # the one picture the browser failed to make
        course = done["courseId"]
        r = await alice.get(f"/api/classrooms/{course}")
        assert r.status_code == 200, r.text
        room = r.json()["classroom"]
        # The stage and its scenes as the browser kept them, in OpenMAIC's course document: nothing translated away.
        assert room["stage"]["name"] == "Fractions" and room["stage"]["id"] == "stage-1"
        assert fmt.validate_document({"stage": room["stage"], "scenes": room["scenes"]}) == []
        scenes = room["scenes"]
        assert [s["title"] for s in scenes] == ["What is a fraction", "Check", "Try it", "Project"]
        assert [s["type"] for s in scenes] == ["slide", "quiz", "interactive", "pbl"] and not room["pendingScenes"]
        texts = [e["content"] for e in scenes[0]["content"]["canvas"]["elements"] if e["type"] == "text"]
        assert texts == ["<p>A part of a whole</p>", "<p>What is a fraction</p>"]
        quiz = scenes[1]["content"]["questions"]
        assert [(q["type"], q.get("answer")) for q in quiz] == [("single", ["A"]), ("short_answer", None)]
        assert "Slice the pizza" in scenes[2]["content"]["html"]
        assert scenes[3]["content"]["projectConfig"] == {"title": "Bake a pie", "description": "Share it fairly"}
        # The pictures the browser kept, and its narration, are served as the course's own media.
        picture, missing = [e for e in scenes[0]["content"]["canvas"]["elements"] if e["type"] == "image"]
        assert (picture["id"], missing["id"], missing["src"]) == ("img1", "img2", "gen_img_2")
        r = await alice.get(picture["src"])
        assert (r.status_code, r.content, r.headers["content-type"]) == (200, PNG, "image/png"), r.text
        (speech,) = [a for a in scenes[0]["actions"] if a["type"] == "speech"]
        r = await alice.get(f"/api/assets/{speech['audioId']}")
        assert (r.status_code, r.content) == (200, MP3)

        # Agents, through the registry's import with the binding: custom ones imported, built-ins skipped.
        agents = {"agents": [{"id": "custom-1", "name": "Ms. Frizzle", "role": "teacher", "persona": "Curious"},
                             {"id": "custom-2", "name": "Ada", "role": "student"},
                             {"id": "default-1", "name": "Built in", "role": "teacher"}]}
        r = await alice.post("/api/agents/import", json=agents, headers=BOUND)
        assert r.status_code == 200, r.text
        assert r.json() == {"imported": 2, "skipped": [{"id": "default-1", "reason": "built-in"}]}, r.text
        listed = {a["id"]: a["name"] for a in (await alice.get("/api/agents")).json()["agents"]}
        assert listed["custom-1"] == "Ms. Frizzle" and listed["custom-2"] == "Ada"

        # Model settings, through the Models page's import with the binding.
        settings = {"providers": {"mine": {"preset": "openai-compatible", "baseUrl": "https://llm.example.org/v1",
                                           "apiKey": "sk-browser-key-123456", "models": ["m1"]}},
                    "slots": {"course.outline": "mine:m1"}}
        r = await alice.post("/api/model-config/import", json=settings, headers=BOUND)
        assert r.status_code == 200, r.text
        assert {(i["kind"], i["id"]) for i in r.json()["imported"]} == {("provider", "mine"), ("slot", "course.outline")}

        # Every import again, as the importer retrying: nothing changes, and the answers say so.
        before = await state(db_url)
        r = await alice.post("/api/legacy-import/stages", json=stage_body(), headers=BOUND)
        assert r.status_code == 200 and r.json() == {**done, "imported": False}, r.text
        # Even a browser that changed the stage since does not update the imported course: the import is once.
        r = await alice.post("/api/legacy-import/stages", json=stage_body("Renamed", "Changed?"), headers=BOUND)
        assert r.status_code == 200 and r.json()["imported"] is False and r.json()["courseId"] == course
        r = await alice.post("/api/agents/import", json=agents, headers=BOUND)
        assert r.json()["imported"] == 0 and {s["reason"] for s in r.json()["skipped"]} == {"exists", "built-in"}
        r = await alice.post("/api/model-config/import", json=settings, headers=BOUND)
        assert r.status_code == 200 and r.json()["imported"] == []
        assert await state(db_url) == before
        assert (await alice.get(f"/api/classrooms/{course}")).json()["classroom"]["stage"]["name"] == "Fractions"

        # Owner-checked: another owner's server sees none of it and cannot import with alice's browser id.
        (tmp_path / "bob").mkdir()
        async with running_server(db_url, tmp_path / "bob", SMALL + "identity: {single_user_owner: bob}\n") \
                as (bob, _):
            r = await bob.get(f"/api/classrooms/{course}")
            assert (r.status_code, r.text) == (404, "Not found")
            r = await bob.post("/api/legacy-import/stages", json=stage_body(), headers=BOUND)
            assert r.status_code == 409 and r.json()["error"]["code"] == "LEGACY_IMPORT_NOT_BOUND", r.text
            r = await bob.post("/api/model-config/import", json=settings, headers=BOUND)
            assert r.status_code == 409 and r.json()["error"]["code"] == "LEGACY_IMPORT_NOT_BOUND", r.text
            r = await bob.post("/api/agents/import", json=agents, headers=BOUND)
            assert r.status_code == 409 and r.json()["error"]["code"] == "LEGACY_IMPORT_NOT_BOUND", r.text
            r = await bob.post("/api/identity/legacy-import-binding", json={"browserId": BROWSER})
            assert r.status_code == 409 and r.json()["error"]["code"] == "LEGACY_IMPORT_BOUND_ELSEWHERE", r.text
        assert await state(db_url) == before

    # Recorded as events: the binding's stream says what came from the browser, and the course's own stream holds
    # the course.
    async with open_database(db_url, max_size=2) as db:
        log = EventLog(db)
        record = await log.read_stream(binding_stream(BROWSER))
        assert [e.type for e in record] == ["legacy_import.bound", "legacy_import.stage_imported",
                                            "legacy_import.agents_imported", "legacy_import.settings_imported"]
        assert "sk-browser-key" not in b"".join(e.data for e in record).decode()
        assert (await log.stream_row(binding_stream(BROWSER))).owner_id == "alice"
        assert [e.type for e in await log.read_stream(course)] == ["course.created", "course.document_set"]
        rows = {(r["owner_id"], r["kind"], r["course_id"]) for r in await db.fetch("SELECT * FROM assets")}
        assert rows == {("alice", "image", course), ("alice", "narration", course)}
        media = msgspec.json.decode(record[1].data)["assets"]
        assert sorted(bytes(r["data"]) for r in await db.fetch(
            "SELECT data FROM assets WHERE id = ANY($1::text[])", media)) == sorted([PNG, MP3])


BAD = [
    ("/api/legacy-import/stages", stage_body(), {}, 409, "LEGACY_IMPORT_NOT_BOUND"),
    ("/api/legacy-import/stages", stage_body(), {"X-OpenMAIC-Legacy-Import": "f" * 32}, 409,
     "LEGACY_IMPORT_NOT_BOUND"),
    ("/api/legacy-import/stages", stage_body(), {"X-OpenMAIC-Legacy-Import": "not-a-browser"}, 400,
     "INVALID_REQUEST"),
    ("/api/legacy-import/stages", {"scenes": []}, BOUND, 400, "MISSING_REQUIRED_FIELD"),
    ("/api/legacy-import/stages", {**stage_body(), "scenes": "many"}, BOUND, 400, "INVALID_REQUEST"),
    ("/api/legacy-import/stages", {**stage_body(), "media": [{"id": "m", "type": "image", "data": "%%%"}]},
     BOUND, 400, "INVALID_REQUEST"),
    ("/api/legacy-import/stages", {**stage_body(), "scenes": [{"id": "x", "type": "video"}]}, BOUND, 400,
     "INVALID_REQUEST"),
    ("/api/legacy-import/stages", {**stage_body(), "media": [{"id": "big", "type": "image",
                                                              "data": b64(b"x" * 20_000)}]}, BOUND, 413, None),
    ("/api/agents/import", {"agents": [{"id": "a", "name": "A", "role": "student"}]},
     {"X-OpenMAIC-Legacy-Import": "f" * 32}, 409, "LEGACY_IMPORT_NOT_BOUND"),
    ("/api/model-config/import", {"slots": {"course.outline": "demo:course"}},
     {"X-OpenMAIC-Legacy-Import": "F" * 32}, 400, "INVALID_REQUEST"),
    ("/api/identity/legacy-import-binding", {"browserId": "ABCDEF0123456789ABCDEF0123456789"}, {}, 400,
     "INVALID_REQUEST"),
    ("/api/identity/legacy-import-binding", {}, {}, 400, "MISSING_REQUIRED_FIELD"),
    ("/api/legacy-import/stages", stage_body(), BOUND, 507, "ASSET_QUOTA_EXCEEDED"),
    ("/api/identity/legacy-import-binding", {"browserId": BROWSER}, {"Origin": "http://evil.example"}, 403,
     "CROSS_ORIGIN_REFUSED"),
]


async def test_bad_import_requests_are_refused_and_store_nothing(db_url, tmp_path):
    config = SMALL.replace("upload_bytes: 20000", "upload_bytes: 20000, asset_bytes_per_owner: 150")
    async with running_server(db_url, tmp_path, config + "identity: {single_user_owner: alice}\n") as (alice, _):
        # Refusals of the binding first (it does not exist yet), then of imports of a bound browser.
        for path, body, headers, status, code in sorted(BAD, key=lambda c: "binding" not in c[0]):
            if "binding" not in path:
                assert (await alice.post("/api/identity/legacy-import-binding",
                                         json={"browserId": BROWSER})).status_code == 200
            before = await state(db_url)
            r = await alice.post(path, content=msgspec.json.encode(body), headers={**JSON, **headers})
            assert r.status_code == status, (path, headers, r.text)
            if code is not None:
                assert r.json()["error"]["code"] == code, (path, headers, r.text)
            assert await state(db_url) == before, (path, headers)
            r = await alice.post(path, content=b'{"stage": ', headers={**JSON, **BOUND})
            assert r.status_code == 400, (path, r.text)


async def test_a_browser_bound_anonymously_goes_on_importing_as_the_account_after_a_claim(db_url, tmp_path):
    async with anonymous_then_signed_in(db_url, tmp_path) as (_, anon_url, user_url):
        async with httpx.AsyncClient(trust_env=False, timeout=15) as browser:
            r = await browser.post(f"{anon_url}/api/identity/legacy-import-binding", json={"browserId": BROWSER})
            assert r.status_code == 200, r.text
            r = await browser.post(f"{anon_url}/api/legacy-import/stages", json=stage_body(), headers=BOUND)
            assert r.status_code == 201, r.text
            course = r.json()["courseId"]
            # Alice has not bound this browser: her imports are refused until the claim moves the binding.
            r = await browser.post(f"{user_url}/api/agents/import", headers=BOUND,
                                   json={"agents": [{"id": "c1", "name": "Ada", "role": "student"}]})
            assert r.status_code == 409 and r.json()["error"]["code"] == "LEGACY_IMPORT_NOT_BOUND", r.text
            r = await browser.post(f"{user_url}/api/identity/claim", headers=JSON)
            assert r.status_code == 200 and r.json()["status"] == "claimed", r.text
            r = await browser.post(f"{user_url}/api/legacy-import/stages", json=stage_body(), headers=BOUND)
            assert r.status_code == 200 and r.json() == {**r.json(), "courseId": course, "imported": False}, r.text
            r = await browser.post(f"{user_url}/api/agents/import", headers=BOUND,
                                   json={"agents": [{"id": "c1", "name": "Ada", "role": "student"}]})
            assert r.status_code == 200 and r.json()["imported"] == 1, r.text
            assert (await browser.get(f"{user_url}/api/classrooms/{course}")).status_code == 200
    async with open_database(db_url, max_size=2) as db:
        log = EventLog(db)
        assert (await log.stream_row(binding_stream(BROWSER))).owner_id == "alice"
        types = [e.type for e in await log.read_stream(binding_stream(BROWSER))]
        assert types == ["legacy_import.bound", "legacy_import.stage_imported", "stream.owner_changed",
                         "legacy_import.agents_imported"]
        assert {r["owner_id"] for r in await db.fetch("SELECT owner_id FROM assets")} == {"alice"}
        assert await db.fetchval("SELECT count(*) FROM assets WHERE owner_id LIKE 'anon:%'") == 0
