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

from tests.e2e import wait_for

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

    worker = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "beeweb",
            "worker",
            "--pool=solo",
            "-Q",
            "default",
            "-n",
            "smoke@localhost",
            "--loglevel=INFO",
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        count = "from experiments.models import Worker; print(Worker.objects.count())"
        assert wait_for(lambda: shell(env, count) == "1"), "worker never registered"
        # A task through the filesystem broker: the worker marks itself seen again.
        shell(
            env,
            "from experiments.models import Worker; from datetime import datetime, UTC;"
            "Worker.objects.update(last_seen=datetime(2000, 1, 1, tzinfo=UTC))",
        )
        shell(env, "from experiments.tasks import ping; ping.delay('smoke@localhost')")
        seen = "from experiments.models import Worker; print(Worker.objects.get().last_seen.year)"
        assert wait_for(lambda: shell(env, seen) != "2000"), "task was never consumed"
        assert any((tmp_path / "broker").iterdir())
    finally:
        os.killpg(worker.pid, signal.SIGTERM)
        try:
            worker.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(worker.pid, signal.SIGKILL)
