"""An isolated beeweb installation for end-to-end tests: its own database (a fresh PostgreSQL
database when DATABASE_URL names one, else SQLite), its own broker (a fresh Redis database
number when CELERY_BROKER_URL is Redis, else the filesystem broker) and its own data
directory; real `manage.py` and Celery worker subprocesses against it, and the functions of
tests/labs/inside.py run in its Django (``Stack.call``).

Several suites may run at once on one machine (CI beside a developer's run): a stack claims
an empty Redis database number atomically (SET NX of a claim key in a database holding
nothing else) and gives it back on close, so two stacks never share a broker."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
import uuid
from pathlib import Path
from urllib.parse import urlparse, urlunparse

ROOT = Path(__file__).resolve().parents[2]


# A fio run that lasts until it is cancelled (300 s, time based) on the localhost testbed:
# what tests of cancel, kill and recovery launch.
LONG_FIO = """\
name: long fio
tool: fio
testbeds: [localhost]
repetitions: 1
drop_caches: false
timeout_s: 600
params: {rw: write, size: 8m, bs: 1m, runtime: 300, time_based: true}
"""


def worker_argv(queue: str, name: str) -> list[str]:
    """A real Celery worker as nodes run it: solo pool, one queue, its own name."""
    return [
        sys.executable,
        "-m",
        "celery",
        "-A",
        "beeweb",
        "worker",
        "--pool=solo",
        "-Q",
        queue,
        "-n",
        name,
        "--loglevel=INFO",
    ]


def wait_for(predicate, timeout: float = 60.0, interval: float = 0.3) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return False


class Stack:
    """``embedded=True`` ignores DATABASE_URL and CELERY_BROKER_URL: the SQLite file and the
    filesystem broker of a newcomer's machine. ``database_url`` and ``broker_url`` name
    other servers than those two variables do (the chaos soak's own, which it restarts)."""

    def __init__(
        self,
        tmp_path: Path,
        embedded: bool = False,
        database_url: str | None = None,
        broker_url: str | None = None,
    ):
        self.tmp = tmp_path
        self.env = {
            k: v
            for k, v in os.environ.items()
            if k not in {"DATABASE_URL", "CELERY_BROKER_URL", "DJANGO_SETTINGS_MODULE"}
        }
        self.env["BEEWEB_DATA_DIR"] = str(tmp_path / "data")
        self.env["BEEWEB_RUN_PROGRESS_SECONDS"] = "0.5"
        self.env["PYTHONUNBUFFERED"] = "1"
        self.database = None
        db_url = "" if embedded else database_url or os.environ.get("DATABASE_URL", "")
        if db_url.startswith(("postgres://", "postgresql://")):
            self.database = f"beeweb_e2e_{uuid.uuid4().hex[:10]}"
            self._admin_sql(db_url, f'CREATE DATABASE "{self.database}"')
            self.server_url = db_url
            self.env["DATABASE_URL"] = urlunparse(
                urlparse(db_url)._replace(path=f"/{self.database}")
            )
        self.claim = f"beeweb-e2e-claim:{uuid.uuid4().hex}"
        self.claimed = ""  # the Redis database this stack claimed (tests may point elsewhere)
        broker = "" if embedded else broker_url or os.environ.get("CELERY_BROKER_URL", "")
        if broker.startswith("redis://"):
            parsed = urlparse(broker)
            number = self._claim_redis(broker)
            self.claimed = urlunparse(parsed._replace(path=f"/{number}"))
            self.env["CELERY_BROKER_URL"] = self.claimed
        self.procs: list[subprocess.Popen] = []
        try:
            self.manage("migrate", "--noinput", "-v0")
            self.admin = self.manage("ensure_admin").stdout  # the first password, shown once
        except BaseException:
            self.close()  # gives the database and the broker's claim back
            raise

    def _claim_redis(self, broker: str) -> int:
        """An empty Redis database number (1-15), claimed for this stack: the claim key is set
        only where it is new, and kept only where it is the database's one key (another
        suite's broker or claim makes the database busy)."""
        import redis

        for _ in range(60):
            for number in range(1, 16):
                url = urlunparse(urlparse(broker)._replace(path=f"/{number}"))
                client = redis.Redis.from_url(url)  # (a db= argument loses to the URL's)
                if client.dbsize() or not client.set(self.claim, "1", nx=True, ex=7200):
                    continue
                if client.dbsize() == 1:
                    return number
                client.delete(self.claim)
            time.sleep(1)
        raise RuntimeError("no empty Redis database (1-15) to claim for an end-to-end stack")

    def flush_broker(self) -> None:
        """Empty the stack's Redis broker (a broker restart), keeping its claim."""
        import redis

        client = redis.Redis.from_url(self.claimed)
        client.flushdb()
        client.set(self.claim, "1", ex=7200)

    @staticmethod
    def _admin_sql(url: str, sql: str) -> None:
        import psycopg

        parsed = urlparse(url)
        with psycopg.connect(
            host=parsed.hostname,
            port=parsed.port or 5432,
            user=parsed.username,
            password=parsed.password,
            dbname=(parsed.path or "/postgres")[1:] or "postgres",
            autocommit=True,
        ) as conn:
            conn.execute(sql)

    @property
    def broker(self) -> str:
        return self.env.get("CELERY_BROKER_URL", "filesystem")

    def manage(
        self, *args: str, timeout: float = 300, check: bool = True, env: dict | None = None
    ) -> subprocess.CompletedProcess:
        proc = subprocess.run(
            [sys.executable, "manage.py", *args],
            cwd=ROOT,
            env={**self.env, **(env or {})},
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if check:
            assert proc.returncode == 0, f"manage.py {' '.join(args)}:\n{proc.stderr}"
        return proc

    def sql(self, query: str) -> list[tuple]:
        """Rows of a query on the stack's database (PostgreSQL or its SQLite file), read
        directly: a manage.py process per poll costs ~1.5 s on a busy machine."""
        if self.database:
            import psycopg

            with psycopg.connect(self.env["DATABASE_URL"]) as conn:
                return conn.execute(query).fetchall()
        path = Path(self.env["BEEWEB_DATA_DIR"]) / "beeweb.sqlite3"
        with contextlib.closing(sqlite3.connect(path, timeout=30)) as conn:
            return conn.execute(query).fetchall()

    def call(self, function: str, *args, env: dict | None = None):
        """``function`` of tests/labs/inside.py called with ``args`` (JSON) in a process of
        the stack's Django; its result, through JSON."""
        proc = subprocess.run(
            [sys.executable, "-m", "tests.labs", function, json.dumps(args)],
            cwd=ROOT,
            env={**self.env, **(env or {})},
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert proc.returncode == 0, f"{function}{args!r}:\n{proc.stderr}"
        return json.loads(proc.stdout.splitlines()[-1])

    def node_workers(self, lab, env: dict | None = None, per_node: dict | None = None) -> dict:
        """One worker per node of a network-namespace lab (queue node.<hostname>, named
        <hostname>@<hostname>, that hostname), reaching the database and broker through the
        lab's gateway; ``worker_log`` reads their logs. They are the stack's: ``close`` stops
        them before it gives the broker's database back. (A lab lives for a whole test
        module; workers left running to its end took the next test's messages from the same
        Redis database and failed them on their dropped database.) ``per_node`` adds variables
        to one node's worker by hostname (its node policy, its BeeGFS settings)."""
        env = {**self.env, **(env or {})}
        for key in ("DATABASE_URL", "CELERY_BROKER_URL"):
            if key in env:
                env[key] = lab.via_gateway(env[key])
        workers = {}
        for node in lab.nodes:
            name = f"{node.hostname}@{node.hostname}"
            workers[node.hostname] = lab.popen(
                node,
                worker_argv(f"node.{node.hostname}", name),
                env={**env, **(per_node or {}).get(node.hostname, {})},
                hostname=node.hostname,
                cwd=ROOT,
                stdout=open(self._log(name), "ab"),
                stderr=subprocess.STDOUT,
            )
        self.procs.extend(workers.values())
        return workers

    def shell(self, code: str, env: dict | None = None) -> str:
        """What ``code`` prints in a manage.py shell: for a test's one-off step; what tests
        share is a function of tests/labs/inside.py (``call``)."""
        return self.manage("shell", "-v", "0", "-c", code, env=env).stdout.strip()

    def worker(
        self, queue: str, name: str, env: dict | None = None, prefix: list[str] | None = None
    ) -> subprocess.Popen:
        """A real Celery worker (solo pool, as on benchmark nodes) in its own session."""
        return self._spawn([*(prefix or []), *worker_argv(queue, name)], name, env)

    def beat(self, env: dict | None = None) -> subprocess.Popen:
        """Celery beat as `make run` starts it (django-celery-beat's database scheduler: the
        janitor, the schedules' check and every scheduled matrix); its log is
        ``worker_log("beat")``."""
        argv = [sys.executable, "-m", "celery", "-A", "beeweb", "beat", "--loglevel=INFO"]
        return self._spawn(argv, "beat", env)

    def _spawn(self, argv: list[str], name: str, env: dict | None) -> subprocess.Popen:
        """``argv`` in its own session with the stack's environment, logging to
        ``worker_log(name)``; stopped by ``close``."""
        proc = subprocess.Popen(
            argv,
            cwd=ROOT,
            env={**self.env, **(env or {})},
            stdout=open(self._log(name), "ab"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.procs.append(proc)
        return proc

    def _log(self, name: str) -> Path:
        return self.tmp / f"worker-{name.replace('@', '-')}.log"

    def worker_log(self, name: str) -> str:
        path = self._log(name)
        return path.read_text(errors="replace") if path.exists() else ""

    @staticmethod
    def stop(proc: subprocess.Popen, sig: int = signal.SIGTERM) -> None:
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)

    def close(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                self.stop(proc)
        if self.database:
            self._admin_sql(
                self.server_url, f'DROP DATABASE IF EXISTS "{self.database}" WITH (FORCE)'
            )
        if self.claimed:
            import redis

            redis.Redis.from_url(self.claimed).flushdb()
