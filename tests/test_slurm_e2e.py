"""End to end: Slurm as a launch mode (issue 14, item 2) against a real slurmctld + slurmd
(tests/labs/slurm-cluster.sh, one fake node ``n1``) and a real Celery worker. A matrix in
Slurm mode runs fio as a step of its own job: the job id, its state and the allocated node
are stored and the metrics parsed; cancelling a running Slurm run cancels its job
(scancel); a job that hits its Slurm time limit fails the run with Slurm's reason."""

from __future__ import annotations

import shutil
import socket
import time

import pytest

from tests import labs
from tests.labs import Stack, finished, wait_for, wait_for_workers
from tests.labs.slurm import Cluster, unavailable

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("fio") is None, reason="fio is not installed"),
    pytest.mark.skipif(unavailable() is not None, reason=unavailable() or ""),
]
HOST = socket.gethostname()

FIO = """\
name: {name}
tool: fio
launch_mode: slurm
testbeds: [{testbed}]
repetitions: 1
drop_caches: {drop}
timeout_s: {timeout}
params: {params}
"""


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("slurm")
    cluster = Cluster(fake_nodes=1)
    cluster.start()
    stack = Stack(tmp)
    try:
        bench = str(tmp / "bench")
        (tmp / "bench").mkdir()
        testbed = {"owner": "admin", "benchmark_dir": bench, "members": {HOST: ["client"]}}
        stack.call(
            "inventory",
            {
                "nodes": {HOST: {"owner": "admin"}},
                "testbeds": [
                    {**testbed, "name": "slurm-tb", "slurm_partition": "debug"},
                    {**testbed, "name": "slurm-bad", "slurm_partition": "nosuchpartition"},
                ],
            },
        )
        stack.env.update(cluster.env)
        stack.worker(f"node.{HOST}", f"slurm@{HOST}", env={"BEEWEB_NODE_DIRS": bench})
        wait_for_workers(stack, f"slurm@{HOST}")
        yield stack, cluster
    finally:
        stack.close()
        cluster.stop()


def launch(
    stack: Stack,
    name: str,
    params: str,
    timeout: int = 120,
    drop: bool = False,
    testbed: str = "slurm-tb",
) -> int:
    text = FIO.format(
        name=name, params=params, timeout=timeout, drop=str(drop).lower(), testbed=testbed
    )
    (matrix,) = labs.launch(stack, ("admin", text))
    return matrix


def run_of(stack: Stack, matrix: int) -> dict:
    (run,) = labs.runs(stack, matrix)
    return run


def test_fio_runs_as_a_step_of_its_slurm_job(lab):
    stack, cluster = lab
    started = time.monotonic()
    matrix = launch(stack, "slurm fio", "{rw: write, size: 8m, bs: 1m}", drop=True)
    assert wait_for(lambda: finished(stack, matrix), 90), stack.worker_log(f"slurm@{HOST}")[-3000:]
    elapsed = time.monotonic() - started
    run = run_of(stack, matrix)
    assert run["status"] == "succeeded", run
    assert run["slurm_job_id"].isdigit(), run
    assert run["slurm_state"] == "COMPLETED", run
    assert run["slurm_nodes"] == ["n1"] and run["launch"].get("hosts") == [["n1", "n1"]], run
    # Slurm owns the client: the run held its launcher only (no storage servers here).
    assert run["nodes_held"] == [HOST], run
    assert run["argv"][:6] == [
        "srun",
        f"--jobid={run['slurm_job_id']}",
        "--nodes=1",
        "--ntasks=1",
        "--kill-on-bad-exit=1",
        "fio",
    ], run["argv"]
    assert len(run["metrics"]) >= 1, run
    # Caches dropped on the node it held (by the launcher's worker) and on the allocated
    # node (through the allocation), one outcome each.
    drop = run["effective_config"]["drop_caches"]
    assert sorted(drop) == sorted([HOST, "n1"]), drop
    assert all(v == "dropped" or v.startswith("not permitted: ") for v in drop.values()), drop
    # What Slurm itself says about the job: its name, its node, completed.
    shown = cluster.scontrol("show", "job", "-o", run["slurm_job_id"])
    assert f"JobName=beeweb-run-{run['pk']} " in shown and "JobState=COMPLETED" in shown, shown
    assert "NodeList=n1 " in shown, shown
    print(f"\nSlurm-mode fio run (salloc, cache drop, srun fio, release): {elapsed:.1f} s")


def test_an_allocation_slurm_refuses_fails_the_run_with_sallocs_words(lab):
    stack, _ = lab
    matrix = launch(stack, "bad partition", "{rw: write, size: 8m, bs: 1m}", testbed="slurm-bad")
    assert wait_for(lambda: finished(stack, matrix), 60), run_of(stack, matrix)
    run = run_of(stack, matrix)
    assert run["status"] == "failed", run
    assert run["error"].startswith("Slurm refused the allocation: salloc: error: "), run
    assert "partition" in run["error"].lower(), run
    # No job, no step: the argv is still the expansion's preview.
    assert run["slurm_job_id"] == "" and run["argv"][:2] == ["srun", "--jobid=<job>"], run


def test_cancel_runs_scancel(lab):
    stack, cluster = lab
    matrix = launch(
        stack, "slurm cancel", "{rw: write, size: 8m, bs: 1m, runtime: 300, time_based: true}"
    )
    assert wait_for(
        lambda: (r := run_of(stack, matrix))["status"] == "running" and "fio" in r["argv"], 60
    ), run_of(stack, matrix)
    job = run_of(stack, matrix)["slurm_job_id"]
    assert "JobState=RUNNING" in cluster.scontrol("show", "job", "-o", job)
    time.sleep(1)
    labs.cancel(stack, matrix)
    cancelled = time.monotonic()
    assert wait_for(lambda: finished(stack, matrix), 60), run_of(stack, matrix)
    run = run_of(stack, matrix)
    assert run["status"] == "cancelled", run
    assert run["slurm_state"] == "CANCELLED", run
    assert run["error"] == (
        f"cancelled while running; the process group was killed; Slurm job {job} cancelled "
        "(scancel)"
    ), run
    assert "JobState=CANCELLED" in cluster.scontrol("show", "job", "-o", job)
    print(f"\ncancel of a running Slurm run: ended {time.monotonic() - cancelled:.1f} s later")


def test_a_job_past_its_time_limit_fails_with_slurms_reason(lab):
    stack, cluster = lab
    # timeout_s 30 -> --time=1 (minute); fio would write for 300 s.
    matrix = launch(
        stack,
        "slurm timeout",
        "{rw: write, size: 8m, bs: 1m, runtime: 300, time_based: true}",
        timeout=30,
    )
    started = time.monotonic()
    assert wait_for(lambda: finished(stack, matrix), 180, interval=1), run_of(stack, matrix)
    run = run_of(stack, matrix)
    assert run["status"] == "failed", run
    assert run["error"] == f"Slurm ended job {run['slurm_job_id']}: TIMEOUT (TimeLimit)", run
    assert (run["slurm_state"], run["slurm_reason"]) == ("TIMEOUT", "TimeLimit"), run
    assert "TimeLimit=00:01:00" in cluster.scontrol("show", "job", "-o", run["slurm_job_id"])
    print(f"\nSlurm time limit (1 min): the run failed {time.monotonic() - started:.0f} s in")
