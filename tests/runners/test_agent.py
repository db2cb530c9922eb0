"""The node agent (experiments.execution.agent) against the real database, with agent threads as
node
workers run them: a drop asked of a held node is answered by that node's agent, a node whose
policy refuses says so, a node without an agent is not waited for, a silent one is waited for
up to the bound, and the executor records one outcome per node it held."""

from __future__ import annotations

import os
import shutil
import statistics
import threading
import time
from datetime import datetime

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.db import OperationalError
from django.urls import reverse
from django.utils import timezone

from experiments.execution import agent, execute, holding, nodepolicy
from experiments.models import Node, NodeLease, Run, RunTelemetry, TestbedNode, Worker
from experiments.results import telemetry
from tests.runners.test_execute import make_matrix, queue

# As root (CI, the worker nodes) the kernel drops; otherwise it says why not.
DROPPED = "dropped" if os.geteuid() == 0 else "not permitted: Permission denied"


def worker_row(name: str, node: str, agent_seen=True) -> Worker:
    now = timezone.now()
    return Worker.objects.create(
        name=name,
        hostname=node,
        queues=[f"node.{node}"],
        started_at=now,
        last_seen=now,
        agent_seen=now if agent_seen else None,
    )


@pytest.fixture
def agents():
    """Start node agents in threads (one per worker, as the NodeAgent bootstep does); all
    are stopped at the end."""
    started: list[agent.Agent] = []

    def start(*names: str) -> list[agent.Agent]:
        for name in names:
            worker_row(f"{name}@{name}", name, agent_seen=False)
            started.append(agent.Agent(f"{name}@{name}", [name]).start())
        # Each announces itself (agent_seen) at its first poll.
        deadline = time.monotonic() + 10
        while len(agent.with_agents(names)) < len(names) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert agent.with_agents(names) == set(names)
        return started

    yield start
    for one in started:
        one.stop()


@pytest.fixture
def held_run(alice, executing_bench, profile):
    """A dd run on "bench" (launched from stor1) whose testbed also has storage servers s2,
    s3 (shared, so the run holds them), held as the executor holds it."""
    bench = executing_bench
    for name in ("s2", "s3"):
        node = Node.objects.create(owner=alice, hostname=name, profile=profile)
        TestbedNode.objects.create(testbed=bench, node=node, storage=True)
    run = make_matrix(
        alice, bench, tool="dd", params={"bs": "64k", "count": 4}, drop_caches=True
    ).runs.get()
    return run


def hold(run: Run) -> list[str]:
    now = timezone.now()
    Run.objects.filter(pk=run.pk).update(status="running", attempts=1, heartbeat_at=now)
    run.refresh_from_db()
    names = holding.nodes_for(run)
    assert holding.try_acquire(run, names) == (True, "")
    Run.objects.filter(pk=run.pk).update(nodes_held=names)
    run.refresh_from_db()
    return names


def test_node_names_come_from_the_workers_node_queues():
    assert agent.node_names(["default", "node.a1", "node.", "node.b1", "nodes"]) == ["a1", "b1"]
    assert agent.node_names(["default"]) == []


def test_the_drop_policy_is_the_nodes(tmp_path, settings):
    assert nodepolicy.parse("", "", tmp_path).drop_caches is True
    assert nodepolicy.parse("", "", tmp_path, " False ").drop_caches is False
    with pytest.raises(ImproperlyConfigured, match="BEEWEB_NODE_DROP_CACHES: 'maybe'"):
        nodepolicy.parse("", "", tmp_path, "maybe")
    settings.NODE_DROP_CACHES = "0"
    assert agent.drop_here() == "refused by the node's policy (BEEWEB_NODE_DROP_CACHES=false)"


@pytest.mark.django_db(transaction=True)
def test_an_agent_answers_a_drop_asked_of_its_node(held_run, agents):
    assert hold(held_run) == ["s2", "s3", "stor1"]
    agents("s2")
    latencies = []
    for _ in range(5):
        asked = time.monotonic()
        NodeLease.objects.filter(hostname="s2").update(
            drop_requested_at=timezone.now(), drop_result=""
        )
        while not NodeLease.objects.get(hostname="s2").drop_result:
            assert time.monotonic() - asked < 5, "the agent did not answer"
            time.sleep(0.01)
        latencies.append(time.monotonic() - asked)
    assert NodeLease.objects.get(hostname="s2").drop_result == DROPPED
    # The other leases were not asked: nothing was done for them.
    assert set(NodeLease.objects.exclude(hostname="s2").values_list("drop_result", flat=True)) == {
        ""
    }
    # A node held: the agent polls every POLL_SECONDS; the drop itself is a sync.
    assert statistics.median(latencies) < agent.POLL_SECONDS + 1.0, latencies
    print(f"\nremote drop answered in {statistics.median(latencies) * 1000:.0f} ms (median of 5)")


@pytest.mark.django_db(transaction=True)
def test_outcomes_per_node_agent_no_agent_and_silent_agent(held_run, agents, monkeypatch):
    hold(held_run)
    agents("s2")
    # s3's worker says its agent is alive but it never answers (killed a moment ago).
    worker_row("s3@s3", "s3")
    monkeypatch.setattr(agent, "ANSWER_SECONDS", 1.0)
    beats = []
    began = time.monotonic()
    drops = agent.drop_caches(held_run, held_run.nodes_held, lambda: beats.append(1) or True)
    took = time.monotonic() - began
    assert drops == {
        "s2": DROPPED,
        "s3": "no answer from s3's worker within 1 s",
        "stor1": DROPPED,
    }
    assert 1.0 <= took < 3.0 and beats, (took, beats)
    # Without any agent on s3 the run does not wait for it.
    Worker.objects.filter(name="s3@s3").delete()
    NodeLease.objects.update(drop_requested_at=None, drop_result="")
    began = time.monotonic()
    drops = agent.drop_caches(held_run, held_run.nodes_held, lambda: True)
    assert drops["s3"] == "no answer: no beeweb worker with a node agent runs on s3"
    assert drops["s2"] == DROPPED and time.monotonic() - began < 1.0


@pytest.mark.django_db(transaction=True)
def test_a_refusing_node_records_its_refusal(held_run, agents, settings):
    hold(held_run)
    settings.NODE_DROP_CACHES = "false"  # every node of this process refuses
    agents("s2", "s3")
    drops = agent.drop_caches(held_run, held_run.nodes_held, lambda: True)
    assert drops == dict.fromkeys(["s2", "s3", "stor1"], nodepolicy.DROP_REFUSED)


@pytest.mark.django_db(transaction=True)
def test_a_cancel_while_waiting_for_answers_stops_the_wait(held_run, settings, monkeypatch):
    hold(held_run)
    worker_row("s2@s2", "s2")  # "alive", never answers
    settings.RUN_PROGRESS_SECONDS = 0.2
    threading.Timer(
        0.5, lambda: Run.objects.filter(pk=held_run.pk).update(cancel_requested=True)
    ).start()
    began = time.monotonic()
    drops = agent.drop_caches(held_run, held_run.nodes_held, lambda: execute._beat(held_run))
    assert drops is None and time.monotonic() - began < 2


@pytest.mark.skipif(shutil.which("dd") is None, reason="dd is not installed")
@pytest.mark.django_db(transaction=True)
def test_the_executor_records_every_held_nodes_outcome(held_run, agents, alice_client):
    agents("s2")
    run = held_run
    assert execute.execute(run.pk, queue(run), "stor1@stor1") == "succeeded"
    run.refresh_from_db()
    assert run.nodes_held == ["s2", "s3", "stor1"]
    assert run.effective_config["drop_caches"] == {
        "s2": DROPPED,
        "s3": "no answer: no beeweb worker with a node agent runs on s3",
        "stor1": DROPPED,
    }
    assert NodeLease.objects.count() == 0
    page = alice_client.get(reverse("experiments:run", args=[run.uuid])).content.decode()
    assert f"s2: {DROPPED}; s3: no answer: no beeweb worker" in page


@pytest.mark.django_db
def test_runs_that_stored_one_outcome_still_show_it(alice_client, held_run):
    Run.objects.filter(pk=held_run.pk).update(
        effective_config={"hostname": "stor1", "drop_caches": "dropped"}
    )
    held_run.refresh_from_db()
    assert held_run.cache_drops == [("stor1", "dropped")]
    page = alice_client.get(reverse("experiments:run", args=[held_run.uuid])).content.decode()
    assert '<dd id="cache-drops">stor1: dropped</dd>' in page


# --- Telemetry of the other held nodes (experiments.execution.agent.NodeTelemetry)
# -----------------------


def wait_rows(run: Run, hostnames: set[str], timeout: float = 10.0) -> dict[str, RunTelemetry]:
    deadline = time.monotonic() + timeout
    rows: dict[str, RunTelemetry] = {}
    while time.monotonic() < deadline:
        try:
            rows = {r.hostname: r for r in RunTelemetry.objects.filter(run=run)}
        except OperationalError:  # SQLite's in-memory test database: an agent is writing
            continue
        if set(rows) >= hostnames:
            return rows
        time.sleep(0.05)
    raise AssertionError(f"no telemetry from {hostnames - set(rows)}")


@pytest.mark.django_db(transaction=True)
def test_held_nodes_sample_while_the_tool_runs_on_one_time_axis(held_run, agents, alice_client):
    assert hold(held_run) == ["s2", "s3", "stor1"]
    agents("s2", "s3")
    time.sleep(1.0)  # idle agents: nothing is sampled before the tool starts
    assert RunTelemetry.objects.count() == 0
    # The launcher (stor1) marks the other leases as its tool starts; it samples itself.
    assert agent.start_sampling(held_run) == 2
    started = timezone.now()
    assert not NodeLease.objects.get(hostname="stor1").sample_from
    time.sleep(3.2)
    assert agent.stop_sampling(held_run) == 2
    stopped = timezone.now()
    rows = wait_rows(held_run, {"s2", "s3"})
    assert set(rows) == {"s2", "s3"}  # none for the launcher: its executor samples it
    docs = {d["hostname"]: d for d in telemetry.for_run(held_run)}
    for name, doc in docs.items():
        first = datetime.fromisoformat(doc["started_at"])
        # The agent polls every POLL_SECONDS while its node is held.
        lag = (first - started).total_seconds()
        assert 0 <= lag < agent.POLL_SECONDS + 0.3, (name, lag)
        # It stops at its first poll after the tool ended.
        last = (stopped - first).total_seconds() + agent.POLL_SECONDS + 0.3
        assert 3 <= len(doc["t"]) <= 5 and doc["t"][-1] <= last, (doc["t"], last)
        assert {"cpu_busy", "cpu_busy:cpu0", "mem_used", "page_cache"} <= set(doc["series"])
        assert "tool_cpu" not in doc["series"]  # the tool's processes live on the launcher
        assert doc["format"] == "beeweb-telemetry/1" and doc["meta"]["cores"] == os.cpu_count()
        overhead = doc["meta"]["sampler_cpu_s"] / doc["t"][-1]
        assert overhead < 0.01, overhead  # at most 1 % of one core at 1 Hz
        print(
            f"\n{name}: first reading {lag * 1000:.0f} ms after the tool started, "
            f"{len(doc['t'])} samples, sampler CPU {overhead * 100:.2f} % of one core"
        )
    skew = abs((rows["s2"].started_at - rows["s3"].started_at).total_seconds())
    assert skew < 0.5, skew
    # The run page draws a panel per node, on the time axis of the earliest reading.
    page = alice_client.get(reverse("experiments:run", args=[held_run.uuid])).content.decode()
    assert "CPU of s2" in page and "CPU of s3" in page
    # Once stored, a node does not sample that attempt again while the lease stays.
    time.sleep(0.6)
    assert RunTelemetry.objects.get(hostname="s2").samples == rows["s2"].samples


@pytest.mark.django_db(transaction=True)
def test_a_lease_that_goes_or_a_run_that_ends_stops_the_sampling(
    held_run, agents, monkeypatch, settings
):
    hold(held_run)
    monkeypatch.setattr(agent, "LIVE_CHECK_SECONDS", 0.5)
    agents("s2", "s3")
    agent.start_sampling(held_run)
    time.sleep(2.2)
    # The attempt ends: the executor frees its nodes (a run that fails keeps no lease).
    NodeLease.objects.filter(hostname="s2").delete()
    rows = wait_rows(held_run, {"s2"}, 3)
    assert rows["s2"].samples >= 2
    # s3's lease is left behind (a launcher that died): once the run no longer runs, s3
    # stops and stores what it has instead of sampling on.
    Run.objects.filter(pk=held_run.pk).update(status="failed")
    rows = wait_rows(held_run, {"s2", "s3"}, 3)
    assert NodeLease.objects.filter(hostname="s3").exists()
    samples = rows["s3"].samples
    time.sleep(1.5)
    assert RunTelemetry.objects.get(hostname="s3").samples == samples


@pytest.mark.django_db(transaction=True)
def test_a_node_whose_policy_refuses_records_it(held_run, agents, settings, alice_client):
    hold(held_run)
    settings.NODE_TELEMETRY = "false"  # every node of this process refuses
    assert nodepolicy.current().telemetry is False
    agents("s2")
    agent.start_sampling(held_run)
    time.sleep(0.6)
    agent.stop_sampling(held_run)
    row = wait_rows(held_run, {"s2"})["s2"]
    assert row.samples == 0
    assert row.meta == {"unavailable": {"telemetry": nodepolicy.TELEMETRY_REFUSED}}
    page = alice_client.get(reverse("experiments:run", args=[held_run.uuid])).content.decode()
    assert (
        "Not sampled on s2: telemetry (refused by the node&#x27;s policy "
        "(BEEWEB_NODE_TELEMETRY=false))" in page
    )


def test_the_telemetry_policy_is_the_nodes(tmp_path):
    assert nodepolicy.parse("", "", tmp_path).telemetry is True
    assert nodepolicy.parse("", "", tmp_path, "true", " off ").telemetry is False
    with pytest.raises(ImproperlyConfigured, match="BEEWEB_NODE_TELEMETRY: 'maybe'"):
        nodepolicy.parse("", "", tmp_path, "true", "maybe")
