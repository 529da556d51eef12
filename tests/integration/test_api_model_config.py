"""The Models page over real sockets: GET/PUT /api/model-config with revisions, the import, write-only keys."""

from __future__ import annotations

import base64

import pytest

from openmaic.owners.tokens import create_token
from openmaic.api.model_config import bp
from tests.integration.api_harness import make_config, running_api

KEY = "sk-models-page-SECRET-0123456789"
DEPLOYMENT = """
providers: {{corp: {{preset: openai, apiKey: corp-key-0123456789}}}}
slots: {{llm: 'corp:gpt-4o', course.outline: 'corp:gpt-4o'}}
identity: {{mode: token}}
server: {{data_dir: '{data}', allow_local_endpoints: true}}
limits: {{json_body_bytes: 8192}}
"""


@pytest.fixture
async def api(db, tmp_path):
    async with running_api(db, make_config(DEPLOYMENT.format(data=tmp_path)), blueprints=[bp]) as served:
        yield served


async def _client(api, db, owner: str):
    token = await create_token(db, owner)
    return api.client(headers={"Authorization": f"Bearer {token}"})


async def test_settings_round_trip_with_revisions_and_keys_never_returned(api, db):
    async with await _client(api, db, "alice") as alice:
        view = (await alice.get("/api/model-config")).json()
        assert view["revision"] is None and view["policy"] == {"allowWorkspaceProviders": True}
        assert {s["slot"]: s["locked"] for s in view["slots"]}["course.outline"] is True
        add = {"kind": "provider", "id": "mine", "preset": "openai-compatible", "apiKey": KEY,
               "baseUrl": "http://127.0.0.1:9/v1", "models": ["llama3"]}
        r = await alice.put("/api/model-config", json={"revision": None, "change": add})
        assert r.status_code == 200, r.text
        assert KEY not in r.text and r.json()["revision"] == 1
        mine = next(p for p in r.json()["providers"] if p["id"] == "mine")
        assert mine["key"] == {"set": True, "mask": "…" + KEY[-4:]} and mine["source"] == "workspace"
        r = await alice.put("/api/model-config", json={"revision": 1, "change": {
            "kind": "slots", "set": {"course.actions": {"model": "mine:llama3", "fallback": "corp:gpt-4o"}}}})
        assert r.status_code == 200 and r.json()["revision"] == 2
        actions = next(s for s in r.json()["slots"] if s["slot"] == "course.actions")
        assert actions["effective"]["providerId"] == "mine" and actions["effective"]["fallback"]["providerId"] == \
            "corp"
        # A stale revision is refused and changes nothing.
        stale = await alice.put("/api/model-config", json={"revision": 1, "change": {"kind": "slots",
                                                                                      "clear": ["course.actions"]}})
        assert stale.status_code == 409 and stale.json() == {
            "error": {"code": "CONFLICT", "message": "The settings changed; reload them"}}
        assert (await alice.get("/api/model-config")).json()["revision"] == 2
    # The database holds the key sealed only; another owner sees none of it.
    dump = str([dict(r) for r in await db.fetch("SELECT config::text, secrets::text FROM model_settings")])
    assert KEY not in dump and base64.b64encode(KEY.encode()).decode() not in dump
    async with await _client(api, db, "bob") as bob:
        theirs = (await bob.get("/api/model-config")).json()
        assert theirs["revision"] is None and all(p["source"] == "deployment" for p in theirs["providers"])


@pytest.mark.parametrize(("body", "status", "code"), [
    ({"revision": None, "change": {"kind": "slots", "set": {"course.outline": "corp:x"}}}, 409, "SLOT_LOCKED"),
    ({"revision": None, "change": {"kind": "slots", "set": {"nope": "corp:x"}}}, 400, "UNKNOWN_SLOT"),
    ({"revision": None, "change": {"kind": "slots", "set": {"agent": "ghost:x"}}}, 400, "INVALID_ASSIGNMENT"),
    ({"revision": None, "change": {"kind": "provider", "id": "corp", "preset": "openai"}}, 400, "PROVIDER_RESERVED"),
    ({"revision": None, "change": {"kind": "provider", "id": "x", "preset": "zzz"}}, 400, "INVALID_PROVIDER"),
    ({"revision": None, "change": {"kind": "remove-provider", "id": "x"}}, 400, "UNKNOWN_PROVIDER"),
    ({"revision": None, "change": {"kind": "explode"}}, 400, "INVALID_REQUEST"),
    ({"revision": "one", "change": {"kind": "slots"}}, 400, "INVALID_REQUEST"),
    ({"change": {"kind": "slots"}}, 400, "MISSING_REQUIRED_FIELD"),
    ({"revision": 7, "change": {"kind": "slots"}}, 409, "CONFLICT"),
])  # fmt: skip
async def test_bad_changes_get_openmaics_answers(api, db, body, status, code):
    async with await _client(api, db, "carol") as carol:
        r = await carol.put("/api/model-config", json=body)
        assert (r.status_code, r.json()["error"]["code"]) == (status, code), r.text
        assert (await carol.get("/api/model-config")).json()["revision"] is None


async def test_malformed_and_oversized_bodies(api, db):
    async with await _client(api, db, "dave") as dave:
        r = await dave.put("/api/model-config", content=b"{not json", headers={"content-type": "application/json"})
        assert r.status_code == 400 and r.json()["error"]["code"] == "INVALID_REQUEST"
        r = await dave.post("/api/model-config/import", content=b"x" * 20_000,
                            headers={"content-type": "application/json"})
        assert r.status_code == 413
        r = await dave.post("/api/model-config/import", json={"providers": [1]})
        assert r.status_code == 400
        r = await dave.post("/api/model-config/import", json={"colour": "red"})
        assert r.status_code == 400
    async with api.client() as anonymous:
        assert (await anonymous.get("/api/model-config")).status_code == 401


async def test_the_import_is_idempotent(api, db):
    proposal = {"providers": {"kept": {"preset": "deepseek", "apiKey": KEY}}, "slots": {"agent": "kept:deepseek-chat",
                                                                                      "course.outline": "kept:x"}}
    async with await _client(api, db, "erin") as erin:
        first = (await erin.post("/api/model-config/import", json=proposal)).json()
        assert first["imported"] == [{"kind": "provider", "id": "kept"}, {"kind": "slot", "id": "agent"}]
        assert [s["code"] for s in first["skipped"]] == ["SLOT_LOCKED"] and first["view"]["revision"] == 1
        again = (await erin.post("/api/model-config/import", json=proposal)).json()
        assert again["imported"] == [] and again["view"]["revision"] == 1  # nothing was written
        assert {(s["id"], s["code"]) for s in again["skipped"]} == {("kept", "EXISTS_SAME"), ("agent", "EXISTS"),
                                                                    ("course.outline", "SLOT_LOCKED")}
        assert KEY not in str(first) + str(again)


async def test_run_choices_follow_the_owners_settings(api, db):
    """What a run may choose per slot: the slot's model, the models the owner's usable providers declare and those
    their settings assign; a slot the deployment sets keeps its own; another owner sees none of alice's."""
    async with await _client(api, db, "frank") as frank:
        before = {s["slot"]: s for s in (await frank.get("/api/model-config/run-choices")).json()["slots"]}
        assert before["course.outline"] == {"slot": "course.outline", "default": "corp:gpt-4o",
                                            "allowed": ["corp:gpt-4o"], "locked": True}
        assert before["course.agents"]["allowed"] == ["corp:gpt-4o"] and not before["course.agents"]["locked"]
        add = {"kind": "provider", "id": "mine", "preset": "openai-compatible", "apiKey": KEY,
               "baseUrl": "http://127.0.0.1:9/v1", "models": ["llama3", "qwen"]}
        assert (await frank.put("/api/model-config", json={"revision": None, "change": add})).status_code == 200
        after = {s["slot"]: s for s in (await frank.get("/api/model-config/run-choices")).json()["slots"]}
        assert after["course.agents"]["allowed"] == ["corp:gpt-4o", "mine:llama3", "mine:qwen"]
        assert after["course.outline"]["allowed"] == ["corp:gpt-4o"]
        # A provider that needs a key and has none cannot run: its models are no choice.
        keyless = {"kind": "provider", "id": "ds", "preset": "deepseek", "models": ["deepseek-chat"]}
        assert (await frank.put("/api/model-config", json={"revision": 1, "change": keyless})).status_code == 200
        later = {s["slot"]: s for s in (await frank.get("/api/model-config/run-choices")).json()["slots"]}
        assert later["course.agents"]["allowed"] == ["corp:gpt-4o", "mine:llama3", "mine:qwen"]
    async with await _client(api, db, "grace") as grace:
        theirs = {s["slot"]: s for s in (await grace.get("/api/model-config/run-choices")).json()["slots"]}
        assert theirs["course.agents"]["allowed"] == ["corp:gpt-4o"]
