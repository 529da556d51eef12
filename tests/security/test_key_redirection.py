"""A saved provider key cannot be read back by pointing its provider somewhere else.

Before, saving a provider again with a new ``baseUrl`` (or preset) and no ``apiKey`` kept the sealed key, and the
next call sent it to the new endpoint: in the shared mode (``PERSISTENCE_SHARED_OWNER_ID`` + ``ACCESS_CODE``) a
member who only had the access code moved the team's provider to their own listener and received
``Authorization: Bearer sk-…`` there. A key is now bound to the endpoint and preset it was entered for, and every
settings change is in the owner's log (``openmaic audit export --owner``), without the key.
"""

from __future__ import annotations

import json

import httpx

from tests.integration.test_audit import cli
from tests.integration.test_serve_models import serving
from tests.security.test_owner_endpoints import _paused, listening
from tests.serving import FAST_CONFIG

KEY = "sk-team-provider-SECRET-0123456789"
CODE = "team-access-code-0123456789"
# The listeners are on loopback, which owners' endpoints may reach only where the operator allows it.
CONFIG = FAST_CONFIG + "server: {allow_local_endpoints: true}\n"


async def _member(client: httpx.AsyncClient) -> None:
    r = await client.post("/api/access-code/verify", json={"code": CODE})
    assert r.status_code == 200, r.text


async def test_moving_a_providers_endpoint_without_its_key_drops_the_key(db_url, tmp_path):
    env = {"ACCESS_CODE": CODE, "PERSISTENCE_SHARED_OWNER_ID": "team"}
    async with listening() as team, listening() as attacker, serving(db_url, tmp_path, env=env, config=CONFIG) as admin:
        await _member(admin)
        r = await admin.put("/api/model-config", json={"revision": None, "change": {
            "kind": "provider", "id": "teamprov", "preset": "openai-compatible", "apiKey": KEY,
            "baseUrl": f"http://127.0.0.1:{team.port}/v1", "models": ["m"]}})
        assert r.status_code == 200, r.text
        r = await admin.put("/api/model-config", json={"revision": 1, "change": {
            "kind": "slots", "set": {"llm": "teamprov:m", "course.outline": "teamprov:m"}}})
        assert r.status_code == 200, r.text

        # Another member, with nothing but the access code: a browser of their own.
        async with httpx.AsyncClient(base_url=str(admin.base_url), trust_env=False, timeout=10) as member:
            await _member(member)
            moved = await member.put("/api/model-config", json={"revision": 2, "change": {
                "kind": "provider", "id": "teamprov", "preset": "openai-compatible",
                "baseUrl": f"http://127.0.0.1:{attacker.port}/v1", "models": ["m"]}})
            assert moved.status_code == 200, moved.text
            # The preset needs no key (a local model server): the run calls the member's endpoint, without one.
            run = await member.post("/api/generation-runs", json={"requirement": "Tides", "outlineReview": "auto"})
            assert run.status_code == 202, run.text
            await _paused(member, run.json()["run"]["id"])
            assert attacker.connections and all(b"authorization" not in c.lower() and KEY.encode() not in c
                                                for c in attacker.connections), attacker.connections
            view = moved.json()
            assert view["keyDropped"] == "teamprov" and "enter the key again" in view["notice"]
            assert next(p for p in view["providers"] if p["id"] == "teamprov")["key"] == {"set": False}
            # A preset change without a key drops a key as well.
            await admin.put("/api/model-config", json={"revision": 3, "change": {
                "kind": "provider", "id": "teamprov", "preset": "openai-compatible", "apiKey": KEY,
                "baseUrl": f"http://127.0.0.1:{team.port}/v1", "models": ["m"]}})
            swapped = await member.put("/api/model-config", json={"revision": 4, "change": {
                "kind": "provider", "id": "teamprov", "preset": "deepseek"}})
            assert swapped.status_code == 200 and swapped.json()["keyDropped"] == "teamprov", swapped.text
            run = await member.post("/api/generation-runs", json={"requirement": "Tides", "outlineReview": "auto"})
            assert run.status_code == 400 and run.json()["errorCode"] == "MISSING_API_KEY", run.text
        assert all(KEY.encode() not in c for c in attacker.connections) and team.connections == []

    out = tmp_path / "team.jsonl"
    r = await cli(db_url, "audit", "export", "--owner", "team", "-o", str(out))
    assert r.returncode == 0, r.stderr
    text = out.read_text()
    assert KEY not in text
    changes = [json.loads(line)["data"] for line in text.splitlines()[1:]
               if json.loads(line).get("type") == "model_settings.changed"]
    assert [(c["change"], c.get("provider"), c.get("key"), c["revision"]) for c in changes] == [
        ("provider", "teamprov", "set", 1), ("slots", None, None, 2), ("provider", "teamprov", "dropped", 3),
        ("provider", "teamprov", "set", 4), ("provider", "teamprov", "dropped", 5)]
    assert changes[2]["base_url"] == f"http://127.0.0.1:{attacker.port}/v1"
    assert changes[1]["slots_set"] == ["course.outline", "llm"]
    assert {(c["by"], c["mode"], c["client"]) for c in changes} == {("team", "shared", "127.0.0.1")}
