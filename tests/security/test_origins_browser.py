"""A page on another port of the same host, in headless Chromium, can neither read the victim's WebSocket feed nor
plant a run in the victim's library (`openmaic serve`, anonymous cookies).

Another port is the same *site*: SameSite=Lax cookies go along, so only the server's own Origin checks stand
between that page and the victim's owner.
"""

from __future__ import annotations

import asyncio
import contextlib
import http.server
import threading
from collections.abc import Iterator

import pytest
import trio

from openmaic.store.database import open_database
from openmaic.store.postgres import free_port
from tests.e2e.test_workbench_ui import CHROMIUM, CHROMIUM_ARGS, running_server, sync_playwright

pytestmark = pytest.mark.skipif(sync_playwright is None, reason="the playwright package is not installed")

CONFIG = (
    "runtime: {lease_ttl_s: 3, heartbeat_s: 0.5, claim_poll_s: 0.2, wake_poll_s: 1}\n"
    "identity: {mode: anonymous}\n"
)

ATTACK = """<!doctype html><meta charset=utf-8><title>cute cats</title><script>
window.results = {ws: [], posts: []};
const victim = "%(victim)s";
const ws = new WebSocket(victim.replace("http", "ws") + "/api/classrooms/ws");
ws.onmessage = (e) => window.results.ws.push(e.data);
ws.onclose = (e) => { window.results.wsClosed = e.code; };
const body = JSON.stringify({requirement: "planted by another page", commandId: "evil-1"});
Promise.allSettled([
  fetch(victim + "/api/generate-classroom", {method: "POST", mode: "no-cors", credentials: "include",
        headers: {"Content-Type": "text/plain"}, body}),
  fetch(victim + "/api/generation-runs", {method: "POST", mode: "no-cors", credentials: "include", body}),
  fetch(victim + "/api/generate-classroom", {method: "POST", mode: "cors", credentials: "include",
        headers: {"Content-Type": "application/json"}, body}),
]).then((r) => { window.results.posts = r.map((x) => x.status); window.results.done = true; });
</script><p>Nothing to see here.</p>"""


@contextlib.contextmanager
def attacker_site(page: bytes) -> Iterator[str]:
    """A real web server on another port of this host serving ``page`` (a page the browser loads from a local
    address, as it would from any site the victim visits)."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(page)))
            self.end_headers()
            self.wfile.write(page)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


async def test_a_page_of_another_port_can_neither_read_a_websocket_nor_plant_a_run(db_url, tmp_path):
    async with running_server(db_url, tmp_path, CONFIG) as base:
        attack_page = (ATTACK % {"victim": base}).encode()

        def browse() -> dict:
            asyncio.set_event_loop_policy(asyncio.DefaultEventLoopPolicy())  # see tests/e2e/test_workbench_ui.py
            try:
                with sync_playwright() as pw:
                    browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
                    try:
                        page = browser.new_context().new_page()
                        page.set_default_timeout(30_000)
                        # The victim uses the workbench: the server gives the browser its owner cookie.
                        page.goto(base + "/")
                        page.wait_for_function("document.cookie !== undefined")
                        mine = page.evaluate("fetch('/api/classrooms').then((r) => r.status)")
                        assert mine == 200
                        # Then visits another page on another port of the same host.
                        with attacker_site(attack_page) as attacker:
                            page.goto(f"{attacker}/cats.html")
                            page.wait_for_function("window.results && window.results.done && "
                                                   "(window.results.wsClosed !== undefined || "
                                                   "window.results.ws.length > 0)")
                            attack = page.evaluate("window.results")
                        # The victim's own page may still write (the checks do not refuse the right origin).
                        page.goto(base + "/")
                        own = page.evaluate(
                            "fetch('/api/generate-classroom', {method: 'POST', headers: {'Content-Type': "
                            "'application/json'}, body: JSON.stringify({requirement: 'my own course'})})"
                            ".then((r) => r.status)")
                        return {"attack": attack, "own": own}
                    finally:
                        browser.close()
            finally:
                asyncio.set_event_loop_policy(None)

        outcome = await trio.to_thread.run_sync(browse)
        attack = outcome["attack"]
        assert attack["ws"] == [], f"the other page read the victim's feed: {attack['ws']}"
        assert attack["wsClosed"] != 1000
        assert outcome["own"] == 202
        async with open_database(db_url, min_size=1, max_size=1) as db:
            planted = await db.fetchval("SELECT count(*) FROM events WHERE data::text LIKE '%planted by another%'")
            runs = await db.fetchval("SELECT count(*) FROM streams WHERE kind = 'generation'")
        assert planted == 0, "the other page planted a run"
        assert runs == 1  # the victim's own course only
