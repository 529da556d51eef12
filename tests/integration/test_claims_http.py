"""POST /api/identity/claim over real sockets against real `openmaic serve` processes with PostgreSQL, the way a
browser does it: one cookie jar for the anonymous visit and the signed-in one.

The main scenario runs the deployment OpenMAIC's way for a site that adds sign-in: one API process answers
anonymous visitors (``anonymous_id`` cookie), another answers signed-in users (here a single user, ``alice``),
and a worker process runs the generation. The visitor starts a run anonymously, with model settings of their
own (the deployment turns every chat slot off, so a step that did not find them after the claim would fail),
signs in while the run is generating, and claims: the run finishes for the account with every step committed
once, the job stays pollable, and the old identity is retired.
"""

from __future__ import annotations

import collections

import httpx
import msgspec
import pytest
import trio

from openmaic.events.log import EventLog
from openmaic.owners.claims import claim_stream_id
from openmaic.store.database import open_database
from tests.classrooms import assert_classroom_ready
from tests.serving import FAST_CONFIG, anonymous_then_signed_in, running_server, served_anonymous_owner, stderr_of

SLOW_DEMO = FAST_CONFIG + """\
providers: {demo: {preset: demo, options: {latencyMs: 8}}}
slots: {llm: null}
"""
OWN_SLOTS = {s: "demo:course" for s in ("course.outline", "course.agents", "course.content", "course.actions")}
JSON = {"Content-Type": "application/json"}


async def poll(client: httpx.AsyncClient, url: str, done, *, timeout: float = 90) -> dict:
    """GET ``url`` until ``done(json)``; the last answer."""
    with trio.fail_after(timeout):
        while True:
            r = await client.get(url)
            assert r.status_code == 200, r.text
            if done(r.json()):
                return r.json()
            await trio.sleep(0.1)


def dropped(response: httpx.Response) -> bool:
    """Whether the answer removes the anonymous_id cookie."""
    return any(v.startswith("anonymous_id=") and "Max-Age=0" in v for v in response.headers.get_list("set-cookie"))


async def test_a_claim_while_the_run_generates_moves_it_and_loses_or_repeats_no_step(db_url, tmp_path):
    others = [("worker", None), ("projector", None)]
    async with anonymous_then_signed_in(db_url, tmp_path, SLOW_DEMO, others=others) as (procs, anon_url, user_url):
        # One cookie jar, as one browser: cookies do not depend on the port.
        async with httpx.AsyncClient(trust_env=False, timeout=15) as browser:

            # Anonymous: settings of their own, a material, a run.
            r = await browser.put(f"{anon_url}/api/model-config",
                                  json={"revision": None, "change": {"kind": "slots", "set": OWN_SLOTS}})
            assert r.status_code == 200, r.text
            cookie = browser.cookies['anonymous_id']
            anonymous = served_anonymous_owner(tmp_path, cookie)
            r = await browser.post(f"{anon_url}/api/materials", content=b"Fractions are parts of a whole.",
                                   headers={"Content-Type": "text/plain", "X-Material-Filename": "notes.txt"})
            assert r.status_code == 201, r.text
            material = r.json()["materialId"]
            r = await browser.post(f"{anon_url}/api/generation-runs",
                                   json={"requirement": "Fractions for 10-year-olds", "outlineReview": "auto"})
            assert r.status_code == 202, r.text
            run_id = r.json()["run"]["id"]
            run = await poll(browser, f"{anon_url}/api/generation-runs/{run_id}",
                             lambda j: j["run"]["progress"]["scenesCompleted"] >= 1
                             or j["run"]["state"] in ("completed", "paused", "ended"))
            assert run["run"]["state"] == "generating", run  # the claim lands while scenes are being written
            total = run["run"]["progress"]["scenesTotal"]
            assert run["run"]["progress"]["scenesCompleted"] < total

            # Signed in (the same browser, the same jar): the claim.
            r = await browser.post(f"{user_url}/api/identity/claim", headers=JSON)
            assert r.status_code == 200, r.text
            body = r.json()
            assert body["status"] == "claimed"
            assert body["moved"]["runs"] == 1 and body["moved"]["courses"] == 1, body
            assert body["moved"]["materials"] == 1 and body["moved"]["settings"] == 1, body
            assert dropped(r) and "anonymous_id" not in browser.cookies
            assert r.headers["cache-control"] == "no-store"

            # The job started anonymously is the account's now, and finishes.
            job = await poll(browser, f"{user_url}/api/generate-classroom/{run_id}", lambda j: j["done"])
            assert job["status"] == "succeeded", job
            assert job["result"]["scenesCount"] == total
            r = await browser.get(f"{user_url}/api/classrooms/{job['result']['classroomId']}")
            assert r.status_code == 200, r.text
            assert len(r.json()["classroom"]["scenes"]) == total
            assert_classroom_ready(r.json()["classroom"])
            r = await browser.delete(f"{user_url}/api/materials/{material}")
            assert r.status_code == 200, r.text  # the material went with the rest

            # A second claim presents nothing to claim.
            r = await browser.post(f"{user_url}/api/identity/claim", headers=JSON)
            assert r.status_code == 409 and r.json()["error"]["code"] == "NO_PENDING_CLAIM"

        # The old cookie, presented again: retired where it was an identity, already claimed where it is a claim.
        old = {"anonymous_id": cookie}
        async with httpx.AsyncClient(trust_env=False, timeout=15, cookies=old) as stale:
            r = await stale.get(f"{anon_url}/api/generation-runs/{run_id}")
            assert r.status_code == 403 and dropped(r), r.text
            assert "OWNER_RETIRED" in r.text
            r = await stale.post(f"{user_url}/api/identity/claim", headers=JSON)
            assert r.status_code == 200 and r.json() == {"status": "already-claimed"} and dropped(r)
        async with httpx.AsyncClient(trust_env=False, timeout=15) as stranger:
            # Another owner (a fresh anonymous visitor) sees the run exactly as a missing one.
            r = await stranger.get(f"{anon_url}/api/generation-runs/{run_id}")
            missing = await stranger.get(f"{anon_url}/api/generation-runs/run-AAAAAAAAAAAAAAAA")
            assert (r.status_code, r.text) == (missing.status_code, missing.text) == (404, "Not found")
        assert all(p.poll() is None for p in procs), stderr_of(tmp_path)

    async with open_database(db_url, max_size=2) as db:
        log = EventLog(db)
        events = await log.read_stream(run_id, limit=10_000)
        types = [e.type for e in events]
        completed = collections.Counter(msgspec.json.decode(e.data)["step"] for e in events
                                        if e.type == "run.step_completed")
        assert completed and all(n == 1 for n in completed.values()), completed
        assert sum(1 for s in completed if s.endswith(":content")) == total, completed
        assert "run.step_failed" not in types, types
        changed = types.index("stream.owner_changed")
        assert "run.step_completed" in types[:changed] and "run.step_completed" in types[changed:], types
        assert (await log.stream_row(run_id)).owner_id == "alice"
        record = [log.decode(e) for e in await log.read_stream(claim_stream_id(anonymous))]
        assert record[0].from_owner_id == anonymous and record[0].to_owner_id == "alice"


@pytest.fixture
async def alice(db_url, tmp_path):
    """A single-user server for alice (the default mode: identity.single_user_owner)."""
    async with running_server(db_url, tmp_path, FAST_CONFIG + "identity: {single_user_owner: alice}\n") as (c, port):
        yield c, port


COOKIE = {"Cookie": "anonymous_id=0f1e2d3c-4b5a-4968-8776-655443322110"}


@pytest.mark.parametrize("headers", [
    {},  # no Content-Type: an HTML form or a plain fetch
    {"Content-Type": "text/plain"},
    {"Content-Type": "application/json", "Sec-Fetch-Site": "cross-site"},
    {"Content-Type": "application/json", "Sec-Fetch-Site": "same-site"},
    {"Content-Type": "application/json", "Origin": "http://evil.example"},
    {"Content-Type": "application/json", "Origin": "null"},
])
async def test_a_claim_from_another_origin_is_refused_and_changes_nothing(alice, db_url, headers):
    client, port = alice
    r = await client.post("/api/identity/claim", headers={**COOKIE, **headers})
    assert r.status_code == 403 and r.json()["error"]["code"] == "CROSS_ORIGIN_REFUSED", r.text
    assert not dropped(r)


async def test_same_origin_claims_and_the_refusals_a_browser_can_meet(alice, db_url, tmp_path):
    client, port = alice
    same = {**COOKIE, **JSON, "Origin": f"http://127.0.0.1:{port}", "Sec-Fetch-Site": "same-origin"}
    r = await client.post("/api/identity/claim", headers=JSON)
    assert r.status_code == 409 and r.json()["error"] == {
        "code": "NO_PENDING_CLAIM", "message": "this request presents no anonymous identity to claim"}
    r = await client.post("/api/identity/claim", headers={**JSON, "Cookie": "anonymous_id=not-a-uuid"})
    assert r.status_code == 409 and r.json()["error"]["code"] == "NO_PENDING_CLAIM"
    r = await client.post("/api/identity/claim", headers=same)
    assert r.status_code == 200 and r.json() == {"status": "claimed", "moved": {}} and dropped(r)
    r = await client.post("/api/identity/claim", headers={**COOKIE, **JSON, "Origin": f"http://127.0.0.1:{port}"})
    assert r.status_code == 200 and r.json() == {"status": "already-claimed"} and dropped(r)
    r = await client.get("/api/identity/claim")
    assert r.status_code == 405

    # The same anonymous identity presented to another account: refused for good, and the cookie is dropped.
    (tmp_path / "bob").mkdir()
    # One deployment, one instance secret: the cookie stands for the same anonymous owner on bob's server.
    (tmp_path / "bob" / "instance-secret.key").write_bytes((tmp_path / "instance-secret.key").read_bytes())
    async with running_server(db_url, tmp_path / "bob", FAST_CONFIG + "identity: {single_user_owner: bob}\n") \
            as (bob, _):
        r = await bob.post("/api/identity/claim", headers={**COOKIE, **JSON})
        assert r.status_code == 409 and r.json()["error"]["code"] == "ALREADY_CLAIMED_ELSEWHERE" and dropped(r)


async def test_an_anonymous_owner_cannot_claim(db_url, tmp_path):
    async with running_server(db_url, tmp_path, FAST_CONFIG + "identity: {mode: anonymous}\n") as (client, _):
        r = await client.post("/api/identity/claim", headers={**COOKIE, **JSON})
        assert r.status_code == 403 and r.json()["error"]["code"] == "TARGET_ANONYMOUS"
        assert not dropped(r)  # it is this browser's own identity: renewed, not dropped


async def test_merged_from_over_http(alice, tmp_path):
    client, _ = alice
    assert (await client.post("/api/identity/claim", headers={**COOKIE, **JSON})).status_code == 200
    import hashlib

    salt = "a1" * 8
    owner = served_anonymous_owner(tmp_path, "0f1e2d3c-4b5a-4968-8776-655443322110")
    digest = hashlib.sha256(f"{salt}\x00{owner}".encode()).hexdigest()
    r = await client.get("/api/identity/merged-from", params={"salt": salt, "digest": digest})
    assert r.status_code == 200 and r.json() == {"merged": True} and r.headers["cache-control"] == "no-store"
    r = await client.get("/api/identity/merged-from", params={"salt": salt, "digest": "f" * 64})
    assert r.json() == {"merged": False}
    for params in ({"salt": salt}, {"salt": "short", "digest": digest}, {"salt": salt, "digest": "XYZ"},
                   {"salt": "G" * 16, "digest": digest}):
        r = await client.get("/api/identity/merged-from", params=params)
        assert r.status_code == 400, (params, r.text)
        assert r.json()["error"]["code"] in ("INVALID_REQUEST", "MISSING_REQUIRED_FIELD")


async def test_with_the_automatic_trigger_the_first_signed_in_request_claims(db_url, tmp_path):
    async with anonymous_then_signed_in(db_url, tmp_path, user_env={"OWNER_CLAIM_TRIGGER": "auto"}) \
            as (procs, anon_url, user_url):
        async with httpx.AsyncClient(trust_env=False, timeout=15) as browser:
            r = await browser.post(f"{anon_url}/api/agents", json={"agent": {
                "id": "tutor", "name": "Tutor", "role": "teacher", "persona": "Patient"}})
            assert r.status_code == 201, r.text
            cookie = browser.cookies['anonymous_id']
            anonymous = served_anonymous_owner(tmp_path, cookie)
            # Any request of the signed-in owner that presents the cookie: it claims, and drops the cookie.
            r = await browser.get(f"{user_url}/api/agents")
            assert r.status_code == 200 and "tutor" in {a["id"] for a in r.json()["agents"]}, r.text
            assert dropped(r) and "anonymous_id" not in browser.cookies
            r = await browser.post(f"{user_url}/api/identity/claim", headers=JSON)
            assert r.status_code == 409 and r.json()["error"]["code"] == "NO_PENDING_CLAIM"
    async with open_database(db_url, max_size=2) as db:
        assert await db.fetchval("SELECT to_owner_id FROM owner_claims WHERE from_owner_id = $1", anonymous) == "alice"
        record = [e.type for e in await EventLog(db).read_stream(claim_stream_id(anonymous))]
        assert record == ["owner.claimed"]


async def test_an_anonymous_owner_feed_says_owner_moved_when_it_is_claimed(db_url, tmp_path):
    # No worker: the run stays queued, in progress, in the anonymous owner's feed.
    async with anonymous_then_signed_in(db_url, tmp_path) as (procs, anon_url, user_url):
        async with httpx.AsyncClient(trust_env=False, timeout=15) as browser:
            r = await browser.post(f"{anon_url}/api/generation-runs",
                                   json={"requirement": "Tides", "outlineReview": "auto"})
            assert r.status_code == 202, r.text
            frames = []
            with trio.fail_after(30):
                async with browser.stream("GET", f"{anon_url}/api/generation-runs/events") as feed:
                    lines = feed.aiter_lines()
                    async for line in lines:
                        if line.startswith("data: "):
                            frames.append(msgspec.json.decode(line[6:]))
                            if frames[-1]["type"] == "runs":
                                assert len(frames[-1]["runs"]) == 1, frames
                                r = await browser.post(f"{user_url}/api/identity/claim", headers=JSON)
                                assert r.status_code == 200 and r.json()["moved"]["runs"] == 1, r.text
                    # The feed ended after its last frame.
            assert frames[-1] == {"type": "owner_moved"}, frames
