"""Fair sharing of the workers' slots: a few cookies pointing their chat slots at an endpoint that never answers
cannot stall every other owner's run.

Over real sockets: `openmaic serve` (every role, four actor slots, at most two per owner), a tarpit (a local
HTTP server that accepts a chat completion request and never answers), attackers from one address holding many
runs from many anonymous cookies, and a victim from another address whose run (the demo provider) must start
within 5 s. And in PostgreSQL: the claim gives every owner a turn before any owner a second slot.
"""

from __future__ import annotations

import httpx
import trio

from openmaic.events.core import SessionCreated
from openmaic.events.log import EventLog, NewStream, StreamAppend
from openmaic.store.database import open_database
from openmaic.store.postgres import free_port
from openmaic.store.queries import Q
from tests.serving import serve_processes, stderr_of, wait_ready

CONFIG = """\
runtime: {lease_ttl_s: 3, heartbeat_s: 0.5, claim_poll_s: 0.2, wake_poll_s: 1, shutdown_grace_s: 1,
          max_actors: 4, max_actors_per_owner: 2}
identity: {mode: anonymous, trusted_proxies: [127.0.0.1]}
server: {allow_local_endpoints: true}
"""
ATTACKERS = 5
"""Anonymous cookies from one address, each with its two runs (limits.active_runs_per_owner): ten tarpit runs
for four slots."""
SLOTS = ("course.outline", "course.agents", "course.content", "course.actions")


async def tarpit(task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED) -> None:
    """Accept connections, read what they send (a chat completion request), never answer."""

    async def hold(stream: trio.SocketStream) -> None:
        while await stream.receive_some(65536):
            pass

    port = free_port()
    await trio.serve_tcp(hold, port, host="127.0.0.1", task_status=task_status)


async def held_runs(db) -> int:
    return await db.fetchval("SELECT count(*) FROM streams WHERE kind = 'generation' AND status = 'running'")


async def test_tarpit_runs_from_many_cookies_leave_a_victims_run_a_slot(db_url, tmp_path):
    port = free_port()
    async with trio.open_nursery() as nursery, open_database(db_url, max_size=2) as db:
        listeners = await nursery.start(tarpit)
        pit = listeners[0].socket.getsockname()[1]
        with serve_processes(db_url, tmp_path, [(None, port)], CONFIG) as procs:
            base = f"http://127.0.0.1:{port}"
            async with httpx.AsyncClient(base_url=base, trust_env=False, timeout=15) as probe:
                await wait_ready(probe, procs, tmp_path)
            attack = []
            for _ in range(ATTACKERS):  # each a cookie of its own, all from 127.0.0.1
                async with httpx.AsyncClient(base_url=base, trust_env=False, timeout=15) as attacker:
                    add = {"kind": "provider", "id": "pit", "preset": "openai-compatible", "apiKey": "sk-x",
                           "baseUrl": f"http://127.0.0.1:{pit}/v1", "models": ["m1"]}
                    r = await attacker.put("/api/model-config", json={"revision": None, "change": add})
                    assert r.status_code == 200, r.text
                    r = await attacker.put("/api/model-config", json={"revision": 1, "change": {
                        "kind": "slots", "set": {s: "pit:m1" for s in SLOTS}}})
                    assert r.status_code == 200, r.text
                    for _ in range(2):
                        r = await attacker.post("/api/generation-runs",
                                                json={"requirement": "Tides", "outlineReview": "auto"})
                        assert r.status_code == 202, r.text
                        attack.append(r.json()["run"]["id"])
            # The attackers' address holds its share of the slots (and would hold them for minutes).
            with trio.fail_after(15):
                while await held_runs(db) < 2:
                    await trio.sleep(0.1)

            async with httpx.AsyncClient(base_url=base, trust_env=False, timeout=15,
                                         headers={"X-Forwarded-For": "10.1.2.3"}) as victim:
                r = await victim.post("/api/generation-runs", json={"requirement": "Fractions", "outlineReview": "auto"})
                assert r.status_code == 202, r.text
                submitted = trio.current_time()
                run = r.json()["run"]["id"]
                with trio.fail_after(5):
                    while not await db.fetchval("SELECT 1 FROM events WHERE stream_id = $1 AND type = 'lease.claimed'",
                                                run):
                        await trio.sleep(0.05)
                started = trio.current_time() - submitted
            # The attackers never held more than their share while the victim's run was claimed.
            attackers_held = await db.fetchval(
                "SELECT count(*) FROM streams WHERE id = ANY($1) AND status = 'running'", attack)
            assert attackers_held <= 2, attackers_held
            assert started < 5
            assert all(p.poll() is None for p in procs), stderr_of(tmp_path)
        nursery.cancel_scope.cancel()


async def queued(log: EventLog, sid: str, owner: str) -> None:
    await log.append(StreamAppend(stream_id=sid, create=NewStream("generation", owner), status="queued", events=[
        SessionCreated(kind="generation", owner_id=owner)]))


async def test_every_owner_gets_a_turn_before_any_gets_a_second_and_no_owner_more_than_its_cap(db):
    log = EventLog(db)
    for i in range(4):  # alice queued first: oldest due
        await queued(log, f"alice-{i}", "alice")
    await queued(log, "bob-0", "bob")
    await queued(log, "carol-0", "carol")
    # bob and carol: anonymous owners last seen from one address, which shares their slots.
    await db.execute("INSERT INTO anonymous_clients (owner_id, share_key) VALUES ('bob', 'anon:client:10.0.0.1'), "
                     "('carol', 'anon:client:10.0.0.1')")
    await queued(log, "dave-0", "dave")

    async def claim(limit: int, worker: str = "w1") -> set[str]:
        rows = await db.fetch(Q.claim, worker, ["generation"], [limit], 10_000, 2)
        return {r["stream_id"] for r in rows}

    # Three slots: alice's first, the one address bob and carol share, dave's; not alice's second.
    assert await claim(3) == {"alice-0", "bob-0", "dave-0"}
    # Then each share's second; alice holds one, so one more of hers; the address's second (carol).
    assert await claim(5) == {"alice-1", "carol-0"}
    # At the cap: nothing more for this worker, however many slots it has free.
    assert await claim(5) == set()
    # Another worker has a share of its own.
    assert await claim(5, "w2") == {"alice-2", "alice-3"}
