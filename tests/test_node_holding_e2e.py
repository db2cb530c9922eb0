"""End to end: exclusive use of nodes with real Celery workers (experiments.execution.holding). Two
users'
matrices on two testbeds that share a storage server, launched at the same moment from two
launcher nodes (each with its own worker), never run at the same time; a worker killed with
SIGKILL while holding nodes frees them once its last heartbeat is RUN_STALE_SECONDS old: the
waiting run takes them then (not before), and not the janitor.

Nothing here bounds a duration (issue 24): the checks are events and their order, and the
waits' timeouts are only against something never happening."""

from __future__ import annotations

import os
import shutil
import signal
from datetime import UTC, datetime, timedelta

import pytest

from tests.labs import (
    Stack,
    finished,
    launch,
    runs,
    two_users_sharing_a_server,
    wait_for,
    wait_for_workers,
)

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("fio") is None, reason="fio is not installed"),
]

STALE = 3  # BEEWEB_RUN_STALE_SECONDS of the workers and of this test's shells

FIO = """\
name: {name}
tool: fio
testbeds: [{testbed}]
repetitions: {reps}
drop_caches: false
timeout_s: 600
params: {{rw: write, size: 4m, bs: 1m, runtime: {runtime}, time_based: true}}
"""


@pytest.fixture
def lab(tmp_path):
    stack = Stack(tmp_path)
    try:
        stack.env["BEEWEB_RUN_STALE_SECONDS"] = str(STALE)
        bench = tmp_path / "bench"
        bench.mkdir()
        stack.call("inventory", two_users_sharing_a_server(str(bench)))
        workers = {}
        # One after the other: two workers starting at once on the filesystem broker (SQLite
        # runs) may read each other's half-written broadcast messages and stop.
        for host in ("hold-a", "hold-b"):
            workers[host] = stack.worker(
                f"node.{host}", f"{host}@{host}", env={"BEEWEB_NODE_DIRS": str(bench)}
            )
            wait_for_workers(stack, f"{host}@{host}")
        yield stack, workers
    finally:
        stack.close()


def test_two_users_on_testbeds_sharing_a_server_never_overlap(lab):
    stack, _ = lab
    launch(
        stack,
        ("alice", FIO.format(name="alice fio", testbed="tb-alice", reps=3, runtime=1)),
        ("bob", FIO.format(name="bob fio", testbed="tb-bob", reps=3, runtime=1)),
    )
    reasons: set[str] = set()

    def done() -> bool:
        reasons.update(r["waiting_for"] for r in runs(stack) if r["waiting_for"])
        return finished(stack)

    assert wait_for(done, 120, interval=0.2), runs(stack)
    rows = runs(stack)
    assert [r["status"] for r in rows] == ["succeeded"] * 6, rows
    assert {r["owner"] for r in rows} == {"alice", "bob"}
    assert {tuple(r["nodes_held"]) for r in rows} == {("hold-a", "hold-s"), ("hold-b", "hold-s")}
    # Every run holds hold-s: no two runs' [started_at, finished_at] intersect.
    spans = sorted((r["started_at"], r["finished_at"], r["pk"]) for r in rows)
    for (_, end, pk), (start, _, nxt) in zip(spans, spans[1:], strict=False):
        assert end <= start, f"runs {pk} and {nxt} overlap on hold-s"
    assert any("node hold-s (held by run" in reason for reason in reasons), reasons
    total = (spans[-1][1] - spans[0][0]).total_seconds()
    print(f"\n6 fio runs of 1 s on a shared server, two workers: {total:.1f} s end to end")


def last_heartbeat(stack: Stack, run: int) -> datetime:
    """When ``run`` last wrote its heartbeat (aware; SQLite keeps UTC as text)."""
    ((beat,),) = stack.sql(f"SELECT heartbeat_at FROM experiments_run WHERE id = {int(run)}")
    return datetime.fromisoformat(beat).replace(tzinfo=UTC) if isinstance(beat, str) else beat


def test_a_killed_holder_frees_its_nodes_once_its_heartbeat_is_stale(lab):
    stack, workers = lab
    launch(stack, ("alice", FIO.format(name="long", testbed="tb-alice", reps=1, runtime=300)))
    assert wait_for(
        lambda: any(r["status"] == "running" and not r["waiting_for"] for r in runs(stack)), 60
    ), stack.worker_log("hold-a@hold-a")[-3000:]
    holder = runs(stack)[0]
    launch(stack, ("bob", FIO.format(name="short", testbed="tb-bob", reps=1, runtime=1)))
    assert wait_for(
        lambda: f"node hold-s (held by run {holder['pk']}" in runs(stack)[-1]["waiting_for"], 30
    ), runs(stack)

    os.kill(workers["hold-a"].pid, signal.SIGKILL)  # nothing tells the database
    workers["hold-a"].wait(timeout=10)
    assert wait_for(lambda: runs(stack)[-1]["status"] == "succeeded", STALE + 60), runs(stack)
    waiter = runs(stack)[-1]
    # The waiter took the nodes only once the holder's last heartbeat was RUN_STALE_SECONDS
    # old (both times are this machine's clock), and the holder is still "running": the
    # waiter freed its leases, not the janitor.
    beat = last_heartbeat(stack, holder["pk"])
    assert waiter["started_at"] >= beat + timedelta(seconds=STALE), (waiter["started_at"], beat)
    assert runs(stack)[0]["status"] == "running", "freed by the waiter, not by the janitor"
    print(
        f"\nkilled holder: its nodes were taken "
        f"{(waiter['started_at'] - beat).total_seconds():.2f} s after its last heartbeat "
        f"(RUN_STALE_SECONDS={STALE})"
    )
