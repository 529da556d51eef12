"""Per-owner quotas, the anonymous minting limit and the pages of every list, against a real `openmaic serve`.

Before, an owner could keep any number of agents (beyond a fixed 100), Pro sessions, messages per session; runs
awaiting confirmation were limited, but the refusal did not say by what; anonymous mode gave every cookieless
request a new owner, so no per-owner limit bound anybody; lists came whole (or silently cut at 200).
"""

from __future__ import annotations

import httpx
import trio

from tests.serving import FAST_CONFIG, run_awaiting_confirmation, running_server

LIMITS = ("limits: {agents_per_owner: 2, sessions_per_owner: 2, messages_per_session: 2, waiting_runs_per_owner: 1,"
          " anonymous_owners_per_minute: 3}\n")
ANONYMOUS = "identity: {mode: anonymous, trusted_proxies: [127.0.0.1]}\n"


def _agent(i: int) -> dict:
    return {"agent": {"id": f"tutor-{i}", "name": f"Tutor {i}", "role": "teacher", "persona": "Kind and exact.",
                      "avatar": "🙂", "color": "#3366ff", "allowedActions": [], "priority": 5}}


def _names_key(r: httpx.Response, key: str) -> None:
    body = r.json()
    text = body["error"] if isinstance(body["error"], str) else body["error"]["message"]
    assert f"limits.{key}" in text, body


async def test_each_quota_refuses_the_one_too_many_naming_its_key_and_lists_come_in_pages(db_url, tmp_path):
    async with running_server(db_url, tmp_path, FAST_CONFIG + LIMITS) as (client, _port):
        # Agents: OpenMAIC's 409 AGENT_LIMIT_REACHED at limits.agents_per_owner.
        for i in (1, 2):
            assert (r := await client.post("/api/agents", json=_agent(i))).status_code == 201, r.text
        r = await client.post("/api/agents", json=_agent(3))
        assert r.status_code == 409 and r.json()["error"]["code"] == "AGENT_LIMIT_REACHED", r.text
        _names_key(r, "agents_per_owner")
        assert (await client.delete("/api/agents/tutor-1")).status_code == 204
        assert (await client.post("/api/agents", json=_agent(3))).status_code == 201  # room again

        # Pro sessions, and messages per session (the first prompt is one).
        sids = []
        for prompt in ("Tides", "Volcanoes"):
            r = await client.post("/api/agent/sessions", json={"prompt": prompt})
            assert r.status_code == 202, r.text
            sids.append(r.json()["id"])
        r = await client.post("/api/agent/sessions", json={"prompt": "Glaciers"})
        assert r.status_code == 429 and r.json()["errorCode"] == "INVALID_REQUEST", r.text
        _names_key(r, "sessions_per_owner")
        url = f"/api/agent/sessions/{sids[0]}/messages"
        first = await client.post(url, json={"text": "Shorter, please", "commandId": "m2"})
        assert first.status_code == 202, first.text
        r = await client.post(url, json={"text": "And a quiz"})
        assert r.status_code == 429 and r.json()["errorCode"] == "INVALID_REQUEST", r.text
        _names_key(r, "messages_per_session")
        again = await client.post(url, json={"text": "Shorter, please", "commandId": "m2"})  # a replay still answers
        assert again.status_code == 202 and again.json()["message"]["seq"] == first.json()["message"]["seq"]
        assert (await client.post(f"/api/agent/sessions/{sids[1]}/messages", json={"text": "Hi"})).status_code == 202

        # Runs awaiting their outline's confirmation count as waiting: 429 ACTIVE_RUN_LIMIT, naming the key.
        run_id = await run_awaiting_confirmation(client, "Deserts")
        r = await client.post("/api/generation-runs", json={"requirement": "Rivers"})
        assert r.status_code == 429 and r.json()["errorCode"] == "ACTIVE_RUN_LIMIT", r.text
        _names_key(r, "waiting_runs_per_owner")

        # Pages. OpenMAIC's default requests see what they always saw.
        agents = (await client.get("/api/agents")).json()
        assert [a["id"] for a in agents["agents"]][6:] == ["tutor-2", "tutor-3"] and agents["nextCursor"] is None
        page = (await client.get("/api/agents?limit=1")).json()
        assert [a["id"] for a in page["agents"]][6:] == ["tutor-2"] and page["nextCursor"]
        rest = (await client.get("/api/agents", params={"limit": 1, "cursor": page["nextCursor"]})).json()
        assert [a["id"] for a in rest["agents"]] == ["tutor-3"] and rest["nextCursor"] is None

        whole = await client.get("/api/agent/sessions")
        assert [s["id"] for s in whole.json()] == sids[::-1] and "x-next-cursor" not in whole.headers
        seen = []
        r = await client.get("/api/agent/sessions?limit=1")
        while True:
            assert r.status_code == 200 and len(r.json()) == 1
            seen += [s["id"] for s in r.json()]
            if "x-next-cursor" not in r.headers:
                break
            assert 'rel="next"' in r.headers["link"]
            r = await client.get("/api/agent/sessions", params={"limit": 1, "cursor": r.headers["x-next-cursor"]})
        assert seen == sids[::-1]
        statuses = await client.get("/api/agent/sessions/status?limit=1")
        assert list(statuses.json()) == [sids[1]] and statuses.headers["x-next-cursor"]

        runs = (await client.get("/api/generation-runs?active=1&limit=1")).json()
        assert [r["id"] for r in runs["runs"]] == [run_id] and runs["nextCursor"] is None
        rooms = (await client.get("/api/classrooms?limit=1")).json()
        assert len(rooms["classrooms"]) <= 1 and "nextCursor" in rooms

        for bad in ("limit=0", "limit=5000", "cursor=not-ours", "cursor=W10"):
            r = await client.get(f"/api/agent/sessions?{bad}")
            assert r.status_code == 400 and r.json()["details"]["path"] in ("limit", "cursor"), (bad, r.text)


async def test_anonymous_owners_are_minted_at_most_so_fast_per_client_address(db_url, tmp_path):
    async with running_server(db_url, tmp_path, FAST_CONFIG + LIMITS + ANONYMOUS) as (client, port):
        base = f"http://127.0.0.1:{port}"

        async def visit(address: str, cookies: httpx.Cookies | None = None) -> httpx.Response:
            # A fresh client each time: no cookie unless given, as a script that throws its jar away.
            async with httpx.AsyncClient(base_url=base, trust_env=False, cookies=cookies) as c:
                return await c.get("/api/classrooms", headers={"X-Forwarded-For": address})

        kept = None
        for _ in range(3):
            r = await visit("203.0.113.7")
            assert r.status_code == 200 and "anonymous_id" in r.cookies, r.text
            kept = r.cookies
        r = await visit("203.0.113.7")
        assert r.status_code == 429 and r.json()["errorCode"] == "RATE_LIMITED", r.text
        assert "anonymous_id" not in r.cookies and int(r.headers["Retry-After"]) >= 1
        _names_key(r, "anonymous_owners_per_minute")
        # A client cannot dodge it by writing its own X-Forwarded-For entry: the proxy's own entry counts.
        assert (await visit("198.51.100.1, 203.0.113.7")).status_code == 429
        # Another address has its own allowance, and a visitor who sends its cookie back is no new owner.
        assert (await visit("203.0.113.8")).status_code == 200
        assert (await visit("203.0.113.7", cookies=kept)).status_code == 200
