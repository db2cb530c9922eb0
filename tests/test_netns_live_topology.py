"""A testbed imported from its running BeeGFS, and a launch that notices the cluster changed,
on the network-namespace cluster (tests/labs/beegfs.py ``beegfs_cluster``): node1 runs the
management daemon and the metadata server, node2 and node3 a storage server each with two
targets (btrfs RAID0 and RAID10 over loop files); each node has its own beeweb worker.

alice's testbed starts empty. On its "Import from the live cluster" page she chooses node1, whose
worker (its node agent: the solo worker could be busy) runs beegfs-ctl against the management
daemon and answers; the preview shows what saving would do; Save stores nodes node1, node2,
node3 with their roles, the metadata target and four storage targets, and remembers node1 as the
testbed's live node. Then node3's storage daemon dies: its targets go offline at the management
daemon, and the next launch stops at a page that names them, with "Launch anyway".
"""

from __future__ import annotations

import os
import re
import subprocess
import time

import pytest

from tests.labs import Stack, wait_for, wait_for_workers
from tests.labs.beegfs import node_env

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not os.environ.get("DATABASE_URL", "").startswith("postgres"),
        reason="the namespaces reach the database over the network: PostgreSQL only",
    ),
]

DD = """\
name: live check
tool: dd
testbeds: [tb]
repetitions: 1
drop_caches: false
timeout_s: 60
params: {{bs: 64k, count: 4}}
"""

TARGETS = """
SELECT t.kind, t.target_id, n.hostname, t.capacity_gb FROM experiments_target t
JOIN experiments_node n ON n.id = t.node_id ORDER BY t.kind, t.target_id
"""
ROLES = """
SELECT n.hostname, m.management, m.metadata, m.storage FROM experiments_testbednode m
JOIN experiments_node n ON n.id = m.node_id ORDER BY 1
"""


def faster_offline(lab, netns: str) -> None:
    """Every daemon's target-offline timeout at its minimum (30 s: the management daemon
    takes a target for Probably-offline after half of it) instead of 180 s, so a dead server
    shows within the test's patience. BeeGFS wants one value on all its servers (they report
    their targets' states every sixth of it): each daemon is restarted in its namespace with
    it, then every target is Online again."""
    for name in ("mgmtd", "meta-node1", "storage-node2", "storage-node3"):
        conf = lab.conf(name)
        conf.write_text(conf.read_text() + "sysTargetOfflineTimeoutSecs = 30\n")
        subprocess.run(lab.restart_argv(name), check=True, capture_output=True, timeout=60)
    lab.wait_online(4, netns=netns)
    assert wait_for(
        lambda: "Online" in lab.ctl("--listtargets", "--nodetype=meta", "--state", netns=netns),
        90,
        0.5,
    )


def test_import_from_the_live_cluster_then_a_dead_server_stops_the_launch(
    beegfs_cluster, netns_lab, tmp_path
):
    lab = beegfs_cluster
    node1 = netns_lab.node(1)
    faster_offline(lab, node1.netns)
    began = time.monotonic()
    stack = Stack(tmp_path)
    try:
        bench = tmp_path / "bench"
        bench.mkdir()
        nodes = {n.hostname: {"owner": "alice", "address": n.address} for n in netns_lab.nodes}
        testbed = {"name": "tb", "owner": "alice", "benchmark_dir": str(bench), "members": {}}
        stack.call("inventory", {"users": {"alice": "x"}, "nodes": nodes, "testbeds": [testbed]})
        # node1's worker reaches the management daemon from inside its namespace.
        stack.node_workers(
            netns_lab, {"BEEWEB_NODE_DIRS": str(bench)}, per_node={"node1": node_env(lab)}
        )
        wait_for_workers(stack, "node1@node1", "node2@node2", "node3@node3", agents=True)
        (tb_uuid,) = stack.sql("SELECT uuid::text FROM experiments_testbed WHERE name = 'tb'")[0]
        node1_uuid = stack.sql("SELECT uuid::text FROM experiments_node WHERE hostname = 'node1'")
        live = f"/testbeds/{tb_uuid}/topology/live/"

        # The page offers node1; "Read the live cluster" shows the preview.
        code, page = stack.call("page", "alice", live)
        assert code == 200 and "Read the live cluster" in page and ">node1</option>" in page
        code, page, _ = stack.call(
            "post", "alice", live, {"action": "preview", "node": node1_uuid[0][0]}
        )
        assert code == 200, page[-2000:]
        assert 'id="topology-changes"' in page and "Nothing is saved yet" in page, page[-3000:]
        assert stack.sql(TARGETS) == []
        answer = re.search(r'name="answer" value="([0-9a-f-]{36})"', page).group(1)
        code, _, location = stack.call(
            "post", "alice", live, {"action": "save", "node": node1_uuid[0][0], "answer": answer}
        )
        assert code == 302 and location.endswith(f"/testbeds/{tb_uuid}/")

        # What the daemons have: node1 management + metadata, node2 and node3 storage, the
        # metadata target on node1, two storage targets on each storage server.
        assert stack.sql(ROLES) == [
            ("node1", True, True, False),
            ("node2", False, False, True),
            ("node3", False, False, True),
        ]
        targets = stack.sql(TARGETS)
        assert [(k, h) for k, _, h, _ in targets] == [
            ("metadata", "node1"),
            ("storage", "node2"),
            ("storage", "node2"),
            ("storage", "node3"),
            ("storage", "node3"),
        ]
        # Capacities from --spaceinfo: the sizes of the btrfs volumes the targets lie on, as
        # their file systems say (BeeGFS prints one decimal of MiB or GiB: within 0.06 GB).
        for volume, host in (("raid0", "node2"), ("raid10", "node3")):
            fs = os.statvfs(lab.base / volume)
            size_gb = fs.f_blocks * fs.f_frsize / 1e9
            for _, _, hostname, capacity in targets:
                if hostname == host:
                    assert abs(capacity - size_gb) <= 0.06, (volume, size_gb, targets)
        (live_node, trip, worker) = stack.sql(
            "SELECT n.hostname, extract(epoch FROM r.answered_at - r.created_at), r.taken_by "
            "FROM experiments_testbed t JOIN experiments_node n ON n.id = t.live_node_id, "
            "experiments_noderequest r WHERE r.uuid::text = '" + answer + "'"
        )[0]
        assert live_node == "node1" and worker == "node1@node1"
        node3_targets = sorted(t for k, t, h, _ in targets if h == "node3")
        imported = time.monotonic() - began

        # As stored: the launch goes ahead without a question (and its run is left queued
        # or run; this test is about the question).
        matrix = stack.call("matrix", "alice", DD.format())
        launch = f"/matrices/{matrix}/launch/"
        code, page, location = stack.call("post", "alice", launch, {})
        assert code == 302 and location.endswith(f"/matrices/{matrix}/"), page[-2000:]

        # node3's storage daemon dies. At once, beegfs-ctl cannot reach it (the management
        # daemon still says Online): the launch asks, naming the silent server's targets.
        killed = time.monotonic()
        lab.kill("storage-node3")
        code, page, _ = stack.call("post", "alice", launch, {})
        assert code == 200 and 'id="launch-anyway"' in page, page[-2000:]
        for target in node3_targets:
            assert f"storage target {target} on node3 does not answer (Communication error; " in (
                page
            ), page[-3000:]
        # Then the management daemon notices (Probably-offline after half its timeout).
        assert wait_for(
            lambda: all(lab.targets(netns=node1.netns).get(t) != "Online" for t in node3_targets),
            180,
            1.0,
        ), lab.targets(netns=node1.netns)
        noticed = time.monotonic() - killed
        code, page, _ = stack.call("post", "alice", launch, {})
        assert code == 200, page[-2000:]
        for target in node3_targets:
            assert re.search(
                rf"storage target {target} on node3 (is|does not answer \(.*?says) "
                "(probably-)?offline",
                page,
            ), page[-3000:]
        assert 'id="launch-anyway"' in page and "Launch anyway" in page
        runs = stack.sql("SELECT count(*) FROM experiments_run")[0][0]
        # Launch anyway: the matrix records it.
        code, _, _ = stack.call("post", "alice", launch, {"anyway": "1"})
        assert code == 302
        (overrides,) = stack.sql(
            f"SELECT topology_overrides FROM experiments_matrix WHERE uuid::text = '{matrix}'"
        )[0]
        assert overrides[0]["by"] == "alice"
        assert any("node3" in d for d in overrides[0]["testbeds"][0]["differences"])
        assert stack.sql("SELECT count(*) FROM experiments_run")[0][0] >= runs
        print(
            f"\nlive import via node1's agent: round trip {float(trip) * 1000:.0f} ms; "
            f"cluster and import {imported:.1f} s; the management daemon saw node3 die "
            f"after {noticed:.1f} s (sysTargetOfflineTimeoutSecs = 30 on every daemon)"
        )
    finally:
        stack.close()
