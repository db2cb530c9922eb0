"""IOR and mdtest in Slurm mode for real (issue 27, part 3): the throw-away cluster of
tests/labs/slurm-cluster.sh with two fake nodes n1 and n2 (each slurmd in its own UTS and
mount namespace, so each rank sees its node's hostname), a real Celery worker as the launcher,
IOR 4.0.0 and mdtest built from ../shared/tools/ior.

A Slurm-mode matrix of an MPI tool allocates ``slurm_nodes`` nodes with ``tasks_per_node``
tasks on each (salloc), drops their caches through the allocation, and starts the tool as one
``srun --mpi=pmix`` step over them (Debian's Open MPI has PMIx but no Slurm PMI; as root, its
direct launch under srun needs no --allow-run-as-root, unlike mpirun). Checked: the job id,
its state and nodes as Slurm says them, the hosts recorded, and the metrics read from the
tools' real output, which states the nodes and tasks the job gave them.

Nothing here bounds a duration (issue 24); the wall times are printed for the record.
"""

from __future__ import annotations

import os
import re
import socket
import time

import pytest

from tests import labs
from tests.helpers.ior import need_ior
from tests.labs import Stack, wait_for_workers
from tests.labs.slurm import Cluster, unavailable

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(unavailable() is not None, reason=unavailable() or ""),
]
HOST = socket.gethostname()

IOR = """\
name: slurm ior
tool: ior
launch_mode: slurm
testbeds: [slurm-tb]
repetitions: 1
drop_caches: true
timeout_s: 300
params: {transfer_size: 1m, block_size: 2m, slurm_nodes: 2}
axes:
  tasks_per_node: [1, 2]
  file_per_proc: [true, false]
"""

MDTEST = """\
name: slurm mdtest
tool: mdtest
launch_mode: slurm
testbeds: [slurm-tb]
repetitions: 1
drop_caches: true
timeout_s: 300
tasks_per_node: 2
params: {items: 50, files_only: true, unique_dir: true, slurm_nodes: 2}
"""


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    need_ior("ior", "mdtest")
    tmp = tmp_path_factory.mktemp("slurm-mpi")
    cluster = Cluster(fake_nodes=2)
    cluster.start()
    stack = Stack(tmp)
    try:
        bench = tmp / "bench"
        bench.mkdir()
        stack.call(
            "inventory",
            {
                "nodes": {HOST: {"owner": "admin"}},
                "testbeds": [
                    {
                        "name": "slurm-tb",
                        "owner": "admin",
                        "benchmark_dir": str(bench),
                        "members": {HOST: ["client"]},
                        "slurm_partition": "debug",
                    }
                ],
            },
        )
        stack.env.update(cluster.env)
        stack.worker(f"node.{HOST}", f"slurm@{HOST}", env={"BEEWEB_NODE_DIRS": str(bench)})
        wait_for_workers(stack, f"slurm@{HOST}")
        yield stack, cluster, bench
    finally:
        stack.close()
        cluster.stop()


def launch(stack: Stack, text: str) -> tuple[int, float]:
    began = time.monotonic()
    (matrix,) = labs.launch(stack, ("admin", text))
    assert labs.wait_for(lambda: labs.finished(stack, matrix), 300, interval=0.5), labs.runs(
        stack, matrix
    )
    return matrix, time.monotonic() - began


def check_job(run: dict, cluster: Cluster, tasks: int, tool: str) -> str:
    """What every Slurm-mode MPI run over n1 and n2 shows; its raw output."""
    assert run["status"] == "succeeded", run["error"] + run["raw_output"][-3000:]
    job = run["slurm_job_id"]
    assert job.isdigit() and run["slurm_state"] == "COMPLETED", run
    assert run["slurm_nodes"] == ["n1", "n2"], run
    assert run["launch"]["hosts"] == [["n1", "n1"], ["n2", "n2"]], run
    assert run["argv"][:7] == [
        "srun",
        f"--jobid={job}",
        "--mpi=pmix",
        "--nodes=2",
        f"--ntasks-per-node={tasks}",
        "--kill-on-bad-exit=1",
        tool,
    ], run["argv"]
    # Slurm owns the clients: the run held its launcher; every node dropped its caches.
    assert run["nodes_held"] == [HOST], run
    drops = run["effective_config"]["drop_caches"]
    assert sorted(drops) == sorted([HOST, "n1", "n2"]), drops
    assert all(v == "dropped" or v.startswith("not permitted: ") for v in drops.values()), drops
    shown = cluster.scontrol("show", "job", "-o", job)
    assert f"JobName=beeweb-run-{run['pk']} " in shown and "JobState=COMPLETED" in shown, shown
    assert "NodeList=n[1-2] " in shown and "NumNodes=2 " in shown, shown
    assert run["params"]["slurm_nodes"] == 2 and run["params"]["nodes"] == 2, run["params"]
    assert run["params"]["threads"] == 2 * tasks, run["params"]
    return run["raw_output"]


def test_ior_runs_as_an_mpi_step_over_two_slurm_nodes(lab):
    stack, cluster, bench = lab
    matrix, wall = launch(stack, IOR)
    done = labs.runs(stack, matrix)
    assert len(done) == 4
    cells = set()
    for run in done:
        tasks, fpp = run["params"]["tasks_per_node"], run["params"]["file_per_proc"]
        cells.add((tasks, fpp))
        out = check_job(run, cluster, tasks, "ior")
        # IOR's own report: first rank on n1 (its UTS namespace), 2 nodes, 2 x tasks ranks.
        assert re.search(r"^Machine\s+: Linux n1$", out, re.M), out
        assert re.search(r"^nodes\s+: 2$", out, re.M), out
        assert re.search(rf"^tasks\s+: {2 * tasks}$", out, re.M), out
        assert re.search(rf"^clients per node\s+: {tasks}$", out, re.M), out
        access = "file-per-process" if fpp else "single-shared-file"
        assert re.search(rf"^access\s+: {access}$", out, re.M), out
        assert run["params"]["aggregate_size"] == 2 * tasks * 2 * 2**20
        assert run["metrics"]["write_bw"] > 0 and run["metrics"]["read_bw"] > 0, run
    assert cells == {(1, True), (1, False), (2, True), (2, False)}
    # Slurm's job ids, one job per run.
    assert len({run["slurm_job_id"] for run in done}) == 4
    assert os.listdir(bench) == []  # every run's directory removed
    print(f"\n4-run Slurm-mode IOR matrix over 2 fake nodes: wall {wall:.1f} s")


def test_mdtest_runs_as_an_mpi_step_over_two_slurm_nodes(lab):
    stack, cluster, _ = lab
    matrix, wall = launch(stack, MDTEST)
    (run,) = labs.runs(stack, matrix)
    out = check_job(run, cluster, 2, "mdtest")
    assert "mdtest-4.0.0 was launched with 4 total task(s) on 2 node(s)" in out, out
    assert "4 tasks, 200 files" in out, out
    for phase in ("file_create", "file_stat", "file_read", "file_remove"):
        assert run["metrics"][phase] > 0, run["metrics"]
    print(f"\nSlurm-mode mdtest run over 2 fake nodes: wall {wall:.1f} s")


def test_a_read_only_ior_writes_its_file_in_a_step_of_the_same_job(lab):
    """IOR with ``write: false``: its preparation (a write pass that keeps the file) is an
    ``srun --mpi=pmix`` step of the run's job too, then the measured read."""
    stack, cluster, _ = lab
    text = IOR.replace("name: slurm ior", "name: slurm ior read").split("axes:")[0]
    text = text.replace("slurm_nodes: 2}", "slurm_nodes: 2, write: false}")
    matrix, wall = launch(stack, text)
    (run,) = labs.runs(stack, matrix)
    print(f"\nSlurm-mode read-only IOR run (write step, read step): wall {wall:.1f} s")
    out = check_job(run, cluster, 1, "ior")
    assert run["argv"][7:9] == ["-r", "-t"], run["argv"]
    assert "write " not in out.split("Results:")[1].split("Summary")[0], out
    assert run["metrics"]["read_bw"] > 0 and "write_bw" not in run["metrics"], run["metrics"]
