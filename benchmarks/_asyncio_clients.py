"""The fan-out benchmark's clients on asyncio: `websockets` (the asyncio WebSocket library people use).

    python -m benchmarks._asyncio_clients PORT

Speaks the same line protocol over stdin/stdout as the trio clients' process of :mod:`benchmarks.fanout`
(``connect`` with one stream per client, ``arm``, ``disconnect``), so the driver treats both alike. `websockets`
is not a dependency of the project; install it into the benchmark's environment to run these rows
(``.venv/bin/pip install websockets==17.4``).
"""

from __future__ import annotations

import asyncio
import gc
import json
import sys
import time

from benchmarks.fanout import Receipts, _decode_frame


class Clients(Receipts):
    def __init__(self, port: int) -> None:
        super().__init__(asyncio.Event)
        self.port = port

    async def client(self, stream: str, caught_up: asyncio.Future[None]) -> None:
        from websockets.asyncio.client import connect

        url = f"ws://127.0.0.1:{self.port}/api/streams/{stream}/ws?after=0"
        async with connect(url, max_size=None, compression=None, max_queue=None) as ws:
            async for msg in ws:
                now = time.time_ns()
                frame = _decode_frame(msg)
                if frame.type == "caught_up" and not caught_up.done():
                    caught_up.set_result(None)
                elif frame.type == "event":
                    self.deliver(stream, frame.seq, now)


async def main(port: int) -> None:
    gc.freeze()  # 1,000 connections: the collector's pauses must not count as the server's latency
    gc.set_threshold(100_000, 50, 100)
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)

    def put(obj: dict) -> None:
        sys.stdout.write(json.dumps(obj) + "\n")
        sys.stdout.flush()

    c = Clients(port)
    while line := await reader.readline():
        cmd = json.loads(line)
        tasks: list[asyncio.Task[None]] = []
        for stream in cmd["streams"]:  # one client per entry, connected one after another
            caught_up = loop.create_future()
            tasks.append(asyncio.create_task(c.client(stream, caught_up)))
            await asyncio.wait_for(asyncio.wait([caught_up, tasks[-1]], return_when=asyncio.FIRST_COMPLETED), 120)
            if tasks[-1].done():
                tasks[-1].result()  # it failed before catching up: say why
        put({"ok": True})
        while (cmd := json.loads(await reader.readline()))["op"] == "arm":
            c.arm(cmd["clients"])
            put({"ok": True})
            try:
                await asyncio.wait_for(c.done.wait(), 5)
            except TimeoutError:
                pass
            got, c.pending = c.received, 0
            put({"received": got})
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        put({"ok": True})


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1])))
