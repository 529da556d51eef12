"""Actor density: many running streams in one worker process, and waiting streams that cost nothing.

    python -m benchmarks.density [--actors 1000] [--waiting 10000] [--seconds 20]

Part 1 runs ``--actors`` test-kind streams at once in one worker (each step awaits a 50 ms sleep) and prints
completed steps/s and heartbeat lateness (how late the worker's single batched heartbeat fires) p50/p99.
Part 2 creates ``--waiting`` streams parked in ``waiting`` and shows the worker's tasks and memory unchanged.
"""

from __future__ import annotations

import argparse
import resource

import msgspec
import trio

from benchmarks._cluster import benchmark_database, percentile
from openmaic.actors.commands import create_session
from openmaic.events.core import SessionCreated
from openmaic.events.log import EventLog, NewStream, StreamAppend
from openmaic.store.database import open_database
from tests.runtime import FAST, open_worker


def rss_mib() -> float:
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    return pages * resource.getpagesize() / 2**20


def task_count() -> int:
    def walk(task: trio.lowlevel.Task) -> int:
        return 1 + sum(walk(t) for n in task.child_nurseries for t in n.child_tasks)

    return walk(trio.lowlevel.current_root_task())


async def main(actors: int, waiting: int, seconds: float) -> None:
    rt = msgspec.structs.replace(FAST, max_actors=actors, max_actors_per_owner=actors, lease_ttl_s=10.0,
                                 heartbeat_s=2.0, claim_poll_s=1.0, wake_poll_s=5.0)
    async with benchmark_database() as url:
        async with open_database(url) as db:
            # Created before the worker starts, so the measurement window sees a steady state.
            print(f"creating {actors} runnable streams…", flush=True)
            log = EventLog(db)
            for i in range(actors):
                await create_session(log, stream_id=f"run{i}", kind="test", owner_id="bench", command_id=None,
                                     input={"steps": 1_000_000, "sleep": 0.05})
        async with open_worker(url, rt, record_lateness=True, listener_ping_s=5.0) as worker:
            with trio.fail_after(300):
                while len(worker.actors) < actors:
                    await trio.sleep(0.1)
            await trio.sleep(2.0)
            worker.stats.heartbeat_lateness.clear()
            before = await worker.db.fetchval("SELECT count(*) FROM events WHERE type = 'test.step_done'")
            t0 = trio.current_time()
            await trio.sleep(seconds)
            after = await worker.db.fetchval("SELECT count(*) FROM events WHERE type = 'test.step_done'")
            rate = (after - before) / (trio.current_time() - t0)
            late = worker.stats.heartbeat_lateness
            print(f"\n{actors} running actors in one worker process, each step a 50 ms sleep + a fenced append:")
            print(f"  completed steps/s      {rate:,.0f}   (if appends were free: {actors / 0.05:,.0f})")
            print(f"  heartbeat lateness     p50 {percentile(late, 50) * 1000:.1f} ms, p99 "
                  f"{percentile(late, 99) * 1000:.1f} ms over {len(late)} heartbeats (target p99 < 1000 ms)")
            print(f"  lease losses           {worker.stats.lease_losses}")
            worker.shutdown()
        async with open_database(url) as db:
            # Part 1's streams were released on shutdown: end them, or part 2's worker would run them again.
            await db.execute("UPDATE streams SET status = 'terminal', wake_at = NULL WHERE id LIKE 'run%'")
        async with open_worker(url, rt) as worker:
            await trio.sleep(1.0)
            tasks0, rss0 = task_count(), rss_mib()
            print(f"\ncreating {waiting} waiting streams…", flush=True)
            for start in range(0, waiting, 500):
                await worker.log.append(*[
                    StreamAppend(stream_id=f"wait{i}", create=NewStream("test", "bench"), status="waiting",
                                 events=[SessionCreated(kind="test", owner_id="bench", input={"idle": True})])
                    for i in range(start, min(start + 500, waiting))
                ])
            await trio.sleep(3 * rt.claim_poll_s)
            tasks1, rss1 = task_count(), rss_mib()
            print(f"  worker actors {len(worker.actors)}, trio tasks {tasks0} → {tasks1}, "
                  f"RSS {rss0:.1f} → {rss1:.1f} MiB (this process, which also wrote the rows)")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--actors", type=int, default=1000)
    ap.add_argument("--waiting", type=int, default=10_000)
    ap.add_argument("--seconds", type=float, default=20.0)
    a = ap.parse_args()
    trio.run(main, a.actors, a.waiting, a.seconds)
