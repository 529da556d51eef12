"""A worker process on the test kind, for fault tests: ``python -m tests.faults.worker_main URL [SETTINGS_JSON]``.

Prints its worker id once it is claiming. SIGTERM/SIGINT start a graceful shutdown.
"""

from __future__ import annotations

import json
import signal
import sys

import msgspec
import trio

from tests.runtime import FAST, open_worker


async def main(url: str, overrides: dict) -> None:
    rt = msgspec.structs.replace(FAST, **overrides)
    async with open_worker(url, rt) as worker:
        print(worker.id, flush=True)
        with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            async for _ in signals:
                worker.shutdown()
                break
        while worker.actors:
            await trio.sleep(0.05)


if __name__ == "__main__":
    trio.run(main, sys.argv[1], json.loads(sys.argv[2]) if len(sys.argv) > 2 else {})
