"""A worker killed (SIGKILL) after its tool ended and before its results were stored (issue
28), made deterministic without any hook in beeweb: the test holds a table lock on what the
store writes, from its own transaction, so the worker blocks inside its store once the tool
has exited; then it kills the worker and lets go.

- ``raw``: the lock is on the run telemetry table, which the first of the two store
  transactions (raw output, then metrics) writes first: the worker dies before the raw
  output is stored. The tool's log and fio's JSON result are still in its directories on the
  node; the next attempt (on the same node: the run's launcher) keeps them in the run's
  history and removes the directories.
- ``metrics``: the lock is on the metric table, which only the second transaction writes:
  the raw output is stored, the metrics are not. The next attempt keeps that raw output in
  the run's history.

Either way the janitor requeues the run (its heartbeats stopped), its second attempt
succeeds, the tool started once per attempt, its metrics were stored once, and no lease is
held."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
from pathlib import Path

import psycopg
import pytest

from tests.labs import blocked_on, runs, tool_starts, wait_for

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("fio") is None, reason="fio is not installed"),
    pytest.mark.skipif(
        not os.environ.get("DATABASE_URL", "").startswith("postgres"),
        reason="the store is blocked with a PostgreSQL table lock",
    ),
]
HOST = socket.gethostname()
QUEUE = f"node.{HOST}"

FIO = """\
name: fio killed while storing
tool: fio
testbeds: [localhost]
repetitions: 1
drop_caches: false
timeout_s: 120
params: {rw: write, size: 8m, bs: 1m, runtime: 2, time_based: true}
"""
TABLES = {"raw": "experiments_runtelemetry", "metrics": "experiments_metric"}


@pytest.mark.parametrize("stage", ["raw", "metrics"])
def test_a_worker_killed_before_its_results_are_stored(localhost_stack, tmp_path, stage):
    stack = localhost_stack
    table = TABLES[stage]
    path = tmp_path / "fio.yaml"
    path.write_text(FIO)
    first_name, second_name = f"first@{HOST}", f"second@{HOST}"
    first = stack.worker(QUEUE, first_name)
    data = Path(stack.env["BEEWEB_DATA_DIR"])

    lock = psycopg.connect(stack.env["DATABASE_URL"])  # a transaction of the test's own
    try:
        stack.manage("launch_matrix", str(path))
        ((pk,),) = stack.sql("SELECT id FROM experiments_run")
        assert wait_for(
            lambda: (
                stack.sql(f"SELECT status FROM experiments_run WHERE id = {pk}") == [("running",)]
            ),
            90,
        ), stack.worker_log(first_name)[-3000:]
        lock.execute(f"LOCK TABLE {table} IN EXCLUSIVE MODE")
        # The tool runs its 2 s, ends, and the worker's store waits for the lock.
        assert wait_for(lambda: blocked_on(stack, table), 120), stack.worker_log(first_name)
        os.kill(first.pid, signal.SIGKILL)
        first.wait(timeout=10)
    finally:
        lock.rollback()
        lock.close()

    (run,) = runs(stack)
    assert run["status"] == "running" and run["attempts"] == 1
    if stage == "raw":
        assert run["raw_output"] == "" or '"jobs"' not in run["raw_output"]
    else:
        assert '"jobs"' in run["raw_output"], "the raw output was stored before the metrics"
    assert stack.sql(f"SELECT count(*) FROM experiments_metric WHERE run_id = {pk}") == [(0,)]
    left = sorted(p.name for p in (data / "runs").iterdir())
    assert left == [f"beeweb-run-{run['uuid']}-1"] if stage == "raw" else left == []

    # Its heartbeats stopped: the janitor requeues it; a worker on the node runs it again.
    assert wait_for(lambda: stack.call("janitor", 2)["requeued"] == 1, 30)
    stack.worker(QUEUE, second_name)
    assert wait_for(lambda: runs(stack)[0]["status"] not in ("queued", "running"), 120), (
        stack.worker_log(second_name)[-3000:]
    )
    (run,) = runs(stack)
    assert (run["status"], run["attempts"]) == ("succeeded", 2), run["error"]
    assert '"jobs"' in run["raw_output"] and run["metrics"]
    (earlier,) = run["launch"]["history"]
    assert earlier["attempt"] == 1 and "stopped sending heartbeats" in earlier["error"]
    if stage == "raw":
        # What the first attempt measured, kept from its directory on the node.
        kept = earlier["left_on_node"]
        assert '"jobs"' in kept["fio.json"], kept
        json.loads(kept["fio.json"])  # whole
    else:
        assert '"jobs"' in earlier["output_tail"]
    # Stored once; each attempt's tool started once; nothing left behind.
    assert (
        stack.sql(
            f'SELECT name, count(*) FROM experiments_metric WHERE run_id = {pk} AND "primary" '
            "GROUP BY name HAVING count(*) > 1"
        )
        == []
    )
    assert tool_starts(stack, [first_name, second_name], pk) == {1: 1, 2: 1}
    assert stack.sql("SELECT count(*) FROM experiments_nodelease") == [(0,)]
    assert list((data / "runs").iterdir()) == []
    bench = Path(run["launch"]["workdir"])
    assert not [p for p in bench.iterdir() if p.name.startswith(f"beeweb-run-{run['uuid']}")]
