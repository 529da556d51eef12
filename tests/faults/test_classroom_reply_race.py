"""Two writers of one classroom reply at once, across two real `openmaic serve` processes on one PostgreSQL.

A learner's question waits (its first reply failed). The test holds the learner's persistence lock, the lock every
append to the conversation takes, so that writers stop exactly where they store their claim:

* both processes are asked to answer the question (``POST …/pending``), read the same conversation, stamp their
  claims and wait on the lock together; once it is let go, one claims and answers, the other is refused, and the
  reply is kept once;
* a writer kept waiting on the lock past its claim's lapse (the database was slow) stores a claim that has already
  lapsed: it gives the question up at once, asking no model, and the other process, which takes the question from
  that lapse on, writes the one reply.

The second process connects as a role of its own, so that the test can tell whose sessions wait on the lock.
"""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import httpx
import trio

from openmaic.browser_import.store import PERSISTENCE_LOCK
from openmaic.owners.tokens import create_token
from openmaic.store.database import Database, open_database
from openmaic.store.locks import owner_lock
from openmaic.store.postgres import free_port
from tests.fakes.provider_server import Status, Text, open_fake_provider
from tests.integration.test_classroom_tutoring import AGENTS, SCENE, config, frames
from tests.serving import serve_processes, stderr_of, wait_ready

REPLY_S = 5
"""limits.classroom_reply_s: how long a claim holds its question."""

SECOND_ROLE = "openmaic_second"
CONTEXT = {"scene": SCENE, "agents": AGENTS, "course": "Tides", "language": "en"}
URL = "/api/classroom-chat/stage-tides"


async def _waiting_on_lock(db: Database, role: str, since: dt.datetime, lock_pid: int) -> dt.datetime | None:
    """When a session of ``role`` last tried the owner's lock after ``since`` (None if it has not)."""
    return await db.fetchval(
        "SELECT max(query_start) FROM pg_stat_activity WHERE datname = current_database() AND usename = $1 "
        "AND pid NOT IN (pg_backend_pid(), $2) AND query LIKE '%SELECT openmaic_owner_try_lock($1::int, $2)%' "
        "AND query_start > $3", role, lock_pid, since)


async def _wait_for_writers(db: Database, roles: list[str], since: dt.datetime, lock_pid: int) -> dt.datetime:
    """Wait until a session of each of ``roles`` tries the lock; answers the latest first try seen."""
    seen: dict[str, dt.datetime] = {}
    with trio.fail_after(15):
        while len(seen) < len(roles):
            for role in roles:
                if role not in seen and (at := await _waiting_on_lock(db, role, since, lock_pid)) is not None:
                    seen[role] = at
            await trio.sleep(0.01)
    return max(seen.values())


async def _wait_for_clock(db: Database, instant: dt.datetime) -> None:
    """Wait until the database's clock (which judges claims) passes ``instant``."""
    with trio.fail_after(REPLY_S + 15):
        while await db.fetchval("SELECT clock_timestamp()") <= instant:
            await trio.sleep(0.05)


async def _records(client: httpx.AsyncClient, auth: dict[str, str]) -> list[dict[str, Any]]:
    session = (await client.get(URL, headers=auth)).json()["sessionId"]
    r = await client.get(f"/api/persistence/runtime/sessions/{session}/records", headers=auth)
    assert r.status_code == 200, r.text
    return r.json()


async def _pending(client: httpx.AsyncClient, auth: dict[str, str], out: dict[str, Any], key: str) -> None:
    r = await client.post(f"{URL}/pending", json=CONTEXT, headers=auth)
    out[key] = (r.status_code, r.text)


async def _hold_lock(db: Database, release: trio.Event, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
    """Hold alice's persistence lock until ``release``; started with (the holding session's pid, the instant it
    took the lock)."""
    async with owner_lock(db, "alice", PERSISTENCE_LOCK) as held:
        task_status.started((await held.fetchval("SELECT pg_backend_pid()"),
                             await held.fetchval("SELECT clock_timestamp()")))
        while not release.is_set():
            with trio.move_on_after(1):
                await release.wait()
            # A transaction idle past idle_in_transaction_session_timeout (5 s) is ended by the server.
            await held.fetchval("SELECT 1")


async def _fail_a_reply(client: httpx.AsyncClient, auth: dict[str, str], fake: Any, message: str) -> dict[str, Any]:
    """Ask ``message``, whose reply fails: the question waits, under this process's claim (answered)."""
    fake.push(Status(500, {"error": {"message": "down"}}))
    r = await client.post(f"{URL}/messages", json={**CONTEXT, "message": message}, headers=auth)
    assert frames(r.text)[-1][0] == "error", r.text
    return (await _records(client, auth))[-1]["payload"]["reply"]


async def test_two_writers_of_one_reply_keep_it_once(db_url, tmp_path):
    async with open_fake_provider() as fake, open_database(db_url) as db:
        alice = {"Authorization": f"Bearer {await create_token(db, 'alice')}"}
        await db.execute(f"DO $$ BEGIN CREATE ROLE {SECOND_ROLE} LOGIN SUPERUSER; "
                         "EXCEPTION WHEN duplicate_object THEN NULL; END $$")
        second_url = db_url.replace("://postgres@", f"://{SECOND_ROLE}@")
        assert second_url != db_url
        conf = config(fake.openai_url) + f"limits: {{classroom_reply_s: {REPLY_S}}}\n"
        ports = [free_port(), free_port()]
        with serve_processes(db_url, tmp_path, [(None, ports[0]), (None, ports[1])], conf,
                             envs=[{}, {"DATABASE_URL": second_url}]) as procs:
            # A connection for every request: the test waits out a claim (5 s) between requests, as long as the
            # server keeps an idle connection (server.keep_alive_s), and a POST sent on a connection the server is
            # closing at that moment is lost ("Server disconnected without sending a response").
            fresh = httpx.Limits(max_keepalive_connections=0)
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{ports[0]}", trust_env=False, timeout=30,
                                         limits=fresh) as one, \
                    httpx.AsyncClient(base_url=f"http://127.0.0.1:{ports[1]}", trust_env=False, timeout=30,
                                      limits=fresh) as two:
                await wait_ready(one, procs, tmp_path)
                await wait_ready(two, procs, tmp_path)

                # A question whose reply failed waits; once the failed claim lapsed, both processes may answer it.
                failed = await _fail_a_reply(one, alice, fake, "Why does the sea rise?")
                await _wait_for_clock(db, dt.datetime.fromisoformat(failed["until"]))

                # Both answer it at once: each reads the conversation, stamps its claim and waits on the lock.
                fake.push(Text("The moon pulls the water.", chunks=2))
                out: dict[str, Any] = {}
                release = trio.Event()
                async with trio.open_nursery() as nursery:
                    lock_pid, since = await nursery.start(_hold_lock, db, release)
                    nursery.start_soon(_pending, one, alice, out, "one")
                    nursery.start_soon(_pending, two, alice, out, "two")
                    await _wait_for_writers(db, ["postgres", SECOND_ROLE], since, lock_pid)
                    release.set()
                assert sorted(s for s, _ in out.values()) == [200, 409], (out, stderr_of(tmp_path))
                won = frames(next(text for s, text in out.values() if s == 200))
                lost = json.loads(next(text for s, text in out.values() if s == 409))["error"]
                assert won[-1][0] == "done" and won[-1][1]["content"] == "The moon pulls the water.", won
                assert lost["code"] == "REPLY_IN_PROGRESS" and "claimed this reply first" in lost["message"], lost
                roles = [rec["payload"]["role"] for rec in await _records(two, alice)]
                assert roles == ["user", "system", "system", "assistant"], roles  # one claim stored, one reply
                assert len(fake.requests) == 2

                # A writer kept on the lock past its claim's lapse stores a lapsed claim: it gives the question up
                # without asking the model, and the other process, free to take the question from then on, does.
                await _fail_a_reply(one, alice, fake, "And the sun?")
                release = trio.Event()
                async with trio.open_nursery() as nursery:
                    lock_pid, since = await nursery.start(_hold_lock, db, release)
                    nursery.start_soon(_pending, one, alice, out, "slow")
                    tried = await _wait_for_writers(db, ["postgres"], since, lock_pid)
                    await _wait_for_clock(db, tried + dt.timedelta(seconds=REPLY_S))  # its claim was stamped before
                    release.set()
                status, text = out["slow"]
                assert status == 409, text
                error = json.loads(text)["error"]
                assert error["code"] == "REPLY_IN_PROGRESS" and "lapsed before it was stored" in error["message"]
                assert len(fake.requests) == 3  # the lapsed writer asked no model
                fake.push(Text("The sun pulls too, more weakly.", chunks=2))
                r = await two.post(f"{URL}/pending", json=CONTEXT, headers=alice)
                assert frames(r.text)[-1][0] == "done", r.text
                kept = (await two.get(URL, headers=alice)).json()
                assert [m["content"] for m in kept["messages"]] == [
                    "Why does the sea rise?", "The moon pulls the water.", "And the sun?",
                    "The sun pulls too, more weakly."], kept
                roles = [rec["payload"]["role"] for rec in await _records(one, alice)][4:]
                assert roles == ["user", "system", "system", "system", "assistant"], roles
