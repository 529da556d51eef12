"""``openmaic serve`` warns when it would serve an unauthenticated single-user API beyond this host (``docker run``
with no configuration). Before, it said nothing."""

from __future__ import annotations

import subprocess
import sys

import trio

from openmaic.config import load_config
from openmaic.serve import exposure_warning
from openmaic.store.postgres import free_port
from tests.integration.test_cli import _env


def test_only_a_non_loopback_single_user_api_without_access_code_is_warned_about(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no ./openmaic.yml
    config = load_config(None, env={})
    for host in ("0.0.0.0", "::", "10.1.2.3", "[::]"):
        assert "ACCESS_CODE" in (exposure_warning(host, config) or ""), host
    for host in ("127.0.0.1", "::1", "localhost", "[::1]"):
        assert exposure_warning(host, config) is None, host
    assert exposure_warning("0.0.0.0", load_config(None, env={"ACCESS_CODE": "sesame-1234"})) is None


async def test_serve_on_every_address_logs_the_warning(db_url, tmp_path):
    env = _env(tmp_path, DATABASE_URL=db_url)
    proc = await trio.lowlevel.open_process(
        [sys.executable, "-m", "openmaic", "serve", "--role", "api", "--host", "0.0.0.0", "--port", str(free_port())],
        env=env, cwd=tmp_path, stderr=subprocess.PIPE,
    )  # fmt: skip
    seen = b""
    try:
        with trio.fail_after(30):
            while b"ready: roles api" not in seen:
                chunk = await proc.stderr.receive_some()
                assert chunk, seen.decode()
                seen += chunk
    finally:
        proc.terminate()
        with trio.move_on_after(10):
            await proc.wait()
        if proc.returncode is None:
            proc.kill()
    assert b"listens on 0.0.0.0 with identity.mode single_user and no ACCESS_CODE" in seen, seen.decode()
