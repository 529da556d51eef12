"""Live events written straight to the socket (openmaic/api/direct_frames.py) are byte for byte what the
ordinary road sends: a real client over a real socket reads every frame length the same either way."""

from __future__ import annotations

import json
import os
from typing import Any

import pytest
import trio
import trio_websocket

from openmaic.api import direct_frames
from openmaic.api.direct_frames import text_frame
from tests.integration.api_harness import running_api

SIZES = (10, 1_000, 70_000)  # 7-, 16- and 64-bit payload lengths


async def _follow(api: Any) -> list[str]:
    """Every message of the stream's socket up to caught_up, then one live event of each size."""
    messages: list[str] = []
    async with trio_websocket.open_websocket_url(api.ws_url("/api/streams/s/ws?after=0"),
                                                 max_message_size=1 << 20) as ws:  # fmt: skip
        with trio.fail_after(20):
            while True:
                messages.append(await ws.get_message())
                if json.loads(messages[-1])["type"] == "caught_up":
                    break
            for size in SIZES:
                await api.append_messages("s", 1, size=size)
                messages.append(await ws.get_message())
    return messages


def _without_phase(message: str) -> Any:
    frame = json.loads(message)
    frame["event"].pop("phase", None)  # live, or backlog when read again later
    return frame


@pytest.mark.parametrize("size", [0, 125, 126, 65_535, 65_536])
def test_a_text_frame_has_the_header_rfc_6455_gives_its_length(size):
    frame = text_frame(b"x" * size)
    assert frame[0] == 0x81  # FIN, text
    if size < 126:
        assert frame[1] == size and len(frame) == 2 + size
    elif size < 65536:
        assert frame[1] == 126 and int.from_bytes(frame[2:4], "big") == size and len(frame) == 4 + size
    else:
        assert frame[1] == 127 and int.from_bytes(frame[2:10], "big") == size and len(frame) == 10 + size


async def test_direct_frames_are_what_the_ordinary_road_sends(db, monkeypatch):
    writes: list[int] = []
    real_write = os.write

    def counting_write(fd: int, data: bytes) -> int:
        writes.append(len(data))
        return real_write(fd, data)

    async with running_api(db) as api:
        await api.create_stream("s")
        for size in SIZES:
            await api.append_messages("s", 1, size=size)
        monkeypatch.setattr(direct_frames.os, "write", counting_write)
        direct = await _follow(api)
        assert len(writes) >= 2 * len(SIZES), writes  # the backlog's and the live events' frames went directly
        # The same stream followed again with the direct road closed: the same messages.
        monkeypatch.setattr(direct_frames.DirectFrames, "of", classmethod(lambda cls, ws: None))
        writes.clear()
        ordinary = await _follow(api)
        assert writes == []
    # The backlog (seqs 1-4) byte for byte; the live events (5-7) as the second client read them from history.
    assert direct[:4] == ordinary[:4]
    assert [_without_phase(m) for m in direct[5:]] == [_without_phase(m) for m in ordinary[4:7]]
    assert [len(json.loads(m)["event"]["data"]["text"]) for m in direct[5:]] == [12, 1_002, 70_002]


async def test_frames_the_socket_takes_in_part_are_finished_before_any_other_write(db, monkeypatch):
    """Every write of a frame's first bytes takes only part of it: the feed's direct writes leave the rest to the
    connection's writer, and a pong hypercorn sends meanwhile (the client pings throughout) must wait for it. A
    pong or a frame written into the middle of another is a protocol error the client reports."""
    real_write = os.write
    fed: list[bool] = []

    def half_write(fd: int, data: bytes) -> int:
        return real_write(fd, data[: max(1, len(data) // 2)])

    real_write_now = direct_frames.DirectFrames.write_now

    def counting_write_now(self: Any, frame: bytes) -> bool:
        written = real_write_now(self, frame)
        fed.append(written and self.unfinished)
        return written

    async with running_api(db) as api:
        await api.create_stream("s")
        await api.append_messages("s", 3)
        monkeypatch.setattr(direct_frames.os, "write", half_write)
        monkeypatch.setattr(direct_frames.DirectFrames, "write_now", counting_write_now)
        seqs: list[int] = []
        async with trio_websocket.open_websocket_url(api.ws_url("/api/streams/s/ws?after=0"),
                                                     max_message_size=1 << 20) as ws:  # fmt: skip
            with trio.fail_after(30):
                while json.loads(await ws.get_message())["type"] != "caught_up":
                    pass

                async def ping() -> None:
                    while True:
                        await ws.ping()  # waits for its pong

                async with trio.open_nursery() as nursery:
                    nursery.start_soon(ping)
                    for size in (10, 1_000, 70_000) * 10:
                        await api.append_messages("s", 1, size=size)
                        frame = json.loads(await ws.get_message())
                        seqs.append(frame["seq"])
                        assert frame["event"]["data"]["text"].startswith(f"m1{'x' * min(size, 5)}")
                    nursery.cancel_scope.cancel()
        assert seqs == list(range(5, 35))
        assert any(fed), "the feed wrote part of a frame directly at least once"
