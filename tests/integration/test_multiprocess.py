"""Several server processes on one database: two API processes and one worker, started as `openmaic serve --role …`.

A command sent through one API process must reach a WebSocket client of the other one live, in order, without gaps.
"""

from __future__ import annotations

import json

import httpx
import trio
import trio_websocket

from openmaic.store.postgres import free_port
from tests.serving import serve_processes, stderr_of, wait_ready

async def test_a_command_through_one_api_process_reaches_a_socket_on_another_live(db_url, tmp_path):
    port1, port2 = free_port(), free_port()
    with serve_processes(db_url, tmp_path, [("api", port1), ("api", port2), ("worker", None)]) as procs:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port1}", trust_env=False, timeout=10) as api1, \
                httpx.AsyncClient(base_url=f"http://127.0.0.1:{port2}", trust_env=False, timeout=10) as api2:
            await wait_ready(api1, procs, tmp_path)
            await wait_ready(api2, procs, tmp_path)

            r = await api1.post("/api/agent/sessions", json={"prompt": "add a scene about fractions"})
            assert r.status_code == 202, r.text
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
                            assert ev["id"] == frame["seq"]
                            seqs.append(ev["id"])
                            if caught_up.is_set():
                                live.append(ev)
                            return ev

                # The worker (a third process) answers the first message; the socket on API #2 sees it happen.
                with trio.fail_after(60):
                    while (await next_event())["type"] != "turn_end":
                        pass
                    while not caught_up.is_set() or \
                            (await api1.get(f"/api/agent/sessions/{sid}")).json()["status"] != "succeeded":
                        with trio.move_on_after(0.2):
                            await next_event()

                r = await api1.post(f"/api/agent/sessions/{sid}/messages",
                                    json={"text": "now add a scene about decimals"})
                assert r.status_code == 202, r.text

                with trio.fail_after(60):
                    while True:
                        ev = await next_event()
                        if ev["type"] == "user_message" and "decimals" in ev["data"]["text"]:
                            posted = ev
                        if ev["type"] == "turn_end" and any(e["type"] == "user_message" for e in live):
                            break

            assert posted in live, "the follow-up arrived as part of the backlog, not live"
            after = [e["type"] for e in live if e["id"] > posted["id"]]
            assert "turn_end" in after, after
            assert seqs == sorted(set(seqs)), seqs
            assert all(p.poll() is None for p in procs), stderr_of(tmp_path)
