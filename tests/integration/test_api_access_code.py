"""OpenMAIC's identity modes from the environment and its access-code gate, against a real `openmaic serve`: every
/api route of the OpenAPI document but health answers 401 without the access cookie; verify sets it; attempts are
rate-limited; a shared team owner without ACCESS_CODE stops the boot."""

from __future__ import annotations

import os
import subprocess
import sys

import httpx
import pytest
import trio

from openmaic.store.postgres import free_port
from tests.integration.test_serve_models import serving

CODE = "open-sesame-0123456789"


def _concrete(path: str) -> str:
    return path.replace("{", "").replace("}", "")  # /api/runs/{id} -> /api/runs/id


async def test_every_api_route_but_health_needs_the_access_cookie(db_url, tmp_path):
    env = {"ACCESS_CODE": CODE, "OWNER_SINGLE_USER": "true", "OWNER_SINGLE_USER_ID": "ada"}
    async with serving(db_url, tmp_path, env=env) as client:
        assert (await client.get("/api/health")).status_code == 200
        status = (await client.get("/api/access-code/status")).json()
        assert status == {"success": True, "enabled": True, "authenticated": False}
        r = await client.post("/api/access-code/verify", json={"code": "wrong"})
        assert r.status_code == 401 and "set-cookie" not in r.headers
        r = await client.post("/api/access-code/verify", json={"code": CODE})
        assert r.status_code == 200 and r.json() == {"success": True}
        assert "openmaic_access" in r.headers["set-cookie"] and CODE not in r.headers["set-cookie"]
        assert (await client.get("/api/access-code/status")).json()["authenticated"] is True
        document = (await client.get("/api/openapi.json")).json()  # the client holds the cookie now
        assert (await client.get("/api/model-config")).status_code == 200
        async with httpx.AsyncClient(base_url=client.base_url, trust_env=False, timeout=10) as stranger:
            checked = 0
            for path, operations in document["paths"].items():
                if not path.startswith("/api/"):
                    continue
                for method in operations:
                    if method.upper() not in ("GET", "POST", "PUT", "PATCH", "DELETE"):
                        continue
                    body = {"json": {}} if method.upper() in ("POST", "PUT", "PATCH") else {}
                    r = await stranger.request(method.upper(), _concrete(path), **body)
                    if path == "/api/health" or path.startswith("/api/access-code/"):
                        assert r.status_code != 401, (method, path)
                        continue
                    checked += 1
                    assert r.status_code == 401, (method, path, r.status_code)
                    assert r.json() == {"success": False, "errorCode": "INVALID_REQUEST",
                                        "error": "Access code required"}, (method, path)
            assert checked >= 15
            assert (await stranger.get("/api/no-such-route")).status_code == 401  # gated before routing
            assert (await stranger.get("/healthz")).status_code == 200  # operations stay open
            forged = await stranger.get("/api/model-config", headers={"Cookie": "openmaic_access=" + "0" * 64})
            assert forged.status_code == 401


async def test_verification_attempts_are_rate_limited(db_url, tmp_path):
    async with serving(db_url, tmp_path, env={"ACCESS_CODE": CODE}) as client:
        answers = [(await client.post("/api/access-code/verify", json={"code": f"guess-{i}"})).status_code
                   for i in range(12)]
        assert answers[:10] == [401] * 10 and answers[10:] == [429, 429]
        r = await client.post("/api/access-code/verify", json={"code": CODE})
        assert r.status_code == 429 and int(r.headers["retry-after"]) > 0
        assert r.json()["errorCode"] == "RATE_LIMITED"
        for body in ({}, {"code": 5}, {"code": CODE, "extra": 1}):
            assert (await client.post("/api/access-code/verify", json=body)).status_code == 400


async def test_a_shared_team_owner_and_bearer_tokens_pass_the_gate(db_url, tmp_path):
    env = {"ACCESS_CODE": CODE, "PERSISTENCE_SHARED_OWNER_ID": "team-a"}
    async with serving(db_url, tmp_path, env=env) as client:
        await client.post("/api/access-code/verify", json={"code": CODE})
        r = await client.put("/api/model-config", json={"revision": None, "change": {"kind": "slots",
                                                                                      "set": {"image": None}}})
        assert r.status_code == 200, r.text
    async with serving(db_url, tmp_path, env={"ACCESS_CODE": CODE},
                       config="identity: {mode: token}\n") as client:
        token = subprocess.run([sys.executable, "-m", "openmaic", "tokens", "create", "--owner", "bot"],
                               env={**os.environ, "DATABASE_URL": db_url}, capture_output=True, text=True,
                               check=True).stdout.strip().splitlines()[-1]
        r = await client.get("/api/model-config", headers={"Authorization": f"Bearer {token}"})
        assert r.status_code == 200, r.text
        assert (await client.get("/api/model-config", headers={"Authorization": "Bearer tok_x.y"})).status_code == 401


@pytest.mark.parametrize(("env", "message"), [
    ({"PERSISTENCE_SHARED_OWNER_ID": "team-a"}, "PERSISTENCE_SHARED_OWNER_ID needs ACCESS_CODE"),
    ({"PERSISTENCE_SHARED_OWNER_ID": "t", "OWNER_SINGLE_USER": "true", "ACCESS_CODE": "c"}, "are both set"),
])  # fmt: skip
async def test_refused_owner_environments_stop_the_boot(db_url, tmp_path, env, message):
    run_env = {k: v for k, v in os.environ.items() if k != "OPENMAIC_CONFIG"}
    run_env.update(DATABASE_URL=db_url, OPENMAIC_DATA_DIR=str(tmp_path), **env)
    done = await trio.to_thread.run_sync(lambda: subprocess.run(
        [sys.executable, "-m", "openmaic", "serve", "--port", str(free_port())], cwd=tmp_path, env=run_env,
        capture_output=True, text=True, timeout=60))
    assert done.returncode == 2 and message in done.stderr
