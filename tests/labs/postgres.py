"""A throw-away PostgreSQL server of a test's own (never the machine's shared one): initdb
into a fresh directory as the ``postgres`` user, started with pg_ctl on a free port, that
the test may restart (fast or immediate shutdown) or stop, and that is removed on close.

    with ThrowawayPostgres() as server:
        monkeypatch.setenv("DATABASE_URL", server.url)  # what Stack reads
        server.restart("immediate", down_seconds=2)
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

BIN = Path("/usr/lib/postgresql/15/bin")


def available() -> tuple[bool, str]:
    """Whether this machine can run one: (ok, why not)."""
    if os.geteuid() != 0:
        return False, "starting a PostgreSQL server as the postgres user needs root"
    if not (BIN / "initdb").exists():
        return False, f"{BIN}/initdb is not installed"
    try:
        pwd.getpwnam("postgres")
    except KeyError:
        return False, "there is no postgres user"
    return True, ""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class ThrowawayPostgres:
    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="beeweb-pg-"))
        self.data = self.dir / "data"
        self.log = self.dir / "server.log"
        self.port = free_port()
        user = pwd.getpwnam("postgres")
        os.chown(self.dir, user.pw_uid, user.pw_gid)
        self._as_postgres(
            BIN / "initdb",
            "-D",
            self.data,
            "-U",
            "postgres",
            "--auth=trust",
            "-E",
            "UTF8",
            "--no-sync",
        )
        with open(self.data / "postgresql.conf", "a") as conf:
            conf.write(
                f"port = {self.port}\nlisten_addresses = '127.0.0.1'\n"
                f"unix_socket_directories = '{self.dir}'\nmax_connections = 100\n"
                "fsync = off\n"
            )
        self.start()

    @property
    def url(self) -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/postgres"

    def _as_postgres(self, *argv) -> str:
        proc = subprocess.run(
            ["runuser", "-u", "postgres", "--", *map(str, argv)],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=self.dir,
        )
        if proc.returncode != 0:
            raise RuntimeError(f"{' '.join(map(str, argv))}: {proc.stdout}{proc.stderr}")
        return proc.stdout

    def start(self) -> None:
        self._as_postgres(BIN / "pg_ctl", "-D", self.data, "-l", self.log, "-w", "start")

    def stop(self, mode: str = "fast") -> None:
        self._as_postgres(BIN / "pg_ctl", "-D", self.data, "-m", mode, "-w", "stop")

    def restart(self, mode: str = "fast", down_seconds: float = 2.0) -> float:
        """Stop (``fast``: sessions terminated, a clean shutdown; ``immediate``: a crash,
        recovered from the WAL at start), stay down ``down_seconds``, start again; how long
        it was unreachable."""
        began = time.monotonic()
        self.stop(mode)
        time.sleep(down_seconds)
        self.start()
        return time.monotonic() - began

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.stop("immediate")
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> ThrowawayPostgres:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
