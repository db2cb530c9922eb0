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
"""

from __future__ import annotations

import os
import shlex
import signal

import pytest

from tests.labs import Stack, launch, runs, wait_for, wait_for_workers
from tests.labs.beegfs import BeegfsLab, node_env

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


def test_the_launchers_worker_dies_mid_run_and_the_servers_get_their_files_back(
    beegfs_cluster, netns_lab, tmp_path
):
    lab: BeegfsLab = beegfs_cluster
    assert lab.wait_online(4) == {1: "Online", 2: "Online", 3: "Online", 4: "Online"}
    confs = {name: lab.conf(f"storage-{name}") for name in ("node2", "node3")}
    originals = {name: path.read_bytes() for name, path in confs.items()}
    gate = tmp_path / "node3-may-restart"
    stack = Stack(tmp_path)
    try:
        bench = tmp_path / "bench"
        bench.mkdir()
        nodes = {n.hostname: {"owner": "alice", "address": n.address} for n in netns_lab.nodes}
        roles = {"node1": ["client", "metadata"], "node2": ["storage"], "node3": ["storage"]}
        testbed = {"name": "tb", "owner": "alice", "benchmark_dir": str(bench), "members": roles}
        stack.call("inventory", {"users": {"alice": "x"}, "nodes": nodes, "testbeds": [testbed]})
        assert stack.shell(TUNING) == "ok"
        per_node = {
            name: {
                **node_env(lab, "storage", f"storage-{name}"),
                "BEEWEB_NODE_BEEGFS": "true",
                "BEEWEB_NODE_BEEGFS_STORAGE_RESTART": shlex.join(
                    lab.restart_argv(f"storage-{name}")
                ),
                "BEEWEB_BEEGFS_CTL": shlex.join(lab.ctl_argv()),
            }
            for name in ("node2", "node3")
        }
        per_node["node3"]["BEEWEB_NODE_BEEGFS_STORAGE_RESTART"] = gated(
            lab.restart_argv("storage-node3"), str(gate)
        )
        per_node["node1"] = {"BEEWEB_BEEGFS_CTL": shlex.join(lab.ctl_argv())}
        workers = stack.node_workers(netns_lab, {"BEEWEB_NODE_DIRS": str(bench)}, per_node=per_node)
        wait_for_workers(stack, "node1@node1", "node2@node2", "node3@node3", agents=True)

        (matrix,) = launch(stack, ("alice", MATRIX))

        def logs() -> dict:
            return {n: stack.worker_log(f"{n}@{n}")[-3000:] for n in ("node1", "node2", "node3")}

        # The chosen moment: node2 changed and restarted, node3's file written, its restart
        # waiting at the gate; the run holds the three nodes.
        def holding() -> bool:
            (run,) = runs(stack, matrix)
            return (
                run["status"] == "running"
                and stack.sql(CHANGES)[:1] != []
                and confs["node3"].read_bytes() != originals["node3"]
            )

        assert wait_for(holding, 180, 0.2), (runs(stack, matrix), stack.sql(CHANGES), logs())
        (run,) = runs(stack, matrix)
        assert run["queue"] == "node.node1" and run["nodes_held"] == ["node1", "node2", "node3"]
        assert confs["node2"].read_bytes() != originals["node2"]

        # The launcher dies; nothing tells the database. node3's restart goes ahead.
        os.kill(workers["node1"].pid, signal.SIGKILL)
        workers["node1"].wait(timeout=20)
        gate.touch()
        assert wait_for(lambda: len(stack.sql(CHANGES)) == 2, 180, 0.2), (
            stack.sql(CHANGES),
            logs(),
        )
        assert lab.wait_online(4) == {1: "Online", 2: "Online", 3: "Online", 4: "Online"}
        # The dead run still holds the servers: nothing is put back yet.
        assert [row[5] for row in stack.sql(CHANGES)] == [False, False]
        for path in confs.values():
            assert path.with_name(path.name + ".beeweb-original").exists()

        # The janitor, once the run's heartbeat is stale, ends it for good (one attempt
        # allowed) and frees its leases.
        stale = (
            f"SELECT count(*) FROM experiments_run WHERE matrix_id = {matrix} "
            "AND heartbeat_at < now() - interval '3 seconds'"
        )
        assert wait_for(lambda: stack.sql(stale)[0][0] == 1, 60, 0.2)
        swept = stack.call("janitor", 2, env={"BEEWEB_RUN_MAX_ATTEMPTS": "1"})
        assert swept == {"requeued": 0, "failed": 1, "cancelled": 0, "redispatched": 0}
        (run,) = runs(stack, matrix)
        assert run["status"] == "failed", run
        assert "node1@node1 stopped sending heartbeats during attempt 1" in run["error"]
        assert "gave up after 1 attempts" in run["error"]
        assert (
            stack.sql(f"SELECT count(*) FROM experiments_nodelease WHERE run_id = {run['pk']}")[0][
                0
            ]
            == 0
        )

        # Nothing of the matrix is queued or running: each server's agent restores.
        restored = (
            "SELECT count(*) FROM experiments_beegfsconfigchange WHERE restored_at IS NOT NULL"
        )
        assert wait_for(lambda: stack.sql(restored)[0][0] == 2, 240, 0.5), (
            stack.sql(CHANGES),
            logs(),
        )
        for name, path in confs.items():
            assert path.read_bytes() == originals[name], name
            assert not path.with_name(path.name + ".beeweb-original").exists(), name
        changes = stack.sql(CHANGES)
        assert [row[:5] for row in changes] == [
            ("node2", matrix, run["pk"], "workers2", {"tuneNumWorkers": "2"}),
            ("node3", matrix, run["pk"], "workers2", {"tuneNumWorkers": "2"}),
        ]
        for row in changes:
            assert row[6].startswith("restored: original file back, restarted in "), row
        assert lab.wait_online(4) == {1: "Online", 2: "Online", 3: "Online", 4: "Online"}
        # The node agents' state files are gone: a worker restart finds nothing to restore.
        assert not list((tmp_path / "data" / "beegfs-config").glob("*.json"))
    finally:
        gate.touch()
        stack.close()
