"""A node cut off from the network mid-run, on the network-namespace lab (tests/labs/netns.py):
one node, its own Celery worker reaching PostgreSQL and Redis over its link.

While the node's fio runs, its link is cut (``ip link set <veth> down`` on the root side):
its heartbeats stop, and once the last one is RUN_STALE_SECONDS old the janitor requeues the
run and frees its node. The tool kept running. When the link comes back, the first copy's
next write finds the run no longer running its attempt: it kills its fio and stores nothing
(no outcome, no metrics) over the run; the node's worker then claims the requeued message as
attempt 2, whose history names attempt 1 and why it was taken. The second attempt is
cancelled (its fio runs for minutes) and a short run on the same node succeeds: no lease is
left held.

Nothing here bounds a duration: the waits are for states, their timeouts only against
something never happening.
"""

from __future__ import annotations

import os
import shutil
import subprocess

import psycopg
import pytest

from tests.labs import (
    Stack,
    blocked_on,
    cancel,
    launch,
    runs,
    tool_starts,
    wait_for,
    wait_for_workers,
)

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("fio") is None, reason="fio is not installed"),
    pytest.mark.skipif(
        not os.environ.get("DATABASE_URL", "").startswith("postgres"),
        reason="the namespaces reach the database over the network: PostgreSQL only",
    ),
]

NETNS_NODES = 1
STALE = 3  # BEEWEB_RUN_STALE_SECONDS of the worker and of the test's janitor sweeps

LONG = """\
name: cut off
tool: fio
testbeds: [tb]
repetitions: 1
drop_caches: false
timeout_s: 900
params: {rw: write, size: 4m, bs: 1m, runtime: 600, time_based: true}
"""

SHORT = """\
name: after
tool: dd
testbeds: [tb]
repetitions: 1
drop_caches: false
timeout_s: 120
params: {bs: 64k, count: 16}
"""


def alive(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie does not: it ended, unreaped)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rpartition(")")[2].split()[0] != "Z"
    except FileNotFoundError:
        return False


def is_fio(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
            return os.path.basename(cmdline.read().split(b"\0")[0]) == b"fio"
    except FileNotFoundError:
        return False


def link(veth: str, state: str) -> None:
    subprocess.run(["ip", "link", "set", "dev", veth, state], check=True)


def _one_node(stack: Stack, netns_lab, tmp_path) -> tuple[str, object]:
    """The lab's first node in a testbed of alice's, its worker started; (worker, bench)."""
    bench = tmp_path / "bench"
    bench.mkdir()
    node = netns_lab.nodes[0]
    stack.call(
        "inventory",
        {
            "users": {"alice": "x"},
            "nodes": {node.hostname: {"owner": "alice", "address": node.address}},
            "testbeds": [
                {
                    "name": "tb",
                    "owner": "alice",
                    "benchmark_dir": str(bench),
                    "members": {node.hostname: ["client", "storage", "metadata"]},
                }
            ],
        },
    )
    env = {
        "BEEWEB_NODE_DIRS": str(bench),
        "BEEWEB_RUN_STALE_SECONDS": str(STALE),
        "BEEWEB_RUN_MAX_ATTEMPTS": "2",
    }
    stack.node_workers(netns_lab, env)
    worker = f"{node.hostname}@{node.hostname}"
    wait_for_workers(stack, worker)
    return worker, bench


def test_a_node_cut_off_mid_run_finds_its_run_taken_and_stops_its_tool(netns_lab, tmp_path):
    stack = Stack(tmp_path)
    veth = f"bw{netns_lab.pid}-v1"  # node1's link, its root-namespace end
    try:
        worker, _ = _one_node(stack, netns_lab, tmp_path)
        (matrix,) = launch(stack, ("alice", LONG))

        # The first attempt's fio runs: the run's pid is its tool's once the tool outlasts
        # its first wait (the claim wrote the worker's).
        pid = "SELECT id, pid FROM experiments_run WHERE status = 'running' AND pid IS NOT NULL"
        assert wait_for(lambda: any(is_fio(p) for _, p in stack.sql(pid)), 120), runs(stack)
        ((run_id, tool_pid),) = stack.sql(pid)
        assert alive(tool_pid)
        assert stack.sql("SELECT count(*) FROM experiments_nodelease")[0][0] == 1

        link(veth, "down")
        try:
            # Its heartbeats stop; once the last is STALE seconds old, a sweep requeues it
            # and frees its node. Its fio keeps running meanwhile.
            swept: list[dict] = []

            def requeued() -> bool:
                swept.append(stack.call("janitor", STALE))
                return runs(stack)[0]["status"] == "queued"

            assert wait_for(requeued, 120, interval=1), (swept, runs(stack))
            taken = runs(stack)[0]
            assert taken["attempts"] == 1 and "stopped sending heartbeats" in taken["error"]
            assert stack.sql("SELECT count(*) FROM experiments_nodelease")[0][0] == 0
            assert alive(tool_pid), "the cut-off node's tool runs on, unaware"
        finally:
            link(veth, "up")

        # Back on the network: the first copy's next write finds its attempt gone; it kills
        # its fio, drops its outcome, and the worker takes the requeued message (attempt 2).
        assert wait_for(lambda: not alive(tool_pid), 300), stack.worker_log(worker)[-3000:]
        assert wait_for(
            lambda: runs(stack)[0]["attempts"] == 2 and runs(stack)[0]["status"] == "running",
            300,
        ), (runs(stack), stack.worker_log(worker)[-3000:])
        log = stack.worker_log(worker)
        assert "taken from this attempt" in log or "taken from attempt 1" in log, log[-3000:]
        second = runs(stack)[0]
        (history,) = second["launch"]["history"]
        assert history["attempt"] == 1 and "stopped sending heartbeats" in history["error"]
        assert history["worker"] == worker
        # Nothing of the first copy's outcome was stored over the run.
        assert second["exit_code"] is None and second["finished_at"] is None
        assert stack.sql("SELECT count(*) FROM experiments_metric")[0][0] == 0

        cancel(stack, matrix)
        assert wait_for(lambda: runs(stack)[0]["status"] == "cancelled", 120), runs(stack)
        assert wait_for(
            lambda: stack.sql("SELECT count(*) FROM experiments_nodelease")[0][0] == 0, 60
        )
        cancelled = runs(stack)[0]
        assert cancelled["attempts"] == 2 and cancelled["pk"] == run_id

        # The node is free: a short run on it succeeds.
        (after,) = launch(stack, ("alice", SHORT))
        assert wait_for(
            lambda: runs(stack, after)[0]["status"] in ("succeeded", "failed", "cancelled"), 120
        )
        (done,) = runs(stack, after)
        assert done["status"] == "succeeded", done["error"]
        assert stack.sql("SELECT count(*) FROM experiments_nodelease")[0][0] == 0
    finally:
        subprocess.run(["ip", "link", "set", "dev", veth, "up"], check=False)
        stack.close()


SHORT_FIO = """\
name: cut while storing
tool: fio
testbeds: [tb]
repetitions: 1
drop_caches: false
timeout_s: 300
params: {rw: write, size: 4m, bs: 1m, runtime: 2, time_based: true}
"""


def test_a_node_cut_off_while_it_stores_keeps_its_output_and_stores_once(netns_lab, tmp_path):
    """The node's link is cut while its worker stores a finished fio's outcome (the test
    holds a lock on the run telemetry table, which the store writes first, until the link is
    down): the janitor requeues the run; when the link comes back, the first copy's store
    finds its attempt taken and stores nothing, leaving its files for the next attempt,
    which runs on the same node, keeps the first fio's JSON result in the run's history and
    succeeds. Stored once, the tool started once per attempt, no lease held, nothing left."""
    stack = Stack(tmp_path)
    veth = f"bw{netns_lab.pid}-v1"
    try:
        worker, bench = _one_node(stack, netns_lab, tmp_path)
        lock = psycopg.connect(stack.env["DATABASE_URL"])
        try:
            launch(stack, ("alice", SHORT_FIO))
            assert wait_for(lambda: runs(stack)[0]["status"] == "running", 120), runs(stack)
            lock.execute("LOCK TABLE experiments_runtelemetry IN EXCLUSIVE MODE")
            assert wait_for(lambda: blocked_on(stack, "experiments_runtelemetry"), 120), (
                stack.worker_log(worker)[-3000:]
            )
            link(veth, "down")
        finally:
            lock.rollback()
            lock.close()
        try:
            swept: list[dict] = []

            def requeued() -> bool:
                swept.append(stack.call("janitor", STALE))
                return runs(stack)[0]["status"] == "queued"

            assert wait_for(requeued, 120, interval=1), (swept, runs(stack))
            assert stack.sql("SELECT count(*) FROM experiments_nodelease")[0][0] == 0
        finally:
            link(veth, "up")

        assert wait_for(lambda: runs(stack)[0]["status"] not in ("queued", "running"), 300), (
            runs(stack),
            stack.worker_log(worker)[-3000:],
        )
        (run,) = runs(stack)
        assert (run["status"], run["attempts"]) == ("succeeded", 2), run["error"]
        (earlier,) = run["launch"]["history"]
        assert earlier["attempt"] == 1 and "stopped sending heartbeats" in earlier["error"]
        assert '"jobs"' in earlier["left_on_node"]["fio.json"], earlier
        assert (
            stack.sql(
                'SELECT name, count(*) FROM experiments_metric WHERE "primary" '
                "GROUP BY run_id, name HAVING count(*) > 1"
            )
            == []
        )
        assert run["metrics"]
        assert stack.sql("SELECT count(*) FROM experiments_runtelemetry")[0][0] == 1
        assert tool_starts(stack, [worker], run["pk"]) == {1: 1, 2: 1}
        assert stack.sql("SELECT count(*) FROM experiments_nodelease")[0][0] == 0
        assert list(bench.iterdir()) == []
    finally:
        subprocess.run(["ip", "link", "set", "dev", veth, "up"], check=False)
        stack.close()
