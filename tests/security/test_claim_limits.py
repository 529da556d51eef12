"""Claims keep to the account's quotas, and signed-in owners cannot take anonymous owners' names (real sockets).

An account with ``limits.agents_per_owner: 3`` that claimed two anonymous owners of 3 agents each used to hold 9
(materials and assets alike). And in ``trusted_header`` and ``token`` modes a user named ``anon:<uuid>`` was an
anonymous owner to every rule: claimable by whoever sent ``Cookie: anonymous_id=<uuid>``.
"""

from __future__ import annotations

import uuid

import httpx
import pytest

from openmaic.events.log import EventLog
from openmaic.owners.claims import ClaimQuotas, ClaimRefused, claim_owner
from openmaic.owners.tokens import _hash
from openmaic.store.database import open_database
from tests.integration.api_harness import make_config, running_api
from tests.serving import FAST_CONFIG, anonymous_then_signed_in, served_anonymous_owner

LIMITS = FAST_CONFIG + "limits: {agents_per_owner: 3, materials_per_owner: 2}\n"
JSON = {"Content-Type": "application/json"}


def browser() -> httpx.AsyncClient:
    return httpx.AsyncClient(trust_env=False, timeout=15)


async def visit(browser: httpx.AsyncClient, anon_url: str, agents: int, materials: int) -> None:
    """Work anonymously: ``agents`` agents and ``materials`` materials of the browser's own."""
    for i in range(agents):
        r = await browser.post(f"{anon_url}/api/agents", json={"agent": {
            "id": f"tutor-{i}", "name": f"Tutor {i}", "role": "teacher", "persona": "Patient"}})
        assert r.status_code == 201, r.text
    for i in range(materials):
        r = await browser.post(f"{anon_url}/api/materials", content=f"Notes {i} {uuid.uuid4()}".encode(),
                               headers={"Content-Type": "text/plain", "X-Material-Filename": f"n{i}.txt"})
        assert r.status_code == 201, r.text


async def test_a_claim_past_the_accounts_quotas_is_refused_naming_the_limit_and_moves_nothing(db_url, tmp_path):
    async with anonymous_then_signed_in(db_url, tmp_path, LIMITS) as (_, anon_url, user_url):
        async with browser() as first:
            await visit(first, anon_url, agents=3, materials=1)
            r = await first.post(f"{user_url}/api/identity/claim", headers=JSON)
            assert r.status_code == 200 and r.json()["moved"]["agents"] == 3, r.text

        async with browser() as second:
            await visit(second, anon_url, agents=3, materials=0)
            cookie = second.cookies["anonymous_id"]
            r = await second.post(f"{user_url}/api/identity/claim", headers=JSON)
            assert r.status_code == 409, r.text
            error = r.json()["error"]
            assert error["code"] == "CLAIM_OVER_QUOTA" and "limits.agents_per_owner" in error["message"], error
            assert "anonymous_id" in second.cookies  # kept: the work is still to be claimed once there is room
            # Nothing moved: the anonymous owner still has its agents, the account its three.
            r = await second.get(f"{anon_url}/api/agents")
            assert {a["id"] for a in r.json()["agents"] if not a.get("readOnly")} == {"tutor-0", "tutor-1", "tutor-2"}
            r = await second.get(f"{user_url}/api/agents")
            assert len([a for a in r.json()["agents"] if not a.get("readOnly")]) == 3

        # Materials alike: the account holds one of two; two more do not fit, and say so.
        async with browser() as third:
            await visit(third, anon_url, agents=0, materials=2)
            r = await third.post(f"{user_url}/api/identity/claim", headers=JSON)
            assert r.status_code == 409 and "limits.materials_per_owner" in r.json()["error"]["message"], r.text

    async with open_database(db_url, max_size=2) as db:
        owner = served_anonymous_owner(tmp_path, cookie)
        assert await db.fetchval("SELECT count(*) FROM agents WHERE owner_id = $1", owner) == 3
        assert await db.fetchval("SELECT count(*) FROM agents WHERE owner_id = 'alice'") == 3
        assert await db.fetchval("SELECT count(*) FROM owner_claims WHERE from_owner_id = $1", owner) == 0


async def test_with_claims_over_quota_allowed_the_claim_moves_everything(db):
    log = EventLog(db)
    anonymous = f"anon:{uuid.uuid4()}"
    for owner, n in (("alice", 3), (anonymous, 3)):
        for i in range(n):
            await db.execute("INSERT INTO agents (id, owner_id, name, role) VALUES ($1, $2, 'T', 'teacher')",
                             f"a{i}", owner)
    limits = make_config("limits: {agents_per_owner: 3, claims_over_quota: allow}").limits
    result = await claim_owner(log, anonymous, "alice", quotas=ClaimQuotas.of(limits))
    assert result.status == "claimed" and result.moved == {"agents": 3, "agentsRenamed": 3}, result
    assert await db.fetchval("SELECT count(*) FROM agents WHERE owner_id = 'alice'") == 6


async def test_signed_in_owners_cannot_be_named_like_anonymous_ones(db):
    victim = str(uuid.uuid4())
    proxy = make_config("identity: {mode: trusted_header, trusted_proxies: [127.0.0.1/32], user_header: X-User}")
    async with running_api(db, proxy) as api, api.client() as client:
        await api.create_stream("theirs", owner=f"anon:{victim}")
        for name in (f"anon:{victim}", f"ANON:{victim}", "anon:x"):
            r = await client.get("/api/agent/sessions/theirs", headers={"X-User": name})
            assert r.status_code == 401 and "anonymous owners' namespace" in r.json()["error"], r.text
        assert (await client.get("/api/agent/sessions", headers={"X-User": "alice"})).status_code == 200
    # A token whose owner was stored with that name before (tokens create refuses it now) is refused too.
    token = f"tok_0123456789ab.{uuid.uuid4().hex}"
    await db.execute("INSERT INTO api_tokens (id, owner_id, token_hash) VALUES ('tok_0123456789ab', $1, $2)",
                     f"anon:{victim}", _hash(token))
    async with running_api(db, make_config("identity: {mode: token}")) as api, api.client() as client:
        r = await client.get("/api/agent/sessions/theirs", headers={"Authorization": f"Bearer {token}"})
        assert r.status_code == 401 and "anonymous owners' namespace" in r.json()["error"], r.text


async def test_asset_bytes_are_counted_like_agents_and_materials(db):
    log = EventLog(db)
    anonymous = f"anon:{uuid.uuid4()}"
    for i, (owner, size) in enumerate((("alice", 600), (anonymous, 500))):
        await db.execute("INSERT INTO assets (id, owner_id, media_type, size, sha256, data) "
                         "VALUES ($1, $2, 'image/png', $3, '\\x00', '\\x00')", f"asset_{i:032x}", owner, size)
    with pytest.raises(ClaimRefused) as refused:
        await claim_owner(log, anonymous, "alice", quotas=ClaimQuotas(asset_bytes=1000))
    assert refused.value.error_code == "CLAIM_OVER_QUOTA" and refused.value.status == 409
    assert refused.value.details == {"key": "limits.asset_bytes_per_owner", "limit": 1000, "held": 600, "adding": 500}
    assert await db.fetchval("SELECT count(*) FROM assets WHERE owner_id = $1", anonymous) == 1
    assert (await claim_owner(log, anonymous, "alice", quotas=ClaimQuotas(asset_bytes=1100))).status == "claimed"
