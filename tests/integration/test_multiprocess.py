"""Several server processes on one database: two API processes and one worker, started as `openmaic serve --role …`.

A command sent through one API process must reach a WebSocket client of the other one live, in order, without gaps.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import trio
import trio_websocket

from openmaic.store.postgres import free_port

ROOT = Path(__file__).resolve().parents[2]


@contextlib.contextmanager
def _processes(db_url: str, tmp_path: Path, roles: list[tuple[str, int | None]]) -> Iterator[list[subprocess.Popen]]:
    config = tmp_path / "openmaic.yml"
    config.write_text(
        "runtime: {lease_ttl_s: 3, heartbeat_s: 0.5, claim_poll_s: 0.2, wake_poll_s: 1}\n"
    )
    env = dict(os.environ, DATABASE_URL=db_url, OPENMAIC_CONFIG=str(config))
    procs: list[subprocess.Popen] = []
    try:
        for i, (role, port) in enumerate(roles):
            args = [sys.executable, "-m", "openmaic", "serve", "--role", role]
            if port is not None:
                args += ["--port", str(port)]
            with (tmp_path / f"{i}-{role}.stderr").open("w") as err:
                procs.append(subprocess.Popen(args, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=err))
        yield procs
    finally:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def _stderr(tmp_path: Path) -> str:
    return "\n".join(f"--- {f.name}\n{f.read_text()[-3000:]}" for f in sorted(tmp_path.glob("*.stderr")))


async def _ready(client: httpx.AsyncClient, procs: list[subprocess.Popen], tmp_path: Path) -> None:
    with trio.fail_after(30):
        while True:
            assert all(p.poll() is None for p in procs), _stderr(tmp_path)
            try:
                if (await client.get("/readyz")).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            await trio.sleep(0.1)


async def test_a_command_through_one_api_process_reaches_a_socket_on_another_live(db_url, tmp_path):
    port1, port2 = free_port(), free_port()
    with _processes(db_url, tmp_path, [("api", port1), ("api", port2), ("worker", None)]) as procs:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port1}", trust_env=False, timeout=10) as api1, \
                httpx.AsyncClient(base_url=f"http://127.0.0.1:{port2}", trust_env=False, timeout=10) as api2:
            await _ready(api1, procs, tmp_path)
            await _ready(api2, procs, tmp_path)

            r = await api1.post("/api/sessions", json={"command_id": "s1", "message": "add a scene about fractions"})
            assert r.status_code == 201, r.text
            sid = r.json()["id"]

            live: list[dict] = []  # events that arrived after caught_up
            seqs: list[int] = []
            caught_up = trio.Event()
            url = f"ws://127.0.0.1:{port2}/api/streams/{sid}/ws?after=0"
            async with trio_websocket.open_websocket_url(url) as ws:

                async def next_event() -> dict:
                    while True:
                        frame = json.loads(await ws.get_message())
                        if frame["type"] == "caught_up":
                            caught_up.set()
                        elif frame["type"] == "event":
                            ev = frame["event"]
                            seqs.append(ev["seq"])
                            if caught_up.is_set():
                                live.append(ev)
                            return ev

                # The worker (a third process) answers the first message; the socket on API #2 sees it happen.
                with trio.fail_after(60):
                    while (await next_event())["type"] != "model.turn_completed":
                        pass
                    while not caught_up.is_set() or \
                            (await api1.get(f"/api/sessions/{sid}")).json()["status"] != "idle":
                        with trio.move_on_after(0.2):
                            await next_event()

                r = await api1.post(f"/api/sessions/{sid}/messages",
                                    json={"command_id": "m2", "text": "now add a scene about decimals"})
                assert r.status_code == 202, r.text

                with trio.fail_after(60):
                    while True:
                        ev = await next_event()
                        if ev["type"] == "session.message_posted" and "decimals" in ev["data"]["text"]:
                            posted = ev
                        if ev["type"] == "model.turn_completed" and any(
                                e["type"] == "session.message_posted" for e in live):
                            break

            assert posted in live, "the follow-up arrived as part of the backlog, not live"
            after = [e["type"] for e in live if e["seq"] > posted["seq"]]
            assert "model.turn_completed" in after, after
            assert seqs == list(range(1, len(seqs) + 1)), seqs
            assert all(p.poll() is None for p in procs), _stderr(tmp_path)
            page = (await api2.get(f"/api/streams/{sid}/events?after=0")).json()
            assert [e["seq"] for e in page["events"]][: len(seqs)] == seqs
