"""The anonymous cookie is a secret that is never the owner id, over real sockets against `openmaic serve`.

The owner id of an anonymous visitor is shown to operators (the session list), written into events
(``session.created``, ``run.created``) and audit exports; the learner key is handed to the page's script. None of
them may hold the cookie, and a cookie set to an owner id seen there must not give that owner's data. A legacy
owner (whose id was its cookie, written before) keeps its work: its cookie moves it, once, to the derived owner.
"""

from __future__ import annotations

import uuid

import httpx
import msgspec
import trio

from openmaic.events.core import SessionCreated
from openmaic.events.log import EventLog, NewStream, StreamAppend
from openmaic.modelconfig.secret_box import derive
from openmaic.owners.anonymous import AnonymousOwners
from openmaic.owners.claims import claim_owner, migrate_owner
from openmaic.owners.learners import learner_key
from openmaic.store.database import open_database
from openmaic.store.postgres import free_port
from openmaic.tools.audit import export, plan_export
from tests.serving import FAST_CONFIG, serve_processes, served_anonymous_owner, stderr_of, wait_ready

ANONYMOUS = FAST_CONFIG + "identity: {mode: anonymous}\n"
BOUND = {"X-OpenMAIC-Legacy-Import": "00112233445566778899aabbccddeeff"}


async def test_the_cookie_is_in_no_answer_event_listing_or_export_and_an_owner_id_is_no_cookie(db_url, tmp_path):
    port, admin_port = free_port(), free_port()
    with serve_processes(db_url, tmp_path, [(None, port, ["--admin-port", str(admin_port)])], ANONYMOUS) as procs:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", trust_env=False, timeout=15) as browser, \
                httpx.AsyncClient(base_url=f"http://127.0.0.1:{admin_port}", trust_env=False, timeout=15) as admin:
            await wait_ready(browser, procs, tmp_path)
            r = await browser.post("/api/generation-runs", json={"requirement": "Tides", "outlineReview": "auto"})
            assert r.status_code == 202, r.text
            run_id = r.json()["run"]["id"]
            cookie = browser.cookies["anonymous_id"]
            owner = served_anonymous_owner(tmp_path, cookie)
            assert cookie not in owner

            # The learner key the page's script is given: derived from the owner, holding neither.
            r = await browser.post("/api/identity/legacy-import-binding", json={"browserId": BOUND[next(iter(BOUND))]})
            assert r.status_code == 200, r.text
            r = await browser.get("/api/persistence/learner-key", headers=BOUND)
            assert r.status_code == 200, r.text
            key = r.json()["learnerKey"]
            assert key == learner_key(owner) and cookie not in key and owner not in key

            # The operators' list names the owner, never the cookie.
            with trio.fail_after(30):
                while True:
                    r = await admin.get("/api/admin/sessions")
                    assert r.status_code == 200, r.text
                    listed = {s["id"]: s["owner"] for s in r.json()["sessions"]}
                    if run_id in listed:
                        break
                    await trio.sleep(0.1)
            assert listed[run_id] == owner and cookie not in r.text
            r = await admin.get(f"/api/admin/sessions/{run_id}")
            assert r.status_code == 200 and cookie not in r.text and owner in r.text, r.text

            # A cookie set to the owner id the list shows is no key to that owner's work: it is re-minted.
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", trust_env=False, timeout=15) as thief:
                stolen = owner.removeprefix("anon:")
                r = await thief.get(f"/api/generation-runs/{run_id}", headers={"Cookie": f"anonymous_id={stolen}"})
                assert r.status_code == 404, r.text
                assert r.cookies["anonymous_id"] not in (stolen, cookie)
            # The owner's own cookie still is.
            assert (await browser.get(f"/api/generation-runs/{run_id}")).status_code == 200
            assert all(p.poll() is None for p in procs), stderr_of(tmp_path)

    async with open_database(db_url, max_size=2) as db:
        # No event, and no stream row, holds the cookie: not session.created, not run.created, not anything.
        assert await db.fetchval("SELECT count(*) FROM events WHERE data::text LIKE '%' || $1 || '%'", cookie) == 0
        assert await db.fetchval("SELECT count(*) FROM streams WHERE owner_id LIKE '%' || $1 || '%'", cookie) == 0
        types = {t for t, in await db.fetch("SELECT DISTINCT type FROM events WHERE stream_id = $1", run_id)}
        assert {"session.created", "run.created"} <= types
        # Nor does the owner's audit export.
        target = tmp_path / "audit.jsonl"
        await export(db, target, await plan_export(db, owner=owner), owner=owner)
        text = target.read_text()
        assert owner in text and cookie not in text


async def stream(log: EventLog, sid: str, owner: str) -> None:
    await log.append(StreamAppend(stream_id=sid, create=NewStream("workbench", owner), events=[
        SessionCreated(kind="workbench", owner_id=owner)]))


async def test_a_legacy_owners_work_moves_once_to_the_owner_its_cookie_now_stands_for(db_url, tmp_path):
    cookie = str(uuid.uuid4())
    legacy = f"anon:{cookie}"
    # Written the old way, before owner ids were derived: the owner id is the cookie.
    async with open_database(db_url, max_size=2) as db:
        log = EventLog(db)
        await stream(log, "legacy-session", legacy)
        await db.execute("INSERT INTO agents (id, owner_id, name, role) VALUES ('tutor', $1, 'Tutor', 'teacher')",
                         legacy)
    port = free_port()
    with serve_processes(db_url, tmp_path, [("api", port)], ANONYMOUS) as procs:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", trust_env=False, timeout=15,
                                     cookies={"anonymous_id": cookie}) as browser:
            await wait_ready(browser, procs, tmp_path)
            owner = served_anonymous_owner(tmp_path, cookie)
            # Several first requests at once: the work moves once, and every one of them sees it.
            answers: list[httpx.Response] = []

            async def look() -> None:
                answers.append(await browser.get("/api/agent/sessions/legacy-session"))

            async with trio.open_nursery() as nursery:
                for _ in range(4):
                    nursery.start_soon(look)
            assert [a.status_code for a in answers] == [200] * 4, [a.text for a in answers]
            assert all(a.cookies.get("anonymous_id") == cookie for a in answers)  # the same cookie, renewed
            r = await browser.get("/api/agents")
            assert r.status_code == 200 and "tutor" in [a["id"] for a in r.json()["agents"]], r.text
            # A stranger holding the owner id (seen in a listing) as a cookie gets nothing.
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", trust_env=False, timeout=15,
                                         cookies={"anonymous_id": owner.removeprefix("anon:")}) as stranger:
                assert (await stranger.get("/api/agent/sessions/legacy-session")).status_code == 404
            assert all(p.poll() is None for p in procs), stderr_of(tmp_path)

    async with open_database(db_url, max_size=2) as db:
        log = EventLog(db)
        assert (await log.stream_row("legacy-session")).owner_id == owner
        assert await db.fetchval("SELECT owner_id FROM agents WHERE id = 'tutor'") == owner
        assert await db.fetchval("SELECT to_owner_id FROM owner_claims WHERE from_owner_id = $1", legacy) == owner
        changed = [msgspec.json.decode(e.data) for e in await log.read_stream("legacy-session") if
                   e.type == "stream.owner_changed"]
        assert changed == [{"from_owner_id": legacy, "to_owner_id": owner}]  # once


async def test_a_migrated_legacy_owner_claimed_into_an_account_takes_its_legacy_self_along(db):
    log = EventLog(db)
    cookie = str(uuid.uuid4())
    legacy, owner = f"anon:{cookie}", AnonymousOwners(lambda: derive("s" * 20)).owner_of(cookie)
    await stream(log, "old", legacy)
    assert (await migrate_owner(log, legacy, owner)).status == "claimed"
    await stream(log, "new", owner)
    result = await claim_owner(log, owner, "user:alice")
    assert result.status == "claimed" and result.moved["sessions"] == 2, result
    claims = dict(await db.fetch("SELECT from_owner_id, to_owner_id FROM owner_claims"))
    assert claims == {legacy: "user:alice", owner: "user:alice"}  # one hop each
    # Late work of either id lands with the account (the owner fence follows the one hop).
    await stream(log, "late", legacy)
    assert (await log.stream_row("late")).owner_id == "user:alice"
    assert await db.fetchval("SELECT openmaic_owner($1)", legacy) == "user:alice"
