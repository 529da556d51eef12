"""A process that appends one large batch and gets killed: run by test_append_crash."""

from __future__ import annotations

import sys

import trio

from openmaic.events.core import SessionMessagePosted
from openmaic.events.log import EventLog, StreamAppend
from openmaic.store.database import open_database
from openmaic.store.queries import Q


async def main(url: str, mode: str, n: int) -> None:
    async with open_database(url, server_settings={"application_name": "append_child"}) as db:
        log = EventLog(db)
        batch = StreamAppend(stream_id="s", events=[SessionMessagePosted(text=f"event {i} " + "x" * 200) for i in range(n)])
        if mode == "statement":
            print("appending", flush=True)
            await log.append(batch)
            print("done", flush=True)
        else:
            async with db.connection() as conn, conn.transaction():
                await conn.fetch(Q.append, *log.append_args([batch]))
                print("appended, not committed", flush=True)
                await trio.sleep_forever()


if __name__ == "__main__":
    trio.run(main, sys.argv[1], sys.argv[2], int(sys.argv[3]))
