"""A streaming standby of a throwaway cluster, for the tests that need a replica (a failover, replica reads)."""

from __future__ import annotations

import subprocess

from openmaic.store.postgres import ThrowawayCluster


class Standby(ThrowawayCluster):
    """A hot standby of ``primary``, streaming from it (``pg_basebackup -R``)."""

    def __init__(self, primary: ThrowawayCluster) -> None:
        super().__init__()
        self.primary = primary

    def start(self) -> Standby:
        subprocess.run(self._cmd(str(self.bin_dir / "pg_basebackup"), "-h", "127.0.0.1", "-p", str(self.primary.port),
                                 "-U", "postgres", "-D", str(self.data), "-R", "-X", "stream", "-c", "fast"),
                       check=True, capture_output=True, text=True)
        self._pg_ctl("-o", self.options, "-l", str(self.root / "log"), "-w", "start")
        return self

    def promote(self) -> None:
        self._pg_ctl("-w", "promote")

    def stop_immediately(self) -> None:
        """``pg_ctl stop -m immediate``: the standby is gone, its data kept (:meth:`stop` deletes it)."""
        self._pg_ctl("-m", "immediate", "-w", "stop")
