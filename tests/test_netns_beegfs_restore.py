"""Issue 26: the original BeeGFS config files come back when the worker that LAUNCHED a tuned
matrix dies mid-run, on the network-namespace lab with a real BeeGFS 7.4.7
(tests/labs/beegfs.py ``beegfs_cluster``: node1 management, metadata and the client, node2
and node3 a storage daemon each, whose operator lets beeweb change its config).

A one-run matrix asks ``storage.tuneNumWorkers`` = 2 of both storage servers. node3's
restart command waits on a gate file the test opens (the real restart behind it), so the
moment is chosen, not raced: node2's config is changed and its daemon restarted, node3's
file is written and its restart pending, the run is running and holds node1, node2 and
node3. node1's worker (the launcher) is SIGKILLed then, and the gate opened: node3's agent
finishes the change it was asked for, with nobody left to read its answer. Nothing is put
back while the dead run still holds the servers. The janitor then ends the run (one attempt
allowed, so it fails for good rather than waiting for node1 to come back), frees its
leases, and with nothing of the matrix queued or running each server's agent puts its
original file back, restarts the daemon and waits until its targets are Online: the files
are byte for byte what they were and each BeegfsConfigChange row records the restore.

The other way a dead worker's run goes on: the janitor requeues it (attempts left); the
servers keep the tuned files while it waits, and a new worker on node1 runs it again on the
configs in place (nothing restarted), and once it has succeeded the files come back.
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess

import pytest

from tests.labs import Stack, finished, launch, runs, wait_for, wait_for_workers
from tests.labs.beegfs import BeegfsLab, node_env
from tests.labs.stack import ROOT, worker_argv

pytestmark = [pytest.mark.slow]

MATRIX = """\
name: dies
tool: storagebench
testbeds: [tb]
tuning_sets: [workers2]
apply_tuning: true
repetitions: 1
drop_caches: false
timeout_s: 300
params: {direction: write, blocksize: 1m, size: 8m, threads: 2, interval: 1}
"""

TUNING = """
from django.contrib.auth import get_user_model
from experiments.models import TuningSet
alice = get_user_model().objects.get(username="alice")
t = TuningSet.objects.create(owner=alice, name="workers2")
t.replace_params([("storage", "tuneNumWorkers", "2")])
print("ok")
"""

CHANGES = (
    "SELECT hostname, matrix_id, run_id, tuning_set, after, restored_at IS NOT NULL, "
    "restore_outcome FROM experiments_beegfsconfigchange ORDER BY hostname"
)


def gated(argv: list[str], gate: str) -> str:
    """``argv`` run once ``gate`` exists (a node's restart command, as its operator wrote
    it: one string, split without a shell)."""
    wait = 'while [ ! -e "$0" ]; do sleep 0.05; done; exec "$@"'
    return shlex.join(["bash", "-c", wait, gate, *argv])


ONLINE = {1: "Online", 2: "Online", 3: "Online", 4: "Online"}


class Killed:
    """A lab stack whose tuned matrix's launcher (node1's worker) was SIGKILLed while its run
    held the servers, node3's change then finished: see the module's docstring."""

    def __init__(self, lab: BeegfsLab, netns_lab, tmp_path) -> None:
        self.lab, self.netns_lab, self.tmp = lab, netns_lab, tmp_path
        assert lab.wait_online(4) == ONLINE
        self.confs = {name: lab.conf(f"storage-{name}") for name in ("node2", "node3")}
        self.originals = {name: path.read_bytes() for name, path in self.confs.items()}
        self.gate = tmp_path / "node3-may-restart"
        self.stack = Stack(tmp_path)

    def start(self) -> None:
        lab, stack = self.lab, self.stack
        self.bench = self.tmp / "bench"
        self.bench.mkdir()
        nodes = {n.hostname: {"owner": "alice", "address": n.address} for n in self.netns_lab.nodes}
        roles = {"node1": ["client", "metadata"], "node2": ["storage"], "node3": ["storage"]}
        testbed = {
            "name": "tb",
            "owner": "alice",
            "benchmark_dir": str(self.bench),
            "members": roles,
        }
        stack.call("inventory", {"users": {"alice": "x"}, "nodes": nodes, "testbeds": [testbed]})
        assert stack.shell(TUNING) == "ok"
        per_node = {
            name: node_env(lab, "storage", f"storage-{name}", allow=True)
            for name in ("node2", "node3")
        }
        per_node["node3"]["BEEWEB_NODE_BEEGFS_STORAGE_RESTART"] = gated(
            lab.restart_argv("storage-node3"), str(self.gate)
        )
        per_node["node1"] = self.node1_env = node_env(lab)
        self.workers = stack.node_workers(
            self.netns_lab, {"BEEWEB_NODE_DIRS": str(self.bench)}, per_node=per_node
        )
        wait_for_workers(stack, "node1@node1", "node2@node2", "node3@node3", agents=True)
        (self.matrix,) = launch(stack, ("alice", MATRIX))

        # The chosen moment: node2 changed and restarted, node3's file written, its restart
        # waiting at the gate; the run holds the three nodes.
        def holding() -> bool:
            (run,) = runs(stack, self.matrix)
            return (
                run["status"] == "running"
                and stack.sql(CHANGES)[:1] != []
                and self.confs["node3"].read_bytes() != self.originals["node3"]
            )

        assert wait_for(holding, 180, 0.2), (runs(stack, self.matrix), self.state())
        (run,) = runs(stack, self.matrix)
        assert run["queue"] == "node.node1" and run["nodes_held"] == ["node1", "node2", "node3"]
        assert self.confs["node2"].read_bytes() != self.originals["node2"]
        self.run = run["pk"]

        # The launcher dies; nothing tells the database. node3's restart goes ahead.
        os.kill(self.workers["node1"].pid, signal.SIGKILL)
        self.workers["node1"].wait(timeout=20)
        self.gate.touch()
        assert wait_for(lambda: len(stack.sql(CHANGES)) == 2, 180, 0.2), self.state()
        assert lab.wait_online(4) == ONLINE
        self.assert_tuned()

        # Once the run's heartbeat is stale, the janitor may take it.
        stale = (
            f"SELECT count(*) FROM experiments_run WHERE id = {self.run} "
            "AND heartbeat_at < now() - interval '3 seconds'"
        )
        assert wait_for(lambda: stack.sql(stale)[0][0] == 1, 60, 0.2)

    def state(self) -> tuple:
        return (
            runs(self.stack, self.matrix),
            self.stack.sql(CHANGES),
            {n: self.stack.worker_log(f"{n}@{n}")[-3000:] for n in ("node1", "node2", "node3")},
        )

    def assert_tuned(self) -> None:
        """Both servers still have the tuned files, their changes not restored."""
        assert [row[5] for row in self.stack.sql(CHANGES)] == [False, False]
        for name, path in self.confs.items():
            assert path.read_bytes() != self.originals[name], name
            assert path.with_name(path.name + ".beeweb-original").exists(), name

    def leases(self) -> int:
        return self.stack.sql(
            f"SELECT count(*) FROM experiments_nodelease WHERE run_id = {self.run}"
        )[0][0]

    def assert_restored(self) -> None:
        """Each server's agent put its original file back, restarted, Online, recorded."""
        restored = (
            "SELECT count(*) FROM experiments_beegfsconfigchange WHERE restored_at IS NOT NULL"
        )
        assert wait_for(lambda: self.stack.sql(restored)[0][0] == 2, 240, 0.5), self.state()
        for name, path in self.confs.items():
            assert path.read_bytes() == self.originals[name], name
            assert not path.with_name(path.name + ".beeweb-original").exists(), name
        changes = self.stack.sql(CHANGES)
        assert [row[:5] for row in changes] == [
            ("node2", self.matrix, self.run, "workers2", {"tuneNumWorkers": "2"}),
            ("node3", self.matrix, self.run, "workers2", {"tuneNumWorkers": "2"}),
        ]
        for row in changes:
            assert row[6].startswith("restored: original file back, restarted in "), row
        assert self.lab.wait_online(4) == ONLINE
        # The node agents' records are gone: a worker that starts finds nothing to restore.
        assert not list((self.tmp / "data" / "beegfs-config").glob("*.json"))

    def close(self) -> None:
        self.gate.touch()
        self.stack.close()


def test_the_launchers_worker_dies_the_janitor_ends_the_run_and_the_files_come_back(
    beegfs_cluster, netns_lab, tmp_path
):
    lab = Killed(beegfs_cluster, netns_lab, tmp_path)
    try:
        lab.start()
        stack = lab.stack
        # The dead run still holds the servers: nothing was put back.
        assert lab.leases() == 3
        lab.assert_tuned()
        # The janitor ends it for good (one attempt allowed) and frees its leases.
        swept = stack.call("janitor", 2, env={"BEEWEB_RUN_MAX_ATTEMPTS": "1"})
        assert swept == {"requeued": 0, "failed": 1, "cancelled": 0, "redispatched": 0}
        (run,) = runs(stack, lab.matrix)
        assert run["status"] == "failed", run
        assert "node1@node1 stopped sending heartbeats during attempt 1" in run["error"]
        assert "gave up after 1 attempts" in run["error"]
        assert lab.leases() == 0
        # Nothing of the matrix is queued or running: each server's agent restores.
        lab.assert_restored()
    finally:
        lab.close()


def test_a_requeued_run_keeps_the_tuned_files_until_a_new_worker_has_run_it(
    beegfs_cluster, netns_lab, tmp_path
):
    lab = Killed(beegfs_cluster, netns_lab, tmp_path)
    try:
        lab.start()
        stack = lab.stack
        swept = stack.call("janitor", 2, env={"BEEWEB_RUN_MAX_ATTEMPTS": "2"})
        assert swept == {"requeued": 1, "failed": 0, "cancelled": 0, "redispatched": 0}
        (run,) = runs(stack, lab.matrix)
        assert run["status"] == "queued" and run["attempts"] == 1, run
        assert lab.leases() == 0
        # Queued: the matrix may still want the change. The agents' restore checks (every
        # RESTORE_CHECK_SECONDS) see the run queued and leave the files; two of them pass
        # while the agents keep polling (their agent_seen moves on).
        agents = "FROM experiments_worker WHERE hostname IN ('node2', 'node3')"
        since = stack.sql("SELECT now()")[0][0]
        later = f"'{since.isoformat()}'::timestamptz + interval '11 seconds'"
        assert wait_for(
            lambda: stack.sql(f"SELECT count(*) {agents} AND agent_seen > {later}")[0][0] == 2,
            120,
            0.5,
        ), stack.sql(f"SELECT hostname, agent_seen {agents}")
        lab.assert_tuned()

        # node1's worker comes back: it runs the run again on the configs in place.
        env = {**stack.env, "BEEWEB_NODE_DIRS": str(lab.bench), **lab.node1_env}
        for key in ("DATABASE_URL", "CELERY_BROKER_URL"):
            env[key] = lab.netns_lab.via_gateway(env[key])
        node1 = next(n for n in lab.netns_lab.nodes if n.hostname == "node1")
        log = open(tmp_path / "worker-node1-again.log", "ab")
        again = lab.netns_lab.popen(
            node1,
            worker_argv("node.node1", "node1@node1"),
            env=env,
            hostname="node1",
            cwd=ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        stack.procs.append(again)
        assert wait_for(lambda: finished(stack, lab.matrix), 240, 0.5), lab.state()
        (run,) = runs(stack, lab.matrix)
        assert run["status"] == "succeeded" and run["attempts"] == 2, run
        servers = run["effective_config"]["beegfs"]
        for name in ("node2", "node3"):
            record = servers[name]["services"]["storage"]
            assert servers[name]["outcome"] == "in force"
            assert record["restarted"] is False, record  # the tuned file was in place
            assert record["keys"] == [
                {"key": "tuneNumWorkers", "before": None, "asked": "2", "in_force": "2"}
            ]
        # The matrix has ended: the files come back.
        lab.assert_restored()
    finally:
        lab.close()
