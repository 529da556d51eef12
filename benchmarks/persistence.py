"""OpenMAIC's browser persistence under load, over HTTP against a real `openmaic serve`:

1. **Runtime appends by depth.** One learner appends records to one session, one after another, up to
   ``--records`` (10,000); the latency of each append is kept, and the report gives the median and p95 of the
   20 appends around record 10, 1,000 and 10,000. An append reads and writes the session's head row, never its
   history, so the three should match.
2. **Two owners.** Owner B reads its runtime session and its document in a loop; the p50/p95 of its reads are
   measured alone, then while owner A writes as fast as ``--writers`` tasks can (whole-document saves of 20
   scenes and runtime appends of its own, from a process of its own), ``--rounds`` times over (the load of a
   shared machine drifts: each loaded window follows its own alone window). The ratio says how much A's heavy
   writes cost B's reads; the load average is printed beside it.

    .venv/bin/python -m benchmarks.persistence            # full run, about 4 minutes
    .venv/bin/python -m benchmarks.persistence --quick    # smoke run

Without ``DATABASE_URL`` a throwaway durable PostgreSQL cluster is started; with it, a fresh database on that
server is created and dropped.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import trio

from benchmarks._cluster import percentile, run_on_fresh_database
from openmaic.store.postgres import free_port

ROOT = Path(__file__).resolve().parents[1]
CONFIG = """identity: {mode: anonymous}
limits: {anonymous_owners_per_minute: 1000, runtime_records_per_session: 100000, json_body_bytes: 4194304}
"""
T0 = "2026-01-01T00:00:00.000Z"
THEME = {"backgroundColor": "#ffffff", "themeColors": ["#5b9bd5"], "fontColor": "#333333", "fontName": "Arial"}


def document(stage_id: str, scenes: int = 20) -> dict:
    def slide(i: int) -> dict:
        elements = [{"id": f"t{i}-{k}", "type": "text", "top": 10 * k, "left": 0, "width": 400, "height": 40,
                     "rotate": 0, "content": f"<p>Paragraph {k} of scene {i}: " + "words " * 40 + "</p>",
                     "defaultFontName": "Arial", "defaultColor": "#333"} for k in range(5)]
        canvas = {"id": f"c{i}", "viewportSize": 1000, "viewportRatio": 0.5625, "theme": THEME, "elements": elements}
        return {"id": f"s{i}", "stageId": stage_id, "type": "slide", "title": f"Scene {i}", "order": i,
                "content": {"type": "slide", "canvas": canvas}}

    return {"stage": {"id": stage_id, "name": "Benchmark", "createdAt": 1, "updatedAt": 2},
            "scenes": [slide(i) for i in range(scenes)]}


def record(session_id: str, i: int) -> dict:
    return {"id": f"r{i}", "sessionId": session_id, "createdAt": T0, "sceneId": f"s{i % 20}",
            "payload": {"role": "user", "content": f"message {i} " + "x" * 100}}


async def visitor(base: str) -> tuple[httpx.AsyncClient, str]:
    c = httpx.AsyncClient(base_url=base + "/api/persistence", trust_env=False, timeout=60)
    key = (await c.get("/learner-key")).json()["learnerKey"]
    return c, key


async def new_session(c: httpx.AsyncClient, key: str, session_id: str) -> None:
    r = await c.post("/runtime/sessions", json={"id": session_id, "kind": "chat", "stageId": "stage-1",
                                                  "learnerKey": key, "status": "active", "createdAt": T0,
                                                  "updatedAt": T0})
    assert r.status_code == 201, r.text


async def appends_by_depth(base: str, total: int) -> dict[int, list[float]]:
    c, key = await visitor(base)
    try:
        await new_session(c, key, "depth")
        marks = [m for m in (10, 1_000, 10_000) if m <= total]
        windows: dict[int, list[float]] = {m: [] for m in marks}
        last = max(marks) + 10
        for i in range(last):
            t = time.perf_counter()
            r = await c.post("/runtime/sessions/depth/records", json=record("depth", i))
            elapsed = time.perf_counter() - t
            assert r.status_code == 201 and r.json()["seq"] == i, r.text
            for m in marks:
                if m - 10 <= i < m + 10:
                    windows[m].append(elapsed)
            if i and i % 2_000 == 0:
                print(f"  … {i} records", file=sys.stderr, flush=True)
        return windows
    finally:
        await c.aclose()


async def reads_of_b(c: httpx.AsyncClient, seconds: float) -> list[float]:
    out: list[float] = []
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        for path in ("/runtime/sessions/b-session", "/documents/b-doc"):
            t = time.perf_counter()
            r = await c.get(path)
            out.append(time.perf_counter() - t)
            assert r.status_code == 200, r.text
    return out


async def writer_process(base: str, writers: int, seconds: float) -> None:
    """Owner A (``--writer``): ``writers`` tasks saving whole documents and appending records for ``seconds``, in a
    process of its own so that building and encoding its bodies does not slow the client measuring B."""
    a, a_key = await visitor(base)
    writes = 0

    async def writer(n: int) -> None:
        nonlocal writes
        await new_session(a, a_key, f"a-{n}")
        i = 0
        while True:
            doc = document(f"a-doc-{n}")
            doc["stage"]["name"] = f"Benchmark {i}"  # a real change: every save is written
            assert (await a.put(f"/documents/a-doc-{n}", json=doc)).status_code == 204
            r = await a.post(f"/runtime/sessions/a-{n}/records", json=record(f"a-{n}", i))
            assert r.status_code == 201, r.text
            writes += 2
            i += 1

    try:
        with trio.move_on_after(seconds):
            async with trio.open_nursery() as nursery:
                for n in range(writers):
                    nursery.start_soon(writer, n)
    finally:
        await a.aclose()
    print(writes, flush=True)


async def two_owners(base: str, seconds: float, writers: int, rounds: int) -> list[tuple[list[float], list[float], int]]:
    """``rounds`` pairs of windows, each B alone, then B while A writes: on a shared machine the load drifts, and
    a loaded window is compared with the alone window just before it."""
    b, b_key = await visitor(base)
    out = []
    try:
        await new_session(b, b_key, "b-session")
        for i in range(20):
            assert (await b.post("/runtime/sessions/b-session/records", json=record("b-session", i))).status_code == 201
        assert (await b.put("/documents/b-doc", json=document("b-doc"))).status_code == 204
        await reads_of_b(b, 1.0)  # warm-up
        for _ in range(rounds):
            alone = await reads_of_b(b, seconds)
            proc = await trio.lowlevel.open_process(
                [sys.executable, "-m", "benchmarks.persistence", "--writer", base, "--writers", str(writers),
                 "--seconds", str(seconds + 3)], cwd=ROOT, stdout=subprocess.PIPE)
            await trio.sleep(2.0)  # A at full speed first
            loaded = await reads_of_b(b, seconds)
            assert proc.stdout is not None
            data = b""
            while chunk := await proc.stdout.receive_some():
                data += chunk
            await proc.wait()
            out.append((alone, loaded, int(data.decode().split()[-1])))
        return out
    finally:
        await b.aclose()


def ms(values: list[float], p: float) -> float:
    return percentile(values, p) * 1000


async def amain(args: argparse.Namespace, url: str) -> None:
    port = free_port()
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "openmaic.yml").write_text(CONFIG)
        env = dict(os.environ, DATABASE_URL=url, OPENMAIC_CONFIG=str(Path(tmp) / "openmaic.yml"),
                   OPENMAIC_DATA_DIR=tmp)
        proc = subprocess.Popen([sys.executable, "-m", "openmaic", "serve", "--port", str(port)], cwd=ROOT, env=env,
                                stdout=subprocess.DEVNULL, stderr=open(Path(tmp) / "serve.stderr", "w"))
        try:
            base = f"http://127.0.0.1:{port}"
            async with httpx.AsyncClient(base_url=base, trust_env=False) as probe:
                with trio.fail_after(60):
                    while True:
                        assert proc.poll() is None, (Path(tmp) / "serve.stderr").read_text()[-3000:]
                        try:
                            if (await probe.get("/readyz")).status_code == 200:
                                break
                        except httpx.TransportError:
                            pass
                        await trio.sleep(0.2)
            print(f"\nRuntime appends by depth (one session, sequential appends; ms per append); load average "
                  f"{os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
            windows = await appends_by_depth(base, args.records)
            print(f"{'at record':>10} {'p50':>8} {'p95':>8}")
            for m, values in windows.items():
                print(f"{m:>10,} {ms(values, 50):>8.2f} {ms(values, 95):>8.2f}")
            print(f"\nTwo owners: B's reads (GET session, GET document) alone and while A writes with "
                  f"{args.writers} tasks (ms), {args.rounds} rounds of {args.seconds:g} s windows")
            load_before = os.getloadavg()[0]
            results = await two_owners(base, args.seconds, args.writers, args.rounds)
            print(f"{'':>20} {'p50':>8} {'p95':>8} {'reads':>7}")
            for n, (alone, loaded, writes) in enumerate(results, 1):
                print(f"{f'round {n}: B alone':>20} {ms(alone, 50):>8.2f} {ms(alone, 95):>8.2f} {len(alone):>7}")
                print(f"{'B, A writing':>20} {ms(loaded, 50):>8.2f} {ms(loaded, 95):>8.2f} {len(loaded):>7}   "
                      f"ratio p50 {ms(loaded, 50) / ms(alone, 50):.2f}, A wrote {writes / (args.seconds + 3):.0f}/s")
            alone = [x for r in results for x in r[0]]
            loaded = [x for r in results for x in r[1]]
            writes = sum(r[2] for r in results)
            print(f"all rounds: ratio p50 {ms(loaded, 50) / ms(alone, 50):.2f}, p95 {ms(loaded, 95) / ms(alone, 95):.2f}; "
                  f"A wrote {writes / (args.rounds * (args.seconds + 3)):.0f} writes/s; load average "
                  f"{load_before:.2f} → {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="smoke run: 1,000 records, 2 s windows")
    parser.add_argument("--records", type=int, default=10_000)
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--writers", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3, help="pairs of windows, B alone then B while A writes")
    parser.add_argument("--writer", metavar="BASE_URL", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.writer:
        trio.run(writer_process, args.writer, args.writers, args.seconds)
        return
    if args.quick:
        args.records, args.seconds, args.rounds = 1_000, 2.0, 1
    run_on_fresh_database(amain, args, "bench_persistence")


if __name__ == "__main__":
    main()
