"""The owners' live library lists (``/api/classrooms/ws`` and ``/events``) over real sockets, with the library
projection running: one reader per owner, woken only by that owner's card changes.

Queries are counted at the one database gateway (every read of an owner's cards is ``Q.library_cards_of_owner``
through ``Database.fetch``), by owner.
"""

from __future__ import annotations

import collections
import functools
import json
from typing import Any

import httpx
import trio

from openmaic.api import classrooms
from openmaic.courses.events import CourseCreated, CourseRetitled
from openmaic.events.log import NewStream, StreamAppend
from openmaic.projections.library import LibraryCards
from openmaic.projections.projector import run_projectors
from openmaic.store.queries import Q
from tests.integration.api_harness import make_config, raw_ws, running_api, sse_frames
from tests.runtime import wait_for

# Owners named by a trusted proxy's header; the poll backstop is long, so every read in the test is one that a
# hint (or a first follower) caused.
CONFIG = ("identity: {mode: trusted_header, trusted_proxies: [127.0.0.1/32], user_header: X-User}\n"
          "runtime: {wake_poll_s: 600}\n")  # fmt: skip


class Clients:
    """Live-list clients, each recording the frames it received."""

    def __init__(self, api: Any, http: httpx.AsyncClient) -> None:
        self.api = api
        self.http = http
        self.frames: dict[tuple[str, int], list[dict[str, Any]]] = {}

    def of(self, owner: str) -> list[list[dict[str, Any]]]:
        return [f for (o, _), f in self.frames.items() if o == owner]

    async def ws(self, owner: str, n: int) -> None:
        frames = self.frames[(owner, n)] = []
        async with raw_ws(self.api.port, "/api/classrooms/ws", headers=[(b"X-User", owner.encode())],
                          message_queue_size=8) as ws:  # fmt: skip
            while True:
                frames.append(json.loads(await ws.get_message()))

    async def sse(self, owner: str, n: int) -> None:
        frames = self.frames[(owner, n)] = []
        async with self.http.stream("GET", "/api/classrooms/events", headers={"X-User": owner}) as r:
            assert r.status_code == 200
            async with sse_frames(r) as stream:
                async for f in stream:
                    if not f.comment:
                        frames.append(f.json())


async def course(api: Any, owner: str, course_id: str, title: str) -> None:
    await api.log.append(StreamAppend(stream_id=course_id, events=[CourseCreated(title=title)],
                                      create=NewStream("course", owner)))  # fmt: skip


async def test_idle_feeds_cost_nothing_when_other_owners_work(db, monkeypatch):
    reads: collections.Counter[str] = collections.Counter()
    real_fetch_as = db.fetch_as

    async def counting_fetch_as(row: Any, sql: str, *args: Any) -> Any:
        if sql == Q.library_cards_of_owner:
            reads[args[0]] += 1
        return await real_fetch_as(row, sql, *args)

    monkeypatch.setattr(db, "fetch_as", counting_fetch_as)
    async with (
        running_api(db, make_config(CONFIG), blueprints=[classrooms.bp]) as api,
        httpx.AsyncClient(base_url=api.url, trust_env=False, timeout=60, limits=httpx.Limits(max_connections=200)) as http,
        trio.open_nursery() as nursery,
    ):
        await nursery.start(functools.partial(run_projectors, db, api.log, api.services.wakeups, [LibraryCards()],
                                              poll_s=0.2, lock_retry_s=0.1))  # fmt: skip
        await course(api, "alice", "course-a1", "Algebra")
        clients = Clients(api, http)

        async def alice_has_a_card() -> bool:
            r = await http.get("/api/classrooms", headers={"X-User": "alice"})
            return len(r.json()["classrooms"]) == 1

        await wait_for(alice_has_a_card)
        reads.clear()
        # 100 idle live lists: 40 of alice's (half WebSocket, half SSE), and one each of 60 other owners.
        for i in range(20):
            nursery.start_soon(clients.ws, "alice", i)
            nursery.start_soon(clients.sse, "alice", 100 + i)
        idle = [f"idle-{i}" for i in range(60)]
        for i, owner in enumerate(idle):
            nursery.start_soon(clients.ws if i % 2 else clients.sse, owner, 0)

        async def all_started() -> bool:
            return len(clients.frames) == 100 and all(clients.frames.values())

        await wait_for(all_started, timeout=60)
        for frames in clients.frames.values():
            assert frames[0]["type"] == "classrooms"
        assert [c["title"] for c in clients.of("alice")[0][0]["classrooms"]] == ["Algebra"]
        # One reader per owner: one read each, however many of their clients. (A reconnected listener wakes every
        # watcher once, whatever it watches, as a lost notification may have been anyone's: each resync allows
        # one more read per owner.)
        wakeups = api.services.wakeups

        def at_most(n: int) -> int:
            return n + wakeups.resyncs

        assert reads["alice"] <= at_most(1), (reads, wakeups.resyncs)
        assert all(1 <= reads[o] <= at_most(1) for o in idle), (reads, wakeups.resyncs)
        assert api.services.owner_feeds.active == 61

        # Another owner works: 30 appends (60 events) on its own streams, each hinting; its own list is read.
        for i in range(30):
            await course(api, "bob", f"course-b{i}", f"B{i}")
            await api.log.append_one(f"course-b{i}", [CourseRetitled(title=f"B{i}!")])

        async def bob_sees_all() -> bool:
            r = await http.get("/api/classrooms", headers={"X-User": "bob"})
            return sum(c["title"].endswith("!") for c in r.json()["classrooms"]) == 30

        await wait_for(bob_sees_all, timeout=30)
        # Nothing of that woke the idle lists: no read of theirs, no frame.
        assert reads["alice"] <= at_most(1) and all(reads[o] <= at_most(1) for o in idle), (reads, wakeups.resyncs)
        assert all(len(f) == 1 for f in clients.frames.values())

        # A change of alice's reaches each of her 40 clients, from one reader; the others stay quiet.
        await api.log.append_one("course-a1", [CourseRetitled(title="Algebra II")])
        await course(api, "alice", "course-a2", "Geometry")

        async def alice_sees_both() -> bool:
            for frames in clients.of("alice"):
                titles = {f["classroom"]["title"] for f in frames[1:] if f["type"] == "classroom"}
                if "Geometry" not in titles or "Algebra II" not in titles:
                    return False
            return True

        await wait_for(alice_sees_both, timeout=30)
        assert len(clients.of("alice")) == 40
        assert 2 <= reads["alice"] <= at_most(3), reads  # the first read, then one per projected batch of hers
        assert all(reads[o] <= at_most(1) for o in idle), (reads, wakeups.resyncs)
        assert all(len(clients.frames[(o, 0)]) == 1 for o in idle)
        nursery.cancel_scope.cancel()


async def test_a_reader_ends_with_its_last_client_and_a_new_client_reads_afresh(db):
    async with running_api(db, make_config(CONFIG), blueprints=[classrooms.bp]) as api, trio.open_nursery() as nursery:
        await nursery.start(functools.partial(run_projectors, db, api.log, api.services.wakeups, [LibraryCards()],
                                              poll_s=0.2, lock_retry_s=0.1))  # fmt: skip
        feeds = api.services.owner_feeds
        async with raw_ws(api.port, "/api/classrooms/ws", headers=[(b"X-User", b"carol")]) as ws:
            assert json.loads(await ws.get_message()) == {"type": "classrooms", "classrooms": []}
            assert feeds.active == 1
            await course(api, "carol", "course-c1", "Optics")
            change = json.loads(await ws.get_message())
            assert change["type"] == "classroom" and change["classroom"]["title"] == "Optics"
            await api.log.append_one("course-c1", [CourseRetitled(title="Optics 2")])
            assert json.loads(await ws.get_message())["classroom"]["title"] == "Optics 2"

        async def no_reader() -> bool:
            return feeds.active == 0

        await wait_for(no_reader)
        async with raw_ws(api.port, "/api/classrooms/ws", headers=[(b"X-User", b"carol")]) as ws:
            first = json.loads(await ws.get_message())
            assert [c["title"] for c in first["classrooms"]] == ["Optics 2"]
        nursery.cancel_scope.cancel()
