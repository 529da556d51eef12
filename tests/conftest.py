"""Test fixtures: one real PostgreSQL per test session, a fresh database per test.

``DATABASE_URL`` (a server we may create databases on) is used when set; otherwise a throwaway cluster is
started (system binaries via runuser when root, else the embedded wheel's). The schema is migrated once into a
template database; each test gets ``CREATE DATABASE … TEMPLATE`` — a file copy, ~10 ms.
"""

from __future__ import annotations

import itertools
import os
import tempfile
import urllib.parse

import pytest
import trio

# Environment must not leak into tests: neither this project's variables nor the legacy model variables an
# environment-only deployment is configured by (a developer's OPENAI_API_KEY would change every default), nor a
# replica (it would take the tests' catch-up reads).
from openmaic.modelconfig.legacy import legacy_variables  # noqa: E402

_LEAKS = ("DATABASE_REPLICA_URL",)
for _k in [k for k in os.environ if k.startswith("OPENMAIC_") or k in legacy_variables(os.environ) or k in _LEAKS]:
    del os.environ[_k]
# DATABASE_URL is the tests' server; whether a pooler stands in front of it is each test's own choice.
for _k in ("DATABASE_POOLER", "DATABASE_DIRECT_URL"):
    os.environ.pop(_k, None)

# The tests start `python -m openmaic` (servers, the CLI) hundreds of times. Where PYTHONDONTWRITEBYTECODE is set,
# each of them would compile every module of the package again (a third of its start-up); they keep the bytecode
# in a cache of their own outside the checkout instead (a changed source is compiled again, as always).
if os.environ.pop("PYTHONDONTWRITEBYTECODE", None) is not None:
    os.environ.setdefault("PYTHONPYCACHEPREFIX", os.path.join(tempfile.gettempdir(), "openmaic-tests-pycache"))

from openmaic.store.database import open_database  # noqa: E402
from openmaic.store.migrations import migrate  # noqa: E402
from openmaic.store.ports import share_ports  # noqa: E402
from openmaic.store.postgres import ThrowawayCluster  # noqa: E402
from tests.pgbouncer import PgBouncer  # noqa: E402

# Under pytest-xdist each worker process has a session of its own (its own throwaway cluster, or its own template
# on a shared DATABASE_URL server); database names carry the pid, so they never collide either.
TEMPLATE = "openmaic_test_template" + (f"_{os.environ['PYTEST_XDIST_WORKER']}" if "PYTEST_XDIST_WORKER" in os.environ else "")

# The servers the tests start pick their ports in a slice of this process's own (gw0 the first of N).
if "PYTEST_XDIST_WORKER" in os.environ:
    share_ports(int(os.environ["PYTEST_XDIST_WORKER"].removeprefix("gw")), int(os.environ["PYTEST_XDIST_WORKER_COUNT"]))


class PgServer:
    def __init__(self, admin_url: str, cluster: ThrowawayCluster | None) -> None:
        self.admin_url = admin_url
        self.cluster = cluster
        self._n = itertools.count()

    def url(self, database: str) -> str:
        parts = urllib.parse.urlsplit(self.admin_url)
        return urllib.parse.urlunsplit(parts._replace(path="/" + database))

    def new_database_name(self) -> str:
        return f"t_{os.getpid()}_{next(self._n)}"


async def _admin(url: str, *statements: str) -> None:
    async with open_database(url, min_size=1, max_size=1) as db:
        for s in statements:
            await db.execute(s)


async def _prepare_template(server: PgServer) -> None:
    await _admin(
        server.admin_url,
        f"DROP DATABASE IF EXISTS {TEMPLATE} WITH (FORCE)",
        f"CREATE DATABASE {TEMPLATE}",
    )
    async with open_database(server.url(TEMPLATE), min_size=1, max_size=1) as db:
        await migrate(db)


@pytest.fixture(scope="session")
def pg() -> PgServer:
    url = os.environ.get("DATABASE_URL")
    cluster = None
    if not url:
        cluster = ThrowawayCluster().start()
        url = cluster.url()
    server = PgServer(url, cluster)
    try:
        trio.run(_prepare_template, server)
        yield server
    finally:
        if cluster is not None:
            cluster.stop()


@pytest.fixture
async def db_url(pg: PgServer) -> str:
    name = pg.new_database_name()
    await _admin(pg.admin_url, f"CREATE DATABASE {name} TEMPLATE {TEMPLATE}")
    try:
        yield pg.url(name)
    finally:
        with trio.CancelScope(shield=True):
            await _admin(pg.admin_url, f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@pytest.fixture
async def db(db_url: str):
    async with open_database(db_url, min_size=1, max_size=10, listen=["openmaic_events"], listener_ping_s=1.0) as d:
        yield d


@pytest.fixture(scope="session")
def bouncers(pg: PgServer):
    """``bouncers(mode, **settings)``: a PgBouncer in ``mode`` in front of the test server, started on first use and
    shared by the session's tests (each test has a database of its own behind it)."""
    started: dict[tuple, PgBouncer] = {}

    def get(mode: str, **settings: str | int) -> PgBouncer:
        key = (mode, *sorted(settings.items()))
        if key not in started:
            started[key] = PgBouncer(pg.admin_url, mode, **settings).start()
        return started[key]

    try:
        yield get
    finally:
        for b in started.values():
            b.stop()
