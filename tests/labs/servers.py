"""Throw-away PostgreSQL and Redis servers for the tests that restart them (the chaos soak,
tests/test_postgres_restart.py, tests/test_broker_redis_lost.py): never the machine's shared
servers. PostgreSQL is a fresh cluster (``initdb``, trust authentication on
loopback) run by the ``postgres`` user with ``pg_ctl`` from /usr/lib/postgresql/<version>/bin,
in a temporary directory, on a free port; Redis is a ``redis-server`` without persistence on a
free port (a restart loses every message, as a broker crash does)."""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path


def free_port() -> int:
    with contextlib.closing(socket.socket()) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def pg_bin() -> Path | None:
    """The newest /usr/lib/postgresql/<version>/bin with initdb and pg_ctl, or None."""
    found = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"),
        key=lambda p: int(Path(p).parts[-3]) if Path(p).parts[-3].isdigit() else 0,
    )
    return Path(found[-1]).parent if found else None


def postgres_unavailable() -> str:
    """Why this machine cannot run a PostgreSQL server of a test's own ('' when it can)."""
    if os.geteuid() != 0:
        return "a PostgreSQL server of a test's own runs as the postgres user: run as root"
    if pg_bin() is None:
        return "no /usr/lib/postgresql/*/bin/pg_ctl (install postgresql)"
    if shutil.which("runuser") is None:
        return "runuser is missing (util-linux)"
    try:
        import pwd

        pwd.getpwnam("postgres")
    except KeyError:
        return "no postgres user"
    return ""


def unavailable() -> str:
    """Why this machine cannot run the soak's own servers ('' when it can)."""
    if why := postgres_unavailable():
        return why
    if shutil.which("redis-server") is None:
        return "redis-server is missing (install redis-server)"
    return ""


def _wait(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    raise RuntimeError(f"{what} did not come up within {timeout:.0f} s")


def _accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


class Postgres:
    """A PostgreSQL cluster of its own. ``url`` is its superuser's URL (user postgres, trust).
    Its directory is a fresh one in the system's temporary directory (a test's tmp_path is
    closed to the postgres user)."""

    def __init__(self):
        self.bin = pg_bin()
        self.dir = Path(tempfile.mkdtemp(prefix="soak-pg-"))
        self.data = self.dir / "data"
        self.log = self.dir / "server.log"
        self.port = free_port()
        self.url = f"postgres://postgres@127.0.0.1:{self.port}/postgres"
        self.restarts = 0

    def _as_postgres(self, *argv: str, timeout: float = 120) -> str:
        proc = subprocess.run(
            ["runuser", "-u", "postgres", "--", *argv],
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd="/",
        )
        if proc.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)}: {proc.stdout}{proc.stderr}")
        return proc.stdout

    def start(self) -> Postgres:
        os.chmod(self.dir, 0o755)
        shutil.chown(self.dir, "postgres", "postgres")
        self._as_postgres(
            str(self.bin / "initdb"), "-D", str(self.data), "-A", "trust", "-U", "postgres",
            "--no-sync", timeout=300,
        )  # fmt: skip
        with open(self.data / "postgresql.conf", "a") as conf:
            conf.write(
                f"\nport = {self.port}\nlisten_addresses = '127.0.0.1'\n"
                "unix_socket_directories = ''\nmax_connections = 200\nfsync = off\n"
                "shared_buffers = 32MB\n"
            )
        self._ctl_start()
        return self

    def _ctl_start(self) -> None:
        self._as_postgres(
            str(self.bin / "pg_ctl"), "-D", str(self.data), "-l", str(self.log), "-w",
            "-t", "120", "start",
        )  # fmt: skip
        _wait(lambda: _accepts(self.port), 60, "PostgreSQL")

    def stop(self, mode: str = "fast") -> None:
        """``fast`` (clients disconnected, a clean shutdown) or ``immediate`` (a crash: the
        next start recovers from the WAL)."""
        self._as_postgres(
            str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "-t", "120",
            "stop",
        )  # fmt: skip

    def restart(self, mode: str = "fast", down_seconds: float = 0.0) -> float:
        """Stop (when running), stay down ``down_seconds`` and start again; how long it was
        unreachable."""
        began = time.monotonic()
        if (self.data / "postmaster.pid").exists():
            self.stop(mode)
        time.sleep(down_seconds)
        self._ctl_start()
        self.restarts += 1
        return time.monotonic() - began

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.stop("immediate")
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> Postgres:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()


class Redis:
    """A redis-server of its own, no persistence; ``url`` is its database 0."""

    def __init__(self, root: Path | None = None):
        self.dir = Path(tempfile.mkdtemp(prefix="soak-redis-", dir=root))
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.proc: subprocess.Popen | None = None
        self.restarts = 0

    def start(self) -> Redis:
        self.proc = subprocess.Popen(
            [
                "redis-server",
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(self.dir),
            ],  # fmt: skip
            stdout=open(self.dir / "server.log", "ab"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        _wait(lambda: _accepts(self.port), 60, "Redis")
        return self

    def stop(self, kill: bool = True) -> None:
        """SIGKILL (a crash) or SIGTERM; either way, without persistence, every message is
        lost."""
        if self.proc and self.proc.poll() is None:
            self.proc.kill() if kill else self.proc.terminate()
            self.proc.wait(timeout=30)

    def restart(self, kill: bool = True, down_seconds: float = 0.0) -> None:
        self.stop(kill)
        time.sleep(down_seconds)
        self.start()
        self.restarts += 1

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)
