"""End to end: exclusive use of nodes with real Celery workers (experiments.execution.holding). Two
users'
matrices on two testbeds that share a storage server, launched at the same moment from two
launcher nodes (each with its own worker), never run at the same time; a worker killed with
SIGKILL while holding nodes frees them within the stale-heartbeat bound."""

from __future__ import annotations

import json
import os
import shutil
import signal
import time
from datetime import datetime

import pytest

from tests.e2e import Stack, wait_for

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("fio") is None, reason="fio is not installed"),
]

STALE = 3  # BEEWEB_RUN_STALE_SECONDS of the workers and of this test's shells

INVENTORY = """
import json
from django.contrib.auth import get_user_model
from experiments.models import HardwareProfile, Node, Testbed, TestbedNode
bench = {bench!r}
users = get_user_model().objects
alice = users.create_user("alice", password="x")
bob = users.create_user("bob", password="x")
profile = HardwareProfile.objects.create(owner=alice, name="box", architecture="x86_64")
bob_profile = HardwareProfile.objects.create(owner=bob, name="box", architecture="x86_64")
# The storage server is alice's and shared: bob's testbed uses it too.
server = Node.objects.create(owner=alice, hostname="hold-s", profile=profile, shared=True)
for owner, prof, name, launcher in ((alice, profile, "tb-alice", "hold-a"),
                                    (bob, bob_profile, "tb-bob", "hold-b")):
    tb = Testbed.objects.create(owner=owner, name=name, benchmark_dir=bench)
    node = Node.objects.create(owner=owner, hostname=launcher, profile=prof)
    TestbedNode.objects.create(testbed=tb, node=node, client=True)
    TestbedNode.objects.create(testbed=tb, node=server, storage=True, metadata=True)
"""

LAUNCH = """
from experiments.matrices.expansion import launch
from experiments.matrices.files import from_data, parse_yaml
from django.contrib.auth import get_user_model
users = get_user_model().objects
made = [from_data(parse_yaml(text), users.get(username=who)) for who, text in {specs!r}]
for m in made:
    launch(m)
print(len(made))
"""

FIO = """\
name: {name}
tool: fio
testbeds: [{testbed}]
repetitions: {reps}
drop_caches: false
timeout_s: 600
params: {{rw: write, size: 4m, bs: 1m, runtime: {runtime}, time_based: true}}
"""

RUNS = """
import json
from experiments.models import Run
print(json.dumps([
    {"pk": r.pk, "status": r.status, "nodes": r.nodes_held, "waiting": r.waiting_for,
     "owner": r.owner.username, "error": r.error,
     "start": r.started_at and r.started_at.isoformat(),
     "end": r.finished_at and r.finished_at.isoformat()}
    for r in Run.objects.order_by("pk")
]))
"""


@pytest.fixture
def lab(tmp_path):
    stack = Stack(tmp_path)
    stack.env["BEEWEB_RUN_STALE_SECONDS"] = str(STALE)
    bench = tmp_path / "bench"
    bench.mkdir()
    stack.shell(INVENTORY.format(bench=str(bench)))
    workers = {}
    online = "from experiments.models import Worker; print(Worker.objects.count())"
    # One after the other: two workers starting at once on the filesystem broker (SQLite
    # runs) may read each other's half-written broadcast messages and stop.
    for count, host in enumerate(("hold-a", "hold-b"), 1):
        workers[host] = stack.worker(
            f"node.{host}", f"{host}@{host}", env={"BEEWEB_NODE_DIRS": str(bench)}
        )
        assert wait_for(lambda count=count: stack.shell(online) == str(count), 90), (
            stack.worker_log(f"{host}@{host}")[-3000:]
        )
    yield stack, workers
    stack.close()


def runs(stack: Stack) -> list[dict]:
    return json.loads(stack.shell(RUNS))


def launch(stack: Stack, *specs: tuple[str, str]) -> None:
    assert stack.shell(LAUNCH.format(specs=list(specs))) == str(len(specs))


def test_two_users_on_testbeds_sharing_a_server_never_overlap(lab):
    stack, _ = lab
    launch(
        stack,
        ("alice", FIO.format(name="alice fio", testbed="tb-alice", reps=3, runtime=1)),
        ("bob", FIO.format(name="bob fio", testbed="tb-bob", reps=3, runtime=1)),
    )
    reasons: set[str] = set()

    def done() -> bool:
        rows = runs(stack)
        reasons.update(r["waiting"] for r in rows if r["waiting"])
        return all(r["status"] in ("succeeded", "failed", "cancelled") for r in rows)

    assert wait_for(done, 120, interval=0.2), runs(stack)
    rows = runs(stack)
    assert [r["status"] for r in rows] == ["succeeded"] * 6, rows
    assert {r["owner"] for r in rows} == {"alice", "bob"}
    assert {tuple(r["nodes"]) for r in rows} == {("hold-a", "hold-s"), ("hold-b", "hold-s")}
    # Every run holds hold-s: no two runs' [started_at, finished_at] intersect.
    spans = sorted(
        (datetime.fromisoformat(r["start"]), datetime.fromisoformat(r["end"]), r["pk"])
        for r in rows
    )
    for (_, end, pk), (start, _, nxt) in zip(spans, spans[1:], strict=False):
        assert end <= start, f"runs {pk} and {nxt} overlap on hold-s"
    assert any("node hold-s (held by run" in reason for reason in reasons), reasons
    total = (spans[-1][1] - spans[0][0]).total_seconds()
    print(f"\n6 fio runs of 1 s on a shared server, two workers: {total:.1f} s end to end")


def test_a_killed_holder_frees_its_nodes_within_the_stale_bound(lab):
    stack, workers = lab
    launch(stack, ("alice", FIO.format(name="long", testbed="tb-alice", reps=1, runtime=300)))
    assert wait_for(
        lambda: any(r["status"] == "running" and not r["waiting"] for r in runs(stack)), 60
    ), stack.worker_log("hold-a@hold-a")[-3000:]
    holder = runs(stack)[0]
    launch(stack, ("bob", FIO.format(name="short", testbed="tb-bob", reps=1, runtime=1)))
    assert wait_for(
        lambda: f"node hold-s (held by run {holder['pk']}" in runs(stack)[-1]["waiting"], 30
    ), runs(stack)

    os.kill(workers["hold-a"].pid, signal.SIGKILL)  # nothing tells the database
    killed = time.time()
    workers["hold-a"].wait(timeout=10)
    assert wait_for(lambda: runs(stack)[-1]["status"] == "succeeded", STALE + 30), runs(stack)
    waiter = runs(stack)[-1]
    started = datetime.fromisoformat(waiter["start"]).timestamp()
    # Its last heartbeat was at most RUN_PROGRESS_SECONDS (0.5 s) before the kill; the waiter
    # polls every 0.5 s.
    assert started - killed <= STALE + 1.5, started - killed
    assert runs(stack)[0]["status"] == "running", "freed by the waiter, not by the janitor"
    print(
        f"\nkilled holder: its nodes were taken {started - killed:.2f} s after SIGKILL "
        f"(RUN_STALE_SECONDS={STALE})"
    )
