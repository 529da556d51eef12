"""OpenMAIC's runtime contract (``@openmaic/storage`` ``test/runtime-contract.ts`` and ``http-runtime-store``)
ported case by case, over real sockets against `openmaic serve`: each test is named after the clause it checks.

The learner key is the caller's own (derived from its owner, never taken from the client): where OpenMAIC's suite
files sessions under two learner keys in one store, here two visitors (two owners) do, and addressing the other's
partition is 403 ``FORBIDDEN_LEARNER``."""

from __future__ import annotations

import itertools

from tests.integration.storage_harness import storage_server_fixture

storage_server = storage_server_fixture()

T0 = "2026-01-01T00:00:00.000Z"
T1 = "2026-01-01T00:01:00.000Z"
RUNTIME_DSL_VERSION = "0.1.0"
_ids = itertools.count(1)


async def key_of(c) -> str:
    return (await c.get("/learner-key")).json()["learnerKey"]


async def make_session(c, **overrides) -> dict:
    return {"id": "sess-1", "kind": "chat", "stageId": "stage-1", "learnerKey": await key_of(c), "status": "active",
            "createdAt": T0, "updatedAt": T0, **overrides}


def make_record(session_id: str, **overrides) -> dict:
    return {"id": f"rec-{next(_ids)}", "sessionId": session_id, "createdAt": T1,
            "payload": {"role": "user", "content": "hello"}, **overrides}


async def create(c, **overrides) -> dict:
    r = await c.post("/runtime/sessions", json=await make_session(c, **overrides))
    assert r.status_code == 201, r.text
    return r.json()


async def append(c, record: dict, status: int = 201, **extra) -> dict:
    r = await c.post(f"/runtime/sessions/{record['sessionId']}/records", json={**record, **extra})
    assert r.status_code == status, r.text
    return r.json()


async def get_session(c, session_id: str) -> dict | None:
    r = await c.get(f"/runtime/sessions/{session_id}")
    if r.status_code == 404:
        assert r.json()["error"]["code"] == "SESSION_NOT_FOUND", r.text
        return None
    assert r.status_code == 200, r.text
    return r.json()


async def records(c, session_id: str, **params) -> list:
    r = await c.get(f"/runtime/sessions/{session_id}/records", params=params)
    if r.status_code == 404:
        assert r.json()["error"]["code"] == "SESSION_NOT_FOUND", r.text
        return []
    assert r.status_code == 200, r.text
    return r.json()


async def partition(c, stage_id: str, key: str | None = None) -> list:
    r = await c.get(f"/runtime/stages/{stage_id}/learners/{key or await key_of(c)}/sessions")
    assert r.status_code == 200, r.text
    return r.json()


def refused(r, status: int = 400, code: str = "VALIDATION_FAILED") -> dict:
    assert r.status_code == status, r.text
    assert set(r.json()) == {"error"} and r.json()["error"]["code"] == code, r.text
    return r.json()["error"]


async def test_create_session_stamps_the_runtime_version_get_session_round_trips_it(storage_server):
    async with storage_server.visitor() as c:
        created = await create(c)
        assert created["runtimeDslVersion"] == RUNTIME_DSL_VERSION
        assert {k: created[k] for k in await make_session(c)} == await make_session(c)
        assert await get_session(c, "sess-1") == created


async def test_create_session_rejects_a_duplicate_id(storage_server):
    async with storage_server.visitor() as c:
        await create(c)
        r = await c.post("/runtime/sessions", json=await make_session(c))
        assert "already exists" in refused(r, 409, "SESSION_ALREADY_EXISTS")["message"]


async def test_create_session_rejects_an_invalid_envelope_and_stores_nothing(storage_server):
    async with storage_server.visitor() as c:
        r = await c.post("/runtime/sessions", json=await make_session(c, learnerKey=""))
        assert "learnerKey" in refused(r)["message"]
        assert await get_session(c, "sess-1") is None


async def test_create_session_validates_status_and_zoned_timestamps(storage_server):
    async with storage_server.visitor() as c:
        for bad in ({"status": "finished"}, {"createdAt": "2026-01-01T00:00:00"}, {"updatedAt": "2026-02-30T00:00:00Z"},
                    {"dslVersion": "0.2.0"}, {"kind": 3}):
            error = refused(await c.post("/runtime/sessions", json=await make_session(c, **bad)))
            assert error["details"] and error["message"].startswith("@openmaic/storage: invalid runtime session")
        assert await get_session(c, "sess-1") is None


async def test_get_session_resolves_undefined_for_an_absent_id(storage_server):
    async with storage_server.visitor() as c:
        assert await get_session(c, "nope") is None


async def test_list_sessions_returns_only_the_stage_learner_partition_ordered_by_created_at(storage_server):
    async with storage_server.visitor() as c, storage_server.visitor() as other:
        await create(c, id="a2", createdAt=T1, updatedAt=T1)
        await create(c, id="a1")
        await create(other, id="b1")
        await create(c, id="c1", stageId="stage-2")
        assert [s["id"] for s in await partition(c, "stage-1")] == ["a1", "a2"]
        assert [s["id"] for s in await partition(other, "stage-1")] == ["b1"]
        assert [s["id"] for s in await partition(c, "stage-2")] == ["c1"]
        # another learner's partition is not addressable
        r = await c.get(f"/runtime/stages/stage-1/learners/{await key_of(other)}/sessions")
        refused(r, 403, "FORBIDDEN_LEARNER")


async def test_list_sessions_orders_by_the_instant_a_timestamp_denotes_not_by_the_string(storage_server):
    async with storage_server.visitor() as c:
        await create(c, id="zulu", createdAt="2025-12-31T23:00:00Z", updatedAt="2025-12-31T23:00:00Z")
        await create(c, id="offset", createdAt="2026-01-01T00:30:00+02:00", updatedAt="2026-01-01T00:30:00+02:00")
        assert [s["id"] for s in await partition(c, "stage-1")] == ["offset", "zulu"]


async def test_set_session_status_transitions_active_to_completed_with_the_supplied_updated_at(storage_server):
    async with storage_server.visitor() as c:
        await create(c)
        r = await c.patch("/runtime/sessions/sess-1/status", json={"status": "completed", "updatedAt": T1})
        assert r.status_code == 204, r.text
        loaded = await get_session(c, "sess-1")
        assert (loaded["status"], loaded["updatedAt"]) == ("completed", T1)


async def test_set_session_status_rejects_an_absent_session(storage_server):
    async with storage_server.visitor() as c:
        r = await c.patch("/runtime/sessions/ghost/status", json={"status": "completed", "updatedAt": T1})
        assert "no session" in refused(r, 404, "SESSION_NOT_FOUND")["message"]


async def test_set_session_status_can_compare_the_record_tail_before_transitioning(storage_server):
    async with storage_server.visitor() as c:
        await create(c)
        await append(c, make_record("sess-1"))
        r = await c.patch("/runtime/sessions/sess-1/status",
                          json={"status": "completed", "updatedAt": T1, "expectedLastSeq": None})
        error = refused(r, 409, "RUNTIME_APPEND_CONFLICT")
        assert error["details"] == {"sessionId": "sess-1", "expectedLastSeq": None, "actualLastSeq": 0}
        assert (await get_session(c, "sess-1"))["status"] == "active"
        r = await c.patch("/runtime/sessions/sess-1/status",
                          json={"status": "completed", "updatedAt": T1, "expectedLastSeq": 0})
        assert r.status_code == 204, r.text
        assert (await get_session(c, "sess-1"))["status"] == "completed"


async def test_delete_session_removes_the_session_and_its_records_idempotent(storage_server):
    async with storage_server.visitor() as c:
        await create(c)
        await append(c, make_record("sess-1"))
        assert (await c.delete("/runtime/sessions/sess-1")).status_code == 204
        assert await get_session(c, "sess-1") is None
        assert await records(c, "sess-1") == []
        assert (await c.delete("/runtime/sessions/sess-1")).status_code == 204
        # its id is free again
        await create(c)
        assert await records(c, "sess-1") == []


async def test_append_record_rejects_an_invalid_envelope_with_the_shared_validation_message(storage_server):
    async with storage_server.visitor() as c:
        await create(c)
        record = make_record("sess-1", createdAt="not-iso")
        r = await c.post("/runtime/sessions/sess-1/records", json=record)
        assert refused(r)["message"] == (f'@openmaic/storage: invalid runtime record "{record["id"]}": /createdAt: '
                                         "expected ISO 8601 `createdAt`")


async def test_append_record_assigns_monotonic_seq_from_0_and_stamps_nothing_on_the_record(storage_server):
    async with storage_server.visitor() as c:
        await create(c)
        got = [await append(c, make_record("sess-1")) for _ in range(3)]
        assert [r["seq"] for r in got] == [0, 1, 2]
        assert "runtimeDslVersion" not in got[0]


async def test_append_record_round_trips_a_null_payload_and_rejects_an_undefined_one(storage_server):
    async with storage_server.visitor() as c:
        await create(c, kind="playback")
        stored = await append(c, make_record("sess-1", payload=None))
        assert stored["payload"] is None and (await records(c, "sess-1"))[0]["payload"] is None
        record = make_record("sess-1")
        del record["payload"]
        assert "payload" in refused(await c.post("/runtime/sessions/sess-1/records", json=record))["message"]


async def test_append_record_rejects_an_absent_parent_and_a_non_active_parent(storage_server):
    async with storage_server.visitor() as c:
        r = await c.post("/runtime/sessions/ghost/records", json=make_record("ghost"))
        assert "no session" in refused(r, 404, "SESSION_NOT_FOUND")["message"]
        await create(c)
        await c.patch("/runtime/sessions/sess-1/status", json={"status": "completed", "updatedAt": T1})
        r = await c.post("/runtime/sessions/sess-1/records", json=make_record("sess-1"))
        assert "active" in refused(r)["message"]


async def test_append_record_can_atomically_transition_its_active_parent_session(storage_server):
    async with storage_server.visitor() as c:
        await create(c)
        record = await append(c, make_record("sess-1"), expectedLastSeq=None,
                              sessionTransition={"status": "completed", "updatedAt": T1})
        assert record["seq"] == 0
        assert await records(c, "sess-1") == [record]
        session = await get_session(c, "sess-1")
        assert (session["status"], session["updatedAt"]) == ("completed", T1)
        r = await c.post("/runtime/sessions/sess-1/records", json=make_record("sess-1"))
        assert "active" in refused(r)["message"]


async def test_append_record_rejects_a_stale_expected_last_seq_without_appending(storage_server):
    async with storage_server.visitor() as c:
        await create(c)
        existing = await append(c, make_record("sess-1"))
        r = await c.post("/runtime/sessions/sess-1/records", json={**make_record("sess-1"), "expectedLastSeq": None})
        error = refused(r, 409, "RUNTIME_APPEND_CONFLICT")
        assert error["details"] == {"sessionId": "sess-1", "expectedLastSeq": None, "actualLastSeq": 0}
        assert await records(c, "sess-1") == [existing]


async def test_append_record_validates_skeleton_payloads_for_skeleton_kinds_by_default(storage_server):
    async with storage_server.visitor() as c:
        await create(c)
        assert (await append(c, make_record("sess-1", payload={"role": "user", "content": "x"})))["seq"] == 0
        r = await c.post("/runtime/sessions/sess-1/records", json=make_record("sess-1", payload={"phase": "draft"}))
        assert "payload" in refused(r)["message"]
        await create(c, id="sess-2", kind="playback")
        assert (await append(c, make_record("sess-2", payload={"position": 42})))["seq"] == 0
        await create(c, id="sess-3", kind="quizAttempt")
        bad = make_record("sess-3", payload={"phase": "final", "answers": {}})
        refused(await c.post("/runtime/sessions/sess-3/records", json=bad))
        assert (await append(c, make_record("sess-3", payload={"phase": "draft", "answers": {"q1": ["A"]}})))[
            "seq"] == 0


async def test_list_records_orders_by_seq_and_narrows_to_anchored_records_with_scene_id(storage_server):
    async with storage_server.visitor() as c:
        await create(c, kind="playback")
        a = await append(c, make_record("sess-1", sceneId="scene-1", payload={"n": 0}))
        b = await append(c, make_record("sess-1", sceneId="scene-2", payload={"n": 1}))
        cc = await append(c, make_record("sess-1", sceneId="scene-1", payload={"n": 2}))
        unanchored = await append(c, make_record("sess-1", payload={"n": 3}))
        assert [r["id"] for r in await records(c, "sess-1")] == [a["id"], b["id"], cc["id"], unanchored["id"]]
        assert [r["id"] for r in await records(c, "sess-1", sceneId="scene-1")] == [a["id"], cc["id"]]


async def test_list_records_pages_with_a_cursor(storage_server):
    async with storage_server.visitor() as c:
        await create(c, kind="playback")
        stored = [await append(c, make_record("sess-1", payload={"n": i})) for i in range(5)]
        r = await c.get("/runtime/sessions/sess-1/records", params={"limit": 2})
        assert [x["seq"] for x in r.json()] == [0, 1]
        seen = r.json()
        while "x-next-cursor" in r.headers:
            r = await c.get("/runtime/sessions/sess-1/records", params={"limit": 2, "cursor": r.headers["x-next-cursor"]})
            seen += r.json()
        assert seen == stored


async def test_merge_learner_re_keys_every_session_of_the_source_learner_across_all_stages(storage_server):
    """Here a merge moves the caller's sessions filed under another key of theirs into their own key: what a
    claim of an anonymous visit leaves behind. Another owner's key moves nothing of theirs."""
    async with storage_server.visitor() as c, storage_server.visitor() as other:
        mine, theirs = await key_of(c), await key_of(other)
        await create(other, id="from-1")
        r = await c.post("/runtime/learners/merge", json={"fromLearnerKey": theirs, "toLearnerKey": mine})
        assert (r.status_code, r.json()) == (200, {"moved": 0}), r.text
        assert [s["id"] for s in await partition(other, "stage-1")] == ["from-1"]
        r = await c.post("/runtime/learners/merge", json={"fromLearnerKey": mine, "toLearnerKey": theirs})
        refused(r, 403, "FORBIDDEN_LEARNER")


async def test_merge_learner_rejects_empty_learner_keys(storage_server):
    async with storage_server.visitor() as c:
        mine = await key_of(c)
        for body in ({"fromLearnerKey": "", "toLearnerKey": mine}, {"fromLearnerKey": mine, "toLearnerKey": ""}):
            assert "non-empty" in refused(await c.post("/runtime/learners/merge", json=body))["message"]


async def test_a_self_merge_moves_nothing_and_returns_0_repeatably(storage_server):
    async with storage_server.visitor() as c:
        await create(c)
        mine = await key_of(c)
        for _ in range(2):
            r = await c.post("/runtime/learners/merge", json={"fromLearnerKey": mine, "toLearnerKey": mine})
            assert (r.status_code, r.json()) == (200, {"moved": 0})
        assert [s["id"] for s in await partition(c, "stage-1")] == ["sess-1"]


async def test_delete_learner_runtime_removes_exactly_one_learner_on_one_stage_idempotent(storage_server):
    async with storage_server.visitor() as c, storage_server.visitor() as other:
        await create(c, id="target")
        await append(c, make_record("target"))
        await create(other, id="other-learner")
        await create(c, id="other-stage", stageId="stage-2")
        path = f"/runtime/stages/stage-1/learners/{await key_of(c)}"
        assert (await c.delete(path)).status_code == 204
        assert await get_session(c, "target") is None and await records(c, "target") == []
        assert await get_session(other, "other-learner") is not None
        assert await get_session(c, "other-stage") is not None
        assert (await c.delete(path)).status_code == 204
        refused(await c.delete(f"/runtime/stages/stage-1/learners/{await key_of(other)}"), 403, "FORBIDDEN_LEARNER")


async def test_delete_stage_runtime_removes_every_session_on_the_stage_other_stages_survive(storage_server):
    async with storage_server.visitor() as c, storage_server.visitor() as other:
        await create(c, id="s1")
        await append(c, make_record("s1"))
        await create(c, id="s3", stageId="stage-2")
        await create(other, id="s2")
        assert (await c.delete("/runtime/stages/stage-1")).status_code == 204
        assert await get_session(c, "s1") is None and await records(c, "s1") == []
        assert await get_session(c, "s3") is not None
        assert await get_session(other, "s2") is not None  # another owner's sessions are not the caller's to delete
        assert (await c.delete("/runtime/stages/stage-1")).status_code == 204


async def test_delete_all_runtime_removes_every_session_and_record_across_stages(storage_server):
    async with storage_server.visitor() as c, storage_server.visitor() as other:
        await create(c, id="s1")
        await append(c, make_record("s1"))
        await create(c, id="s2", stageId="stage-2")
        await append(c, make_record("s2"))
        await create(other, id="kept")
        assert (await c.delete("/runtime")).status_code == 204
        for sid in ("s1", "s2"):
            assert await get_session(c, sid) is None and await records(c, sid) == []
        assert await get_session(other, "kept") is not None
        assert (await c.delete("/runtime")).status_code == 204


async def test_a_stored_session_carries_the_runtime_stamp_only_never_a_dsl_version_key(storage_server):
    async with storage_server.visitor() as c:
        await create(c, runtimeDslVersion="9.9.9")
        stored = await get_session(c, "sess-1")
        assert stored["runtimeDslVersion"] == RUNTIME_DSL_VERSION and "dslVersion" not in stored


async def test_http_sessions_of_another_owner_read_as_missing(storage_server):
    async with storage_server.visitor() as c, storage_server.visitor() as other:
        await create(c)
        assert await get_session(other, "sess-1") is None
        refused(await other.get("/runtime/sessions/sess-1/records"), 404, "SESSION_NOT_FOUND")
        r = await other.post("/runtime/sessions/sess-1/records", json=make_record("sess-1"))
        refused(r, 404, "SESSION_NOT_FOUND")
        r = await other.post("/runtime/sessions", json=await make_session(c, id="x"))
        refused(r, 403, "FORBIDDEN_LEARNER")


async def test_http_body_path_mismatch_and_malformed_bodies_are_validation_failed(storage_server):
    async with storage_server.visitor() as c:
        await create(c)
        refused(await c.post("/runtime/sessions/sess-1/records", json=make_record("other")))
        refused(await c.post("/runtime/sessions", content=b"{", headers={"Content-Type": "application/json"}))
        refused(await c.post("/runtime/sessions", json=[1]))
        refused(await c.post("/runtime/sessions/sess-1/records", json={**make_record("sess-1"), "expectedLastSeq": -1}))
        refused(await c.post("/runtime/sessions/sess-1/records", json=make_record("sess-1", actionIndex=1.5)))


async def test_http_unknown_runtime_routes_are_route_not_found(storage_server):
    async with storage_server.visitor() as c:
        for method, path in (("GET", "/runtime/nothing"), ("PUT", "/runtime/sessions/x"),
                             ("GET", "/runtime/learners/merge")):
            refused(await c.request(method, path), 404, "ROUTE_NOT_FOUND")
