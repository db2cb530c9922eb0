"""Issue 26's done-when for tuning applied to the servers, on the network-namespace lab with a
real BeeGFS 7.4.7 (tests/labs/beegfs.py ``beegfs_cluster``): node1 runs the management and
metadata daemons and is the client, node2 and node3 each a storage daemon whose operator lets
beeweb change its config (BEEWEB_NODE_BEEGFS=true, the lab's config file and restart command).

A matrix sweeps two tuning sets, ``storage.tuneNumWorkers`` 16 and 2, two runs each: a short
StorageBench write over all four targets, so what is measured is the servers the tuning
changed. Every run records, per storage server, the value before, asked and in force as the
daemon reports it (getcfg), the first run of each set after a restart, the second without
one; the comparison of the two sets shows the tuning key as their one configuration
difference; when the matrix has ended, both servers' config files are byte for byte what
they were, each change recorded with its restore on the matrix page.
"""

from __future__ import annotations

import json
import time

import pytest

from tests.labs import Stack, finished, launch, runs, wait_for, wait_for_workers
from tests.labs.beegfs import BeegfsLab, node_env

pytestmark = [pytest.mark.slow]

MATRIX = """\
name: workers
tool: storagebench
testbeds: [tb]
tuning_sets: [workers16, workers2]
apply_tuning: true
repetitions: 2
order: cells
drop_caches: false
timeout_s: 300
params: {direction: write, blocksize: 1m, size: 8m, threads: 2, interval: 1}
"""

TUNING = """
from django.contrib.auth import get_user_model
from experiments.models import TuningSet
alice = get_user_model().objects.get(username="alice")
for name, value in (("workers16", "16"), ("workers2", "2")):
    t = TuningSet.objects.create(owner=alice, name=name)
    t.replace_params([("storage", "tuneNumWorkers", value)])
print("ok")
"""

DIFFERENCES = """
from experiments.comparison.computation import compute
from experiments.comparison.spec import ComparisonSpec
import json
spec = ComparisonSpec.from_query("metric=write_bw&x=tool&series=tuning&tool=storagebench")
result = compute(spec)
print(json.dumps([[d.series, d.baseline, d.rows] for d in result.differences]))
"""


def test_a_matrix_of_two_tuning_sets_runs_each_with_its_values_in_force(
    beegfs_cluster, netns_lab, tmp_path
):
    lab: BeegfsLab = beegfs_cluster
    began = time.monotonic()
    confs = {name: lab.conf(f"storage-{name}") for name in ("node2", "node3")}
    originals = {name: path.read_bytes() for name, path in confs.items()}
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
            name: node_env(lab, "storage", f"storage-{name}", allow=True)
            for name in ("node2", "node3")
        }
        per_node["node1"] = node_env(lab)
        stack.node_workers(netns_lab, {"BEEWEB_NODE_DIRS": str(bench)}, per_node=per_node)
        wait_for_workers(stack, "node1@node1", "node2@node2", "node3@node3", agents=True)

        (matrix,) = launch(stack, ("alice", MATRIX))
        assert wait_for(lambda: finished(stack, matrix), 240, 0.5), (
            [(r["status"], r["error"], r["waiting_for"]) for r in runs(stack, matrix)],
            stack.sql(
                "SELECT hostname, run_id, beegfs_request, beegfs_result FROM experiments_nodelease"
            ),
            {n: stack.worker_log(f"{n}@{n}")[-3000:] for n in ("node1", "node2", "node3")},
        )
        done = runs(stack, matrix)
        assert [r["status"] for r in done] == ["succeeded"] * 4, [r["error"] for r in done]

        sets = [r["effective_config"]["beegfs"] for r in done]
        asked = ["16", "16", "2", "2"]
        restarts = []
        for run, servers, value in zip(done, sets, asked, strict=True):
            assert run["nodes_held"] == ["node1", "node2", "node3"]
            assert sorted(servers) == ["node2", "node3"], servers  # node1: nothing asked
            for name in ("node2", "node3"):
                answer = servers[name]
                assert answer["outcome"] == "in force", answer
                record = answer["services"]["storage"]
                assert record["conf"] == str(confs[name])
                assert record["keys"] == [
                    {"key": "tuneNumWorkers", "before": None, "asked": value, "in_force": value}
                ]
                restarts.append(record["restarted"])
        # The first run of each set restarted both servers; the second found them as asked.
        assert restarts == [True, True, False, False, True, True, False, False]

        # The comparison of the two sets: the tuning key is their one configuration difference.
        diffs = stack.shell(DIFFERENCES)
        ((series, baseline, rows),) = json.loads(diffs)
        assert {series, baseline} == {"workers16", "workers2"}
        assert [row[:2] for row in rows] == [
            ["tuning", "tuning set"],
            ["tuning", "storage.tuneNumWorkers"],
        ]
        values = {row[1]: {row[2], row[3]} for row in rows}
        assert values["storage.tuneNumWorkers"] == {"16", "2"}

        # The matrix ended: each server's agent puts its original file back (within its
        # restore check, RESTORE_CHECK_SECONDS, plus a restart and the wait until Online).
        restored = (
            "SELECT count(*) FROM experiments_beegfsconfigchange WHERE restored_at IS NOT NULL"
        )
        assert wait_for(lambda: stack.sql(restored)[0][0] == 4, 120, 0.5), stack.sql(
            "SELECT hostname, restore_outcome FROM experiments_beegfsconfigchange"
        )
        for name, path in confs.items():
            assert path.read_bytes() == originals[name], name
            assert not path.with_name(path.name + ".beeweb-original").exists()
        changes = stack.sql(
            "SELECT hostname, tuning_set, before, after, restart_s, online_s, restore_outcome "
            "FROM experiments_beegfsconfigchange ORDER BY hostname, applied_at"
        )
        assert [(c[0], c[1], c[3]) for c in changes] == [
            ("node2", "workers16", {"tuneNumWorkers": "16"}),
            ("node2", "workers2", {"tuneNumWorkers": "2"}),
            ("node3", "workers16", {"tuneNumWorkers": "16"}),
            ("node3", "workers2", {"tuneNumWorkers": "2"}),
        ]
        outcomes = [c[6] for c in changes]
        assert outcomes[0] == outcomes[2] == "replaced by the next tuning set's values"
        assert outcomes[1].startswith("restored: original file back, restarted in ")
        assert outcomes[3].startswith("restored: original file back, restarted in ")
        assert lab.targets() == {1: "Online", 2: "Online", 3: "Online", 4: "Online"}

        # Each run's page says what its servers had in force.
        code, page = stack.call("page", "alice", f"/runs/{done[2]['uuid']}/")
        assert code == 200
        assert "node2: in force; storage.tuneNumWorkers default → 2, in force 2" in page
        code, page = stack.call("page", "alice", f"/runs/{done[3]['uuid']}/")
        assert "storage already as asked: not restarted" in page

        # The matrix page lists the changes and their restores.
        uuid = stack.sql(f"SELECT uuid FROM experiments_matrix WHERE id = {matrix}")[0][0]
        code, page = stack.call("page", "alice", f"/matrices/{uuid}/")
        assert code == 200
        assert 'id="beegfs-changes"' in page and page.count("original file back") == 2

        costs = [
            (r["restart_s"], r["online_s"])
            for run in sets
            for a in run.values()
            for r in a["services"].values()
            if r["restarted"]
        ]
        print(
            "\ntuning change cost (restart s, until Online s) per server: "
            + ", ".join(f"{a:.2f}+{b:.2f}" for a, b in costs)
            + f"; {time.monotonic() - began:.1f} s in all"
        )
    finally:
        stack.close()
