"""Smoke test of the embedded default: SQLite + kombu's filesystem broker + a real worker.

Everything runs in subprocesses with DATABASE_URL and CELERY_BROKER_URL unset, as on a
newcomer's machine after `make run`.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e import wait_for, worker_argv

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow


def manage(env, *args, timeout=120) -> str:
    proc = subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def shell(env, code: str) -> str:
    return manage(env, "shell", "-v", "0", "-c", code).strip()


def test_embedded_default_runs_a_real_worker(tmp_path):
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in {"DATABASE_URL", "CELERY_BROKER_URL", "DJANGO_SETTINGS_MODULE"}
    }
    env["BEEWEB_DATA_DIR"] = str(tmp_path)
    manage(env, "migrate", "--noinput", "-v0")
    assert (tmp_path / "beeweb.sqlite3").exists()
    out = manage(env, "ensure_admin")
    assert "password:" in out
    assert "not shown again" in manage(env, "ensure_admin")

    log_path = tmp_path / "worker.log"
    log = log_path.open("w")
    worker = subprocess.Popen(
        worker_argv("default", "smoke@localhost"),
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        count = "from experiments.models import Worker; print(Worker.objects.count())"
        assert wait_for(lambda: shell(env, count) == "1"), "worker never registered"
        # A real task through the filesystem broker: the worker logs that it ran it.
        task_id = shell(
            env, "from experiments.execution.tasks import janitor; print(janitor.delay().id)"
        )
        done = f"runners.janitor[{task_id}] succeeded"
        assert wait_for(lambda: done in log_path.read_text()), "task was never consumed"
    finally:
        os.killpg(worker.pid, signal.SIGTERM)
        try:
            worker.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(worker.pid, signal.SIGKILL)
        log.close()
