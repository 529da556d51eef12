"""One `openmaic serve` for a module of storage-contract cases, and a fresh owner per case.

OpenMAIC's conformance suites give every case a fresh store. Here every case gets a fresh anonymous visitor (its
own cookie jar, so its own owner): the server and its database are started once per module, and one owner's
documents, sessions and assets are invisible to every other's, as the contract's stores are to each other."""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest
import trio

from openmaic.store.postgres import free_port
from tests.conftest import TEMPLATE, PgServer, _admin
from tests.serving import FAST_CONFIG, serve_processes, stderr_of

__all__ = ["StorageServer", "storage_server_fixture"]


class StorageServer:
    def __init__(self, base_url: str, db_url: str, port: int) -> None:
        self.base_url = base_url
        self.db_url = db_url
        self.port = port

    @contextlib.asynccontextmanager
    async def visitor(self, prefix: str = "/api/persistence") -> AsyncIterator[httpx.AsyncClient]:
        """A client of its own (a new owner), its base URL at ``prefix``."""
        async with httpx.AsyncClient(base_url=self.base_url + prefix, trust_env=False, timeout=30) as c:
            r = await c.get("/learner-key")  # the first answer sets the visitor's cookie
            assert r.status_code == 200, r.text
            yield c


def _wait_ready(base_url: str, procs: list, tmp: Path) -> None:
    deadline = time.monotonic() + 30
    with httpx.Client(base_url=base_url, trust_env=False) as c:
        while time.monotonic() < deadline:
            assert all(p.poll() is None for p in procs), stderr_of(tmp)
            try:
                if c.get("/readyz").status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.1)
    raise AssertionError("the server did not become ready\n" + stderr_of(tmp))


def storage_server_fixture(config: str = "", name: str = "storage_server") -> object:
    """A module-scoped fixture (named ``name``): one anonymous-mode server with ``config`` added, on a database of
    its own."""

    @pytest.fixture(scope="module", name=name)
    def storage_server(pg: PgServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[StorageServer]:
        name = pg.new_database_name()
        trio.run(_admin, pg.admin_url, f"CREATE DATABASE {name} TEMPLATE {TEMPLATE}")
        tmp = tmp_path_factory.mktemp("storage")
        port = free_port()
        try:
            with serve_processes(pg.url(name), tmp, [(None, port)],
                                 FAST_CONFIG + "identity: {mode: anonymous}\n" + config) as procs:
                base = f"http://127.0.0.1:{port}"
                _wait_ready(base, procs, tmp)
                yield StorageServer(base, pg.url(name), port)
        finally:
            trio.run(_admin, pg.admin_url, f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")

    return storage_server
