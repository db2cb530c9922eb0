"""StorageBench RAID0 vs RAID10 on a real BeeGFS across network-namespace nodes (issue 26,
"done when"): node1 runs the management daemon and metadata server, node2 a storage server
whose two targets sit on btrfs RAID0 over two loop files, node3 one whose two targets sit on
btrfs RAID10 over four (tests/labs/beegfs.py ``cluster_lab``). Each node has its own worker,
whose BEEWEB_BEEGFS_CTL is beegfs-ctl against the lab's management daemon.

A matrix sweeps direction (write, read) over the four targets (the ``target`` axis: a run per
target, launched on that target's server, benchmarking its BeeGFS id only; a read writes its
data first, unmeasured). Every run succeeds with its target's own result; the testbed's limits
then carry the measured ceilings; and "RAID0 vs RAID10, StorageBench per target" is drawn like
for like (seed 002's methodology, one device at a time, at small scale) with its sentence.

Last, a storage daemon killed mid-run (node3's, while the run's beegfs-ctl waits on it) fails
that run with BeeGFS's words in its error.

No figure is asserted: which RAID level is faster on loop files in one page cache is this
machine's business (the test prints what it saw).
"""

from __future__ import annotations

import json
import os
import signal

import pytest

from tests.labs import Stack, finished, launch, run_page, runs, wait_for, wait_for_workers
from tests.labs.beegfs import node_env

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not os.environ.get("DATABASE_URL", "").startswith("postgres"),
        reason="the namespaces reach the database over the network: PostgreSQL only",
    ),
]

MATRIX = """\
name: raid
tool: storagebench
testbeds: [tb]
repetitions: 1
drop_caches: true
timeout_s: 300
params: {blocksize: 1m, size: 32m, threads: 2, interval: 1}
axes:
  direction: [write, read]
  target: [node2-t1, node2-t2, node3-t1, node3-t2]
"""

# A write on node3's first target, whose storage daemon is killed under it.
KILLED = """\
name: killed
tool: storagebench
testbeds: [tb]
repetitions: 1
timeout_s: 300
params: {blocksize: 1m, size: 16m, threads: 1, interval: 1}
axes:
  target: [node3-t1]
"""

# As the compare page's preset for seed 002 ("RAID0 vs RAID10: StorageBench per device"), with
# each RAID level's two targets pooled: a run per target, the targets of one level told apart
# by the run's target only, which the query ignores (and the sentence says so).
QUERY = "metric={metric}&x=tool&series=raid&tool=storagebench&baseline=10&ignore=target"
COMPARE = f"""
import json
from experiments.comparison import ComparisonSpec, compute
out = {{}}
for metric in ("write_bw", "read_bw"):
    result = compute(ComparisonSpec.from_query({QUERY!r}.format(metric=metric)))
    out[metric] = {{
        "errors": result.errors,
        "sentences": [c.sentence for c in result.comparisons],
        "claimed": [c.claimed for c in result.comparisons],
        "points": [[p.series, p.n, p.mean] for p in result.points],
    }}
print(json.dumps(out))
"""

LIMITS = """
import json
from experiments.inventory.limits import compute_limits
from experiments.models import Testbed
limits = compute_limits(Testbed.objects.get(name="tb"))
print(json.dumps([[l.name, l.read, l.write, l.detail] for l in limits.limits]))
"""


def live_targets(lab) -> dict[int, str]:
    """BeeGFS target id -> the storage server (node name) holding it, from the live cluster."""
    out = {}
    for line in lab.ctl("--listtargets", "--longnodes").splitlines():
        fields = line.split()
        if fields and fields[0].isdigit():
            out[int(fields[0])] = line.split("beegfs-storage", 1)[1].split()[0]
    return out


def test_storagebench_raid0_vs_raid10_per_target(beegfs_cluster, netns_lab, tmp_path):
    lab = beegfs_cluster
    stack = Stack(tmp_path)
    try:
        bench = tmp_path / "bench"
        bench.mkdir()
        hosts = [n.hostname for n in netns_lab.nodes]
        assert hosts == ["node1", "node2", "node3"]
        ids = live_targets(lab)
        by_server = {h: sorted(t for t, s in ids.items() if s == h) for h in ("node2", "node3")}
        assert [len(v) for v in by_server.values()] == [2, 2], ids
        nodes = {n.hostname: {"owner": "alice", "address": n.address} for n in netns_lab.nodes}
        roles = {"node1": ["management", "metadata"], "node2": ["storage"], "node3": ["storage"]}
        targets = [
            {"node": server, "name": f"{server}-t{i}", "path": ""}
            for server in ("node2", "node3")
            for i in (1, 2)
        ]
        testbed = {
            "name": "tb",
            "owner": "alice",
            "benchmark_dir": str(bench),
            "members": roles,
            "targets": targets,
        }
        stack.call("inventory", {"users": {"alice": "x"}, "nodes": nodes, "testbeds": [testbed]})
        # The targets' BeeGFS ids as the live management daemon numbers them, and their RAID
        # level as built: node2's btrfs RAID0 over 2 devices, node3's RAID10 over 4.
        layout = {
            f"{server}-t{i}": [tid, raid, disks]
            for server, raid, disks in (("node2", "0", 2), ("node3", "10", 4))
            for i, tid in enumerate(by_server[server], start=1)
        }
        stack.shell(
            "from experiments.models import Target\n"
            f"for name, (tid, raid, disks) in {layout!r}.items():\n"
            "    Target.objects.filter(name=name).update(\n"
            "        target_id=tid, raid_level=raid, disks=disks, filesystem='btrfs')\n"
        )
        env = {"BEEWEB_NODE_DIRS": str(bench)}
        stack.node_workers(netns_lab, env, per_node={h: node_env(lab) for h in hosts})
        wait_for_workers(stack, "node1@node1", "node2@node2", "node3@node3", agents=True)

        (matrix,) = launch(stack, ("alice", MATRIX))
        assert wait_for(lambda: finished(stack, matrix), 600, 0.5)
        done = runs(stack, matrix)
        assert len(done) == 8
        errors = [(r["target"], r["params"].get("direction"), r["error"]) for r in done]
        assert all(r["status"] == "succeeded" for r in done), errors
        figures = {}
        for run in done:
            name, op = run["target"], run["params"]["direction"]
            tid = layout[name][0]
            server = name.split("-")[0]
            assert f"--targetids={tid}" in run["argv"] and run["queue"] == f"node.{server}"
            assert sorted(run["nodes_held"]) == ["node1", "node2", "node3"]
            rows = stack.call("metrics", run["pk"])
            lines = [m for m in rows if m["name"] == f"{op}_bw" and "target" in m["extra"]]
            assert [(m["extra"]["target"], m["extra"]["node"]) for m in lines] == [(tid, server)]
            assert run["metrics"][f"{op}_bw"] > 0
            figures[(name, op)] = run["metrics"][f"{op}_bw"]
            if op == "read":
                (step,) = run["effective_config"]["prepare"]
                assert step["exit_code"] == 0 and "--keep" in step["argv"]
                assert sorted(run["effective_config"]["drop_caches"]) == hosts
        # Per-target values on the run page (the metrics table names the target).
        code, page = run_page(stack, "alice", done[0]["uuid"])
        first = done[0]["target"]
        assert code == 200 and f"target: {layout[first][0]}" in page
        assert f"node: {first.split('-')[0]}" in page

        # Nothing left on the targets: every run cleaned up.
        assert not list(lab.base.glob("raid*/t*/benchmark/*"))

        compared = json.loads(stack.shell(COMPARE))
        for metric in ("write_bw", "read_bw"):
            got = compared[metric]
            assert got["errors"] == [], got
            assert sorted((s, n) for s, n, _ in got["points"]) == [("RAID0", 2), ("RAID10", 2)]
            (sentence,) = got["sentences"]
            assert got["claimed"] == [True], sentence  # like for like: nothing confounds
            assert sentence.startswith("RAID0 "), sentence
            assert "than RAID10 with storagebench" in sentence or "as RAID10" in sentence
            assert sentence.endswith(
                "n = 2 each; ignoring target node2-t1 | node2-t2 vs node3-t1 | node3-t2)"
            ), sentence

        limits = {n: (r, w, d) for n, r, w, d in json.loads(stack.shell(LIMITS))}
        measured = limits["storage targets (StorageBench)"]
        assert measured[0] and measured[1] and "measured by StorageBench run" in measured[2]

        # A storage daemon killed mid-run fails that run, in BeeGFS's words. Stopped first
        # (SIGSTOP), so that the run's beegfs-ctl waits on it whatever this machine's speed:
        # on these 300 MB volumes a write would otherwise end (or fill the disk) first.
        lab.kill("storage-node3", signal.SIGSTOP)
        try:
            (killed,) = launch(stack, ("alice", KILLED))
            assert wait_for(lambda: runs(stack, killed)[0]["status"] == "running", 120, 0.2)
        finally:
            lab.kill("storage-node3")
        assert wait_for(lambda: finished(stack, killed), 180, 0.5)
        (failed,) = runs(stack, killed)
        assert failed["status"] == "failed" and failed["exit_code"] == 1, failed["error"]
        assert "exited with 1: beegfs-ctl --storagebench start failed" in failed["error"]
        assert "node3" in failed["error"], failed["error"]
        print(f"\nthe run whose storage daemon was killed: {failed['error']}")

        per = ", ".join(
            f"{name} ({'RAID' + layout[name][1]}) {op} {value / 2**20:.0f} MiB/s"
            for (name, op), value in sorted(figures.items())
        )
        print(f"\nStorageBench per target, 2 threads x 32 MiB, 1 MiB blocks: {per}")
        for metric in ("write_bw", "read_bw"):
            print(f"{metric}: {compared[metric]['sentences'][0]}")
    finally:
        stack.close()
