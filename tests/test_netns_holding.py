"""Exclusive use of nodes and per-node cache drops on the network-namespace cluster
(tests/labs/netns.py): three nodes, each with its own hostname and its own Celery worker (and so
its own node agent, experiments.execution.agent) reaching PostgreSQL and Redis over the network.
alice's
testbed is launched from node1, bob's from node2; both use node3 as their storage and
metadata server.

- Two users' matrices launched at the same moment never run at the same time on a node
  (from every run's started_at / finished_at), and every run records a cache drop for every
  node it held, done on that node by that node's worker.
- The waiting run's page, fetched as its user, says what it waits for; node3's agent answers
  each drop request at its first poll that reads it; a worker SIGKILLed while it holds nodes
  frees them once its last heartbeat is RUN_STALE_SECONDS old (the waiter takes them, not
  the janitor).

Nothing here bounds a duration (issue 24): the checks are events and their order, and the
waits' timeouts are only against something never happening.
"""

from __future__ import annotations

import os
import shutil
import signal
import time
from datetime import timedelta

import psycopg
import pytest

from tests.labs import (
    Stack,
    finished,
    launch,
    run_page,
    runs,
    two_users_sharing_a_server,
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

STALE = 3  # BEEWEB_RUN_STALE_SECONDS of the workers

FIO = """\
name: {name}
tool: fio
testbeds: [{testbed}]
repetitions: {reps}
drop_caches: true
timeout_s: 600
params: {{rw: write, size: 4m, bs: 1m, runtime: {runtime}, time_based: true}}
"""


@pytest.fixture(scope="module")
def cluster(netns_lab, tmp_path_factory):
    """The inventory and one worker per node (solo pool, queue node.<hostname>, that
    hostname), started once for the module's tests, which run in order."""
    began = time.monotonic()
    tmp = tmp_path_factory.mktemp("netns-holding")
    stack = Stack(tmp)
    try:
        bench = tmp / "bench"
        bench.mkdir()
        addresses = {n.hostname: n.address for n in netns_lab.nodes}
        spec = two_users_sharing_a_server(str(bench), ("node1", "node2"), "node3", addresses)
        stack.call("inventory", spec)
        env = {"BEEWEB_NODE_DIRS": str(bench), "BEEWEB_RUN_STALE_SECONDS": str(STALE)}
        workers = stack.node_workers(netns_lab, env)
        # Every worker registered and its node agent running.
        wait_for_workers(stack, "node1@node1", "node2@node2", "node3@node3", agents=True)
        print(f"\ncluster of 3 nodes up in {time.monotonic() - began:.1f} s")
        yield stack, workers
    finally:
        stack.close()


# A node agent's poll as PostgreSQL shows it (pg_stat_activity keeps a session's last
# statement and when it began): the read of its node's leases, its hostname inlined (Django
# binds parameters on the client).
POLLS = (
    "SELECT pid, query_start FROM pg_stat_activity WHERE pid <> pg_backend_pid() "
    "AND query_start > %s AND query LIKE %s"
)


def poll_text(node: str) -> str:
    lease = '"experiments_nodelease"'
    return f"%FROM {lease} WHERE {lease}.\"hostname\" IN ('{node}')%"


def ask_drop(stack: Stack, run: int, node: str) -> tuple[str, int]:
    """Ask ``node`` to drop its caches on behalf of ``run`` as the executor does (on the
    run's lease) and wait for the answer: the answer, and how many polls of ``node``'s agent
    began after the request and before it was answered. Every poll that begins once the
    request is committed reads it, so the first one answers: at most 1. The polls are seen
    by sampling pg_stat_activity, and only those that began before a reading that found no
    answer yet are counted: a poll may go unseen on a busy machine, none is counted wrongly.
    """
    with psycopg.connect(stack.env["DATABASE_URL"], autocommit=True) as conn:
        update = "UPDATE experiments_nodelease SET drop_requested_at = now(), drop_result = ''"
        where = " WHERE run_id = %s AND hostname = %s"
        assert conn.execute(update + where, (run, node)).rowcount == 1
        (asked,) = conn.execute("SELECT clock_timestamp()").fetchone()  # after the commit
        seen: set[tuple] = set()
        unanswered = asked  # the last reading that found no answer (the server's clock)

        def answer() -> str:
            nonlocal unanswered
            seen.update(conn.execute(POLLS, (asked, poll_text(node))).fetchall())
            result, now = conn.execute(
                "SELECT drop_result, clock_timestamp() FROM experiments_nodelease" + where,
                (run, node),
            ).fetchone()
            if not result:
                unanswered = now
            return result

        assert wait_for(answer, 60, 0.01), f"{node}'s agent did not answer"
        return answer(), sum(1 for _, began in seen if began <= unanswered)


def test_two_users_matrices_never_overlap_and_every_held_node_drops(cluster):
    stack, _ = cluster
    began = time.monotonic()
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
    by_owner = {r["owner"]: r for r in rows}
    assert by_owner["alice"]["worker"] == "node1@node1"
    assert by_owner["bob"]["worker"] == "node2@node2"
    assert {tuple(r["nodes_held"]) for r in rows} == {("node1", "node3"), ("node2", "node3")}
    # No two runs overlap on any node: for each node, the spans of the runs holding it.
    for node in ("node1", "node2", "node3"):
        spans = sorted(
            (r["started_at"], r["finished_at"], r["pk"]) for r in rows if node in r["nodes_held"]
        )
        for (_, end, pk), (start, _, nxt) in zip(spans, spans[1:], strict=False):
            assert end <= start, f"runs {pk} and {nxt} overlap on {node}"
    assert any("node node3 (held by run" in reason for reason in reasons), reasons
    # Each run dropped the caches of every node it held, each on that node by its worker
    # (the namespaces share this kernel, and the workers run as root).
    for r in rows:
        assert r["effective_config"].get("drop_caches") == dict.fromkeys(
            r["nodes_held"], "dropped"
        ), r
    print(
        f"\n6 fio runs of 1 s by two users sharing node3, caches dropped on every held node: "
        f"{time.monotonic() - began:.1f} s end to end"
    )


def test_a_waiting_runs_page_and_a_killed_holder(cluster):
    stack, workers = cluster
    first = len(runs(stack))
    launch(stack, ("alice", FIO.format(name="long", testbed="tb-alice", reps=1, runtime=300)))
    assert wait_for(
        lambda: any(
            r["status"] == "running" and not r["waiting_for"] and r["started_at"]
            for r in runs(stack)[first:]
        ),
        60,
    ), stack.worker_log("node1@node1")[-3000:]
    holder = runs(stack)[first]
    launch(stack, ("bob", FIO.format(name="short", testbed="tb-bob", reps=1, runtime=1)))
    reason = f"node node3 (held by run {holder['pk']}"
    assert wait_for(lambda: reason in runs(stack)[-1]["waiting_for"], 30), runs(stack)
    waiter = runs(stack)[-1]

    status, page = run_page(stack, "bob", waiter["uuid"])
    assert status == 200
    assert f"Not started: waiting for {reason}" in page, page[-3000:]

    # node3's agent answers drop requests on the holder's lease from its own namespace (only
    # its agent reads node3's leases), each at its first poll that reads the request.
    with psycopg.connect(stack.env["DATABASE_URL"], autocommit=True) as conn:
        assert wait_for(
            lambda: conn.execute(POLLS, (holder["started_at"], poll_text("node3"))).fetchall(), 60
        ), "node3's agent's polls are not visible in pg_stat_activity"
    asks = [ask_drop(stack, holder["pk"], "node3") for _ in range(5)]
    assert [answer for answer, _ in asks] == ["dropped"] * 5, asks
    assert all(polls <= 1 for _, polls in asks), asks
    print(
        "\nnode3's agent answered 5 drops, polls seen between request and answer: "
        + ", ".join(str(polls) for _, polls in asks)
    )

    os.kill(workers["node1"].pid, signal.SIGKILL)  # nothing tells the database
    workers["node1"].wait(timeout=10)
    assert wait_for(lambda: runs(stack)[-1]["status"] == "succeeded", STALE + 60), runs(stack)
    waiter = runs(stack)[-1]
    # The waiter took node3 only once the holder's last heartbeat was RUN_STALE_SECONDS old
    # (both times are the one machine's clock), and the holder is still "running": the
    # waiter freed the lease, not the janitor.
    beat = last_heartbeat(stack, holder["pk"])
    assert waiter["started_at"] >= beat + timedelta(seconds=STALE), (waiter["started_at"], beat)
    assert waiter["effective_config"].get("drop_caches") == {"node2": "dropped", "node3": "dropped"}
    assert runs(stack)[first]["status"] == "running", "freed by the waiter, not by the janitor"
    print(
        f"\nkilled holder on node1: node3 taken by bob's run "
        f"{(waiter['started_at'] - beat).total_seconds():.2f} s after the holder's last "
        f"heartbeat (RUN_STALE_SECONDS={STALE})"
    )


def last_heartbeat(stack: Stack, run: int):
    """When ``run`` last wrote its heartbeat (an aware datetime)."""
    ((beat,),) = stack.sql(f"SELECT heartbeat_at FROM experiments_run WHERE id = {int(run)}")
    return beat
