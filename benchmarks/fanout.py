"""Fan-out latency: from an append in one process to its receipt by WebSocket / SSE clients of an API process.

    python -m benchmarks.fanout [--rounds 100] [--quick] [--only ws-raw:1000:1 ...] [--client-procs 2]

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

Three WebSocket clients: ``ws`` is trio-websocket (wsproto), ``websockets`` the asyncio library of that name
(``benchmarks/_asyncio_clients.py``; not a dependency of the project: ``.venv/bin/pip install websockets==17.4``
to run its rows, which only ``--only websockets:…`` asks for), ``ws-raw`` a minimal RFC 6455 reader
(``benchmarks/_raw_ws.py``). The clients run in processes of their own (this module with ``--clients``, or the
asyncio one, driven over stdin/stdout; ``--client-procs N`` deals each scenario's clients to N of them), apart
from the appender and from the API process, as real clients would be; all of them still share the machine's
two cores with the API process and PostgreSQL. The clients go to two processes by default: a process of 1,000
trio-websocket clients spends about 70-150 ms of CPU receiving one round (70-150 µs per message, by machine), all
of it on one core, so with one process the round's p99 measures that core rather than the server. The CPU
columns show where the machine's cores went, per round: ``srv`` the API process, ``cli`` the clients' processes
together, ``pg`` PostgreSQL (postmaster, backends, and backends that ended), ``drv`` this process (the appender),
``oth`` the rest of the machine's busy time (other users' processes, the kernel's own work). Latency "from append
commit to receipt" is the ``cmt`` columns (the processes share one clock).

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
from typing import Any

import httpx
import msgspec
import psutil
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
    client_cpu_ms: float = 0.0  # the clients' processes' CPU time per round
    pg_cpu_ms: float = float("nan")  # PostgreSQL's (postmaster, backends, ended backends) per round
    driver_cpu_ms: float = 0.0  # this process's (the appender's) per round
    machine_ms: float = 0.0  # CPU time the whole machine spent busy per round, every process of every user


class _FrameHead(msgspec.Struct):
    type: str
    seq: int = 0


_decode_frame = msgspec.json.Decoder(_FrameHead).decode  # reads type and seq, skips the envelope


# -- the clients' process ---------------------------------------------------------------------------------------
#
# Driven line by line over stdin/stdout, one JSON object each way:
#   {"op": "connect", "kind", "streams": [one per client]} -> {"ok": true} once every client is caught up
#   {"op": "arm", "clients"} -> {"ok": true}; the next `clients` events received are this round's
#   (the driver then appends)                 -> {"received": [[stream, seq, receive ns], ...]} when all arrived
#   {"op": "disconnect"} -> {"ok": true}


class Receipts:
    """One round's receipts in a clients' process: ``arm`` it, then ``done`` is set once the round has all."""

    def __init__(self, new_event: Any) -> None:
        self._new_event = new_event  # trio.Event or asyncio.Event
        self.received: list[tuple[str, int, int]] = []
        self.pending = 0
        self.done = new_event()

    def arm(self, clients: int) -> None:
        self.received, self.pending, self.done = [], clients, self._new_event()

    def deliver(self, stream: str, seq: int, recv_ns: int) -> None:
        if self.pending > 0:
            self.received.append((stream, seq, recv_ns))
            self.pending -= 1
            if self.pending == 0:
                self.done.set()


class Clients(Receipts):
    def __init__(self, host: str, port: int) -> None:
        super().__init__(trio.Event)
        self.host = host
        self.port = port

    async def ws_client(self, stream: str, task_status=trio.TASK_STATUS_IGNORED) -> None:
        url = f"ws://{self.host}:{self.port}/api/streams/{stream}/ws?after=0"
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

    async def raw_ws_client(self, stream: str, task_status=trio.TASK_STATUS_IGNORED) -> None:
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


class _Lines:
    """Newline-delimited JSON over a byte stream."""

    def __init__(self, receive: trio.abc.ReceiveStream, send: trio.abc.SendStream) -> None:
        self._receive, self._send, self._buf = receive, send, b""

    async def get(self) -> dict:
        while b"\n" not in self._buf:
            chunk = await self._receive.receive_some(1 << 16)
            if not chunk:
                raise EOFError("the other process closed the pipe")
            self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        return json.loads(line)

    async def put(self, obj: dict) -> None:
        await self._send.send_all(json.dumps(obj).encode() + b"\n")


async def clients_main(port: int) -> None:
    """The clients' process: follows the driver's commands until its stdin ends."""
    tune_gc()  # 1,000 connections here too: the collector's pauses must not count as the server's latency
    raise_fd_limit()
    pipe = _Lines(trio.lowlevel.FdStream(os.dup(0)), trio.lowlevel.FdStream(os.dup(1)))
    c = Clients("127.0.0.1", port)
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", trust_env=False, timeout=30,
                                 limits=httpx.Limits(max_connections=2000, max_keepalive_connections=2000)) as http:
        while True:
            try:
                cmd = await pipe.get()
            except EOFError:
                return
            async with trio.open_nursery() as nursery:
                with trio.fail_after(120):
                    for s in cmd["streams"]:  # one client per entry
                        if cmd["kind"] == "ws":
                            await nursery.start(c.ws_client, s)
                        elif cmd["kind"] == "ws-raw":
                            await nursery.start(c.raw_ws_client, s)
                        else:
                            await nursery.start(c.sse_client, http, s)
                await pipe.put({"ok": True})
                while (cmd := await pipe.get())["op"] == "arm":
                    c.arm(cmd["clients"])
                    await pipe.put({"ok": True})
                    with trio.move_on_after(5):
                        await c.done.wait()
                    got, c.pending = c.received, 0
                    await pipe.put({"received": got})
                nursery.cancel_scope.cancel()
            await pipe.put({"ok": True})


# -- the driver -------------------------------------------------------------------------------------------------


class Bench:
    def __init__(self, log: EventLog, clients: list[_Lines]) -> None:
        self.log = log
        self.clients = clients

    async def append(self, sent: dict[tuple[str, int], tuple[int, int]], stream: str, stats: Stats) -> None:
        t0 = time.time_ns()
        res = await self.log.append_one(stream, [SessionMessagePosted(text=str(t0))])
        t1 = time.time_ns()
        stats.append_ms.append((t1 - t0) / 1e6)
        sent[(stream, res.last_seq)] = (t0, t1)

    async def run_rounds(self, streams: list[str], shares: list[int], rounds: int, stats: Stats) -> None:
        for _ in range(rounds):
            for pipe, n in zip(self.clients, shares, strict=True):
                await pipe.put({"op": "arm", "clients": n})
            for pipe in self.clients:
                await pipe.get()
            sent: dict[tuple[str, int], tuple[int, int]] = {}
            async with trio.open_nursery() as n:
                for s in streams:
                    n.start_soon(self.append, sent, s, stats)
            received = [r for pipe in self.clients for r in (await pipe.get())["received"]]
            stats.missed += sum(shares) - len(received)
            for stream, seq, recv in received:
                if (stream, seq) not in sent:
                    stats.missed += 1
                    continue
                t0, committed = sent[(stream, seq)]
                stats.total_ms.append((recv - t0) / 1e6)
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
    return (f"{label:<48} {len(s.total_ms):>7} {percentile(s.total_ms, 50):>8.2f} {percentile(s.total_ms, 99):>8.2f}"
            f" {percentile(s.after_commit_ms, 50):>8.2f} {percentile(s.after_commit_ms, 99):>8.2f}"
            f" {percentile(s.append_ms, 50):>8.2f} {percentile(s.append_ms, 99):>8.2f} {s.missed:>6}"
            f" {s.server_cpu_ms:>7.1f} {s.client_cpu_ms:>7.1f} {s.pg_cpu_ms:>7.1f} {s.driver_cpu_ms:>7.1f}"
            f" {s.machine_ms - s.server_cpu_ms - s.client_cpu_ms - s.driver_cpu_ms - _nz(s.pg_cpu_ms):>7.1f}")


def _nz(x: float) -> float:
    return 0.0 if x != x else x


HEADER = (f"{'scenario':<48} {'samples':>7} {'tot p50':>8} {'tot p99':>8} {'cmt p50':>8} {'cmt p99':>8}"
          f" {'app p50':>8} {'app p99':>8} {'missed':>6} {'srv cpu':>7} {'cli cpu':>7} {'pg cpu':>7} {'drv cpu':>7}"
          f" {'oth cpu':>7}")


def postgres_cpu_s(postmaster: int | None) -> float:
    """CPU seconds of a local PostgreSQL so far: its postmaster, its live children, and (in the postmaster's
    ``children_*`` times) the backends it reaped; NaN when it is not a local process we can see."""
    if postmaster is None:
        return float("nan")
    try:
        pm = psutil.Process(postmaster)
        t = pm.cpu_times()
        total = t.user + t.system + t.children_user + t.children_system
        for child in pm.children():
            try:
                c = child.cpu_times()
                total += c.user + c.system
            except psutil.Error:
                pass
        return total
    except psutil.Error:
        return float("nan")


def machine_busy_s() -> float:
    """CPU seconds the whole machine has spent busy (not idle, not waiting on I/O), all cores, all users."""
    t = psutil.cpu_times()
    return sum(t) - t.idle - getattr(t, "iowait", 0.0)


def raise_fd_limit() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = min(hard, 65536) if hard != resource.RLIM_INFINITY else 65536
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))  # inherited by the subprocesses too


async def main(args: argparse.Namespace) -> None:
    raise_fd_limit()
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
              " (ms); CPU ms per round: srv = the API process, cli = the clients' processes, pg = PostgreSQL,"
              " drv = this appender, oth = the rest of the machine (other users)")
        print(HEADER)
        (bs,) = await new_streams(1)
        print(row("baseline: append + read_stream", await baseline(log, bs, max(rounds, 50))), flush=True)
        await _scenarios(args, log, new_streams, proc, port, clients_list, sse_clients, rounds)


async def _postmaster(log: EventLog) -> int | None:
    """The PostgreSQL postmaster's pid when the server runs on this machine (a backend's parent), else None."""
    backend = await log.db.fetchval("SELECT pg_backend_pid()")
    try:
        parent = psutil.Process(backend).parent()
    except psutil.Error:
        return None
    return parent.pid if parent is not None and parent.name().startswith("postgres") else None


async def _client_processes(kind: str, port: int, n: int) -> list[trio.Process]:
    """``n`` processes of clients: asyncio ones for `websockets`, trio ones (this module) for the rest."""
    if kind == "websockets":
        cmd = [sys.executable, "-m", "benchmarks._asyncio_clients", str(port)]
    else:
        cmd = [sys.executable, "-m", "benchmarks.fanout", "--clients", str(port)]
    return [await trio.lowlevel.open_process(cmd, cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
            for _ in range(n)]  # fmt: skip


async def _stop(children: list[trio.Process]) -> None:
    for child in children:
        await child.stdin.aclose()
    with trio.move_on_after(10):
        for child in children:
            await child.wait()
    for child in children:
        if child.returncode is None:
            child.kill()


async def _scenarios(args, log, new_streams, proc, port, clients_list, sse_clients, rounds) -> None:
    postmaster = await _postmaster(log)
    scenarios = [(kind, c, ns) for kind in ("ws", "ws-raw") for c in clients_list for ns in (1, 100) if ns <= c]
    scenarios += [("sse", sse_clients, ns) for ns in (1, min(100, sse_clients))]
    if args.only:
        wanted = [tuple(x.split(":")) for x in args.only]
        scenarios = [(kind, int(c), int(ns)) for kind, c, ns in wanted]
    for kind, n_clients, n_streams in scenarios:
        streams = await new_streams(n_streams)
        stats = Stats()
        n_procs = min(args.client_procs, n_clients)
        children = await _client_processes(kind, port, n_procs)
        try:
            pipes = [_Lines(child.stdout, child.stdin) for child in children]
            # Client i follows stream i mod n_streams; the clients are dealt to the processes in turn, so each
            # process follows every stream alike.
            assigned: list[list[str]] = [[] for _ in pipes]
            for i in range(n_clients):
                assigned[i % n_procs].append(streams[i % n_streams])
            for pipe, mine in zip(pipes, assigned, strict=True):
                await pipe.put({"op": "connect", "kind": kind, "streams": mine})
            for pipe in pipes:
                await pipe.get()
            profiler = None
            if args.py_spy:
                # The API process sampled during the rounds only (not while clients connect): py-spy's raw
                # format, one line per distinct stack with its sample count (see --py-spy).
                out = f"{args.py_spy_out}-{kind}-{n_clients}-{n_streams}.txt"
                profiler = subprocess.Popen([args.py_spy, "record", "-p", str(proc.pid), "-r", "250", "-f", "raw",
                                             "-o", out, "--nonblocking"], stdout=subprocess.DEVNULL)  # fmt: skip
                await trio.sleep(1)
            server0 = process_cpu_s(proc.pid)
            clients0 = sum(process_cpu_s(child.pid) for child in children)
            pg0, driver0, machine0 = postgres_cpu_s(postmaster), process_cpu_s(), machine_busy_s()
            await Bench(log, pipes).run_rounds(streams, [len(mine) for mine in assigned], rounds, stats)
            stats.server_cpu_ms = (process_cpu_s(proc.pid) - server0) / rounds * 1000
            stats.client_cpu_ms = (sum(process_cpu_s(child.pid) for child in children) - clients0) / rounds * 1000
            stats.pg_cpu_ms = (postgres_cpu_s(postmaster) - pg0) / rounds * 1000
            stats.driver_cpu_ms = (process_cpu_s() - driver0) / rounds * 1000
            stats.machine_ms = (machine_busy_s() - machine0) / rounds * 1000
            if profiler is not None:
                profiler.send_signal(signal.SIGINT)
                profiler.wait()
            for pipe in pipes:
                await pipe.put({"op": "disconnect"})
            for pipe in pipes:
                await pipe.get()
        finally:
            await _stop(children)
        procs = f" ({n_procs} procs)" if n_procs > 1 else ""
        label = f"{kind}: {n_clients} clients, {n_streams} stream{'s' if n_streams > 1 else ''}{procs}"
        print(row(label, stats), flush=True)
        await trio.sleep(0.5)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("--quick", action="store_true", help="a smoke run: few clients and rounds")
    parser.add_argument("--only", nargs="+", metavar="KIND:CLIENTS:STREAMS",
                        help="run only these scenarios, e.g. ws:1000:1 sse:100:100 websockets:1000:100")
    parser.add_argument("--client-procs", type=int, default=2, metavar="N",
                        help="spread each scenario's clients over N processes (default 2: 1,000 trio-websocket "
                             "clients in one process need more CPU per round than one core gives in 100 ms)")
    parser.add_argument("--py-spy", metavar="PATH", help="sample the API process with this py-spy during the rounds")
    parser.add_argument("--py-spy-out", default="fanout-profile", metavar="PREFIX",
                        help="where --py-spy writes (PREFIX-KIND-CLIENTS-STREAMS.txt)")
    parser.add_argument("--clients", type=int, metavar="PORT", help=argparse.SUPPRESS)  # the clients' process
    parsed = parser.parse_args()
    if parsed.clients:
        trio.run(clients_main, parsed.clients)
    else:
        trio.run(main, parsed)
