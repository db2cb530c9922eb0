"""The node agent (experiments.execution.agent) against the real database, with agent threads as
node
workers run them: a drop asked of a held node is answered by that node's agent, a node whose
policy refuses says so, a node without an agent is not waited for, a silent one is waited for
up to the bound, and the executor records one outcome per node it held."""

from __future__ import annotations

import os
import shutil
import statistics
import time
from datetime import datetime, timedelta

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.db import OperationalError
from django.urls import reverse
from django.utils import timezone

from experiments.execution import agent, answers, execute, holding, nodepolicy
from experiments.execution.attempt import Attempt
from experiments.models import Node, NodeLease, Run, RunTelemetry, TestbedNode, Worker
from experiments.results import telemetry
from runners.sampler import MIN_LAST_INTERVAL
from tests.helpers.execution import make_matrix, queue

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


class Polls:
    """A last job that counts its agent's polls: at each poll every job ticks once, in
    order, so when this count reaches k the jobs of poll k have done their work."""

    def __init__(self):
        self.count = 0

    def tick(self, leases) -> None:
        self.count += 1


def polls(one: agent.Agent) -> int:
    return one.jobs[-1].count


def wait_for(predicate, what: str, timeout: float = 60.0) -> None:
    """Wait for something to happen; the bound is only against it never happening."""
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, what
        time.sleep(0.02)


def wait_polls(*started: agent.Agent, n: int = 2) -> None:
    """Wait until each agent has finished ``n`` more polls. Called after a change in the
    database: the poll under way may have read the leases before it, the next one did not
    (n=2: a poll that saw the change has done its work)."""
    wanted = [(one, polls(one) + n) for one in started]
    wait_for(lambda: all(polls(one) >= k for one, k in wanted), f"{n} polls of each agent")


@pytest.fixture
def agents():
    """Start node agents in threads (one per worker, as the NodeAgent bootstep does), each
    with the jobs a worker's agent has and a poll counter; all are stopped at the end."""
    started: list[agent.Agent] = []

    def start(*names: str) -> list[agent.Agent]:
        these = []
        for name in names:
            worker_row(f"{name}@{name}", name, agent_seen=False)
            jobs = [agent.CacheDrop(), agent.NodeTelemetry(), Polls()]
            these.append(agent.Agent(f"{name}@{name}", [name], jobs=jobs).start())
        started.extend(these)
        # Each announces itself (agent_seen) at its first poll.
        wait_for(lambda: agent.with_agents(names) == set(names), "the agents' first polls")
        return these

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
def test_an_agent_answers_a_drop_asked_of_its_node(held_run, agents, monkeypatch):
    assert hold(held_run) == ["s2", "s3", "stor1"]
    (s2,) = agents("s2")
    # Which poll answers, and how long the agent waits between polls (not how long either
    # takes: the drop itself is a sync, as slow as the node's disks).
    answered_after: list[int] = []
    waits: list[float | None] = []
    real_drop, real_wait = agent.drop_here, s2.stopping.wait
    monkeypatch.setattr(agent, "drop_here", lambda: answered_after.append(polls(s2)) or real_drop())
    s2.stopping.wait = lambda timeout=None: waits.append(timeout) or real_wait(timeout)
    latencies = []
    for _ in range(5):
        asked = time.monotonic()
        NodeLease.objects.filter(hostname="s2").update(
            drop_requested_at=timezone.now(), drop_result=""
        )
        before = polls(s2)
        wait_for(lambda: NodeLease.objects.get(hostname="s2").drop_result, "no answer")
        latencies.append(time.monotonic() - asked)
        # Answered by the first poll that read the leases after the request: the one under
        # way then (it may have read them before) or the next.
        assert answered_after[-1] - before <= 1, (answered_after, before)
    assert NodeLease.objects.get(hostname="s2").drop_result == DROPPED
    # The other leases were not asked: nothing was done for them.
    assert set(NodeLease.objects.exclude(hostname="s2").values_list("drop_result", flat=True)) == {
        ""
    }
    # A node held: the agent polls every POLL_SECONDS.
    assert waits and set(waits) == {agent.POLL_SECONDS}, waits
    print(f"\nremote drop answered in {statistics.median(latencies) * 1000:.0f} ms (median of 5)")


@pytest.mark.django_db(transaction=True)
def test_outcomes_per_node_agent_no_agent_and_silent_agent(held_run, agents, monkeypatch, settings):
    hold(held_run)
    agents("s2")
    # s3's worker says its agent is alive but it never answers (killed a moment ago).
    worker_row("s3@s3", "s3")
    monkeypatch.setattr(agent, "ANSWER_SECONDS", 1.0)
    settings.RUN_PROGRESS_SECONDS = 0  # a heartbeat at every look at the answers
    beats = []
    began = time.monotonic()
    drops = agent.drop_caches(held_run, held_run.nodes_held, lambda: beats.append(1) or True)
    took = time.monotonic() - began
    assert drops == {
        "s2": DROPPED,
        "s3": "no answer from s3's worker within 1 s",
        "stor1": DROPPED,
    }
    # It waited for the silent node, beating meanwhile; the outcome says it gave up.
    assert took >= 1.0 and beats, (took, beats)
    # Without any agent on s3 the run does not wait for it: s3's outcome is decided before
    # the wait (had it waited, s3's outcome would be "no answer from s3's worker within").
    Worker.objects.filter(name="s3@s3").delete()
    NodeLease.objects.update(drop_requested_at=None, drop_result="")
    drops = agent.drop_caches(held_run, held_run.nodes_held, lambda: True)
    assert drops["s3"] == "no answer: no beeweb worker with a node agent runs on s3"
    assert drops["s2"] == DROPPED


class StarvedClock:
    """``agent.time`` for a worker starved of CPU: every sleep of the wait for answers
    wakes after the whole answer window (and more) has passed; ``advance`` moves it on."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.sleeps = 0

    def monotonic(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds

    def sleep(self, seconds: float) -> None:
        self.sleeps += 1
        self.advance(agent.ANSWER_SECONDS + 1)


@pytest.mark.django_db(transaction=True)
def test_a_starved_wait_for_answers_still_beats(held_run, settings, monkeypatch):
    """However late the wait wakes, it beats before it gives up: a loop starved for the
    whole answer window used to find the wait over first and end without a beat. And a beat
    is due one interval after the drop began, not after this node's own (slow) drop."""
    hold(held_run)
    worker_row("s2@s2", "s2")  # "alive", never answers; s3 has no worker at all
    clock = StarvedClock()
    monkeypatch.setattr(agent, "time", clock)
    monkeypatch.setattr(answers, "time", clock)  # the wait's loop
    settings.RUN_PROGRESS_SECONDS = 2.0

    def slow_drop() -> str:
        clock.advance(settings.RUN_PROGRESS_SECONDS)  # this node's drop took one interval
        return "dropped"

    monkeypatch.setattr(agent, "drop_here", slow_drop)
    beats: list[int] = []  # the sleeps before each beat
    drops = agent.drop_caches(
        held_run, held_run.nodes_held, lambda: beats.append(clock.sleeps) or True
    )
    assert drops is not None
    assert drops["s2"] == f"no answer from s2's worker within {agent.ANSWER_SECONDS:g} s"
    # At the first look (the own drop took an interval) and at the late wake, before the
    # wait ended: one sleep in all.
    assert beats == [0, 1] and clock.sleeps == 1, (beats, clock.sleeps)


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
    beats = []
    attempt = Attempt(held_run, token="", worker=held_run.worker)

    def cancelled_meanwhile() -> bool:
        # The user cancels while the run waits (a beat comes only from within the wait).
        if not beats:
            Run.objects.filter(pk=held_run.pk).update(cancel_requested=True)
        beats.append(1)
        return execute._beat(attempt)

    drops = agent.drop_caches(held_run, held_run.nodes_held, cancelled_meanwhile)
    # None: stopped by the cancel at the first beat after it, not by the end of the wait
    # for answers (ANSWER_SECONDS; that returns every node's outcome).
    assert drops is None and len(beats) == 1, (drops, beats)


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


def wait_rows(run: Run, hostnames: set[str], timeout: float = 60.0) -> dict[str, RunTelemetry]:
    """The run's telemetry rows once every one of ``hostnames`` stored its own (the bound is
    only against one that never does)."""
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


def recording(one: agent.Agent):
    """The agent's sampling under way (one run at a time here), or None."""
    active = list(one.jobs[1].active.values())
    return active[0] if active else None


def wait_readings(one: agent.Agent, n: int) -> None:
    """Wait until the agent's sampler has taken ``n`` readings after its first."""

    def enough() -> bool:
        rec = recording(one)
        return rec is not None and rec.sampler is not None and len(rec.sampler.t) >= n

    wait_for(enough, f"{n} readings on {one.names}")


def spy_polls(one: agent.Agent, method: str) -> list[int]:
    """The agent's poll count each time its telemetry job calls ``method`` (_start,
    _finish): which poll started or ended a sampling."""
    job = one.jobs[1]
    seen: list[int] = []
    real = getattr(job, method)

    def spy(*args):
        seen.append(polls(one))
        return real(*args)

    setattr(job, method, spy)
    return seen


@pytest.mark.django_db(transaction=True)
def test_held_nodes_sample_while_the_tool_runs_on_one_time_axis(held_run, agents, alice_client):
    cpu_before = time.process_time()
    assert hold(held_run) == ["s2", "s3", "stor1"]
    s2, s3 = agents("s2", "s3")
    started_at = {one: spy_polls(one, "_start") for one in (s2, s3)}
    finished_at = {one: spy_polls(one, "_finish") for one in (s2, s3)}
    wait_polls(s2, s3)  # idle agents of held nodes: nothing is sampled before the tool starts
    assert RunTelemetry.objects.count() == 0
    assert not any(started_at.values())
    # The launcher (stor1) marks the other leases as its tool starts; it samples itself.
    started = timezone.now()
    assert agent.start_sampling(held_run) == 2
    asked = {one: polls(one) for one in (s2, s3)}
    assert not NodeLease.objects.get(hostname="stor1").sample_from
    # The tool runs for three readings of each node, however long they take.
    wait_readings(s2, 3)
    wait_readings(s3, 3)
    ended = timezone.now()
    assert agent.stop_sampling(held_run) == 2
    told = {one: polls(one) for one in (s2, s3)}
    rows = wait_rows(held_run, {"s2", "s3"})
    seen = timezone.now()
    assert set(rows) == {"s2", "s3"}  # none for the launcher: its executor samples it
    for one in (s2, s3):
        # Each starts at its first poll that read the lease after the tool started (the
        # poll under way then, or the next), and stops likewise after the tool ended.
        (start,) = started_at[one]
        (finish,) = finished_at[one]
        assert start - asked[one] <= 1 and finish - told[one] <= 1, (start, finish, asked, told)
    docs = {d["hostname"]: d for d in telemetry.for_run(held_run)}
    process_cpu = time.process_time() - cpu_before
    for name, doc in docs.items():
        first = datetime.fromisoformat(doc["started_at"])
        # On the run's time axis: from after the tool started to after it ended (or the
        # last grid reading, if it came less than MIN_LAST_INTERVAL before the stop).
        last = first + timedelta(seconds=doc["t"][-1])
        assert started <= first <= ended, (name, started, first, ended)
        assert ended - timedelta(seconds=MIN_LAST_INTERVAL + 0.01) <= last <= seen, (name, last)
        assert len(doc["t"]) >= 3, doc["t"]
        assert {"cpu_busy", "cpu_busy:cpu0", "mem_used", "page_cache"} <= set(doc["series"])
        assert "tool_cpu" not in doc["series"]  # the tool's processes live on the launcher
        assert doc["format"] == "beeweb-telemetry/1" and doc["meta"]["cores"] == os.cpu_count()
        # The sampler's own CPU: counted, and part of what this process used meanwhile.
        assert 0 < doc["meta"]["sampler_cpu_s"] <= process_cpu
        overhead = doc["meta"]["sampler_cpu_s"] / doc["t"][-1]
        print(
            f"\n{name}: first reading {(first - started).total_seconds() * 1000:.0f} ms after "
            f"the tool started, {len(doc['t'])} samples, sampler CPU {overhead * 100:.2f} % "
            "of one core"
        )
    # The run page draws a panel per node, on the time axis of the earliest reading.
    page = alice_client.get(reverse("experiments:run", args=[held_run.uuid])).content.decode()
    assert "CPU of s2" in page and "CPU of s3" in page
    # Once stored, a node does not sample that attempt again while the lease stays.
    wait_polls(s2)
    assert recording(s2) is None and len(started_at[s2]) == 1
    assert RunTelemetry.objects.get(hostname="s2").samples == rows["s2"].samples


@pytest.mark.django_db(transaction=True)
def test_a_lease_that_goes_or_a_run_that_ends_stops_the_sampling(
    held_run, agents, monkeypatch, settings
):
    hold(held_run)
    monkeypatch.setattr(agent, "LIVE_CHECK_SECONDS", 0.5)
    s2, s3 = agents("s2", "s3")
    agent.start_sampling(held_run)
    wait_readings(s2, 2)
    # The attempt ends: the executor frees its nodes (a run that fails keeps no lease).
    NodeLease.objects.filter(hostname="s2").delete()
    rows = wait_rows(held_run, {"s2"})
    assert rows["s2"].samples >= 2
    # s3's lease is left behind (a launcher that died): once the run no longer runs, s3
    # stops and stores what it has instead of sampling on.
    wait_readings(s3, 1)
    Run.objects.filter(pk=held_run.pk).update(status="failed")
    rows = wait_rows(held_run, {"s2", "s3"})
    assert NodeLease.objects.filter(hostname="s3").exists()
    samples = rows["s3"].samples
    wait_polls(s3)
    assert recording(s3) is None
    assert RunTelemetry.objects.get(hostname="s3").samples == samples


@pytest.mark.django_db(transaction=True)
def test_a_node_whose_policy_refuses_records_it(held_run, agents, settings, alice_client):
    hold(held_run)
    settings.NODE_TELEMETRY = "false"  # every node of this process refuses
    assert nodepolicy.current().telemetry is False
    (s2,) = agents("s2")
    agent.start_sampling(held_run)
    wait_polls(s2)  # it saw the tool start (and refused to sample)
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
