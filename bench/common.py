"""Shared set-up of the bench scripts: a dedicated PostgreSQL database (``beeweb_bench`` by
default, never the dev or CI one), created and migrated on first use, and helpers to start a
real gunicorn and Celery worker against it."""

from __future__ import annotations

import os
import platform
import signal
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlparse, urlunparse

ROOT = Path(__file__).resolve().parents[1]
VENV_BIN = Path(sys.executable).parent
SERVER = os.environ.get("BENCH_SERVER_URL", "postgres://beeweb@127.0.0.1:5432/beeweb")
DB_NAME = os.environ.get("BENCH_DB", "beeweb_bench")
BROKER = os.environ.get("BENCH_BROKER_URL", "redis://127.0.0.1:6379/9")
PORT = int(os.environ.get("BENCH_PORT", "18765"))
DATA_DIR = Path(os.environ.get("BENCH_DATA_DIR", ROOT / "var" / "bench"))
if DB_NAME in {"beeweb", "postgres", "template0", "template1"} or "test" in DB_NAME:
    raise SystemExit(f"refusing to benchmark in database {DB_NAME!r}")


def database_url() -> str:
    return urlunparse(urlparse(SERVER)._replace(path=f"/{DB_NAME}"))


def env() -> dict[str, str]:
    """Environment of every beeweb process of the bench."""
    DATA_DIR.mkdir(parents=True, exist_ok=True)
    return {
        **{k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"},
        "DATABASE_URL": database_url(),
        "CELERY_BROKER_URL": BROKER,
        "BEEWEB_DATA_DIR": str(DATA_DIR),
        "DATABASE_CONN_MAX_AGE": "600",
        "LOG_LEVEL": "WARNING",
        "PYTHONUNBUFFERED": "1",
    }


def ensure_database() -> None:
    import psycopg

    parsed = urlparse(SERVER)
    with psycopg.connect(
        host=parsed.hostname,
        port=parsed.port or 5432,
        user=parsed.username,
        password=parsed.password,
        dbname="postgres",
        autocommit=True,
    ) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [DB_NAME]).fetchone():
            conn.execute(f'CREATE DATABASE "{DB_NAME}"')
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "--noinput", "-v0"],
        cwd=ROOT,
        env=env(),
        check=True,
    )


def setup_django() -> None:
    """Point this process at the bench database and set Django up."""
    os.environ.update(env())
    os.environ["DJANGO_SETTINGS_MODULE"] = "beeweb.settings"
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()


def machine() -> str:
    cpu = "?"
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    mem = int(Path("/proc/meminfo").read_text().split()[1]) // 1024 // 1024
    return (
        f"{os.cpu_count()} CPUs ({cpu}), {mem} GiB RAM, {platform.system()} "
        f"{platform.release()}, Python {platform.python_version()}"
    )


def median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


def rss_kib(pid: int) -> int:
    """Resident memory of a process and all its descendants."""
    total = 0
    pids = [pid]
    while pids:
        current = pids.pop()
        try:
            for line in Path(f"/proc/{current}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
            children = Path(f"/proc/{current}/task/{current}/children").read_text().split()
        except OSError:
            continue
        pids.extend(int(c) for c in children)
    return total


def wait_http(url: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(url, timeout=2)
            return
        except urllib.error.HTTPError:
            return
        except OSError:
            time.sleep(0.2)
    raise SystemExit(f"{url} did not answer within {timeout} s")


@contextmanager
def gunicorn(workers: int = 2, threads: int = 1):
    """A real gunicorn serving beeweb on 127.0.0.1:PORT; yields (base URL, process)."""
    with socket.socket() as probe:
        if probe.connect_ex(("127.0.0.1", PORT)) == 0:
            raise SystemExit(f"port {PORT} is already taken: set BENCH_PORT")
    log = open(DATA_DIR / "gunicorn.log", "ab")
    proc = subprocess.Popen(
        [
            str(VENV_BIN / "gunicorn"),
            "beeweb.wsgi:application",
            "--bind",
            f"127.0.0.1:{PORT}",
            "--workers",
            str(workers),
            "--threads",
            str(threads),
            "--timeout",
            "300",
        ],
        cwd=ROOT,
        env=env(),
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        wait_http(f"http://127.0.0.1:{PORT}/login/")
        yield f"http://127.0.0.1:{PORT}", proc
    finally:
        stop(proc)


@contextmanager
def celery_worker(queue: str, app: str = "beeweb"):
    """A real solo-pool Celery worker on ``queue``, as on benchmark nodes (``app``: the
    Celery application's module)."""
    log = open(DATA_DIR / "celery.log", "ab")
    proc = subprocess.Popen(
        [
            str(VENV_BIN / "celery"),
            "-A",
            app,
            "worker",
            "--pool=solo",
            "-Q",
            queue,
            "-n",
            f"bench@{socket.gethostname()}",
            "--loglevel=WARNING",
            "--without-gossip",
            "--without-mingle",
        ],
        cwd=ROOT,
        env=env(),
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        yield proc
    finally:
        stop(proc)


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    except ProcessLookupError:
        pass


def bench_token() -> str:
    """The API token of the bench user (created with the data)."""
    out = subprocess.run(
        [sys.executable, "manage.py", "api_token", "bench"],
        cwd=ROOT,
        env=env(),
        check=True,
        capture_output=True,
        text=True,
    )
    return out.stdout.strip()


def page_statements(client, url: str, query: dict) -> list[str]:
    """The SQL statements one request of a page runs (captured from the Django test client)."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as ctx:
        client.get(url, query)
    return [q["sql"] for q in ctx.captured_queries]


def run_plain(statements: list[str]) -> None:
    """A page's floor: its statements executed as plain SQL on the same connection and
    fetched, with no ORM, view or template."""
    from django.db import connection

    with connection.cursor() as cursor:
        for sql in statements:
            cursor.execute(sql)
            if cursor.description is not None:
                cursor.fetchall()
