"""Worker subprocesses for fault tests."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import trio

ROOT = Path(__file__).resolve().parents[2]


class WorkerProcess:
    def __init__(self, url: str, env: dict[str, str] | None = None, **settings: object) -> None:
        """A worker on ``url``, with ``env`` added to its environment (a pooler's DATABASE_POOLER, …)."""
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.faults.worker_main", url, json.dumps(settings)],
            cwd=ROOT, stdout=subprocess.PIPE, text=True, env=dict(os.environ, **env) if env else None,
        )
        self.id = ""

    async def started(self) -> WorkerProcess:
        with trio.fail_after(30):
            self.id = (await trio.to_thread.run_sync(self.proc.stdout.readline)).strip()
        assert self.id, "the worker process exited before it started"
        return self

    @property
    def pid(self) -> int:
        return self.proc.pid

    def signal(self, sig: int) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, sig)

    def kill(self) -> None:
        self.signal(signal.SIGKILL)
        self.proc.wait()

    async def wait(self, timeout: float = 30) -> int:
        """The exit code; polls, so that a surrounding cancel scope can interrupt the wait."""
        with trio.fail_after(timeout):
            while self.proc.poll() is None:
                await trio.sleep(0.02)
        return self.proc.returncode

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.proc.stdout.close()


async def start_workers(url: str, n: int, env: dict[str, str] | None = None, **settings: object) -> list[WorkerProcess]:
    ws = [WorkerProcess(url, env, **settings) for _ in range(n)]
    for w in ws:
        await w.started()
    return ws
