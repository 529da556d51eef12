"""PgBouncer for tests: Debian's ``/usr/sbin/pgbouncer`` in front of a test PostgreSQL, on a free loopback port.

PgBouncer, like PostgreSQL, refuses to run as root: as root it runs as the ``postgres`` system user, as the
throwaway clusters do. Tests that need it skip, saying why, when the binary is absent (``.ci/run`` installs it).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.parse
from pathlib import Path

import pytest

from openmaic.store.ports import free_port

PGBOUNCER = Path("/usr/sbin/pgbouncer")

requires_pgbouncer = pytest.mark.skipif(
    not PGBOUNCER.exists(), reason=f"PgBouncer is not installed ({PGBOUNCER}; Debian's package pgbouncer)")


class PgBouncer:
    """One PgBouncer in ``mode`` (``session`` or ``transaction``) before the server of ``server_url``, every database
    of it reachable under its own name. ``settings`` adds to or overrides the ``[pgbouncer]`` section."""

    def __init__(self, server_url: str, mode: str, *, pool_size: int = 4, **settings: str | int) -> None:
        parts = urllib.parse.urlsplit(server_url)
        self.server_host, self.server_port = parts.hostname or "127.0.0.1", parts.port or 5432
        self.user = parts.username or "postgres"
        self.mode = mode
        self.port = free_port()
        self.root = Path(tempfile.mkdtemp(prefix="openmaic-pgbouncer-"))
        self.settings: dict[str, str | int] = {
            "listen_addr": "127.0.0.1", "listen_port": self.port, "unix_socket_dir": "",
            "auth_type": "trust", "auth_file": str(self.root / "userlist.txt"),
            "pool_mode": mode, "default_pool_size": pool_size, "max_client_conn": 1000,
            "pidfile": str(self.root / "pgbouncer.pid"), "logfile": str(self.root / "pgbouncer.log"),
            "admin_users": self.user, "server_reset_query": "DISCARD ALL",
            # As deploy/pgbouncer/ recommends: a client that vanished or sits idle in a transaction is cut off.
            "tcp_keepalive": 1, "tcp_keepidle": 5, "tcp_keepintvl": 2, "tcp_keepcnt": 3,
            "idle_transaction_timeout": 5, "query_wait_timeout": 5,
            **settings,
        }
        self._user = "postgres" if os.geteuid() == 0 else None
        self._proc: subprocess.Popen[bytes] | None = None

    def url(self, database: str) -> str:
        return f"postgresql://{self.user}@127.0.0.1:{self.port}/{database}"

    def start(self) -> PgBouncer:
        (self.root / "userlist.txt").write_text(f'"{self.user}" ""\n')
        ini = ["[databases]", f"* = host={self.server_host} port={self.server_port}", "", "[pgbouncer]"]
        ini += [f"{k} = {v}" for k, v in self.settings.items()]
        (self.root / "pgbouncer.ini").write_text("\n".join(ini) + "\n")
        cmd = [str(PGBOUNCER), str(self.root / "pgbouncer.ini")]
        if self._user:
            shutil.chown(self.root, self._user)
            for f in self.root.iterdir():
                shutil.chown(f, self._user)
            cmd = ["runuser", "-u", self._user, "--", *cmd]
        self._proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return self
            except OSError:
                if self._proc.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"PgBouncer did not start: {self.log()[-2000:]}") from None
                time.sleep(0.05)

    def admin(self, command: str) -> str:
        """Run ``command`` on PgBouncer's admin console (``RECONNECT db``, ``SHOW POOLS``)."""
        from openmaic.store.postgres import find_bin_dir

        done = subprocess.run([str(find_bin_dir() / "psql"), "-h", "127.0.0.1", "-p", str(self.port), "-U", self.user,
                               "-d", "pgbouncer", "-At", "-c", command], capture_output=True, text=True, timeout=10)
        if done.returncode:
            raise RuntimeError(f"pgbouncer {command!r}: {done.stderr}")
        return done.stdout

    def log(self) -> str:
        try:
            return (self.root / "pgbouncer.log").read_text()
        except OSError:
            return ""

    def stop(self) -> None:
        # The pid file's: under runuser, the process started is runuser's, not PgBouncer's.
        try:
            os.kill(int((self.root / "pgbouncer.pid").read_text()), signal.SIGTERM)
        except (OSError, ValueError):
            pass
        if self._proc is not None:
            try:
                self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        shutil.rmtree(self.root, ignore_errors=True)


#: Role defaults that bound every server session behind a transaction-mode pooler as the service asks (its statement
#: bound, and an idle-transaction bound below the fault tests' leases).
ROLE_BOUNDS = {"statement_timeout": "30000", "idle_in_transaction_session_timeout": "1000"}


def database_of(url: str) -> str:
    return urllib.parse.urlsplit(url).path.lstrip("/")


async def set_database_bounds(direct_url: str, bounds: dict[str, str] = ROLE_BOUNDS) -> None:
    """Give ``direct_url``'s database ``bounds`` as the defaults of every new session (``ALTER DATABASE … SET``, the
    test's own database: ``ALTER ROLE`` would reach every test's)."""
    from openmaic.store.database import open_database
    from openmaic.store.pooler import Pooler

    async with open_database(direct_url, min_size=1, max_size=1, pooler=Pooler()) as db:
        for name, value in bounds.items():
            await db.execute(f"ALTER DATABASE {database_of(direct_url)} SET {name} = {value}")


def pooled_env(bouncer: PgBouncer, direct_url: str) -> dict[str, str]:
    """The environment of a process that reaches ``direct_url``'s database through ``bouncer``."""
    env = {"DATABASE_URL": bouncer.url(database_of(direct_url)), "DATABASE_POOLER": bouncer.mode}
    if bouncer.mode == "transaction":
        env["DATABASE_DIRECT_URL"] = direct_url
    return env
