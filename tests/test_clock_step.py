"""A node's wall clock steps an hour back or ahead while its run goes (issue 28): the node
worker runs under libfaketime (LD_PRELOAD, its offset read from a file of the test's at every
call, the monotonic clock left alone: what ``date -s`` does to a node; the host's clock is
never touched), while the janitor runs on the host's true clock.

- An hour back: its heartbeats used to be an hour old as written, and the janitor requeued the
  run while its tool ran. They are on the database's clock now (experiments.shared.clock): the
  run is not reaped, succeeds in one attempt, and its telemetry's clock measurement says how far
  the node's clock is off (so the run page puts it on the database's time).
- An hour ahead, then the worker killed: its heartbeats used to come from an hour in the future,
  so the run outlived its dead worker by an hour. Now the janitor requeues it once its last
  heartbeat is BEEWEB_RUN_STALE_SECONDS old, and its node's lease is free again."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import time
from pathlib import Path

import pytest

from tests.labs import Stack, runs, wait_for

LIB = Path("/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("ioping") is None, reason="ioping is not installed"),
    pytest.mark.skipif(not LIB.exists(), reason=f"libfaketime is not installed ({LIB})"),
    pytest.mark.skipif(
        not os.environ.get("DATABASE_URL", "").startswith("postgres"),
        reason="the database's clock is PostgreSQL's (SQLite shares the machine's)",
    ),
]
HOST = socket.gethostname()
QUEUE = f"node.{HOST}"
STALE = 8
# ioping paces its requests by sleeps (fio, under libfaketime, takes the step for a hung job
# start and exits): ``count`` requests a second apart.
IOPING = """\
name: ioping under a stepped clock
tool: ioping
testbeds: [localhost]
repetitions: 1
drop_caches: false
timeout_s: 900
params: {{count: {count}, interval: 1}}
"""


def _stepped_worker(stack: Stack, tmp_path: Path, name: str) -> tuple[object, Path]:
    offset = tmp_path / f"{name.split('@')[0]}.faketime"
    offset.write_text("+0\n")
    env = {
        "LD_PRELOAD": str(LIB),
        "FAKETIME_TIMESTAMP_FILE": str(offset),
        "FAKETIME_NO_CACHE": "1",
        "FAKETIME_DONT_FAKE_MONOTONIC": "1",
        "BEEWEB_RUN_STALE_SECONDS": str(STALE),
    }
    return stack.worker(QUEUE, name, env=env), offset


def _heartbeat_age(stack: Stack) -> float:
    """Seconds between the database's clock and the run's last heartbeat."""
    ((age,),) = stack.sql("SELECT extract(epoch FROM now() - heartbeat_at) FROM experiments_run")
    return float(age)


def _launch(stack: Stack, tmp_path: Path, seconds: int) -> None:
    path = tmp_path / "ioping.yaml"
    path.write_text(IOPING.format(count=seconds))
    stack.manage("launch_matrix", str(path))


def test_a_node_clock_stepped_back_does_not_get_its_run_reaped(localhost_stack, tmp_path):
    stack = localhost_stack
    name = f"back@{HOST}"
    worker, offset = _stepped_worker(stack, tmp_path, name)
    _launch(stack, tmp_path, seconds=3 * STALE)
    assert wait_for(lambda: runs(stack)[0]["status"] == "running", 90), stack.worker_log(name)
    offset.write_text("-1h\n")  # the node's clock jumps an hour back
    # The janitor, on the host's true clock, sweeps for longer than RUN_STALE_SECONDS.
    swept = []
    deadline = time.monotonic() + 2 * STALE
    while time.monotonic() < deadline and runs(stack)[0]["status"] == "running":
        swept.append(stack.call("janitor", STALE))
        assert _heartbeat_age(stack) < STALE, "heartbeats on the database's clock"
        time.sleep(1)
    assert all(s["requeued"] == s["failed"] == 0 for s in swept), swept
    assert wait_for(lambda: runs(stack)[0]["status"] != "running", 120), stack.worker_log(name)
    (run,) = runs(stack)
    assert (run["status"], run["attempts"]) == ("succeeded", 1), run["error"]
    assert abs((run["finished_at"] - run["started_at"]).total_seconds()) < 600
    # The telemetry the stepped node stored measures its clock an hour behind the database's.
    ((started, meta),) = stack.sql("SELECT started_at, meta FROM experiments_runtelemetry")
    offset_s = meta["clock"]["offset_s"]
    assert 3500 < offset_s < 3700, meta
    corrected = started.timestamp() + offset_s
    assert abs(corrected - run["started_at"].timestamp()) < 120, (started, run["started_at"])
    assert "wall clock is" in stack.worker_log(name)
    Stack.stop(worker)


def test_a_node_clock_stepped_ahead_then_its_worker_killed_is_not_immortal(
    localhost_stack, tmp_path
):
    stack = localhost_stack
    name = f"ahead@{HOST}"
    worker, offset = _stepped_worker(stack, tmp_path, name)
    _launch(stack, tmp_path, seconds=300)
    assert wait_for(lambda: runs(stack)[0]["status"] == "running", 90), stack.worker_log(name)
    offset.write_text("+1h\n")  # the node's clock jumps an hour ahead
    time.sleep(3)  # heartbeats written after the step
    assert _heartbeat_age(stack) > -STALE, "no heartbeat from the future"
    os.killpg(worker.pid, signal.SIGKILL)  # the worker dies; nothing tells the database
    worker.wait(timeout=10)
    killed = time.monotonic()
    assert wait_for(lambda: stack.call("janitor", STALE)["requeued"] == 1, 6 * STALE), runs(stack)
    waited = time.monotonic() - killed
    (run,) = runs(stack)
    assert run["status"] == "queued" and "stopped sending heartbeats" in run["error"]
    assert stack.sql("SELECT count(*) FROM experiments_nodelease") == [(0,)]
    print(f"\nnode clock an hour ahead, worker killed: requeued after {waited:.1f} s")
