"""OpenMAIC's browser persistence routes over real sockets against real `openmaic serve` processes with
PostgreSQL, replayed the way OpenMAIC 1.2's importer of a 1.1.x browser sends them (one cookie jar, every request
after the binding with ``X-OpenMAIC-Legacy-Import``): list the library and folders, look the course up, save it
whole, upload its media and write the references back scene by scene, file it. The course lands as this server's
course, and every step repeated changes nothing."""

from __future__ import annotations

import copy

import httpx
import msgspec
import trio

from openmaic.events.log import EventLog
from openmaic.owners.learners import learner_key
from openmaic.store.database import open_database
from tests.serving import FAST_CONFIG, anonymous_then_signed_in, running_server

BROWSER = "00112233445566778899aabbccddeeff"
BOUND = {"X-OpenMAIC-Legacy-Import": BROWSER}
JSON = {"Content-Type": "application/json"}
PNG = b"\x89PNG\r\n\x1a\n" + b"picture" * 40
MP3 = b"ID3" + b"narration" * 30
CONFIG = FAST_CONFIG + "limits: {upload_bytes: 60000}\n"


def document(doc_id: str = "stage-1", name: str = "Fractions") -> dict:
    """A course as OpenMAIC's document store holds it: a slide with a picture and narration, and a quiz."""
    return {
        "stage": {"id": doc_id, "name": name, "description": "Parts of a whole", "language": "en",
                  "createdAt": 1700000000000, "updatedAt": 1700000000000, "style": {"theme": "chalk"},
                  "generatedAgentConfigs": [
                      {"id": "gen-t", "name": "Ms. Frizzle", "role": "teacher", "persona": "Curious", "color": "#f00"},
                      {"id": "gen-s", "name": "Ada", "role": "student", "persona": "Asks why"}]},
        "scenes": [
            {"id": "s-quiz", "stageId": doc_id, "type": "quiz", "title": "Check", "order": 2,
             "content": {"type": "quiz", "questions": [
                 {"id": "q1", "type": "single", "question": "Which is larger?",
                  "options": [{"label": "1/2", "value": "A"}, {"label": "1/3", "value": "B"}], "answer": ["A"]}]}},
            {"id": "s-slide", "stageId": doc_id, "type": "slide", "title": "What is a fraction", "order": 1,
             "content": {"type": "slide", "canvas": {"id": "c1", "elements": [
                 {"id": "t1", "type": "text", "top": 10, "left": 0, "content": "<p>A part of a whole</p>"},
                 {"id": "img1", "type": "image", "top": 100, "left": 300, "src": "gen_img_1"}]}},
             "actions": [{"id": "a1", "type": "speech", "text": "Today: fractions.", "audioId": "tts_s1_a1"}]},
        ],
        "outline": {"requirement": "Teach fractions"},
    }


def multipart(data: bytes, media_type: str, meta: str = '{"contentType": "image/png"}') -> dict:
    return {"files": {"meta": ("metadata.json", meta, "application/json"), "bytes": ("asset", data, media_type)}}


async def event_count(db_url: str) -> int:
    async with open_database(db_url, max_size=1) as db:
        return await db.fetchval("SELECT count(*) FROM events")


ALICE_KEY = learner_key("alice")
SESSION = {"id": "chat-stage-1-1", "kind": "chat", "stageId": "stage-1", "learnerKey": ALICE_KEY, "status": "active",
           "createdAt": "2024-01-02T03:04:05.000Z", "updatedAt": "2024-01-02T03:04:05.000Z"}
RECORDS = [{"id": f"chat-stage-1-1-r{i}", "sessionId": "chat-stage-1-1", "createdAt": f"2024-01-02T03:0{i}:00.000Z",
            "payload": {"role": "user" if i % 2 else "assistant", "text": f"message {i}"}, "sceneId": "s-slide"}
           for i in (1, 2, 3)]
RUNTIME = "/api/persistence/runtime"


async def copy_runtime(c: httpx.AsyncClient, doc_id: str) -> None:
    """The importer's copy of a learner's runtime session: create it active, append what the server lacks, end
    it with the legacy session's status."""
    r = await c.get(f"{RUNTIME}/stages/{doc_id}/learners/{ALICE_KEY}/sessions", headers=BOUND)
    assert r.status_code == 200 and isinstance(r.json(), list), r.text
    r = await c.get(f"{RUNTIME}/sessions/{SESSION['id']}", headers=BOUND)
    if r.status_code == 404:
        assert r.json()["error"]["code"] == "SESSION_NOT_FOUND", r.text
        r = await c.post(f"{RUNTIME}/sessions", json=SESSION, headers=BOUND)
        assert r.status_code == 201 and r.json() == SESSION, r.text
        existing = r.json()
    else:
        existing = r.json()
    r = await c.get(f"{RUNTIME}/sessions/{SESSION['id']}/records", headers=BOUND)
    assert r.status_code == 200, r.text
    present = r.json()
    for record in RECORDS[len(present):]:
        if existing["status"] != "active":
            break
        r = await c.post(f"{RUNTIME}/sessions/{SESSION['id']}/records", json=record, headers=BOUND)
        assert r.status_code == 201, r.text
        assert r.json() == {**record, "seq": RECORDS.index(record) + 1}, r.text
    if existing["status"] != "completed":
        r = await c.patch(f"{RUNTIME}/sessions/{SESSION['id']}/status",
                          json={"status": "completed", "updatedAt": "2024-01-02T04:00:00.000Z"}, headers=BOUND)
        assert r.status_code == 204, r.text


async def import_course(c: httpx.AsyncClient, doc: dict) -> tuple[str, str]:
    """The importer's sequence for one course; returns the course id (here) and the folder's."""
    doc_id = doc["stage"]["id"]
    r = await c.post("/api/identity/legacy-import-binding", json={"browserId": BROWSER})
    assert r.status_code == 200 and r.json() == {"bound": True}, r.text
    r = await c.get("/api/persistence/learner-key", headers=BOUND)
    assert r.status_code == 200 and r.json() == {"learnerKey": ALICE_KEY}, r.text
    r = await c.get("/api/stages", headers=BOUND)
    assert r.status_code == 200, r.text
    owned = {s["id"]: s for s in r.json()["stages"]}
    r = await c.get("/api/folders", headers=BOUND)
    assert r.status_code == 200, r.text
    folder = next((f for f in r.json()["folders"] if f["name"] == "Maths"), None)
    if folder is None:
        r = await c.post("/api/folders", json={"name": "Maths"}, headers=BOUND)
        assert r.status_code == 201, r.text
        folder = r.json()["folder"]
    if doc_id not in owned:
        r = await c.get(f"/api/persistence/documents/{doc_id}", headers=BOUND)
        assert r.status_code == 404 and r.json()["error"]["code"] == "DOCUMENT_NOT_FOUND", r.text
        r = await c.put(f"/api/persistence/documents/{doc_id}", json=doc, headers=BOUND)
        assert r.status_code == 204, r.text
    r = await c.get(f"/api/persistence/documents/{doc_id}", headers=BOUND)
    assert r.status_code == 200, r.text
    stored = r.json()
    # Media: the bytes go to the pool, and each reference is written back into its scene.
    r = await c.post("/api/persistence/assets", headers=BOUND, **multipart(PNG, "image/png"))
    assert r.status_code == 201 and r.headers["x-asset-revision"], r.text
    picture = r.json()["id"]
    r = await c.post("/api/persistence/assets", headers=BOUND, **multipart(MP3, "audio/mpeg", "{}"))
    assert r.status_code == 201, r.text
    clip = r.json()["id"]
    r = await c.head(f"/api/persistence/assets/{picture}/content", headers=BOUND)
    assert r.status_code == 200 and r.headers["x-asset-revision"] and r.headers["content-type"] == "image/png"
    slide = copy.deepcopy(next(s for s in stored["scenes"] if s["id"] == "s-slide"))
    slide["content"]["canvas"]["elements"][1]["src"] = picture
    slide["actions"][0]["audioId"] = clip
    r = await c.put(f"/api/persistence/documents/{doc_id}/scenes/s-slide", json=slide, headers=BOUND)
    assert r.status_code == 204, r.text
    await copy_runtime(c, doc_id)
    r = await c.post("/api/folders/members", json={"stageId": doc_id, "folderId": folder["id"]}, headers=BOUND)
    assert r.status_code == 200, r.text
    r = await c.get("/api/stages", headers=BOUND)
    entry = next(s for s in r.json()["stages"] if s["id"] == doc_id)
    assert entry["folderId"] == folder["id"], entry
    return entry["courseId"], folder["id"]


async def test_the_importers_requests_land_a_course_once(db_url, tmp_path):
    async with running_server(db_url, tmp_path, CONFIG + "identity: {single_user_owner: alice}\n") as (c, _):
        doc = document()
        course, folder = await import_course(c, doc)
        assert course.startswith("course-")

        # The course is this server's: the classroom shows its scenes, its picture and its narration.
        r = await c.get(f"/api/classrooms/{course}")
        assert r.status_code == 200, r.text
        room = r.json()["classroom"]
        assert room["title"] == "Fractions"
        assert [(a["id"], a["name"], a["role"]) for a in room["agents"]] == [
            ("gen-t", "Ms. Frizzle", "teacher"), ("gen-s", "Ada", "classmate")], room["agents"]
        assert [s["title"] for s in room["scenes"]] == ["What is a fraction", "Check"]
        slide = room["scenes"][0]
        assert slide["content"]["slide"]["bullets"] == ["A part of a whole"]
        assert slide["content"]["slide"]["notes"] == "Today: fractions."
        (picture,) = slide["media"]
        assert (picture["elementId"], picture["status"]) == ("img1", "done")
        r = await c.get(f"/api/assets/{picture['assetId']}")
        assert (r.status_code, r.content) == (200, PNG)
        r = await c.get(f"/api/assets/{slide['narrationAssetId']}")
        assert (r.status_code, r.content) == (200, MP3)
        assert room["scenes"][1]["content"]["quiz"]["questions"][0]["options"] == ["1/2", "1/3"]
        r = await c.get(f"/classroom/{course}")
        assert r.status_code == 200

        # The learner's session reads back with its records in order and its final status.
        r = await c.get(f"{RUNTIME}/sessions/{SESSION['id']}")
        assert r.json() == {**SESSION, "status": "completed", "updatedAt": "2024-01-02T04:00:00.000Z"}, r.text
        r = await c.get(f"{RUNTIME}/sessions/{SESSION['id']}/records?sceneId=s-slide")
        assert [x["seq"] for x in r.json()] == [1, 2, 3] and r.json()[0]["payload"] == RECORDS[0]["payload"]
        r = await c.get(f"{RUNTIME}/stages/stage-1/learners/{ALICE_KEY}/sessions")
        assert [x["id"] for x in r.json()] == [SESSION["id"]]

        # What the client wrote reads back as it wrote it, fields this server does not know included.
        r = await c.get("/api/persistence/documents/stage-1")
        stored = r.json()
        assert stored["stage"] == doc["stage"] and stored["outline"] == doc["outline"]
        assert [s["id"] for s in stored["scenes"]] == ["s-slide", "s-quiz"]
        r = await c.get("/api/persistence/documents/stage-1/scenes/s-quiz")
        assert r.status_code == 200 and r.json() == doc["scenes"][0]
        r = await c.get(f"/api/persistence/assets/{picture['assetId']}/content")
        assert (r.status_code, r.content, r.headers["content-type"]) == (200, PNG, "image/png")
        assert "sandbox" in r.headers["content-security-policy"] and r.headers["x-content-type-options"] == "nosniff"

        # The library has its card once the projection caught up.
        with trio.fail_after(20):
            while not (cards := [x for x in (await c.get("/api/classrooms")).json()["classrooms"]
                                 if x["id"] == course]):
                await trio.sleep(0.1)
        assert (cards[0]["title"], cards[0]["scenesTotal"], cards[0]["label"]) == ("Fractions", 2, "ready"), cards

        # Everything again, as an importer retrying after a lost answer: nothing changes.
        before = await event_count(db_url)
        again, folder_again = await import_course(c, doc)
        assert (again, folder_again) == (course, folder)
        r = await c.put("/api/persistence/documents/stage-1", json=stored)
        assert r.status_code == 204
        r = await c.post(f"{RUNTIME}/sessions", json=SESSION, headers=BOUND)
        assert r.status_code == 200 and r.json()["status"] == "completed", r.text
        r = await c.post(f"{RUNTIME}/sessions/{SESSION['id']}/records", json=RECORDS[1], headers=BOUND)
        assert r.status_code == 200 and r.json()["seq"] == 2, r.text
        r = await c.patch(f"{RUNTIME}/sessions/{SESSION['id']}/status",
                          json={"status": "completed", "updatedAt": "2024-01-02T04:00:00.000Z"}, headers=BOUND)
        assert r.status_code == 204
        r = await c.post("/api/folders", json={"name": " maths "}, headers=BOUND)
        assert r.status_code == 409 and r.json()["error"]["code"] == "FOLDER_NAME_DUPLICATE", r.text
        assert await event_count(db_url) == before

        # A changed document is saved: its course follows.
        renamed = {**stored, "stage": {**stored["stage"], "name": "Fractions, again"}}
        r = await c.put("/api/persistence/documents/stage-1", json=renamed)
        assert r.status_code == 204
        assert (await c.get(f"/api/classrooms/{course}")).json()["classroom"]["title"] == "Fractions, again"
        r = await c.get("/api/stages")
        assert next(s for s in r.json()["stages"] if s["id"] == "stage-1")["name"] == "Fractions, again"

    async with open_database(db_url, max_size=1) as db:
        record = await EventLog(db).read_stream(f"legacy-import:{BROWSER}")
        assert [e.type for e in record] == ["legacy_import.bound", "legacy_import.stage_imported"]
        assert msgspec.json.decode(record[1].data)["course_id"] == course
        types = [e.type for e in await EventLog(db).read_stream(course)]
        assert types == ["course.created", "course.browser_document_set", "course.outline_set", "course.agents_set",
                         "course.browser_scene_set", "course.outline_set", "course.filed",
                         "course.browser_document_set", "course.outline_set"], types


async def test_another_owners_document_is_a_missing_one(db_url, tmp_path):
    async with running_server(db_url, tmp_path, CONFIG + "identity: {single_user_owner: alice}\n") as (alice, _):
        r = await alice.put("/api/persistence/documents/stage-1", json=document())
        assert r.status_code == 204, r.text
        r = await alice.post(f"{RUNTIME}/sessions", json={**SESSION, "id": "alice-session"})
        assert r.status_code == 201, r.text
        alice_course = (await alice.get("/api/stages")).json()["stages"][0]["courseId"]
        (tmp_path / "bob").mkdir()
        async with running_server(db_url, tmp_path / "bob", CONFIG + "identity: {single_user_owner: bob}\n") \
                as (bob, _):
            for path in ("/api/persistence/documents/stage-1", "/api/persistence/documents/stage-1/scenes/s-quiz",
                         "/api/persistence/documents/nothing-here"):
                r = await bob.get(path)
                assert r.status_code == 404 and r.json()["error"]["code"] == "DOCUMENT_NOT_FOUND", (path, r.text)
            r = await bob.put("/api/persistence/documents/stage-1/stage", json=document()["stage"])
            assert r.status_code == 404 and r.json()["error"]["code"] == "DOCUMENT_NOT_FOUND"
            r = await bob.post("/api/folders/members", json={"stageId": alice_course, "folderId": None})
            assert r.status_code == 404 and r.json()["error"]["code"] == "DOCUMENT_NOT_FOUND", r.text
            r = await bob.post("/api/folders/members", json={"stageId": "stage-1", "folderId": None})
            assert r.status_code == 404, r.text
            # Bob's own "stage-1" is his own course; alice's is untouched.
            r = await bob.put("/api/persistence/documents/stage-1", json=document(name="Bob's"))
            assert r.status_code == 204, r.text
            bob_course = (await bob.get("/api/stages")).json()["stages"][0]["courseId"]
            assert bob_course != alice_course
            r = await bob.post(f"{RUNTIME}/sessions", json={**SESSION, "learnerKey": learner_key("bob"), "stageId": alice_course})
            assert r.status_code == 404 and r.json()["error"]["code"] == "DOCUMENT_NOT_FOUND", r.text
            for path in (f"{RUNTIME}/sessions/alice-session", f"{RUNTIME}/sessions/alice-session/records"):
                r = await bob.get(path)
                assert r.status_code == 404 and r.json()["error"]["code"] == "SESSION_NOT_FOUND", r.text
            assert (await bob.get(f"{RUNTIME}/stages/stage-1/learners/{ALICE_KEY}/sessions")).json() == []
            r = await bob.get(f"/api/persistence/assets/{'asset_' + '0' * 32}/content")
            assert r.status_code == 404 and r.headers["x-error-code"] == "ASSET_NOT_FOUND"
        r = await alice.get("/api/persistence/documents/stage-1")
        assert r.json()["stage"]["name"] == "Fractions"


def _doc(**changes: object) -> dict:
    doc = document()
    doc.update(changes)
    return doc


def _scene(**changes: object) -> dict:
    return {**document()["scenes"][0], **changes}


UNBOUND = {"X-OpenMAIC-Legacy-Import": "f" * 32}
DOC = "/api/persistence/documents/stage-1"
BAD: list[tuple[str, str, dict, dict, int, str | None]] = [
    ("PUT", DOC, {"content": b'{"stage": '}, JSON, 400, "INVALID_REQUEST"),
    ("PUT", DOC, {"json": _doc(scenes="many")}, {}, 400, "INVALID_REQUEST"),
    ("PUT", DOC, {"json": {"scenes": []}}, {}, 400, "MISSING_REQUIRED_FIELD"),
    ("PUT", DOC, {"json": _doc(stage={**document()["stage"], "id": "other"})}, {}, 400, "INVALID_REQUEST"),
    ("PUT", DOC, {"json": _doc(scenes=[_scene(stageId="other")])}, {}, 400, "INVALID_REQUEST"),
    ("PUT", DOC, {"json": _doc(scenes=[_scene(order="1")])}, {}, 400, "INVALID_REQUEST"),
    ("PUT", DOC, {"json": _doc(scenes=[_scene(type="video")])}, {}, 400, "INVALID_REQUEST"),
    ("PUT", DOC, {"json": _doc(scenes=[_scene(), _scene()])}, {}, 400, "INVALID_REQUEST"),
    ("PUT", DOC, {"json": _doc(scenes=[_scene(id=5)])}, {}, 400, "INVALID_REQUEST"),
    ("PUT", DOC, {"json": _doc(outline="x" * 70_000)}, {}, 413, None),
    ("PUT", DOC, {"json": document()}, UNBOUND, 409, "LEGACY_IMPORT_NOT_BOUND"),
    ("PUT", DOC, {"json": document()}, {"X-OpenMAIC-Legacy-Import": "nope"}, 400, "INVALID_REQUEST"),
    ("PUT", "/api/persistence/documents/other/scenes/s-quiz", {"json": _scene(stageId="other")}, {}, 404,
     "DOCUMENT_NOT_FOUND"),
    ("PUT", DOC + "/scenes/s-other", {"json": _scene()}, {}, 400, "INVALID_REQUEST"),
    ("PUT", DOC + "/scenes/s-quiz", {"json": [1, 2]}, {}, 400, "INVALID_REQUEST"),
    ("PUT", "/api/persistence/documents/other/stage", {"json": {"id": "other"}}, {}, 404, "DOCUMENT_NOT_FOUND"),
    ("PUT", DOC + "/stage", {"json": {"id": "stage-1", "name": 7}}, {}, 400, "INVALID_REQUEST"),
    ("GET", "/api/persistence/learner-key", {}, UNBOUND, 409, "LEGACY_IMPORT_NOT_BOUND"),
    ("GET", "/api/stages", {}, UNBOUND, 409, "LEGACY_IMPORT_NOT_BOUND"),
    ("POST", "/api/persistence/assets", {"json": {"bytes": "AAAA"}}, {}, 415, "UNSUPPORTED_MEDIA_TYPE"),
    ("POST", "/api/persistence/assets", multipart(b"hello", "text/plain"), {}, 415, "UNSUPPORTED_MEDIA_TYPE"),
    ("POST", "/api/persistence/assets", {"files": {"meta": ("m.json", "{}", "application/json")}}, {}, 400,
     "MISSING_REQUIRED_FIELD"),
    ("POST", "/api/persistence/assets", multipart(PNG, "image/png", "[1]"), {}, 400, "INVALID_REQUEST"),
    ("POST", "/api/persistence/assets", multipart(PNG, "image/png", "{"), {}, 400, "INVALID_REQUEST"),
    ("POST", "/api/persistence/assets", multipart(b"x" * 70_000, "image/png"), {}, 413, None),
    ("POST", "/api/persistence/assets", multipart(b"x" * 5_000, "image/png"), {}, 507, "ASSET_QUOTA_EXCEEDED"),
    ("POST", "/api/persistence/assets", multipart(PNG, "image/png"), UNBOUND, 409, "LEGACY_IMPORT_NOT_BOUND"),
    ("POST", "/api/folders", {"json": {}}, {}, 400, "MISSING_REQUIRED_FIELD"),
    ("POST", "/api/folders", {"json": {"name": 5}}, {}, 400, "INVALID_REQUEST"),
    ("POST", "/api/folders", {"json": {"name": "  "}}, {}, 400, "FOLDER_NAME_EMPTY"),
    ("POST", "/api/folders", {"json": {"name": "n" * 101}}, {}, 400, "FOLDER_NAME_TOO_LONG"),
    ("POST", "/api/folders", {"json": {"name": "Maths"}}, UNBOUND, 409, "LEGACY_IMPORT_NOT_BOUND"),
    ("POST", "/api/folders/members", {"json": {"stageId": "stage-1", "folderId": "folder-nope"}}, {}, 404,
     "FOLDER_NOT_FOUND"),
    ("POST", "/api/folders/members", {"json": {"stageId": "nothing", "folderId": None}}, {}, 404,
     "DOCUMENT_NOT_FOUND"),
    ("POST", "/api/folders/members", {"json": {"stageId": 3, "folderId": None}}, {}, 400, "INVALID_REQUEST"),
    ("GET", "/api/persistence/documents/stage-1/scenes/nothing", {}, {}, 404, "SCENE_NOT_FOUND"),
    ("POST", RUNTIME + "/sessions", {"content": b"{"}, JSON, 400, "INVALID_REQUEST"),
    ("POST", RUNTIME + "/sessions", {"json": {**SESSION, "kind": 3}}, {}, 400, "INVALID_REQUEST"),
    ("POST", RUNTIME + "/sessions", {"json": {k: v for k, v in SESSION.items() if k != "stageId"}}, {}, 400,
     "MISSING_REQUIRED_FIELD"),
    ("POST", RUNTIME + "/sessions", {"json": {**SESSION, "id": "s3", "learnerKey": "mallory"}}, {}, 403,
     "LEARNER_KEY_MISMATCH"),
    ("POST", RUNTIME + "/sessions", {"json": {**SESSION, "id": "s2", "stageId": "nothing"}}, {}, 404,
     "DOCUMENT_NOT_FOUND"),
    ("POST", RUNTIME + "/sessions", {"json": {**SESSION, "status": "finished"}}, {}, 409, "SESSION_ALREADY_EXISTS"),
    ("POST", RUNTIME + "/sessions", {"json": SESSION}, UNBOUND, 409, "LEGACY_IMPORT_NOT_BOUND"),
    ("POST", RUNTIME + "/sessions/chat-stage-1-1/records", {"json": {**RECORDS[0], "payload": {"x": 1}}}, {}, 409,
     "RECORD_ALREADY_EXISTS"),
    ("POST", RUNTIME + "/sessions/chat-stage-1-1/records", {"json": {**RECORDS[1], "expectedLastSeq": None}}, {},
     409, "RUNTIME_APPEND_CONFLICT"),
    ("POST", RUNTIME + "/sessions/chat-stage-1-1/records", {"json": {**RECORDS[1], "sessionId": "other"}}, {}, 400,
     "INVALID_REQUEST"),
    ("POST", RUNTIME + "/sessions/chat-stage-1-1/records", {"json": {**RECORDS[1], "actionIndex": -1}}, {}, 400,
     "INVALID_REQUEST"),
    ("POST", RUNTIME + "/sessions/nothing/records", {"json": {**RECORDS[1], "sessionId": "nothing"}}, {}, 404,
     "SESSION_NOT_FOUND"),
    ("POST", RUNTIME + "/sessions/chat-stage-1-1/records", {"json": {**RECORDS[1], "payload": "x" * 30_000}}, {},
     413, None),
    ("PATCH", RUNTIME + "/sessions/chat-stage-1-1/status", {"json": {"status": "Done!", "updatedAt": "t"}}, {}, 400,
     "INVALID_REQUEST"),
    ("PATCH", RUNTIME + "/sessions/chat-stage-1-1/status",
     {"json": {"status": "completed", "updatedAt": "t", "expectedLastSeq": 7}}, {}, 409, "RUNTIME_APPEND_CONFLICT"),
    ("PATCH", RUNTIME + "/sessions/nothing/status", {"json": {"status": "completed", "updatedAt": "t"}}, {}, 404,
     "SESSION_NOT_FOUND"),
    ("GET", RUNTIME + "/sessions/nothing", {}, {}, 404, "SESSION_NOT_FOUND"),
    ("GET", "/api/persistence/assets/nothing/content", {}, {}, 404, "ASSET_NOT_FOUND"),
]


async def raw_request(port: int, method: str, path: str, kwargs: dict) -> tuple[int, bytes]:
    """Status and body of a request sent over a plain socket: for uploads the server may refuse before reading
    them (413, or a fence refused first), whose unsent rest an HTTP client would leave to the garbage collector."""
    request = httpx.Request(method, f"http://127.0.0.1:{port}{path}", **kwargs)
    head = f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n"
    head += "".join(f"{k}: {v}\r\n" for k, v in request.headers.items() if k.lower() not in ("host", "connection"))
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    async with stream:
        try:
            await stream.send_all(head.encode() + b"\r\n" + request.read())
        except trio.BrokenResourceError:
            pass  # the server answered and closed before the whole body was sent
        answer = b""
        with trio.fail_after(10):
            try:
                while chunk := await stream.receive_some(65536):
                    answer += chunk
            except trio.BrokenResourceError:
                pass  # reset after the answer, for the body it did not read
    headers, _, body = answer.partition(b"\r\n\r\n")
    return int(headers.split(b" ", 2)[1]), body


async def test_bad_persistence_requests_are_refused_and_change_nothing(db_url, tmp_path):
    config = CONFIG.replace("upload_bytes: 60000",
                            "upload_bytes: 60000, json_body_bytes: 20000, asset_bytes_per_owner: 1000")
    async with running_server(db_url, tmp_path, config + "identity: {single_user_owner: alice}\n") as (c, port):
        assert (await c.put(DOC, json=document())).status_code == 204
        r = await c.post("/api/identity/legacy-import-binding", json={"browserId": BROWSER})
        assert r.status_code == 200
        assert (await c.post(f"{RUNTIME}/sessions", json=SESSION)).status_code == 201
        assert (await c.post(f"{RUNTIME}/sessions/{SESSION['id']}/records", json=RECORDS[0])).status_code == 201
        for method, path, kwargs, headers, status, code in BAD:
            before = await event_count(db_url)
            async with open_database(db_url, max_size=1) as db:
                assets = await db.fetchval("SELECT count(*) FROM assets")
            if status == 413 or "files" in kwargs:
                got, body = await raw_request(port, method, path, {"headers": headers, **kwargs})
            else:
                r = await c.request(method, path, headers=headers, **kwargs)
                got, body = r.status_code, r.content
            assert got == status, (method, path, headers, body)
            if code is not None:
                assert msgspec.json.decode(body)["error"]["code"] == code, (method, path, body)
            assert await event_count(db_url) == before, (method, path)
            async with open_database(db_url, max_size=1) as db:
                assert await db.fetchval("SELECT count(*) FROM assets") == assets, (method, path)
        assert (await c.get(DOC)).json() == {**document(), "scenes": document()["scenes"][::-1]}


async def test_concurrent_writes_of_one_owner_make_one_course_and_lose_no_scene(db_url, tmp_path):
    """Two tabs (or a retried importer) at once: identical saves make one course; scenes saved side by side all
    land, each once."""
    async with running_server(db_url, tmp_path, CONFIG + "identity: {single_user_owner: alice}\n") as (c, _):
        statuses: list[int] = []

        async def save(path: str, body: dict) -> None:
            statuses.append((await c.put(path, json=body)).status_code)

        async with trio.open_nursery() as nursery:
            for _ in range(6):
                nursery.start_soon(save, DOC, document())
        assert statuses == [204] * 6
        assert await event_count(db_url) == 4  # course.created, .browser_document_set, .outline_set, .agents_set
        statuses.clear()
        scenes = [_scene(id=f"s-{i}", title=f"Scene {i}", order=10 + i) for i in range(8)]
        async with trio.open_nursery() as nursery:
            for scene in scenes + scenes:
                nursery.start_soon(save, f"{DOC}/scenes/{scene['id']}", scene)
        assert statuses == [204] * 16
        stored = (await c.get(DOC)).json()
        assert [s["id"] for s in stored["scenes"]] == ["s-slide", "s-quiz", *(s["id"] for s in scenes)]
        course = (await c.get("/api/stages")).json()["stages"][0]["courseId"]
        room = (await c.get(f"/api/classrooms/{course}")).json()["classroom"]
        assert [s["title"] for s in room["scenes"]][2:] == [s["title"] for s in scenes]
        assert await event_count(db_url) == 4 + 2 * len(scenes)  # each scene once: its own write and the course


async def test_an_anonymous_owners_documents_sessions_and_folders_move_with_a_claim(db_url, tmp_path):
    async with anonymous_then_signed_in(db_url, tmp_path, CONFIG) as (_, anon, user):
        async with httpx.AsyncClient(trust_env=False, timeout=15) as browser:
            r = await browser.post(f"{anon}/api/identity/legacy-import-binding", json={"browserId": BROWSER})
            assert r.status_code == 200, r.text
            key = (await browser.get(f"{anon}/api/persistence/learner-key", headers=BOUND)).json()["learnerKey"]
            assert key.startswith("learner-")
            assert (await browser.put(f"{anon}{DOC}", json=document(), headers=BOUND)).status_code == 204
            r = await browser.post(f"{anon}{RUNTIME}/sessions", json={**SESSION, "learnerKey": key}, headers=BOUND)
            assert r.status_code == 201, r.text
            folder = (await browser.post(f"{anon}/api/folders", json={"name": "Maths"}, headers=BOUND)).json()
            r = await browser.post(f"{anon}/api/folders/members", headers=BOUND,
                                   json={"stageId": "stage-1", "folderId": folder["folder"]["id"]})
            assert r.status_code == 200, r.text
            # Before the claim the account holds none of it (and may not use the browser's binding).
            assert (await browser.get(f"{user}{DOC}")).status_code == 404
            assert (await browser.get(f"{user}{DOC}", headers=BOUND)).status_code == 409
            r = await browser.post(f"{user}/api/identity/claim", headers=JSON)
            assert r.status_code == 200 and r.json()["status"] == "claimed", r.text
            before = await event_count(db_url)
            # The account goes on where the anonymous visitor left off: the same ids, nothing written twice.
            assert (await browser.get(f"{user}{DOC}", headers=BOUND)).json()["stage"]["name"] == "Fractions"
            assert (await browser.put(f"{user}{DOC}", json=document(), headers=BOUND)).status_code == 204
            (stage,) = (await browser.get(f"{user}/api/stages", headers=BOUND)).json()["stages"]
            assert (stage["id"], stage["folderId"]) == ("stage-1", folder["folder"]["id"])
            r = await browser.get(f"{user}{RUNTIME}/sessions/{SESSION['id']}", headers=BOUND)
            assert r.status_code == 200 and r.json()["learnerKey"] == key, r.text
            # The account's learner key finds the sessions filed under the claimed visitor's.
            r = await browser.get(f"{user}/api/persistence/learner-key", headers=BOUND)
            assert r.json() == {"learnerKey": ALICE_KEY}
            r = await browser.get(f"{user}{RUNTIME}/stages/stage-1/learners/{ALICE_KEY}/sessions", headers=BOUND)
            assert [x["id"] for x in r.json()] == [SESSION["id"]], r.text
            r = await browser.get(f"{user}/api/folders", headers=BOUND)
            assert [f["name"] for f in r.json()["folders"]] == ["Maths"]
            assert (await browser.get(f"{user}/api/classrooms/{stage['courseId']}")).status_code == 200
            assert await event_count(db_url) == before
    async with open_database(db_url, max_size=1) as db:
        for table in ("browser_documents", "runtime_sessions", "library_folders"):
            assert {r["owner_id"] for r in await db.fetch(f"SELECT owner_id FROM {table}")} == {"alice"}, table


# Every route OpenMAIC's importer reaches with its fenced clients (its FENCED_ENDPOINTS list), with the body it
# sends: an unbound browser id is refused on each before anything is read or written.
FENCED = [
    ("GET", "/api/persistence/learner-key", {}),
    ("GET", DOC, {}),
    ("PUT", DOC, {"json": document()}),
    ("PUT", DOC + "/stage", {"json": document()["stage"]}),
    ("PUT", DOC + "/scenes/s-quiz", {"json": document()["scenes"][0]}),
    ("POST", "/api/persistence/assets", multipart(PNG, "image/png")),
    ("HEAD", "/api/persistence/assets/asset_00000000000000000000000000000000/content", {}),
    ("GET", "/api/persistence/assets/asset_00000000000000000000000000000000/content", {}),
    ("POST", RUNTIME + "/sessions", {"json": SESSION}),
    ("GET", RUNTIME + "/sessions/chat-stage-1-1", {}),
    ("POST", RUNTIME + "/sessions/chat-stage-1-1/records", {"json": RECORDS[0]}),
    ("GET", RUNTIME + "/sessions/chat-stage-1-1/records", {}),
    ("GET", RUNTIME + f"/stages/stage-1/learners/{ALICE_KEY}/sessions", {}),
    ("PATCH", RUNTIME + "/sessions/chat-stage-1-1/status", {"json": {"status": "completed", "updatedAt": "t"}}),
    ("GET", "/api/stages", {}),
    ("GET", "/api/folders", {}),
    ("POST", "/api/folders", {"json": {"name": "Maths"}}),
    ("POST", "/api/folders/members", {"json": {"stageId": "stage-1", "folderId": None}}),
]


async def test_every_route_the_importer_reaches_refuses_an_unbound_browser(db_url, tmp_path):
    async with running_server(db_url, tmp_path, CONFIG + "identity: {single_user_owner: alice}\n") as (c, port):
        assert (await c.put(DOC, json=document())).status_code == 204
        assert (await c.post(f"{RUNTIME}/sessions", json=SESSION)).status_code == 201
        before = await event_count(db_url)
        for method, path, kwargs in FENCED:
            if "files" in kwargs:  # refused before the upload is read
                status, body = await raw_request(port, method, path, {"headers": UNBOUND, **kwargs})
            else:
                r = await c.request(method, path, headers=UNBOUND, **kwargs)
                status, body = r.status_code, r.content
            assert status == 409, (method, path, body)
            if method != "HEAD":
                assert msgspec.json.decode(body)["error"]["code"] == "LEGACY_IMPORT_NOT_BOUND", (method, path, body)
        assert await event_count(db_url) == before
