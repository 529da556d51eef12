"""An append call that commits but whose answer is lost with its connection: every request it carried is answered
as committed, with its seqs, and nothing is written twice. (Before, each of its callers got DatabaseUnavailable:
one lost connection failed up to a whole group of steps.)"""

from __future__ import annotations

from urllib.parse import urlsplit

import trio

from openmaic.events.core import SessionCreated, SessionInterrupted
from openmaic.events.group_commit import group_commit
from openmaic.events.log import EventLog, NewStream, StreamAppend
from openmaic.store.database import open_database
from tests.faults.blocking import held
from tests.faults.proxy import DOWN, open_proxy
from tests.runtime import wait_for

N = 8


async def test_appends_whose_answers_were_lost_are_answered_as_committed(db_url, db):
    parts = urlsplit(db_url)
    name = parts.path.lstrip("/")
    async with open_proxy(parts.port) as proxy, open_database(proxy.url(name), min_size=4, max_size=8) as via:
        log = EventLog(via)
        for i in range(N):
            await log.append(StreamAppend(stream_id=f"g{i}", events=[SessionCreated(kind="test", owner_id="o")],
                                          create=NewStream("test", "o")))
        gc = group_commit(via)
        before = gc.statistics()
        results: dict[int, list] = {}
        failures: dict[int, BaseException] = {}

        async def append(i: int) -> None:
            try:
                results[i] = await log.append(StreamAppend(stream_id=f"g{i}", events=[SessionInterrupted(reason=f"r{i}")],
                                                           attempt=None))
            except Exception as exc:
                failures[i] = exc

        async def all_committed() -> bool:
            return await db.fetchval("SELECT count(*) FROM streams WHERE id LIKE 'g%' AND head_seq = 2") == N

        async with trio.open_nursery() as nursery:
            # The streams' rows are held: the calls wait in the server (sent, their statements prepared) until
            # the answers are set to be lost, then commit.
            async with held(db_url, "SELECT 1 FROM streams WHERE id LIKE 'g%' ORDER BY id FOR UPDATE") as blocker:
                for i in range(N):
                    nursery.start_soon(append, i)

                async def calls_waiting() -> bool:
                    return bool(await blocker.blocked()) and gc.statistics()["queued"] == 0

                await wait_for(calls_waiting, timeout=20)
                proxy.discard(DOWN)  # the server's answers are lost from here on
            await wait_for(all_committed, timeout=20)
            # Committed, the answers lost: now the connections go (the server ends them), and the appends learn it.
            proxy.heal()
            await db.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                             "WHERE datname = $1 AND pid <> pg_backend_pid()", name)
        after = gc.statistics()
        assert after["requests"] - before["requests"] > after["calls"] - before["calls"]  # some were grouped
        assert failures == {}, failures
        assert {i: [(r.stream_id, r.first_seq, r.last_seq) for r in rs] for i, rs in results.items()} == \
            {i: [(f"g{i}", 2, 2)] for i in range(N)}
        rows = await db.fetch("SELECT stream_id, count(*) FROM events WHERE stream_id LIKE 'g%' GROUP BY stream_id")
        assert {r[0]: r[1] for r in rows} == {f"g{i}": 2 for i in range(N)}  # written once each
