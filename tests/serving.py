"""`openmaic serve` processes for tests: real servers on real sockets, short runtime settings, stderr kept."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import httpx
import trio

from openmaic.store.postgres import free_port

ROOT = Path(__file__).resolve().parents[1]
FAST_CONFIG = "runtime: {lease_ttl_s: 3, heartbeat_s: 0.5, claim_poll_s: 0.2, wake_poll_s: 1}\n"


@contextlib.contextmanager
def serve_processes(
    db_url: str, tmp_path: Path,
    roles: Sequence[tuple[str | None, int | None] | tuple[str | None, int | None, list[str]]],
    config: str = FAST_CONFIG, *, envs: Sequence[Mapping[str, str]] = (),
) -> Iterator[list[subprocess.Popen]]:
    """Start one `openmaic serve` per ``(role or None for all roles, port or None[, more arguments])``, the i-th
    with ``envs[i]`` added to its environment (when given); SIGTERM them all at the end."""
    config_file = tmp_path / "openmaic.yml"
    config_file.write_text(config)
    # The data directory (the instance secret file) is the test's own, never the checkout's.
    env = dict(os.environ, DATABASE_URL=db_url, OPENMAIC_CONFIG=str(config_file), OPENMAIC_DATA_DIR=str(tmp_path))
    procs: list[subprocess.Popen] = []
    try:
        for i, (role, port, *more) in enumerate(roles):
            args = [sys.executable, "-m", "openmaic", "serve"]
            args += ["--role", role] if role else []
            args += ["--port", str(port)] if port is not None else []
            args += [a for extra in more for a in extra]
            if role in ("worker", "projector") and "--admin-port" not in args:
                args += ["--admin-port", str(free_port())]  # never the default port other processes may hold
            with (tmp_path / f"{i}-{role or 'all'}.stderr").open("w") as err:
                own = dict(env, **envs[i]) if i < len(envs) else env
                procs.append(subprocess.Popen(args, cwd=ROOT, env=own, stdout=subprocess.DEVNULL, stderr=err))
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


def stderr_of(tmp_path: Path) -> str:
    return "\n".join(f"--- {f.name}\n{f.read_text()[-3000:]}" for f in sorted(tmp_path.glob("*.stderr")))


async def wait_ready(client: httpx.AsyncClient, procs: Sequence[subprocess.Popen], tmp_path: Path) -> None:
    """Until ``/readyz`` answers 200 (failing at once, with the servers' stderr, if one of them exited)."""
    with trio.fail_after(30):
        while True:
            assert all(p.poll() is None for p in procs), stderr_of(tmp_path)
            try:
                if (await client.get("/readyz")).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            await trio.sleep(0.1)


@contextlib.asynccontextmanager
async def running_server(
    db_url: str, tmp_path: Path, config: str = FAST_CONFIG
) -> AsyncIterator[tuple[httpx.AsyncClient, int]]:
    """One `openmaic serve` with every role, ready; yields a client for it and its port."""
    port = free_port()
    with serve_processes(db_url, tmp_path, [(None, port)], config) as procs:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", trust_env=False, timeout=10) as client:
            await wait_ready(client, procs, tmp_path)
            yield client, port


@contextlib.asynccontextmanager
async def anonymous_then_signed_in(
    db_url: str, tmp_path: Path, config: str = FAST_CONFIG, *, user: str = "alice",
    others: Sequence[tuple[str | None, int | None]] = (), user_env: Mapping[str, str] | None = None,
) -> AsyncIterator[tuple[list[subprocess.Popen], str, str]]:
    """A site that adds sign-in, as OpenMAIC deploys one: an API process answering anonymous visitors (the
    ``anonymous_id`` cookie) and one answering the signed-in ``user`` (with ``user_env`` added to its environment),
    plus ``others`` roles, all ready. Yields the processes and the two base URLs; one cookie jar serves both, as one
    browser (cookies ignore the port)."""
    anon_port, user_port = free_port(), free_port()
    envs = [{"OPENMAIC_IDENTITY_MODE": "anonymous"},
            {"OWNER_SINGLE_USER": "true", "OWNER_SINGLE_USER_ID": user, **(user_env or {})}]
    roles = [("api", anon_port), ("api", user_port), *others]
    with serve_processes(db_url, tmp_path, roles, config, envs=envs) as procs:
        urls = f"http://127.0.0.1:{anon_port}", f"http://127.0.0.1:{user_port}"
        for url in urls:
            async with httpx.AsyncClient(base_url=url, trust_env=False) as probe:
                await wait_ready(probe, procs, tmp_path)
        yield procs, *urls


async def run_awaiting_confirmation(client: httpx.AsyncClient, requirement: str) -> str:
    """Start a run that waits for its outline's confirmation; its id once it does."""
    r = await client.post("/api/generation-runs", json={"requirement": requirement, "outlineReview": "wait"})
    assert r.status_code == 202, r.text
    run_id = r.json()["run"]["id"]
    with trio.fail_after(30):
        while (await client.get(f"/api/generation-runs/{run_id}")).json()["run"]["state"] \
                != "awaiting_outline_confirmation":
            await trio.sleep(0.1)
    return run_id


def served_anonymous_owner(tmp_path: Path, cookie: str) -> str:
    """The owner id the servers started with ``tmp_path`` as their data directory (their instance secret file)
    derive from the ``anonymous_id`` cookie ``cookie``."""
    from openmaic.modelconfig.secret_box import instance_key
    from openmaic.owners.anonymous import AnonymousOwners

    return AnonymousOwners(lambda: instance_key(None, tmp_path)).owner_of(cookie)


async def settled_session(client: httpx.AsyncClient, sid: str, timeout: float = 60) -> dict[str, Any]:
    """A Pro session's metadata (``GET /api/agent/sessions/{sid}``) once it has ended: succeeded, failed or
    cancelled."""
    with trio.fail_after(timeout):
        while (meta := (await client.get(f"/api/agent/sessions/{sid}")).json())["status"] not in (
                "succeeded", "failed", "cancelled"):
            await trio.sleep(0.1)
    return meta
