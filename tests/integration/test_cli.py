"""The command line against real PostgreSQL, each command run as a real subprocess."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import trio

from openmaic.store.database import open_database
from openmaic.store.postgres import free_port


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL" and not k.startswith("OPENMAIC_")}
    # Never touch a developer's .openmaic: any embedded server goes under the test's own directory.
    return env | {"OPENMAIC_DATA_DIR": str(tmp_path / "data")} | extra


async def openmaic(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[bytes]:
    with trio.fail_after(60):
        return await trio.run_process(
            [sys.executable, "-m", "openmaic", *args],
            env=env,
            cwd=Path(env["OPENMAIC_DATA_DIR"]).parent,
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )


def out(r: subprocess.CompletedProcess[bytes]) -> str:
    return r.stdout.decode()


def err(r: subprocess.CompletedProcess[bytes]) -> str:
    return r.stderr.decode()


@pytest.fixture
async def empty_db_url(pg):
    """A database with no schema at all (``db_url`` is already migrated)."""
    name = pg.new_database_name()
    async with open_database(pg.admin_url, min_size=1, max_size=1) as admin:
        await admin.execute(f"CREATE DATABASE {name}")
    try:
        yield pg.url(name)
    finally:
        with trio.CancelScope(shield=True):
            async with open_database(pg.admin_url, min_size=1, max_size=1) as admin:
                await admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


async def test_migrate_twice(empty_db_url, tmp_path) -> None:
    env = _env(tmp_path, DATABASE_URL=empty_db_url)
    status = await openmaic("db", "status", env=env)
    assert status.returncode == 0, err(status)
    assert "pending:   0001_event_log" in out(status)

    first = await openmaic("migrate", env=env)
    assert first.returncode == 0, err(first)
    assert "applied 0001_event_log" in out(first)

    second = await openmaic("migrate", env=env)
    assert second.returncode == 0, err(second)
    assert out(second).startswith("schema is current (version ")
    assert "applied" not in out(second)


async def test_db_status_and_url(db_url, tmp_path) -> None:
    env = _env(tmp_path, DATABASE_URL=db_url)
    status = await openmaic("db", "status", env=env)
    assert status.returncode == 0, err(status)
    lines = out(status).splitlines()
    assert lines[0].startswith("database:  DATABASE_URL postgresql://")
    assert "reachable: yes" in lines
    assert "pending:   none" in lines
    assert err(status) == ""

    url = await openmaic("db", "url", env=env)
    assert (url.returncode, out(url)) == (0, db_url + "\n")


async def test_database_url_flag_overrides_environment(db_url, tmp_path) -> None:
    env = _env(tmp_path, DATABASE_URL=f"postgresql://postgres@127.0.0.1:{free_port()}/nowhere")
    r = await openmaic("db", "status", "--database-url", db_url, env=env)
    assert r.returncode == 0, err(r)
    assert "reachable: yes" in out(r)


async def test_db_stop_leaves_database_url_alone(tmp_path) -> None:
    env = _env(tmp_path, DATABASE_URL="postgresql://postgres@127.0.0.1:1/x")
    r = await openmaic("db", "stop", env=env)
    assert r.returncode == 0, err(r)
    assert "DATABASE_URL is set" in out(r)
    assert "no embedded PostgreSQL runs" in out(r)


@pytest.mark.parametrize("command", [["migrate"], ["db", "status"], ["serve"]])
async def test_unreachable_database_is_one_line_exit_2(command, tmp_path) -> None:
    env = _env(tmp_path, DATABASE_URL=f"postgresql://postgres@127.0.0.1:{free_port()}/nowhere")
    r = await openmaic(*command, env=env)
    assert r.returncode == 2
    errors = [line for line in err(r).splitlines() if line.startswith("openmaic: error: ")]
    assert len(errors) == 1
    assert "cannot reach PostgreSQL" in errors[0]
    assert "Traceback" not in err(r)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
async def test_serve_migrates_then_stops_on_signal(empty_db_url, tmp_path, signum) -> None:
    env = _env(tmp_path, DATABASE_URL=empty_db_url)
    proc = await trio.lowlevel.open_process(
        [sys.executable, "-m", "openmaic", "serve", "--role", "worker", "--port", "0", "--admin-port", str(free_port())],
        env=env,
        cwd=tmp_path,
        stderr=subprocess.PIPE,
    )
    seen = b""
    try:
        with trio.fail_after(20):
            while b"ready: roles worker" not in seen:
                chunk = await proc.stderr.receive_some()
                assert chunk, seen.decode()
                seen += chunk
            proc.send_signal(signum)
            while chunk := await proc.stderr.receive_some():
                seen += chunk
            assert await proc.wait() == 0, seen.decode()
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    log = seen.decode()
    assert "applied migration 0001_event_log" in log
    assert f"{signal.Signals(signum).name} received, shutting down gracefully" in log
    assert "Traceback" not in log


@pytest.fixture
def embedded_home():
    """A directory for the embedded server outside pytest's own temporary tree. The server runs as the postgres
    user, so its data directory's parents are opened for traversal; pytest makes /tmp/pytest-of-<user> private
    again whenever another pytest starts, which would cut the server off from its own files mid-test."""
    home = Path(tempfile.mkdtemp(prefix="openmaic-embedded-"))
    try:
        yield home
    finally:
        shutil.rmtree(home, ignore_errors=True)


async def test_embedded_server_lifecycle(embedded_home) -> None:
    env = _env(embedded_home)
    try:
        before = await openmaic("db", "status", env=env)
        assert before.returncode == 0, err(before)
        assert "running:   no" in out(before)

        url = await openmaic("db", "url", env=env)
        assert url.returncode == 0, err(url)
        assert out(url).startswith("postgresql://")

        after = await openmaic("db", "status", env=env)
        assert after.returncode == 0, err(after)
        assert "reachable: yes" in out(after)
        assert "pending:   0001_event_log" in out(after)
    finally:
        stop = await openmaic("db", "stop", env=env)
    assert stop.returncode == 0, err(stop)
    assert out(stop).startswith("stopped the embedded PostgreSQL")
    again = await openmaic("db", "stop", env=env)
    assert "no embedded PostgreSQL runs" in out(again)
