"""End to end: real Celery workers (on Redis in CI, the filesystem broker otherwise) run real
fio matrices launched by `manage.py launch_matrix`; a worker killed with SIGKILL mid-run
leaves its run requeued, never stuck as running; cancel stops a running tool."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time

import pytest

from tests import labs
from tests.labs import LONG_FIO, Stack, runs, wait_for

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("fio") is None, reason="fio is not installed"),
]
HOST = socket.gethostname()
QUEUE = f"node.{HOST}"

FIO_MATRIX = """\
name: fio write/read x numjobs
tool: fio
testbeds: [localhost]
repetitions: 3
drop_caches: true
timeout_s: 300
params: {size: 16m, bs: 1m, direct: false}
axes:
  rw: [write, read]
  numjobs: [1, 2, 4, 8]
"""


def fio_pids(stack: Stack) -> list[int]:
    out = subprocess.run(
        ["pgrep", "-f", f"fio.*{stack.env['BEEWEB_DATA_DIR']}"], capture_output=True, text=True
    ).stdout
    return [int(p) for p in out.split()]


def run_field(stack: Stack, field: str):
    (run,) = runs(stack)
    return run[field]


def test_launch_matrix_runs_the_example_fio_matrix(localhost_stack, tmp_path):
    stack = localhost_stack
    path = tmp_path / "fio.yaml"
    path.write_text(FIO_MATRIX)
    stack.worker(QUEUE, f"node@{HOST}")
    started = time.monotonic()
    result = stack.manage(
        "launch_matrix", str(path), "--wait", "--timeout", "900", check=False, timeout=1000
    )
    elapsed = time.monotonic() - started
    assert result.returncode == 0, (
        result.stdout + result.stderr + stack.worker_log(f"node@{HOST}")[-3000:]
    )
    assert "queued 24 runs" in result.stdout
    assert "24/24 finished succeeded=24" in result.stdout
    done = [r for r in runs(stack) if r["status"] == "succeeded"]
    writes = sum("write_bw" in r["metrics"] for r in done)
    reads = sum("read_bw" in r["metrics"] for r in done)
    assert (len(done), writes, reads) == (24, 12, 12)
    lag = sum((r["started_at"] - r["queued_at"]).total_seconds() for r in done) / len(done)
    busy = sum((r["finished_at"] - r["started_at"]).total_seconds() for r in done) / len(done)
    # The configuration summaries the worker kept as runs landed equal a recomputation.
    check = stack.manage("rebuild_summaries", "--check", check=False)
    assert check.returncode == 0, check.stdout + check.stderr
    print(
        f"\nexample matrix (24 fio runs, broker {stack.broker}): {elapsed:.1f} s in all; "
        f"queue-to-start {lag:.2f} s per run (includes waiting behind earlier "
        f"runs), {busy:.2f} s per run from start to stored metrics"
    )


def test_sigkill_mid_run_requeues_and_cancel_stops_the_tool(localhost_stack, tmp_path):
    stack = localhost_stack
    path = tmp_path / "long.yaml"
    path.write_text(LONG_FIO)
    first = stack.worker(QUEUE, f"first@{HOST}")
    stack.manage("launch_matrix", str(path))
    assert wait_for(lambda: run_field(stack, "status") == "running", 90), stack.worker_log(
        f"first@{HOST}"
    )[-3000:]
    assert wait_for(lambda: fio_pids(stack), 30), "fio never started"

    os.kill(first.pid, signal.SIGKILL)  # the worker dies; nothing tells the database
    first.wait(timeout=10)
    assert wait_for(lambda: not fio_pids(stack), 15), "fio outlived its worker"
    assert run_field(stack, "status") == "running"

    time.sleep(3)
    swept = stack.call("janitor", 2)
    assert swept == {"requeued": 1, "failed": 0, "cancelled": 0, "redispatched": 0}
    assert run_field(stack, "status") == "queued"
    assert "stopped sending heartbeats during attempt 1" in run_field(stack, "error")

    second = stack.worker(QUEUE, f"second@{HOST}")
    assert wait_for(
        lambda: run_field(stack, "attempts") == 2 and run_field(stack, "status") == "running", 90
    ), stack.worker_log(f"second@{HOST}")[-3000:]
    assert wait_for(lambda: fio_pids(stack), 30)
    labs.cancel(stack)
    assert wait_for(lambda: run_field(stack, "status") == "cancelled", 30)
    assert wait_for(lambda: not fio_pids(stack), 15)
    assert "cancelled while running" in run_field(stack, "error")
    assert second.poll() is None, "the worker survives a cancel"


DD_MATRIX = """\
name: dd resume
tool: dd
testbeds: [localhost]
repetitions: 4
drop_caches: false
timeout_s: 60
params: {bs: 1m, count: 4}
"""


def test_resume_after_the_broker_lost_its_messages(localhost_stack, tmp_path):
    stack = localhost_stack
    path = tmp_path / "dd.yaml"
    path.write_text(DD_MATRIX)
    stack.manage("launch_matrix", str(path))  # no worker yet: four runs wait in the broker

    def statuses() -> list[str]:
        return sorted(r["status"] for r in runs(stack))

    assert statuses() == ["queued"] * 4

    # The broker restarts empty (Redis here keeps nothing on disk).
    if stack.broker.startswith("redis://"):
        stack.flush_broker()
    else:
        for message in (tmp_path / "data" / "broker" / "queue").iterdir():
            message.unlink()
    stack.worker(QUEUE, f"resume@{HOST}")
    time.sleep(4)
    assert statuses() == ["queued"] * 4, "nothing should have arrived"

    assert stack.call("resume", runs(stack)[0]["matrix_id"]) == 4
    assert wait_for(lambda: statuses() == ["succeeded"] * 4, 90), stack.worker_log(
        f"resume@{HOST}"
    )[-3000:]
