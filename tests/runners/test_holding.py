"""Exclusive use of nodes (experiments.execution.holding) against the real database: which nodes a
run
holds, all or nothing, first queued first served, stale holders freed, opt-out testbeds, and
the executor waiting (heartbeats, reason, cancel) until its nodes are free."""

from __future__ import annotations

import shutil
import threading
import time
from datetime import timedelta
from types import SimpleNamespace

import pytest
from django.db import connection
from django.urls import reverse
from django.utils import timezone

from experiments.comparison.limits import independent_storage_flag
from experiments.execution import dispatch as dispatching
from experiments.execution import execute, holding
from experiments.models import Node, NodeLease, Run, Target, Testbed, TestbedNode
from tests.helpers.execution import make_matrix, queue


@pytest.fixture
def lab(alice, profile):
    """Two testbeds sharing storage server s1 (and metadata server m1 on the first): tb1 is
    launched from a1 with clients a1, c1; tb2 from b1."""
    nodes = {
        name: Node.objects.create(owner=alice, hostname=name, profile=profile)
        for name in ("a1", "b1", "c1", "s1", "m1", "t1")
    }
    tb1 = Testbed.objects.create(owner=alice, name="tb1", benchmark_dir="/mnt/beegfs/b")
    tb2 = Testbed.objects.create(owner=alice, name="tb2", benchmark_dir="/mnt/beegfs/b")
    for tb, roles in (
        (tb1, {"a1": "client", "c1": "client", "s1": "storage", "m1": "metadata"}),
        (tb2, {"b1": "client", "s1": "storage"}),
    ):
        for name, role in roles.items():
            TestbedNode.objects.create(testbed=tb, node=nodes[name], **{role: True})
    return {"tb1": tb1, "tb2": tb2, **nodes}


def running(alice, testbed, launcher, mode="single", hosts=(), queued=0.0, target=None):
    """A run as claim() leaves it: running, attempt 1, a fresh heartbeat."""
    now = timezone.now()
    return Run.objects.create(
        owner=alice,
        testbed=testbed,
        tool="dd",
        target=target,
        status=Run.Status.RUNNING,
        attempts=1,
        heartbeat_at=now,
        queued_at=now - timedelta(seconds=100 - queued),
        launch={
            "workdir": "/mnt/beegfs/b",
            "launcher": launcher,
            "mode": mode,
            "hosts": [[h, h] for h in hosts],
        },
    )


def acquire(run: Run) -> tuple[bool, str]:
    """What the executor does once: try, and store the reason while it waits."""
    names = holding.nodes_for(run)
    held, why = holding.try_acquire(run, names)
    Run.objects.filter(pk=run.pk).update(nodes_held=names, waiting_for=why)
    run.refresh_from_db()
    return held, why


def leases() -> dict[str, int]:
    return dict(NodeLease.objects.values_list("hostname", "run_id"))


@pytest.mark.django_db
def test_a_run_holds_its_launcher_clients_target_node_and_shared_servers(alice, lab):
    single = running(alice, lab["tb1"], "a1", hosts=["a1", "c1"])
    assert holding.nodes_for(single) == ["a1", "m1", "s1"]  # clients unused in single mode
    mpi = running(alice, lab["tb1"], "a1", mode="mpi", hosts=["a1", "c1"])
    assert holding.nodes_for(mpi) == ["a1", "c1", "m1", "s1"]
    target = Target.objects.create(testbed=lab["tb2"], node=lab["t1"], raid_level="0")
    on_target = running(alice, lab["tb2"], "b1", target=target)
    assert holding.nodes_for(on_target) == ["b1", "s1", "t1"]
    # A change saved in this process is seen at once (the signal drops the cached servers).
    tb1 = Testbed.objects.get(pk=lab["tb1"].pk)
    tb1.independent_storage = True
    tb1.save()
    mpi.refresh_from_db()
    assert holding.nodes_for(mpi) == ["a1", "c1"]


@pytest.mark.django_db
def test_a_testbeds_servers_are_read_again_once_the_cached_reading_is_too_old(
    alice, lab, monkeypatch
):
    """The storage and metadata servers a run holds are inventory: a worker reuses its
    reading for SERVERS_MAX_AGE_S, so a change made elsewhere (another process; here a bulk
    update, which sends no signal) shows within that bound, and not before."""
    run = running(alice, lab["tb1"], "a1")
    assert holding.nodes_for(run) == ["a1", "m1", "s1"]
    Testbed.objects.filter(pk=lab["tb1"].pk).update(independent_storage=True)
    assert holding.nodes_for(run) == ["a1", "m1", "s1"]  # the reading is fresh: reused
    monkeypatch.setattr(holding, "SERVERS_MAX_AGE_S", 0.0)  # now the reading is too old
    assert holding.nodes_for(run) == ["a1"]  # read again


@pytest.mark.django_db
def test_holding_is_all_or_nothing_and_says_who_holds_what(alice, lab):
    first = running(alice, lab["tb1"], "a1")
    second = running(alice, lab["tb2"], "b1", queued=1)
    assert acquire(first) == (True, "")
    assert leases() == {"a1": first.pk, "m1": first.pk, "s1": first.pk}
    held, why = acquire(second)
    assert not held
    assert why == f"waiting for node s1 (held by run {first.pk} ({first}))"
    assert "b1" not in leases(), "nothing is taken while one node is busy"
    assert holding.release(first) == 3
    assert acquire(second) == (True, "")
    assert leases() == {"b1": second.pk, "s1": second.pk}


@pytest.mark.django_db
def test_first_queued_first_served_across_testbeds(alice, lab):
    holder = running(alice, lab["tb2"], "b1", queued=0)
    assert acquire(holder)[0]
    # Queued earlier than `later`, waits for s1 (held) and a1 (free, but not taken).
    earlier = running(alice, lab["tb1"], "a1", queued=1)
    assert not acquire(earlier)[0]
    assert "a1" not in leases()
    # `later` wants only a1 (independent storage): free, yet `earlier` waits for it.
    Testbed.objects.filter(pk=lab["tb1"].pk).update(independent_storage=True)
    later = running(alice, lab["tb1"], "a1", queued=2)
    Testbed.objects.filter(pk=lab["tb1"].pk).update(independent_storage=False)
    later.nodes_held = ["a1"]
    held, why = holding.try_acquire(later, ["a1"])
    assert (
        not held and why == f"waiting for node a1 (run {earlier.pk}, queued earlier, waits for it)"
    )
    # A waiter that stopped sending heartbeats no longer blocks anyone.
    Run.objects.filter(pk=earlier.pk).update(heartbeat_at=timezone.now() - timedelta(hours=1))
    assert holding.try_acquire(later, ["a1"]) == (True, "")
    holding.release(later)
    Run.objects.filter(pk=earlier.pk).update(heartbeat_at=timezone.now())
    holding.release(holder)
    assert acquire(earlier) == (True, "")


@pytest.mark.django_db
def test_a_stale_or_finished_holder_frees_its_nodes(alice, lab, settings):
    settings.RUN_STALE_SECONDS = 5
    holder = running(alice, lab["tb1"], "a1")
    assert acquire(holder)[0]
    other = running(alice, lab["tb2"], "b1", queued=1)
    assert not acquire(other)[0]
    Run.objects.filter(pk=holder.pk).update(heartbeat_at=timezone.now() - timedelta(seconds=6))
    assert acquire(other) == (True, "")
    assert leases() == {"b1": other.pk, "s1": other.pk, "a1": holder.pk, "m1": holder.pk}
    # The janitor's sweep frees the rest; a finished run or a new attempt frees its leases.
    assert holding.sweep() == 2
    Run.objects.filter(pk=other.pk).update(attempts=2)
    assert holding.sweep() == 2 and leases() == {}


@pytest.mark.django_db
def test_the_janitor_sweeps_leases_of_dead_runs(alice, lab, django_capture_on_commit_callbacks):
    holder = running(alice, lab["tb1"], "a1")
    assert acquire(holder)[0]
    Run.objects.filter(pk=holder.pk).update(status=Run.Status.SUCCEEDED)
    with django_capture_on_commit_callbacks(execute=False):
        dispatching.janitor()
    assert leases() == {}


@pytest.mark.django_db
def test_pages_show_what_a_waiting_run_waits_for(alice_client, alice, lab, bench):
    matrix = make_matrix(alice, bench, tool="dd", params={"bs": "64k", "count": 1})
    run = matrix.runs.get()
    Run.objects.filter(pk=run.pk).update(
        status="running", waiting_for="waiting for node stor1 (held by run 7 (dd on x))"
    )
    page = alice_client.get(reverse("experiments:run", args=[run.uuid])).content.decode()
    assert "Not started: waiting for node stor1 (held by run 7 (dd on x))." in page
    part = alice_client.get(
        reverse("experiments:matrix_progress", args=[matrix.uuid]), HTTP_HX_REQUEST="true"
    ).content.decode()
    assert "waiting for node stor1 (held by run 7 (dd on x))" in part


def test_comparison_flags_points_of_independent_storage_testbeds():
    class Ctx:
        testbeds = {1: Testbed(name="local", independent_storage=True), 2: Testbed(name="bg")}

    point = SimpleNamespace(flags=[])
    independent_storage_flag(Ctx, point, [{"run__testbed_id": 1}, {"run__testbed_id": 2}])
    assert point.flags == [
        "testbed local declares independent storage: its runs held only their own nodes, "
        "and other runs may have used its storage servers meanwhile"
    ]
    other = SimpleNamespace(flags=[])
    independent_storage_flag(Ctx, other, [{"run__testbed_id": 2}])
    assert other.flags == []


def alive_heartbeat():
    """A heartbeat an hour ahead: a holder that stays alive for the whole test."""
    return timezone.now() + timedelta(hours=1)


def _once_waiting(run: Run, action) -> threading.Thread:
    """Do ``action`` in a thread once ``run`` waits for its nodes (its ``waiting_for`` is
    written), however long the executor takes to get there."""

    def body():
        try:
            deadline = time.monotonic() + 60  # only against a run that never waits
            while not Run.objects.get(pk=run.pk).waiting_for:
                if time.monotonic() > deadline:
                    return
                time.sleep(0.02)
            action()
        finally:
            connection.close()

    thread = threading.Thread(target=body)
    thread.start()
    return thread


@pytest.mark.skipif(shutil.which("dd") is None, reason="dd is not installed")
@pytest.mark.django_db(transaction=True)
def test_the_executor_waits_for_its_nodes_then_runs(alice, executing_bench):
    bench = executing_bench
    blocker = make_matrix(alice, bench, tool="dd", params={"bs": "64k", "count": 1}).runs.get()
    # A live holder: its heartbeat stays fresh however long the machine takes to get the
    # other run waiting (a stand-in that never beats would turn stale under load).
    Run.objects.filter(pk=blocker.pk).update(
        status="running", attempts=1, heartbeat_at=alive_heartbeat(), queued_at=timezone.now()
    )
    blocker.refresh_from_db()
    assert holding.try_acquire(blocker, ["stor1"]) == (True, "")
    run = make_matrix(alice, bench, tool="dd", params={"bs": "64k", "count": 4}).runs.get()
    seen: list[str] = []
    freed: list = []

    def free():
        seen.append(Run.objects.get(pk=run.pk).waiting_for)
        freed.append(timezone.now())
        Run.objects.filter(pk=blocker.pk).update(status="succeeded", finished_at=timezone.now())

    thread = _once_waiting(run, free)
    status = execute.execute(run.pk, queue(run), "w@test")
    thread.join()
    run.refresh_from_db()
    assert status == "succeeded", run.error
    assert seen == [f"waiting for node stor1 (held by run {blocker.pk} ({blocker}))"]
    assert run.waiting_for == "" and run.nodes_held == ["stor1"]
    assert run.started_at >= freed[0]  # it started once its node was free, not before
    assert NodeLease.objects.count() == 0, "released when the attempt ends"


@pytest.mark.skipif(shutil.which("dd") is None, reason="dd is not installed")
@pytest.mark.django_db(transaction=True)
def test_cancel_while_waiting_for_nodes(alice, executing_bench):
    bench = executing_bench
    blocker = make_matrix(alice, bench, tool="dd", params={"bs": "64k", "count": 1}).runs.get()
    Run.objects.filter(pk=blocker.pk).update(
        status="running", attempts=1, heartbeat_at=alive_heartbeat()
    )
    blocker.refresh_from_db()
    assert holding.try_acquire(blocker, ["stor1"])[0]
    run = make_matrix(alice, bench, tool="dd", params={"bs": "64k", "count": 1}).runs.get()
    thread = _once_waiting(run, lambda: Run.objects.filter(pk=run.pk).update(cancel_requested=True))
    assert execute.execute(run.pk, queue(run), "w@test") == "cancelled"
    thread.join()
    run.refresh_from_db()
    assert run.error.startswith("cancelled while it waited for its nodes (waiting for node stor1")
    assert run.exit_code is None and "run_dir" not in run.effective_config
    assert list(NodeLease.objects.values_list("run_id", flat=True)) == [blocker.pk]


@pytest.mark.skipif(shutil.which("dd") is None, reason="dd is not installed")
@pytest.mark.django_db(transaction=True)
def test_a_run_slow_to_store_its_outcome_keeps_beating_and_its_nodes(
    alice, executing_bench, settings, monkeypatch
):
    """Storing the outcome (telemetry, verdicts, parsing) of a loaded node can outlast
    RUN_STALE_SECONDS; the run still holds its nodes then, so a waiting run must not take
    them: its heartbeats go on from a thread of their own until the nodes are released."""
    settings.RUN_STALE_SECONDS = 1
    settings.RUN_PROGRESS_SECONDS = 0.2
    run = make_matrix(
        alice, executing_bench, tool="dd", params={"bs": "64k", "count": 1}
    ).runs.get()
    rival = make_matrix(
        alice, executing_bench, tool="dd", params={"bs": "64k", "count": 2}
    ).runs.get()
    Run.objects.filter(pk=rival.pk).update(
        status="running", attempts=1, heartbeat_at=timezone.now(), queued_at=timezone.now()
    )
    rival.refresh_from_db()
    finish = execute._finish
    taken: list[tuple[bool, str]] = []

    def slow_finish(attempt, *outcome, **how):
        # Slower than three stale windows (without the executor's loop), and the rival
        # tries as soon as a heartbeat written after them shows: the beats went on.
        began = timezone.now()
        stale = timedelta(seconds=3 * settings.RUN_STALE_SECONDS)
        deadline = time.monotonic() + 60  # only against beats that stopped
        while Run.objects.get(pk=attempt.run.pk).heartbeat_at < began + stale:
            assert time.monotonic() < deadline, "no heartbeat after three stale windows"
            time.sleep(0.02)
        taken.append(holding.try_acquire(rival, ["stor1"]))
        finish(attempt, *outcome, **how)

    monkeypatch.setattr(execute, "_finish", slow_finish)
    assert execute.execute(run.pk, queue(run), "w@test") == "succeeded"
    assert taken == [(False, f"waiting for node stor1 (held by run {run.pk} ({run}))")], taken
    assert NodeLease.objects.count() == 0, "released when the attempt ends"


@pytest.mark.django_db
def test_a_node_taken_meanwhile_takes_nothing_and_leaves_the_transaction_usable(
    alice, lab, monkeypatch
):
    """Another run takes one of the nodes between the reads and the insert (possible on
    SQLite, which locks no row, or for a node without a Node row): the insert skips it
    (no error to roll back inside the claim's transaction), none of the run's leases stay,
    and the other run keeps its node."""
    from django.db import transaction

    run = running(alice, lab["tb1"], "a1")
    other = running(alice, lab["tb2"], "b1", queued=1)
    busy = holding._busy

    def meanwhile(holders, waiters, wanted):
        NodeLease.objects.create(
            hostname="s1", node=lab["s1"], run=other, attempt=1, acquired_at=timezone.now()
        )
        return busy(holders, waiters, wanted)

    monkeypatch.setattr(holding, "_busy", meanwhile)
    with transaction.atomic():
        held, why = holding.try_acquire(run, holding.nodes_for(run))
        assert not held and why.endswith("(taken meanwhile)")
        assert leases() == {"s1": other.pk}, "nothing of the run's; the other's stays"
        assert Run.objects.filter(pk=run.pk).exists(), "the transaction goes on"


@pytest.mark.django_db
def test_a_storagebench_run_holds_the_servers_it_benchmarks(alice, lab, profile):
    """Even where the testbed's storage is independent (no shared servers to hold): the
    servers of the targets it names, else every storage server; a run on a target, its node."""
    tb = lab["tb1"]
    tb.independent_storage = True
    tb.save()
    s2 = Node.objects.create(owner=alice, hostname="s2", profile=profile)
    TestbedNode.objects.create(testbed=tb, node=s2, storage=True)
    Target.objects.create(testbed=tb, node=lab["s1"], raid_level="0", target_id=1)
    on_s2 = Target.objects.create(testbed=tb, node=s2, raid_level="10", target_id=3)
    bench = running(alice, tb, "a1")
    Run.objects.filter(pk=bench.pk).update(tool="storagebench")
    bench.refresh_from_db()
    assert holding.nodes_for(bench) == ["a1", "s1", "s2"]  # --alltargets
    bench.params = {"targetids": [3]}
    assert holding.nodes_for(bench) == ["a1", "s2"]
    on_target = running(alice, tb, "s2", target=on_s2)
    Run.objects.filter(pk=on_target.pk).update(tool="storagebench")
    on_target.refresh_from_db()
    assert holding.nodes_for(on_target) == ["s2"]
