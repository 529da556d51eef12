"""A TCP proxy between the processes under test and PostgreSQL that can go silent, as a partition does.

:meth:`Proxy.cut` stops forwarding in both directions and stops connecting new clients, but closes nothing: no
FIN, no RST, so neither side learns anything from the network (its own timers must tell it). :meth:`Proxy.hold`
stops forwarding one direction only (the server's replies, say), and :meth:`Proxy.heal` resumes. Bytes read
while forwarding is stopped are kept and delivered, in order, once it resumes; :meth:`Proxy.discard` drops them
instead (a reply that is lost for good).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import trio

UP, DOWN = "up", "down"
"""Directions: client → server, server → client."""


class Proxy:
    def __init__(self, upstream_port: int, host: str = "127.0.0.1") -> None:
        self.host = host
        self.upstream_port = upstream_port
        self.port = 0
        self._open = {UP: trio.Event(), DOWN: trio.Event()}
        self._open[UP].set()
        self._open[DOWN].set()
        self._accepting = trio.Event()
        self._accepting.set()
        self.connections = 0
        self.bytes = {UP: 0, DOWN: 0}
        self.held_bytes = {UP: 0, DOWN: 0}
        """Bytes that arrived while their direction was held (read and kept)."""
        self._discarding = {UP: False, DOWN: False}
        self.discarded = {UP: 0, DOWN: 0}

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@{self.host}:{self.port}/{database}"

    # -- control ----------------------------------------------------------------------------------------------

    def cut(self) -> None:
        """Go silent: nothing is forwarded either way and new connections are accepted but never served."""
        self.hold(UP)
        self.hold(DOWN)
        if self._accepting.is_set():
            self._accepting = trio.Event()

    def hold(self, direction: str) -> None:
        if self._open[direction].is_set():
            self._open[direction] = trio.Event()

    def discard(self, direction: str) -> None:
        """Drop whatever comes in ``direction`` until :meth:`heal` (an end of stream is still passed on then)."""
        self._discarding[direction] = True

    def heal(self) -> None:
        for d in (UP, DOWN):
            self._discarding[d] = False
            self._open[d].set()
        self._accepting.set()

    @property
    def silent(self) -> bool:
        return not self._open[UP].is_set() and not self._open[DOWN].is_set()

    # -- forwarding -------------------------------------------------------------------------------------------

    async def _pump(self, src: trio.SocketStream, dst: trio.SocketStream, direction: str) -> None:
        while True:
            data = await src.receive_some(65536)
            if not data:
                # The sender closed its side: pass that on, once this direction forwards again (across a partition
                # a FIN is lost like any other packet).
                await self._open[direction].wait()
                with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                    await dst.send_eof()
                return
            if self._discarding[direction]:
                self.discarded[direction] += len(data)
                continue
            if not self._open[direction].is_set():
                self.held_bytes[direction] += len(data)
                await self._open[direction].wait()
            self.bytes[direction] += len(data)
            await dst.send_all(data)

    async def _serve(self, client: trio.SocketStream) -> None:
        async with client:
            await self._accepting.wait()
            try:
                server = await trio.open_tcp_stream(self.host, self.upstream_port)
            except OSError:
                return
            self.connections += 1
            async with server:
                try:
                    async with trio.open_nursery() as nursery:
                        nursery.start_soon(self._pump, client, server, UP)
                        nursery.start_soon(self._pump, server, client, DOWN)
                except* (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                    pass

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        listeners = await trio.open_tcp_listeners(0, host=self.host)
        self.port = listeners[0].socket.getsockname()[1]
        task_status.started()
        await trio.serve_listeners(self._serve, listeners)


@contextlib.asynccontextmanager
async def open_proxy(upstream_port: int) -> AsyncIterator[Proxy]:
    proxy = Proxy(upstream_port)
    async with trio.open_nursery() as nursery:
        await nursery.start(proxy.run)
        try:
            yield proxy
        finally:
            nursery.cancel_scope.cancel()
