"""OpenMAIC's document contract (``@openmaic/storage`` ``test/document-contract.ts`` and ``http-document-store``)
ported case by case, over real sockets against `openmaic serve`: each test is named after the clause it checks.

The stale-, future- and corrupt-stamp cases seed the stored version as OpenMAIC's suite does (``seedStoredVersion``,
after a save), here by appending to the document's course stream through the event log what another server would
have stored: an earlier one stored a save unstamped (``course.browser_document_set``, the client's JSON without its
stamp); a newer one, or a writer that corrupted it, stores a ``course.document_set`` whose document carries its
own stamp. The server under test reads that stream as any other."""

from __future__ import annotations

import math

import msgspec
import pytest

from openmaic.courses import format as fmt
from openmaic.courses.events import BrowserDocumentSet, CourseDocumentSet
from openmaic.courses.format import DSL_VERSION
from openmaic.events.log import EventLog, StreamAppend
from openmaic.owners.learners import learner_key
from openmaic.store.database import open_database
from tests.integration.storage_harness import storage_server_fixture

storage_server = storage_server_fixture()
small_server = storage_server_fixture("limits: {document_bytes_per_owner: 1800}\n", name="small_server")


THEME = {"backgroundColor": "#ffffff", "themeColors": ["#5b9bd5"], "fontColor": "#333333", "fontName": "Arial"}


def slide_scene(stage_id: str, id: str, order: float, title: str | None = None) -> dict:
    """A valid slide scene. OpenMAIC's suite uses a bare canvas (the DSL's ``validateScene`` checks only that it is
    an object); this server runs the app's stricter gate (``validateAppScene``), so the canvas is a whole one."""
    canvas = {"id": f"canvas-{id}", "viewportSize": 1000, "viewportRatio": 0.5625, "theme": THEME, "elements": []}
    return {"id": id, "stageId": stage_id, "title": title or id, "order": order, "type": "slide",
            "content": {"type": "slide", "canvas": canvas}}


def quiz_scene(stage_id: str, id: str, order: float, title: str | None = None) -> dict:
    return {"id": id, "stageId": stage_id, "title": title or id, "order": order, "type": "quiz",
            "content": {"type": "quiz", "questions": [{"id": f"q-{id}", "type": "single", "question": "Q?"}]}}


def make_document(stage_id: str = "stage-1") -> dict:
    return {"stage": {"id": stage_id, "name": "Intro Course", "createdAt": 1000, "updatedAt": 2000},
            "scenes": [slide_scene(stage_id, "scene-a", 0), quiz_scene(stage_id, "scene-b", 1)],
            "outline": {"entries": [{"id": "o1", "title": "Intro"}], "generationComplete": True}}


async def save(c, doc: dict, status: int = 204):
    r = await c.put(f"/documents/{doc['stage']['id']}", json=doc)
    assert r.status_code == status, r.text
    return r


async def load(c, stage_id: str) -> dict | None:
    r = await c.get(f"/documents/{stage_id}")
    if r.status_code == 404:
        assert r.json()["error"]["code"] == "DOCUMENT_NOT_FOUND", r.text
        return None
    assert r.status_code == 200, r.text
    return r.json()


async def get_scene(c, stage_id: str, scene_id: str) -> dict | None:
    r = await c.get(f"/documents/{stage_id}/scenes/{scene_id}")
    if r.status_code == 404:
        assert r.json()["error"]["code"] in ("DOCUMENT_NOT_FOUND", "SCENE_NOT_FOUND"), r.text
        return None
    assert r.status_code == 200, r.text
    return r.json()


def refused(r, status: int = 400, code: str = "VALIDATION_FAILED") -> dict:
    assert r.status_code == status, r.text
    body = r.json()
    assert set(body) == {"error"} and body["error"]["code"] == code, body
    return body["error"]


async def test_round_trips_a_full_document_stage_scenes_outline(storage_server):
    async with storage_server.visitor() as c:
        doc = make_document()
        await save(c, doc)
        loaded = await load(c, "stage-1")
        assert loaded is not None
        assert {k: loaded["stage"][k] for k in doc["stage"]} == doc["stage"]
        assert [s["id"] for s in loaded["scenes"]] == ["scene-a", "scene-b"]
        assert loaded["outline"] == doc["outline"]


async def test_load_document_returns_null_for_an_unknown_stage(storage_server):
    async with storage_server.visitor() as c:
        r = await c.get("/documents/nope")
        error = refused(r, 404, "DOCUMENT_NOT_FOUND")
        assert 'missing document "nope"' in error["message"]


async def test_scenes_come_back_sorted_by_order_regardless_of_input_order(storage_server):
    async with storage_server.visitor() as c:
        doc = make_document("stage-x")
        doc["scenes"] = [slide_scene("stage-x", "third", 2), slide_scene("stage-x", "first", 0),
                         slide_scene("stage-x", "second", 1)]
        await save(c, doc)
        assert [s["id"] for s in (await load(c, "stage-x"))["scenes"]] == ["first", "second", "third"]


async def test_stamps_the_current_dsl_version_on_load(storage_server):
    async with storage_server.visitor() as c:
        await save(c, make_document())
        assert (await load(c, "stage-1"))["dslVersion"] == DSL_VERSION


async def test_list_documents_returns_one_summary_per_stage_with_a_scene_count(storage_server):
    async with storage_server.visitor() as c:
        await save(c, make_document("stage-1"))
        await save(c, make_document("stage-2"))
        r = await c.get("/documents")
        assert r.status_code == 200, r.text
        listed = r.json()
        assert sorted(d["id"] for d in listed) == ["stage-1", "stage-2"]
        one = next(d for d in listed if d["id"] == "stage-1")
        assert (one["name"], one["createdAt"], one["sceneCount"]) == ("Intro Course", 1000, 2)


async def test_delete_document_removes_the_stage_its_scenes_and_its_outline(storage_server):
    async with storage_server.visitor() as c:
        await save(c, make_document())
        assert (await c.delete("/documents/stage-1")).status_code == 204
        assert await load(c, "stage-1") is None
        assert await get_scene(c, "stage-1", "scene-a") is None
        assert (await c.get("/documents")).json() == []


async def test_delete_document_is_idempotent(storage_server):
    async with storage_server.visitor() as c:
        assert (await c.delete("/documents/never-existed")).status_code == 204
        await save(c, make_document())
        assert (await c.delete("/documents/stage-1")).status_code == 204
        assert (await c.delete("/documents/stage-1")).status_code == 204


async def test_a_save_after_a_delete_replaces_the_document(storage_server):
    async with storage_server.visitor() as c:
        await save(c, make_document())
        assert (await c.delete("/documents/stage-1")).status_code == 204
        again = make_document()
        again["stage"]["name"] = "Second life"
        again["scenes"] = again["scenes"][:1]
        await save(c, again)
        loaded = await load(c, "stage-1")
        assert loaded["stage"]["name"] == "Second life" and [s["id"] for s in loaded["scenes"]] == ["scene-a"]
        assert [d["id"] for d in (await c.get("/documents")).json()] == ["stage-1"]


async def test_put_stage_updates_only_the_stage_row_of_an_existing_document(storage_server):
    async with storage_server.visitor() as c:
        doc = make_document()
        await save(c, doc)
        before = await load(c, "stage-1")
        r = await c.put("/documents/stage-1/stage", json={**doc["stage"], "name": "Renamed", "updatedAt": 3000})
        assert r.status_code == 204, r.text
        loaded = await load(c, "stage-1")
        assert (loaded["stage"]["name"], loaded["stage"]["updatedAt"]) == ("Renamed", 3000)
        assert loaded["scenes"] == before["scenes"]
        assert loaded["outline"] == doc["outline"]


async def seed_stored_version(server, c, stage_id: str, version: str | None) -> None:
    """The suite's ``seedStoredVersion``: the visitor's saved document ``stage_id`` as stored again by another
    server, unstamped (``version`` None: an earlier server's ``course.browser_document_set``) or stamped
    ``version`` (a newer server's, or a corrupted, ``course.document_set``), appended to its course stream."""
    current = await load(c, stage_id)
    key = (await c.get("/learner-key")).json()["learnerKey"]
    async with open_database(server.db_url, min_size=1, max_size=2) as db:
        rows = await db.fetch("SELECT course_id, owner_id FROM browser_documents WHERE document_id = $1", stage_id)
        course_id = next(r["course_id"] for r in rows if learner_key(r["owner_id"]) == key)
        head = await db.fetchval("SELECT head_seq FROM streams WHERE id = $1", course_id)
        if version is None:
            event = BrowserDocumentSet(document_id=stage_id, stage=current["stage"], scenes=current["scenes"],
                                       outline=current.get("outline"))
        else:
            document = fmt.decode_document({k: v for k, v in current.items() if k != "dslVersion"})
            event = CourseDocumentSet(document=msgspec.structs.replace(document, dslVersion=version))
        await EventLog(db).append(StreamAppend(stream_id=course_id, events=[event], expected_seq=head))


async def test_put_stage_rejects_a_stale_stored_document(storage_server):
    async with storage_server.visitor() as c:
        doc = make_document()
        await save(c, doc)
        await seed_stored_version(storage_server, c, "stage-1", None)
        r = await c.put("/documents/stage-1/stage", json={**doc["stage"], "name": "Stale Rename"})
        assert "load and save it" in refused(r, 400, "VALIDATION_FAILED")["message"]
        assert (await load(c, "stage-1"))["stage"]["name"] == "Intro Course"


async def test_put_stage_rejects_a_future_versioned_stored_document(storage_server):
    async with storage_server.visitor() as c:
        doc = make_document()
        await save(c, doc)
        await seed_stored_version(storage_server, c, "stage-1", "99.0.0")
        r = await c.put("/documents/stage-1/stage", json={**doc["stage"], "name": "Future Rename"})
        assert refused(r, 409, "FUTURE_VERSION")["details"] == {"stageId": "stage-1", "storedVersion": "99.0.0"}
        loaded = await load(c, "stage-1")
        assert loaded["stage"]["name"] == "Intro Course"
        assert loaded["dslVersion"] == "99.0.0"  # never downgraded on read


async def test_list_documents_tolerates_a_corrupt_stored_version_stamp(storage_server):
    async with storage_server.visitor() as c:
        await save(c, make_document())
        await seed_stored_version(storage_server, c, "stage-1", "not-a-version")
        listed = (await c.get("/documents")).json()
        assert [(d["id"], d["name"], d["sceneCount"]) for d in listed] == [("stage-1", "Intro Course", 2)]
        refused(await c.get("/documents/stage-1"), 500, "INTERNAL_ERROR")


async def test_load_migrates_a_stale_stored_document_which_a_whole_save_brings_to_the_current_version(
        storage_server):
    """GET migrates on read ("Load and migrate one complete document"); "a stale document must first be loaded and
    saved as a full aggregate", after which the part writes are accepted again."""
    async with storage_server.visitor() as c:
        doc = make_document()
        await save(c, doc)
        before = await load(c, "stage-1")
        await seed_stored_version(storage_server, c, "stage-1", None)
        loaded = await load(c, "stage-1")
        assert loaded == before and loaded["dslVersion"] == DSL_VERSION
        assert (await get_scene(c, "stage-1", "scene-a")) == before["scenes"][0]
        await save(c, loaded)
        r = await c.put("/documents/stage-1/stage", json={**doc["stage"], "name": "Renamed"})
        assert r.status_code == 204, r.text
        assert (await load(c, "stage-1"))["stage"]["name"] == "Renamed"


@pytest.mark.parametrize("operation", ["putStage", "putScene", "deleteScene"])
async def test_http_maps_unversioned_writes_to_400_validation_failed(storage_server, operation):
    async with storage_server.visitor() as c:
        await save(c, make_document())
        await seed_stored_version(storage_server, c, "stage-1", None)
        if operation == "putStage":
            r = await c.put("/documents/stage-1/stage",
                            json={"id": "stage-1", "name": "Stale update", "createdAt": 1, "updatedAt": 2})
        elif operation == "putScene":
            r = await c.put("/documents/stage-1/scenes/scene-c", json=slide_scene("stage-1", "scene-c", 2))
        else:
            r = await c.delete("/documents/stage-1/scenes/scene-a")
        assert f"cannot {operation}" in refused(r, 400, "VALIDATION_FAILED")["message"]
        assert [s["id"] for s in (await load(c, "stage-1"))["scenes"]] == ["scene-a", "scene-b"]


async def test_http_rematerializes_a_typed_future_version_error_classified_from_the_backing_store(storage_server):
    async with storage_server.visitor() as c:
        await save(c, make_document())
        await seed_stored_version(storage_server, c, "stage-1", "99.0.0")
        replacement = make_document()
        replacement["stage"]["name"] = "Old Client Overwrite"
        error = refused(await c.put("/documents/stage-1", json=replacement), 409, "FUTURE_VERSION")
        assert error["details"] == {"stageId": "stage-1", "storedVersion": "99.0.0"}
        assert "refusing to overwrite document" in error["message"]
        assert (await load(c, "stage-1"))["stage"]["name"] == "Intro Course"


@pytest.mark.parametrize("version", ["99.0.0", "not-a-version"])
async def test_delete_document_is_not_version_guarded(storage_server, version):
    """"Idempotent and intentionally not version-guarded": the way out for a document this server cannot write."""
    async with storage_server.visitor() as c:
        await save(c, make_document())
        await seed_stored_version(storage_server, c, "stage-1", version)
        if version == "not-a-version":  # nothing else reads or writes it
            refused(await c.get("/documents/stage-1/scenes/scene-a"), 500, "INTERNAL_ERROR")
            refused(await c.put("/documents/stage-1", json=make_document()), 500, "INTERNAL_ERROR")
            refused(await c.delete("/documents/stage-1/scenes/scene-a"), 500, "INTERNAL_ERROR")
        assert (await c.delete("/documents/stage-1")).status_code == 204
        assert await load(c, "stage-1") is None
        await save(c, make_document())  # and the id is saved anew, current
        assert (await load(c, "stage-1"))["dslVersion"] == DSL_VERSION


async def test_put_stage_rejects_when_the_document_is_absent(storage_server):
    async with storage_server.visitor() as c:
        r = await c.put("/documents/ghost-stage/stage",
                        json={"id": "ghost-stage", "name": "Missing", "createdAt": 1, "updatedAt": 2})
        assert "missing document" in refused(r, 404, "DOCUMENT_NOT_FOUND")["message"]


async def test_rejects_a_document_whose_stage_is_missing_required_fields(storage_server):
    async with storage_server.visitor() as c:
        doc = make_document()
        del doc["stage"]["name"]
        error = refused(await c.put("/documents/stage-1", json=doc))
        assert isinstance(error["details"], list) and all({"path", "message"} <= set(p) for p in error["details"])
        assert await load(c, "stage-1") is None


async def test_rejects_a_document_with_an_invalid_scene(storage_server):
    async with storage_server.visitor() as c:
        doc = make_document()
        doc["scenes"][0]["content"] = {"type": "quiz", "questions": []}
        refused(await c.put("/documents/stage-1", json=doc))


async def test_a_rejected_save_leaves_the_store_untouched_atomic(storage_server):
    async with storage_server.visitor() as c:
        await save(c, make_document())
        bad = make_document()
        bad["stage"]["name"] = "Renamed"
        bad["scenes"].append({"id": "broken", "stageId": "stage-1"})
        refused(await c.put("/documents/stage-1", json=bad))
        loaded = await load(c, "stage-1")
        assert loaded["stage"]["name"] == "Intro Course"
        assert [s["id"] for s in loaded["scenes"]] == ["scene-a", "scene-b"]
        assert await get_scene(c, "stage-1", "broken") is None


async def test_rejects_a_scene_whose_stage_id_does_not_match_the_document(storage_server):
    async with storage_server.visitor() as c:
        doc = make_document("stage-1")
        doc["scenes"] = [slide_scene("stage-1", "ok", 0), slide_scene("other-stage", "stray", 1)]
        refused(await c.put("/documents/stage-1", json=doc))
        assert await load(c, "stage-1") is None
        assert await get_scene(c, "other-stage", "stray") is None


async def test_rejects_a_scene_with_a_non_finite_order(storage_server):
    async with storage_server.visitor() as c:
        doc = make_document()
        body = msgspec.json.encode(doc).replace(b'"order":0', b'"order":1e999')  # Infinity: JSON has no NaN
        refused(await c.put("/documents/stage-1", content=body, headers={"Content-Type": "application/json"}))
        assert await load(c, "stage-1") is None
        assert math.isinf(float("1e999"))


async def test_rejects_duplicate_scene_ids_within_a_document(storage_server):
    async with storage_server.visitor() as c:
        doc = make_document("stage-1")
        doc["scenes"] = [slide_scene("stage-1", "dup", 0), slide_scene("stage-1", "dup", 1)]
        refused(await c.put("/documents/stage-1", json=doc))
        assert await load(c, "stage-1") is None


async def test_rejects_saving_a_document_stamped_at_an_unknown_unreachable_dsl_version(storage_server):
    async with storage_server.visitor() as c:
        doc = {**make_document(), "dslVersion": "0.0.1"}
        refused(await c.put("/documents/stage-1", json=doc))
        assert await load(c, "stage-1") is None


async def test_normalizes_a_legacy_stamped_document_to_the_current_version_on_save(storage_server):
    async with storage_server.visitor() as c:
        doc = {**make_document(), "dslVersion": "0.0.0"}
        await save(c, doc)
        loaded = await load(c, "stage-1")
        assert loaded["dslVersion"] == DSL_VERSION
        assert loaded["outline"] == doc["outline"]


async def test_rejects_saving_a_document_written_by_a_newer_client(storage_server):
    async with storage_server.visitor() as c:
        await save(c, make_document())
        future = {**make_document(), "dslVersion": "99.0.0"}
        future["stage"]["name"] = "Should Not Persist"
        error = refused(await c.put("/documents/stage-1", json=future), 409, "FUTURE_VERSION")
        assert error["details"] == {"stageId": "stage-1", "storedVersion": "99.0.0"}
        assert (await load(c, "stage-1"))["stage"]["name"] == "Intro Course"


async def test_put_scene_inserts_a_new_scene_into_an_existing_document(storage_server):
    async with storage_server.visitor() as c:
        await save(c, make_document())
        r = await c.put("/documents/stage-1/scenes/scene-c", json=slide_scene("stage-1", "scene-c", 2))
        assert r.status_code == 204, r.text
        assert [s["id"] for s in (await load(c, "stage-1"))["scenes"]] == ["scene-a", "scene-b", "scene-c"]


async def test_put_scene_overwrites_an_existing_scene(storage_server):
    async with storage_server.visitor() as c:
        await save(c, make_document())
        r = await c.put("/documents/stage-1/scenes/scene-a", json=slide_scene("stage-1", "scene-a", 0, "Renamed"))
        assert r.status_code == 204, r.text
        assert (await get_scene(c, "stage-1", "scene-a"))["title"] == "Renamed"


async def test_put_scene_rejects_a_scene_whose_stage_id_does_not_match_the_argument(storage_server):
    async with storage_server.visitor() as c:
        await save(c, make_document("stage-1"))
        refused(await c.put("/documents/stage-1/scenes/stray", json=slide_scene("other-stage", "stray", 2)))
        assert await get_scene(c, "stage-1", "stray") is None
        assert await get_scene(c, "other-stage", "stray") is None


async def test_put_scene_rejects_when_the_parent_document_is_absent(storage_server):
    async with storage_server.visitor() as c:
        r = await c.put("/documents/ghost-stage/scenes/s", json=slide_scene("ghost-stage", "s", 0))
        refused(r, 404, "DOCUMENT_NOT_FOUND")


async def test_put_scene_validates_the_scene(storage_server):
    async with storage_server.visitor() as c:
        await save(c, make_document())
        refused(await c.put("/documents/stage-1/scenes/x", json={"id": "x", "stageId": "stage-1"}))


async def test_get_scene_returns_null_for_a_missing_scene(storage_server):
    async with storage_server.visitor() as c:
        await save(c, make_document())
        refused(await c.get("/documents/stage-1/scenes/no-such-scene"), 404, "SCENE_NOT_FOUND")


async def test_delete_scene_removes_one_scene_and_leaves_the_others(storage_server):
    async with storage_server.visitor() as c:
        await save(c, make_document())
        assert (await c.delete("/documents/stage-1/scenes/scene-a")).status_code == 204
        assert [s["id"] for s in (await load(c, "stage-1"))["scenes"]] == ["scene-b"]
        assert (await c.delete("/documents/stage-1/scenes/scene-a")).status_code == 204


async def test_delete_scene_on_an_absent_document_is_a_no_op(storage_server):
    async with storage_server.visitor() as c:
        assert (await c.delete("/documents/ghost-stage/scenes/x")).status_code == 204


async def test_re_saving_reconciles_added_edited_removed_scenes(storage_server):
    async with storage_server.visitor() as c:
        await save(c, make_document())
        nxt = make_document()
        nxt["scenes"] = [slide_scene("stage-1", "scene-a", 0, "Edited A"), slide_scene("stage-1", "scene-c", 1)]
        await save(c, nxt)
        loaded = await load(c, "stage-1")
        assert [s["id"] for s in loaded["scenes"]] == ["scene-a", "scene-c"]
        assert loaded["scenes"][0]["title"] == "Edited A"
        assert await get_scene(c, "stage-1", "scene-b") is None


async def test_persists_the_outline_verbatim_and_can_clear_it(storage_server):
    async with storage_server.visitor() as c:
        doc = make_document()
        await save(c, doc)
        assert (await load(c, "stage-1"))["outline"] == doc["outline"]
        without = make_document()
        del without["outline"]
        await save(c, without)
        assert "outline" not in await load(c, "stage-1")


async def test_documents_are_isolated_from_one_another(storage_server):
    async with storage_server.visitor() as c:
        await save(c, make_document("stage-1"))
        await save(c, make_document("stage-2"))
        assert (await c.delete("/documents/stage-1/scenes/scene-a")).status_code == 204
        assert [s["id"] for s in (await load(c, "stage-2"))["scenes"]] == ["scene-a", "scene-b"]


async def test_owners_are_isolated_from_one_another(storage_server):
    async with storage_server.visitor() as alice, storage_server.visitor() as bob:
        await save(alice, make_document())
        assert await load(bob, "stage-1") is None
        assert (await bob.get("/documents")).json() == []
        assert (await bob.delete("/documents/stage-1")).status_code == 204
        assert await load(alice, "stage-1") is not None


# -- the HTTP contract's own clauses (document-http-contract.md) -------------------------------------------------


async def test_http_malformed_empty_or_non_object_bodies_are_validation_failed(storage_server):
    async with storage_server.visitor() as c:
        for body in (b'{"stage": ', b"", b"[1, 2]", b'"doc"'):
            r = await c.put("/documents/stage-1", content=body, headers={"Content-Type": "application/json"})
            refused(r)


async def test_http_body_and_path_id_mismatch_is_validation_failed(storage_server):
    async with storage_server.visitor() as c:
        refused(await c.put("/documents/other", json=make_document()))
        await save(c, make_document())
        refused(await c.put("/documents/stage-1/stage", json={**make_document()["stage"], "id": "other"}))
        refused(await c.put("/documents/stage-1/scenes/scene-z", json=slide_scene("stage-1", "scene-a", 0)))


async def test_http_unknown_routes_and_unlisted_methods_are_route_not_found(storage_server):
    async with storage_server.visitor() as c:
        for method, path in (("GET", "/nothing"), ("GET", "/documents/a/b/c/d"), ("POST", "/documents"),
                             ("POST", "/documents/stage-1"), ("PATCH", "/documents/stage-1/stage")):
            refused(await c.request(method, path), 404, "ROUTE_NOT_FOUND")


async def test_http_every_error_is_the_storage_envelope(storage_server):
    async with storage_server.visitor() as c:
        r = await c.put("/documents/stage-1", content=b"{", headers={"Content-Type": "application/json"})
        assert r.headers["content-type"].startswith("application/json")
        error = refused(r)
        assert set(error) <= {"code", "message", "details"} and isinstance(error["message"], str)



async def test_an_owners_documents_stay_within_their_byte_quota(small_server):
    async with small_server.visitor() as c, small_server.visitor() as other:
        await save(c, make_document("stage-1"))  # 664 bytes as stored
        await save(c, make_document("stage-2"))
        error = refused(await c.put("/documents/stage-3", json=make_document("stage-3")), 429, "INVALID_REQUEST")
        assert "limits.document_bytes_per_owner" in error["message"]
        assert await load(c, "stage-3") is None
        big = slide_scene("stage-1", "scene-z", 5, title="t" * 1500)
        refused(await c.put("/documents/stage-1/scenes/scene-z", json=big), 429, "INVALID_REQUEST")
        # a delete frees its bytes; another owner has quota of their own
        assert (await c.delete("/documents/stage-2")).status_code == 204
        await save(c, make_document("stage-3"))
        await save(other, make_document("stage-1"))
