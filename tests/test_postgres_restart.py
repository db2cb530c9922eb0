"""PostgreSQL restarts while a node worker claims, heartbeats and stores runs (issue 28): a
stack on a throw-away PostgreSQL server of the test's own (tests/labs/servers.py; the
machine's shared server is never touched), a real node worker, a janitor worker and beat,
a matrix of short real dd runs and time-based fio runs; the server is restarted twice
mid-matrix, once with a fast shutdown (sessions terminated) and once with an immediate one
(a crash, recovered from the WAL). Every run ends succeeded, each in one attempt: the tools
keep running through the outage, heartbeats and stores are tried again on a fresh
connection (BEEWEB_DB_RETRY_SECONDS), results are stored once, raw outputs are stored, and
no node lease is left held."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import time

import pytest

from tests.labs import ROOT, Stack, servers, wait_for, wait_for_workers

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("fio") is None, reason="fio is not installed"),
    pytest.mark.skipif(bool(servers.postgres_unavailable()), reason=servers.postgres_unavailable()),
]
HOST = socket.gethostname()
QUEUE = f"node.{HOST}"

MATRIX = """\
name: dd and fio through PostgreSQL restarts
tool: {tool}
testbeds: [localhost]
repetitions: {repetitions}
drop_caches: false
timeout_s: 300
params: {params}
"""
DD = MATRIX.format(tool="dd", repetitions=24, params="{bs: 1m, count: 8}")
FIO = MATRIX.format(
    tool="fio",
    repetitions=6,
    params="{rw: write, size: 8m, bs: 1m, runtime: 3, time_based: true}",
)
FINAL = {"succeeded", "failed", "cancelled"}


def _rows(stack: Stack, query: str) -> list[tuple] | None:
    """The query's rows; None while the server is down."""
    try:
        return stack.sql(query)
    except Exception:
        return None


def _statuses(stack: Stack) -> list[str]:
    rows = _rows(stack, "SELECT status FROM experiments_run ORDER BY id") or []
    return [status for (status,) in rows]


def _launch(stack: Stack, tmp_path, text: str, name: str) -> None:
    path = tmp_path / f"{name}.yaml"
    path.write_text(text.replace("name: ", f"name: {name} ", 1))
    stack.manage("launch_matrix", str(path))


@pytest.fixture
def pg_stack(tmp_path, monkeypatch):
    with servers.Postgres() as server:
        monkeypatch.setenv("DATABASE_URL", server.url)
        stack = Stack(tmp_path)
        try:
            stack.manage("ensure_localhost")
            yield stack, server
        finally:
            stack.close()


def test_postgres_restarts_mid_matrix_lose_nothing(pg_stack, tmp_path):
    stack, server = pg_stack
    stack.env.update(
        {
            "BEEWEB_JANITOR_SECONDS": "2",
            "BEEWEB_RUN_STALE_SECONDS": "45",
            "BEEWEB_RUN_REDISPATCH_SECONDS": "60",
        }
    )
    node = f"node@{HOST}"
    stack.worker(QUEUE, node)
    stack.worker("default", f"janitor@{HOST}")
    stack.procs.append(
        subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "beeweb", "beat", "--loglevel=INFO"],
            cwd=ROOT,
            env=stack.env,
            stdout=open(tmp_path / "beat.log", "ab"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    )
    wait_for_workers(stack, node, f"janitor@{HOST}", timeout=90)
    _launch(stack, tmp_path, FIO, "first")
    _launch(stack, tmp_path, DD, "second")
    _launch(stack, tmp_path, FIO, "third")
    total = len(_statuses(stack))
    assert total == 36
    started = time.monotonic()

    def log() -> str:
        return stack.worker_log(node)[-4000:]

    outages = []
    # A fast shutdown while the first fio runs (its heartbeats and output writes fail).
    assert wait_for(lambda: _statuses(stack).count("succeeded") >= 2, 180), log()
    assert wait_for(lambda: "running" in _statuses(stack), 60, interval=0.1), log()
    outages.append(("fast", server.restart("fast", down_seconds=3)))
    # An immediate one (a crash) while the dd runs are claimed and stored, several a second.
    assert wait_for(lambda: _statuses(stack).count("succeeded") >= 12, 240), log()
    outages.append(("immediate", server.restart("immediate", down_seconds=3)))
    # And another fast one, into the last fio runs.
    assert wait_for(lambda: _statuses(stack).count("succeeded") >= 31, 300), log()
    outages.append(("fast", server.restart("fast", down_seconds=2)))

    done = wait_for(lambda: set(_statuses(stack)) <= FINAL, 600, interval=1)
    elapsed = time.monotonic() - started
    assert done, f"{_statuses(stack)}\n{log()}"
    rows = stack.sql(
        "SELECT id, status, error, attempts, length(raw_output), launch::jsonb ? 'history' "
        "FROM experiments_run ORDER BY id"
    )
    problems = [row for row in rows if row[1] != "succeeded" or row[3] != 1 or row[5]]
    assert not problems, f"{problems}\n{log()}"
    assert all(row[4] > 0 for row in rows), "every run's raw output is stored"
    # Results stored once: one primary row per metric name and run.
    doubled = stack.sql(
        'SELECT run_id, name, count(*) FROM experiments_metric WHERE "primary" '
        "GROUP BY run_id, name HAVING count(*) > 1"
    )
    assert doubled == []
    assert stack.sql('SELECT count(DISTINCT run_id) FROM experiments_metric WHERE "primary"') == [
        (total,)
    ]
    assert stack.sql("SELECT count(*) FROM experiments_nodelease") == [(0,)]
    check = stack.manage("rebuild_summaries", "--check", check=False)
    assert check.returncode == 0, check.stdout + check.stderr
    worker_log = stack.worker_log(node)
    retried = worker_log.count("the database is unreachable")
    print(
        f"\nPostgreSQL restarted {len(outages)} times mid-matrix "
        f"({', '.join(f'{mode}: down {down:.1f} s' for mode, down in outages)}): "
        f"{total}/{total} runs succeeded in one attempt each, {elapsed:.1f} s in all; "
        f"the worker waited out the database {retried} times"
    )
