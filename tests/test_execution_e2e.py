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

from tests.e2e import LONG_FIO, Stack, wait_for

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


@pytest.fixture
def stack(tmp_path):
    s = Stack(tmp_path)
    s.manage("ensure_localhost")
    yield s
    s.close()


def fio_pids(stack: Stack) -> list[int]:
    out = subprocess.run(
        ["pgrep", "-f", f"fio.*{stack.env['BEEWEB_DATA_DIR']}"], capture_output=True, text=True
    ).stdout
    return [int(p) for p in out.split()]


def run_field(stack: Stack, field: str) -> str:
    return stack.shell(f"from experiments.models import Run; print(Run.objects.get().{field})")


def test_launch_matrix_runs_the_example_fio_matrix(stack, tmp_path):
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
    report = stack.shell(
        "from django.db.models import Avg, F\n"
        "from experiments.models import Metric, Run\n"
        "runs = Run.objects.filter(status='succeeded')\n"
        "lag = runs.aggregate(a=Avg(F('started_at') - F('queued_at')))['a']\n"
        "busy = runs.aggregate(a=Avg(F('finished_at') - F('started_at')))['a']\n"
        "print(runs.count(), Metric.objects.filter(primary=True, name='write_bw').count(),\n"
        "      Metric.objects.filter(primary=True, name='read_bw').count(),\n"
        "      lag.total_seconds(), busy.total_seconds())"
    )
    count, writes, reads, lag, busy = report.split()
    assert (int(count), int(writes), int(reads)) == (24, 12, 12)
    # The configuration summaries the worker kept as runs landed equal a recomputation.
    check = stack.manage("rebuild_summaries", "--check", check=False)
    assert check.returncode == 0, check.stdout + check.stderr
    print(
        f"\nexample matrix (24 fio runs, broker {stack.broker}): {elapsed:.1f} s in all; "
        f"queue-to-start {float(lag):.2f} s per run (includes waiting behind earlier "
        f"runs), {float(busy):.2f} s per run from start to stored metrics"
    )


def test_sigkill_mid_run_requeues_and_cancel_stops_the_tool(stack, tmp_path):
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
    swept = stack.shell("from experiments.execution.dispatch import janitor; print(janitor(2))")
    assert swept == "{'requeued': 1, 'failed': 0, 'cancelled': 0, 'redispatched': 0}"
    assert run_field(stack, "status") == "queued"
    assert "stopped sending heartbeats during attempt 1" in run_field(stack, "error")

    second = stack.worker(QUEUE, f"second@{HOST}")
    assert wait_for(
        lambda: run_field(stack, "attempts") == "2" and run_field(stack, "status") == "running", 90
    ), stack.worker_log(f"second@{HOST}")[-3000:]
    assert wait_for(lambda: fio_pids(stack), 30)
    stack.shell(
        "from experiments.matrices.expansion import cancel_runs;"
        " from experiments.models import Run;"
        "print(cancel_runs(Run.objects.all()))"
    )
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


def test_resume_after_the_broker_lost_its_messages(stack, tmp_path):
    path = tmp_path / "dd.yaml"
    path.write_text(DD_MATRIX)
    stack.manage("launch_matrix", str(path))  # no worker yet: four runs wait in the broker
    statuses = (
        "from experiments.models import Run;"
        "print(sorted(Run.objects.values_list('status', flat=True)))"
    )
    assert stack.shell(statuses) == str(["queued"] * 4)

    # The broker restarts empty (Redis here keeps nothing on disk).
    if stack.broker.startswith("redis://"):
        stack.flush_broker()
    else:
        for message in (tmp_path / "data" / "broker" / "queue").iterdir():
            message.unlink()
    stack.worker(QUEUE, f"resume@{HOST}")
    time.sleep(4)
    assert stack.shell(statuses) == str(["queued"] * 4), "nothing should have arrived"

    resent = stack.shell(
        "from experiments.matrices.expansion import resume; from experiments.models import "
        "Matrix; print(resume(Matrix.objects.get()))"
    )
    assert resent == "4"
    assert wait_for(lambda: stack.shell(statuses) == str(["succeeded"] * 4), 90), stack.worker_log(
        f"resume@{HOST}"
    )[-3000:]
