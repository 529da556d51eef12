"""Fan-out latency: from an append in one process to its receipt by WebSocket / SSE clients of an API process.

    python -m benchmarks.fanout [--rounds 100] [--quick] [--only ws-raw:1000:1 ...]

Setup: ``openmaic serve --role api`` runs as a subprocess on a throwaway durable cluster (or ``DATABASE_URL``).
The benchmark process creates waiting ``workbench`` session streams directly in the database
(``create_session``; only the API role runs, so no worker takes them), connects its clients to the API process, waits until every client is caught up, then
appends events itself with ``EventLog.append_one`` (one ``session.message_posted`` per stream per round; its
text carries ``time.time_ns()`` taken just before the append call).

Per delivered (client, event) pair it records:

* **total** — receive wall clock minus the send time (just before ``append_one``): what a user sees;
* **after commit** — receive wall clock minus the moment ``append_one`` returned (the commit is durable):
  the fan-out path alone (NOTIFY hint → the API process wakes → reads the stream → writes the frame);
* the append's own duration (one durable commit, fsync on) is printed separately.

Scenarios: WebSocket with 1, 100 and 1,000 clients on one stream and on 100 streams (clients spread evenly),
and SSE with 100 clients (one stream and 100 streams). One round appends one event to every stream at once and
waits until every client has it before the next round.

Two WebSocket clients: ``ws`` is trio-websocket (wsproto), ``ws-raw`` a minimal RFC 6455 reader
(``benchmarks/_raw_ws.py``). All clients live in the benchmark process, on the same two cores as the API process
and PostgreSQL, so the clients' own CPU is part of every figure; trio-websocket spends about as much CPU
receiving a message as the server spends sending it, and ``ws-raw`` about a third of that. The ``srv cpu`` and
``cli cpu`` columns show where the CPU went (per round, from /proc). Latency "from append commit to receipt" is
the ``cmt`` columns.

Baseline, same run, same database: ``append_one`` followed by one ``read_stream`` of that event from the
benchmark process on another pooled connection. It is the floor any reader in another process could reach:
one durable commit plus one read round trip, with no wake-up path, no second process and no socket to a client.
The fan-out path has to add at least a NOTIFY delivery, the API process's own read and a frame write.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import msgspec
import trio
import trio_websocket

from benchmarks._cluster import benchmark_database, percentile
from benchmarks._raw_ws import RawWebSocket
from openmaic.actors.commands import create_session
from openmaic.events.core import SessionMessagePosted
from openmaic.events.log import EventLog
from openmaic.serve import tune_gc
from openmaic.store.database import open_database
from openmaic.store.postgres import free_port

ROOT = Path(__file__).resolve().parents[1]
OWNER = "local"  # the single-user owner of the default identity mode


@dataclass
class Stats:
    total_ms: list[float] = field(default_factory=list)
    after_commit_ms: list[float] = field(default_factory=list)
    append_ms: list[float] = field(default_factory=list)
    missed: int = 0
    server_cpu_ms: float = 0.0  # the API process's CPU time per round (user + system)
    client_cpu_ms: float = 0.0  # this process's (clients and appender) CPU time per round


class Round:
    """The current round: which (stream, seq) each client waits for, and when each append started / returned."""

    def __init__(self) -> None:
        self.streams: set[str] = set()
        self.sent: dict[tuple[str, int], tuple[int, int]] = {}  # (stream, seq) -> (send ns, commit ns)
        self.pending = 0
        self.done = trio.Event()
        self.received: list[tuple[str, int, int]] = []  # (stream, seq, receive ns)

    def got(self, stream: str, seq: int, recv_ns: int) -> None:
        self.received.append((stream, seq, recv_ns))
        self.pending -= 1
        if self.pending <= 0:
            self.done.set()


class _FrameHead(msgspec.Struct):
    type: str
    seq: int = 0


_decode_frame = msgspec.json.Decoder(_FrameHead).decode  # reads type and seq, skips the envelope


class Bench:
    def __init__(self, host: str, port: int, log: EventLog) -> None:
        self.host = host
        self.port = port
        self.ws_base = f"ws://{host}:{port}"
        self.log = log
        self.round: Round | None = None
        self.seq: dict[str, int] = {}

    def deliver(self, stream: str, seq: int, recv_ns: int) -> None:
        r = self.round
        # Matched to its append later: a client may have the event before append_one has returned.
        if r is not None and stream in r.streams:
            r.got(stream, seq, recv_ns)

    async def ws_client(self, stream: str, ready: trio.Semaphore | list, task_status=trio.TASK_STATUS_IGNORED) -> None:
        url = f"{self.ws_base}/api/streams/{stream}/ws?after=0"
        async with trio_websocket.open_websocket_url(url, message_queue_size=10_000) as ws:
            started = False
            while True:
                msg = await ws.get_message()
                now = time.time_ns()
                frame = json.loads(msg)
                if frame["type"] == "caught_up" and not started:
                    started = True
                    task_status.started()
                elif frame["type"] == "event":
                    self.deliver(stream, frame["seq"], now)

    async def raw_ws_client(self, stream: str, ready: list, task_status=trio.TASK_STATUS_IGNORED) -> None:
        ws = await RawWebSocket.connect(self.host, self.port, f"/api/streams/{stream}/ws?after=0")
        try:
            started = False
            while True:
                msg = await ws.get_message()
                now = time.time_ns()
                frame = _decode_frame(msg)
                if frame.type == "caught_up" and not started:
                    started = True
                    task_status.started()
                elif frame.type == "event":
                    self.deliver(stream, frame.seq, now)
        finally:
            with trio.CancelScope(shield=True):  # closing a socket does not block; shielded so it always happens
                await ws.aclose()

    async def sse_client(self, client: httpx.AsyncClient, stream: str, task_status=trio.TASK_STATUS_IGNORED) -> None:
        async with client.stream("GET", f"/api/agent/sessions/{stream}/events?lastEventId=0",
                                 headers={"accept": "text/event-stream"}) as resp:
            resp.raise_for_status()
            started = False
            seq = None
            async for line in resp.aiter_lines():
                if line.startswith("event: caught_up") and not started:
                    started = True
                    task_status.started()
                elif line.startswith("id: "):
                    seq = int(line[4:])
                elif line == "" and seq is not None:
                    self.deliver(stream, seq, time.time_ns())
                    seq = None

    async def append(self, r: Round, stream: str, stats: Stats) -> None:
        t0 = time.time_ns()
        res = await self.log.append_one(stream, [SessionMessagePosted(text=str(t0))])
        t1 = time.time_ns()
        stats.append_ms.append((t1 - t0) / 1e6)
        r.sent[(stream, res.last_seq)] = (t0, t1)

    async def run_rounds(self, streams: list[str], clients_per_stream: dict[str, int], rounds: int,
                         stats: Stats) -> None:
        for _ in range(rounds):
            r = Round()
            r.streams = set(streams)
            r.pending = sum(clients_per_stream[s] for s in streams)
            self.round = r
            async with trio.open_nursery() as n:
                for s in streams:
                    n.start_soon(self.append, r, s, stats)
            with trio.move_on_after(5):
                await r.done.wait()
            self.round = None
            stats.missed += max(0, r.pending)
            for stream, seq, recv in r.received:
                if (stream, seq) not in r.sent:
                    stats.missed += 1
                    continue
                sent, committed = r.sent[(stream, seq)]
                stats.total_ms.append((recv - sent) / 1e6)
                stats.after_commit_ms.append((recv - committed) / 1e6)
            await trio.sleep(0.01)


async def baseline(log: EventLog, stream: str, rounds: int) -> Stats:
    stats = Stats()
    for _ in range(rounds):
        t0 = time.time_ns()
        res = await log.append_one(stream, [SessionMessagePosted(text=str(t0))])
        t1 = time.time_ns()
        (ev,) = await log.read_stream(stream, res.last_seq - 1, 1)
        t2 = time.time_ns()
        assert ev.seq == res.last_seq
        stats.append_ms.append((t1 - t0) / 1e6)
        stats.total_ms.append((t2 - t0) / 1e6)
        stats.after_commit_ms.append((t2 - t1) / 1e6)
    return stats


def process_cpu_s(pid: int | None = None) -> float:
    """User + system CPU seconds of a process (this one by default); 0 where /proc is missing."""
    if pid is None:
        t = os.times()
        return t.user + t.system
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def row(label: str, s: Stats) -> str:
    return (f"{label:<34} {len(s.total_ms):>7} {percentile(s.total_ms, 50):>8.2f} {percentile(s.total_ms, 99):>8.2f}"
            f" {percentile(s.after_commit_ms, 50):>8.2f} {percentile(s.after_commit_ms, 99):>8.2f}"
            f" {percentile(s.append_ms, 50):>8.2f} {percentile(s.append_ms, 99):>8.2f} {s.missed:>6}"
            f" {s.server_cpu_ms:>7.1f} {s.client_cpu_ms:>7.1f}")


HEADER = (f"{'scenario':<34} {'samples':>7} {'tot p50':>8} {'tot p99':>8} {'cmt p50':>8} {'cmt p99':>8}"
          f" {'app p50':>8} {'app p99':>8} {'missed':>6} {'srv cpu':>7} {'cli cpu':>7}")


async def main(args: argparse.Namespace) -> None:
    # The clients' process holds 1,000 connections too: tuned like the server, so that its collector's pauses
    # are not counted as the server's latency.
    tune_gc()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = min(hard, 65536) if hard != resource.RLIM_INFINITY else 65536
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))  # inherited by the server subprocess too
    clients_list = [1, 10] if args.quick else [1, 100, 1000]
    sse_clients = 10 if args.quick else 100
    rounds = 10 if args.quick else args.rounds
    async with benchmark_database() as url:
        with tempfile.TemporaryDirectory() as tmp:
            config = Path(tmp) / "openmaic.yml"
            config.write_text("runtime: {wake_poll_s: 1}\n")
            port = free_port()
            env = dict(os.environ, DATABASE_URL=url, OPENMAIC_CONFIG=str(config))
            err = open(Path(tmp) / "api.stderr", "w")
            proc = subprocess.Popen([sys.executable, "-m", "openmaic", "serve", "--role", "api", "--port", str(port)],
                                    cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=err)
            try:
                await _run(args, url, port, proc, clients_list, sse_clients, rounds)
            finally:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    proc.kill()
                err.close()
                if proc.returncode not in (0, -signal.SIGTERM):
                    print((Path(tmp) / "api.stderr").read_text()[-4000:], file=sys.stderr)


async def _run(args, url, port, proc, clients_list, sse_clients, rounds) -> None:
    base = f"http://127.0.0.1:{port}"
    async with open_database(url, min_size=2, max_size=20) as db, \
            httpx.AsyncClient(base_url=base, trust_env=False, timeout=30,
                              limits=httpx.Limits(max_connections=2000, max_keepalive_connections=2000)) as http:
        with trio.fail_after(30):
            while True:
                assert proc.poll() is None, "the API process exited"
                try:
                    if (await http.get("/readyz")).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                await trio.sleep(0.1)
        log = EventLog(db)
        counter = 0

        async def new_streams(n: int) -> list[str]:
            nonlocal counter
            out = []
            for _ in range(n):
                counter += 1
                sid = f"bench{counter}"
                await create_session(log, stream_id=sid, kind="workbench", owner_id=OWNER, command_id=None,
                                     status="waiting")
                out.append(sid)
            return out

        print(f"fan-out: {rounds} rounds per scenario; one round = one append per stream, all clients wait for it")
        print("tot = receive - just before append_one; cmt = receive - append_one returned; app = append_one itself"
              " (ms); srv cpu / cli cpu = CPU ms per round of the API process / of the clients' process")
        print(HEADER)
        (bs,) = await new_streams(1)
        print(row("baseline: append + read_stream", await baseline(log, bs, max(rounds, 50))), flush=True)
        bench = Bench("127.0.0.1", port, log)
        scenarios = [(kind, c, ns) for kind in ("ws", "ws-raw") for c in clients_list for ns in (1, 100) if ns <= c]
        scenarios += [("sse", sse_clients, ns) for ns in (1, min(100, sse_clients))]
        if args.only:
            wanted = {tuple(x.split(":")) for x in args.only}
            scenarios = [s for s in scenarios if (s[0], str(s[1]), str(s[2])) in wanted]
        for kind, n_clients, n_streams in scenarios:
            streams = await new_streams(n_streams)
            per = {s: 0 for s in streams}
            stats = Stats()
            async with trio.open_nursery() as nursery:
                with trio.fail_after(120):
                    for i in range(n_clients):
                        s = streams[i % n_streams]
                        per[s] += 1
                        if kind == "ws":
                            await nursery.start(bench.ws_client, s, [])
                        elif kind == "ws-raw":
                            await nursery.start(bench.raw_ws_client, s, [])
                        else:
                            await nursery.start(bench.sse_client, http, s)
                server0, client0 = process_cpu_s(proc.pid), process_cpu_s()
                await bench.run_rounds(streams, per, rounds, stats)
                stats.server_cpu_ms = (process_cpu_s(proc.pid) - server0) / rounds * 1000
                stats.client_cpu_ms = (process_cpu_s() - client0) / rounds * 1000
                nursery.cancel_scope.cancel()
            label = f"{kind}: {n_clients} clients, {n_streams} stream{'s' if n_streams > 1 else ''}"
            print(row(label, stats), flush=True)
            await trio.sleep(0.5)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("--quick", action="store_true", help="a smoke run: few clients and rounds")
    parser.add_argument("--only", nargs="+", metavar="KIND:CLIENTS:STREAMS",
                        help="run only these scenarios, e.g. ws:1000:1 sse:100:100")
    trio.run(main, parser.parse_args())
