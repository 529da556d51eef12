"""A real `openmaic serve --role worker` told to stop while a step is in flight: the first SIGTERM drains (the step
may finish within the grace), a second one stops the process at once, and another worker then finishes the run
with every step committed once."""

from __future__ import annotations

import signal

import httpx
import trio

from openmaic.events.log import EventLog
from openmaic.store.postgres import free_port
from tests.fakes.provider_server import Held, Text, open_fake_provider
from tests.faults.client import check_run, run_completed, start_run
from tests.runtime import wait_for
from tests.serving import serve_processes, stderr_of, wait_ready

# The outline's model call is held open by the provider for as long as the test likes, and the grace is long: a
# worker that only drained would still be running when the bound passes, whatever the machine's load.
GRACE_S, AT_ONCE_S = 30.0, 5.0


def _config(provider_url: str) -> str:
    return (
        f"runtime: {{lease_ttl_s: 3, heartbeat_s: 0.5, claim_poll_s: 0.2, wake_poll_s: 1, shutdown_grace_s: {GRACE_S}}}\n"
        f"providers: {{held: {{preset: openai-compatible, baseUrl: '{provider_url}', apiKey: held-0123456789,"
        " models: [slow], options: {maxRetries: 0, timeoutS: 120}}}\n"
        "slots: {llm: demo:course, agent: demo:agent, course.outline: held:slow}\n"
    )


# The worker that takes over answers every call itself.
FAST = "runtime: {lease_ttl_s: 3, heartbeat_s: 0.5, claim_poll_s: 0.2, wake_poll_s: 1}\nslots: {llm: demo:course, agent: demo:agent}\n"


async def _asked(fake) -> bool:
    return bool(fake.requests)


async def _exit_within(proc, timeout: float) -> float | None:
    """Seconds until ``proc`` exits, or None if it still runs after ``timeout``."""
    started = trio.current_time()
    with trio.move_on_after(timeout):
        while proc.poll() is None:
            await trio.sleep(0.02)
        return trio.current_time() - started
    return None


async def test_a_second_sigterm_stops_a_draining_worker_at_once_and_the_run_completes_elsewhere(db, db_url, tmp_path):
    port = free_port()
    async with open_fake_provider() as fake:
        fake.push(Held(Text("never sent"), trio.Event()))
        with serve_processes(db_url, tmp_path, [("api", port), ("worker", None)], _config(fake.openai_url)) as procs:
            await _stop_twice_then_resume(db, db_url, tmp_path, port, fake, *procs)


async def _stop_twice_then_resume(db, db_url, tmp_path, port, fake, api, worker) -> None:
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", trust_env=False, timeout=10) as client:
        await wait_ready(client, [api, worker], tmp_path)
        run = await start_run(client, "Tides")
        await wait_for(lambda: _asked(fake), timeout=30)  # the outline's call is in flight, held

        worker.send_signal(signal.SIGTERM)
        await wait_for(lambda: _logged(tmp_path, "shutting down gracefully"), timeout=10)
        assert worker.poll() is None, "the first SIGTERM drains: the step in flight may still finish"
        worker.send_signal(signal.SIGTERM)
        stopped_in = await _exit_within(worker, GRACE_S)
        assert stopped_in is not None and stopped_in < AT_ONCE_S, (
            f"a second SIGTERM stops the worker at once, not after {stopped_in} s\n{stderr_of(tmp_path)}")

        # Another worker (with a fast model) takes the abandoned lease over and completes the run.
        (tmp_path / "fast").mkdir()
        with serve_processes(db_url, tmp_path / "fast", [("worker", None)], FAST):
            await run_completed(client, run)
        await check_run(EventLog(db), run)


async def _logged(tmp_path, text: str) -> bool:
    return any(text in f.read_text() for f in tmp_path.glob("*-worker.stderr"))
