"""Smoke test of the embedded default: SQLite + kombu's filesystem broker + a real worker.

Everything runs in subprocesses with DATABASE_URL and CELERY_BROKER_URL unset, as on a
newcomer's machine after `make run`.
"""

from __future__ import annotations

import pytest

from tests.labs import Stack, wait_for, wait_for_workers

pytestmark = pytest.mark.slow


def test_embedded_default_runs_a_real_worker(tmp_path):
    stack = Stack(tmp_path, embedded=True)  # migrated, and the admin created
    try:
        assert (tmp_path / "data" / "beeweb.sqlite3").exists()
        assert "password:" in stack.admin
        again = " ".join(stack.manage("ensure_admin").stdout.split())  # (wrapped text)
        assert "credentials are not shown again" in again

        stack.worker("default", "smoke@localhost")
        wait_for_workers(stack, "smoke@localhost", timeout=60)
        # A real task through the filesystem broker: the worker logs that it ran it.
        task_id = stack.call("send_janitor")
        done = f"runners.janitor[{task_id}] succeeded"
        assert wait_for(lambda: done in stack.worker_log("smoke@localhost")), (
            "task was never consumed"
        )
    finally:
        stack.close()
