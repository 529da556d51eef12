"""The network between a worker and PostgreSQL goes silent (no FIN, no RST), for a moment or for good.

A TCP proxy (:mod:`tests.faults.proxy`) sits between the worker and the server and stops forwarding on demand.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import urllib.parse

import httpx
import pytest
import trio
import trio.testing

from openmaic import errors
from openmaic.events.log import EventLog
from openmaic.events.wakeups import RUNNABLE
from openmaic.store.database import CANCEL_GRACE_S, open_database
from openmaic.store.postgres import free_port
from tests.faults.client import check_run, run_completed, start_run
from tests.faults.proxy import DOWN, UP, open_proxy
from tests.runtime import new_stream, open_worker, settings, wait_for
from tests.serving import ROOT, wait_ready


@pytest.fixture
def log(db):
    return EventLog(db)


def through(proxy, db_url: str) -> str:
    """``db_url`` with the proxy's address instead of the server's."""
    parts = urllib.parse.urlsplit(db_url)
    return urllib.parse.urlunsplit(parts._replace(netloc=f"{parts.username}@127.0.0.1:{proxy.port}"))


def server_port(db_url: str) -> int:
    return urllib.parse.urlsplit(db_url).port


async def test_a_claim_in_flight_at_shutdown_is_released_uncharged(db, db_url, log):
    """The claim committed, but its reply is still on the wire when the shutdown begins: the streams it took are
    released with the others, uncharged, instead of being left leased by nobody until their lease expires."""
    async with open_proxy(server_port(db_url)) as proxy:
        # No claim poll within the test: the worker claims when it is told to.
        async with open_worker(through(proxy, db_url), settings(lease_ttl_s=3.0, claim_poll_s=60)) as worker:
            await trio.testing.wait_all_tasks_blocked(0.05)  # the first claim is done; the loop waits for a hint
            proxy.hold(DOWN)  # the server's replies stop here; requests still get through
            await new_stream(log, "s1", steps=1, sleep=30)
            worker.wakeups.poke([RUNNABLE])
            await wait_for(lambda: _leased_to(db, "s1", worker.id), timeout=10)  # the claim has committed
            worker.shutdown()
            await trio.testing.wait_all_tasks_blocked(0.05)
            proxy.heal()
            with trio.fail_after(10):
                while worker.actors or not await _status_is(db, "s1", "queued"):
                    await trio.sleep(0.02)
    row = await db.fetchrow("SELECT status, lease_worker, unattended_attempts FROM streams WHERE id = 's1'")
    assert (row["status"], row["lease_worker"], row["unattended_attempts"]) == ("queued", None, 0)
    types = [e.type for e in await log.read_stream("s1")]
    assert types[-3:] == ["lease.claimed", "session.interrupted", "lease.released"]


async def _leased_to(db, sid: str, worker_id: str) -> bool:
    return await db.fetchval("SELECT lease_worker = $2 FROM streams WHERE id = $1", sid, worker_id) is True


async def _status_is(db, sid: str, status: str) -> bool:
    return await db.fetchval("SELECT status FROM streams WHERE id = $1", sid) == status


async def test_a_call_cut_off_by_a_silent_partition_ends_within_its_bounds(db_url, caplog):
    """Cancelled, a call whose server cannot be reached returns within the cancel grace (its connection is
    terminated, and the log says so, naming the grace); not cancelled, it is given up at its statement bound; held
    connections and closing the pool are bounded too."""
    slack = 1.5  # scheduling on a loaded machine
    async with open_proxy(server_port(db_url)) as proxy:
        with trio.fail_after(30):
            async with open_database(through(proxy, db_url), min_size=3, max_size=3, statement_timeout_s=1.0) as db:
                async with db.connection() as held:
                    assert await db.fetchval("SELECT 1") == 1
                    proxy.cut()
                    started = trio.current_time()
                    with trio.move_on_after(0.5):
                        await db.fetchval("SELECT 1")
                    assert trio.current_time() - started < 0.5 + CANCEL_GRACE_S + slack, "a cancelled pooled call"
                    assert [f"did not come back within {CANCEL_GRACE_S:.1f} s" in r.getMessage()
                            for r in caplog.records if r.levelno == logging.WARNING] == [True]

                    started = trio.current_time()
                    with trio.move_on_after(0.5):
                        await held.fetchval("SELECT 1")
                    assert trio.current_time() - started < 0.5 + slack, "a cancelled call on a held connection"
                    assert held.broken

                    started = trio.current_time()
                    with pytest.raises(errors.DatabaseUnavailable):
                        await db.fetchval("SELECT 1")  # nobody cancels it: its own bound (1 s + 1 s) ends it
                    assert trio.current_time() - started < 2.0 + slack, "an unanswered statement"
                    started = trio.current_time()
                started = trio.current_time()
            assert trio.current_time() - started < 2 * CANCEL_GRACE_S + slack, "closing the pool"


async def test_closing_with_a_hint_in_flight_ends_it_at_once_and_reports_no_stuck_call(db_url, caplog):
    """The NOTIFY sender's statement is never waited on once cancelled (a hint is never the carrier): closing the
    database while one is cut off terminates its connection at once, and logs no warning of a call that "did not
    come back" (nothing was waited for; how long closing takes across a partition is the test above's)."""
    async with open_proxy(server_port(db_url)) as proxy:
        with trio.fail_after(30):
            async with open_database(through(proxy, db_url), min_size=2, max_size=2) as db:
                assert await db.fetchval("SELECT 1") == 1
                proxy.cut()
                db.notify_soon("openmaic_partition_test", "hint")

                async def flush_sent() -> bool:
                    return proxy.held_bytes[UP] > 0

                await wait_for(flush_sent, timeout=10)  # the flush's statement is on the wire, unanswered
                assert db.statistics()["size"] - db.statistics()["idle"] == 1, "the flush holds a connection"
    assert not [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


# -- whole processes cut off -----------------------------------------------------------------------------------

TTL, GRACE = 3.0, 3.0
CONFIG = (
    f"runtime: {{lease_ttl_s: {TTL}, heartbeat_s: 0.5, claim_poll_s: 0.2, wake_poll_s: 1, shutdown_grace_s: {GRACE}}}\n"
    "providers: {demo: {preset: demo, options: {latencyMs: 60}}}\nslots: {llm: demo:course, agent: demo:agent}\n"
    "limits: {active_runs_per_owner: 10, waiting_runs_per_owner: 20}\n"
)


class Serve:
    """One `openmaic serve --role ROLE` process (its stderr kept in ``tmp_path``)."""

    def __init__(self, db_url: str, tmp_path, name: str, role: str, port: int | None = None) -> None:
        config = tmp_path / "openmaic.yml"
        config.write_text(CONFIG)
        env = dict(os.environ, DATABASE_URL=db_url, OPENMAIC_CONFIG=str(config))
        args = [sys.executable, "-m", "openmaic", "serve", "--role", role]
        args += ["--port", str(port)] if port is not None else []
        self.name = name
        self.stderr = tmp_path / f"{name}.stderr"
        with self.stderr.open("w") as err:
            self.proc = subprocess.Popen(args, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=err)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def signal(self, sig: int) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)

    async def exited(self, timeout: float) -> float:
        """Seconds until the process exits (failing past ``timeout``)."""
        started = trio.current_time()
        with trio.move_on_after(timeout):
            while self.proc.poll() is None:
                await trio.sleep(0.02)
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGUSR1)
            await trio.sleep(1)
        assert self.proc.poll() is not None, f"{self.name} still runs:\n{self.stderr.read_text()[-4000:]}"
        return trio.current_time() - started

    async def ready(self, timeout: float = 60) -> Serve:
        """Once the process has logged that it serves its role."""
        with trio.fail_after(timeout):
            while "ready: roles" not in self.stderr.read_text():
                assert self.proc.poll() is None, self.stderr.read_text()[-3000:]
                await trio.sleep(0.05)
        return self

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


async def test_work_cut_off_by_a_silent_partition_resumes_elsewhere_and_the_cut_off_worker_obeys_sigterm(
        db, db_url, log, tmp_path):
    procs: list[Serve] = []
    try:
        async with open_proxy(server_port(db_url)) as to_a, open_proxy(server_port(db_url)) as to_c:
            port = free_port()
            api = Serve(db_url, tmp_path, "api", "api", port)
            a = Serve(through(to_a, db_url), tmp_path, "worker-a", "worker")
            procs += [api, a]
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", trust_env=False, timeout=10) as client:
                await wait_ready(client, [api.proc, a.proc], tmp_path)
                first = [await start_run(client, f"Rivers, part a{i}") for i in range(3)]
                await wait_for(lambda: _generating_under(db, first, a.pid), timeout=30)

                # Worker A's network goes silent. C (healthy) takes A's runs over, and runs three more.
                c = Serve(through(to_c, db_url), tmp_path, "worker-c", "worker")
                procs.append(c)
                await c.ready()
                to_a.cut()
                cut_a = await db_now(db)
                second = [await start_run(client, f"Rivers, part c{i}") for i in range(3)]
                await wait_for(lambda: _claimed_since(db, first, cut_a), timeout=30)
                await wait_for(lambda: _generating_under(db, second, c.pid), timeout=30)
                delays = await takeover_delays(db, log, first, cut_a, a.pid)
                assert max(delays) <= TTL + 3.0, f"slowest takeover from the cut-off worker: {max(delays):.2f} s"

                # Now C is cut off, mid-run, and B (healthy) takes everything over. C, told to stop, cannot release
                # anything through the partition: it still ends within its grace, its calls bounded. (A second signal
                # stopping a draining worker at once is tests/integration/test_shutdown.py's.)
                b = Serve(db_url, tmp_path, "worker-b", "worker")
                procs.append(b)
                await b.ready()
                to_c.cut()
                cut_c = await db_now(db)
                c.signal(signal.SIGTERM)
                stopped_in = await c.exited(GRACE + 10)
                assert stopped_in < GRACE + 5.0, f"a cut-off worker obeys SIGTERM within its grace, not {stopped_in:.1f} s"

                # Every run completes, each step committed once.
                with trio.fail_after(120):
                    for run in first + second:
                        await run_completed(client, run)
                delays = await takeover_delays(db, log, first + second, cut_c, c.pid)
                assert max(delays) <= TTL + 3.0, f"slowest takeover from the second cut-off worker: {max(delays):.2f} s"
                for run in first + second:
                    await check_run(log, run)

                # A, cut off all along, has presumed its leases lost long ago: SIGTERM ends it within its grace.
                assert a.proc.poll() is None, "the cut-off worker kept running"
                a.signal(signal.SIGTERM)
                assert await a.exited(GRACE + 10) < GRACE + 1.0, "SIGTERM is obeyed within the grace"
                to_a.heal()
                to_c.heal()
    finally:
        for p in procs:
            p.signal(signal.SIGTERM)
        for p in procs:
            try:
                p.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()


async def db_now(db):
    return await db.fetchval("SELECT clock_timestamp()")


async def _generating_under(db, runs: list[str], pid: int) -> bool:
    """Every one of ``runs`` is leased to the worker process ``pid`` and has committed a scene step under that
    lease."""
    rows = await db.fetch(
        "SELECT s.id, s.lease_worker, EXISTS (SELECT 1 FROM events e WHERE e.stream_id = s.id AND e.attempt = s.attempt"
        " AND e.type = 'run.step_completed') AS progressed FROM streams s WHERE s.id = ANY($1::text[])", runs)
    return len(rows) == len(runs) and all(
        r["lease_worker"] and r["lease_worker"].split(":")[-2] == str(pid) and r["progressed"] for r in rows)


async def _claimed_since(db, runs: list[str], since) -> bool:
    return await db.fetchval(
        "SELECT count(DISTINCT stream_id) FROM events WHERE stream_id = ANY($1::text[]) AND type = 'lease.claimed' "
        "AND recorded_at > $2", runs, since) == len(runs)


async def takeover_delays(db, log: EventLog, runs: list[str], cut_at, pid: int) -> list[float]:
    """For each run that the process ``pid`` held at ``cut_at``, how long until another worker claimed it."""
    delays = []
    for run in runs:
        events = await log.read_stream(run, limit=100_000)
        claims = [(e, log.decode(e)) for e in events if e.type == "lease.claimed"]
        held = [c for e, c in claims if e.recorded_at <= cut_at]
        ended = [e for e in events if e.type == "session.ended" and e.recorded_at <= cut_at]
        if not held or held[-1].worker.split(":")[-2] != str(pid) or ended:
            continue
        after = [e for e, c in claims if e.recorded_at > cut_at]
        assert after, f"{run} was never taken over"
        delays.append((after[0].recorded_at - cut_at).total_seconds())
    assert delays, "the cut-off process held none of the runs"
    return delays
