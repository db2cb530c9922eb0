"""StorageBench runs through the executor against the real BeeGFS 7.4.7 servers of
``beegfs_host``: per-target and aggregate metrics stored on the run, a read's unmeasured write
recorded as its preparation, a cancel that stops the benchmark (``--stop``) and cleans up, and
a storage daemon killed mid-run failing the run with BeeGFS's words in its error."""

from __future__ import annotations

import threading
import time

import pytest

from experiments.execution import execute
from experiments.matrices.expansion import cancel_runs
from experiments.models import Run, Target
from tests.helpers.execution import make_matrix, queue

SMALL = {"blocksize": "1m", "size": "16m", "threads": 2, "interval": 1}
LONG = {"blocksize": "64k", "size": "64g", "threads": 1, "interval": 1}


@pytest.fixture
def lab(beegfs_host, executing_bench, node, monkeypatch):
    """The host lab as node stor1's BeeGFS (its worker's BEEWEB_BEEGFS_CTL), its two targets
    in the testbed's inventory; no benchmark files before or after."""
    monkeypatch.setenv("BEEWEB_BEEGFS_CTL", " ".join(beegfs_host.ctl_argv()))
    executing_bench.targets.all().delete()
    for target_id in (1, 2):
        Target.objects.create(
            testbed=executing_bench,
            node=node,
            name=f"target{target_id}",
            target_id=target_id,
            raid_level="none",
            filesystem="ext4",
        )
    beegfs_host.wait_online(2)
    beegfs_host.ctl("--storagebench", "--alltargets", "--cleanup")
    yield beegfs_host
    beegfs_host.ctl("--storagebench", "--alltargets", "--cleanup")


def files(lab) -> list:
    return sorted((lab.base / "data").glob("target*/benchmark/*"))


def in_thread(run: Run) -> tuple[threading.Thread, dict]:
    token = queue(run)
    result: dict = {}

    def work() -> None:
        from django.db import connection

        try:
            result["status"] = execute.execute(run.pk, token, "w@test")
        finally:
            connection.close()

    worker = threading.Thread(target=work)
    worker.start()
    return worker, result


def wait_for(condition, what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"no {what} after {timeout:.0f} s"
        time.sleep(0.1)


@pytest.mark.django_db
def test_write_and_read_store_per_target_and_aggregate_results(alice, executing_bench, lab):
    matrix = make_matrix(
        alice,
        executing_bench,
        tool="storagebench",
        params=SMALL,
        axes=[{"param": "direction", "values": ["write", "read"]}],
        drop_caches=True,
    )
    for run in matrix.runs.order_by("pk"):
        assert execute.execute(run.pk, queue(run), "w@test") == "succeeded", run.error
        run.refresh_from_db()
        op = run.params["direction"]
        aggregate = run.metrics.get(name=f"{op}_bw", primary=True)
        per_target = {m.extra["target"]: m.value for m in run.metrics.filter(name=f"{op}_bw")
                      if "target" in m.extra}  # fmt: skip
        assert sorted(per_target) == [1, 2] and all(v > 0 for v in per_target.values())
        assert aggregate.value == pytest.approx(sum(per_target.values()), rel=0.01)
        assert run.params["targets"] == 2 and run.params["nodes"] == 1
        assert "--alltargets" in run.argv and "beegfs-ctl" not in run.argv
        assert list(run.effective_config["drop_caches"]) == ["stor1"]
        if op == "read":
            (step,) = run.effective_config["prepare"]
            assert step["exit_code"] == 0 and step["argv"][-2:] == ["--threads=2", "--keep"]
            assert "Write benchmark results:" in step["output"]
            assert "Write benchmark results:" not in run.raw_output  # only the read is parsed
        assert files(lab) == []


@pytest.mark.django_db
def test_a_run_on_a_target_benchmarks_only_that_target(alice, executing_bench, lab):
    matrix = make_matrix(
        alice,
        executing_bench,
        tool="storagebench",
        params=SMALL,
        axes=[{"param": "target", "values": ["target2"]}],
    )
    run = matrix.runs.get()
    assert execute.execute(run.pk, queue(run), "w@test") == "succeeded", run.error
    run.refresh_from_db()
    assert "--targetids=2" in run.argv and "targetids" not in run.params
    assert [m.extra["target"] for m in run.metrics.all() if "target" in m.extra] == [2]
    assert run.target.target_id == 2 and run.params["targets"] == 1


@pytest.mark.django_db(transaction=True)  # the executor runs in a thread of its own
def test_cancel_stops_the_benchmark_and_cleans_up(alice, executing_bench, lab):
    matrix = make_matrix(alice, executing_bench, tool="storagebench", params=LONG, timeout_s=600)
    run = matrix.runs.get()
    worker, result = in_thread(run)
    try:
        wait_for(lambda: "Running" in lab.ctl("--storagebench", "--alltargets", "--status"),
                 "Running benchmark")  # fmt: skip
        wait_for(lambda: Run.objects.get(pk=run.pk).pid, "pid")
        cancel_runs(Run.objects.filter(pk=run.pk))
        worker.join(timeout=60)
    finally:
        Run.objects.filter(pk=run.pk).update(cancel_requested=True)
        worker.join(timeout=60)
    assert result["status"] == "cancelled"
    run.refresh_from_db()
    assert "cancelled while running" in run.error
    assert "terminated: stopping the benchmark" in run.raw_output
    assert "Stopped" in lab.ctl("--storagebench", "--alltargets", "--status")
    assert files(lab) == []


@pytest.mark.django_db(transaction=True)
def test_a_storage_daemon_killed_mid_run_fails_the_run_in_beegfs_words(alice, executing_bench, lab):
    matrix = make_matrix(alice, executing_bench, tool="storagebench", params=LONG, timeout_s=600)
    run = matrix.runs.get()
    worker, result = in_thread(run)
    try:
        wait_for(lambda: "Running" in lab.ctl("--storagebench", "--alltargets", "--status"),
                 "Running benchmark")  # fmt: skip
        lab.kill("storage-storage01")
        worker.join(timeout=120)
        assert result["status"] == "failed"
        run.refresh_from_db()
        assert run.exit_code == 1
        assert (
            "exited with 1: beegfs-ctl --storagebench --status failed (exit status 3): "
            "Failed to communicate with node: storage01 [ID: 1]"
        ) in run.error
    finally:
        Run.objects.filter(pk=run.pk).update(cancel_requested=True)
        worker.join(timeout=60)
        lab.sh("restart", "storage-storage01")
        lab.wait_online(2)
