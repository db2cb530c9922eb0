"""BeeGFS server statistics in a run's telemetry, on the network-namespace cluster with real
BeeGFS 7.4.7 daemons (``beegfs_cluster``, tests/labs/beegfs.py): node1 runs the management
and metadata daemons, node2 and node3 a storage daemon each (BeeGFS node names = hostnames),
every node its own Celery worker and node agent.

A fio run launched from node1 on a testbed whose storage servers are node2 and node3 holds
both; their agents sample them while the tool runs and each finds its own storage daemon in
``--listnodes`` (its hostname), reads the worker count in force with ``getcfg`` and runs one
``beegfs-ctl --serverstats`` for the run (runners.beegfs_stats). Their telemetry rows carry the
``beegfs_*:storage`` series, one value per sample, and the run page draws the panels. Zeros
are legitimate values (no client can mount BeeGFS here: fio writes to the nodes' own disks),
so nothing here asserts a rate; nor a duration (issue 24).
"""

from __future__ import annotations

import json
import os
import shutil
import zlib

import pytest

from tests.labs import Stack, finished, launch, run_page, wait_for, wait_for_workers

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("fio") is None, reason="fio is not installed"),
    pytest.mark.skipif(
        not os.environ.get("DATABASE_URL", "").startswith("postgres"),
        reason="the namespaces reach the database over the network: PostgreSQL only",
    ),
]

FIO = """\
name: beegfs telemetry
tool: fio
testbeds: [tb]
repetitions: 1
drop_caches: false
timeout_s: 120
params: {rw: write, size: 4m, bs: 1m, runtime: 4, time_based: true}
"""

ROWS = """
SELECT t.hostname, t.samples, t.meta, r.uuid::text, r.nodes_held, t.data
FROM experiments_runtelemetry t JOIN experiments_run r ON r.id = t.run_id ORDER BY 1
"""
SERIES = ("write_bw", "read_bw", "reqs", "queue", "busy_workers")


def test_the_storage_servers_a_run_holds_carry_their_daemons_statistics(
    beegfs_cluster, netns_lab, tmp_path
):
    from tests.labs import beegfs

    stack = Stack(tmp_path)
    try:
        bench = tmp_path / "bench"
        bench.mkdir()
        nodes = {n.hostname: {"owner": "alice", "address": n.address} for n in netns_lab.nodes}
        roles = {"node1": ["client"], "node2": ["storage"], "node3": ["storage"]}
        testbed = {"name": "tb", "owner": "alice", "benchmark_dir": str(bench), "members": roles}
        stack.call("inventory", {"users": {"alice": "x"}, "nodes": nodes, "testbeds": [testbed]})
        ctl = beegfs.node_env(beegfs_cluster)  # beegfs-ctl against the lab, on every node
        stack.node_workers(
            netns_lab,
            {"BEEWEB_NODE_DIRS": str(bench)},
            per_node={name: ctl for name in ("node1", "node2", "node3")},
        )
        wait_for_workers(stack, "node1@node1", "node2@node2", "node3@node3", agents=True)

        launch(stack, ("alice", FIO))
        assert wait_for(lambda: finished(stack), 120, 0.2)
        status = stack.sql("SELECT status, error FROM experiments_run")
        assert status == [("succeeded", "")], status
        assert wait_for(lambda: len(stack.sql(ROWS)) == 3, 60, 0.2), stack.sql(ROWS)
        rows = {r[0]: r for r in stack.sql(ROWS)}
        assert rows["node1"][4] == ["node1", "node2", "node3"]  # the run held both servers
        for name in ("node2", "node3"):
            _, samples, meta, *_, data = rows[name]
            series = json.loads(zlib.decompress(bytes(data)))["series"]
            for key in SERIES:
                values = series[f"beegfs_{key}:storage"]
                assert len(values) == samples, (name, key, values)
            assert not any(k.endswith(":meta") for k in series if k.startswith("beegfs_"))
            daemon = meta["beegfs"]["storage"]
            assert daemon["node_name"] == name
            assert daemon["workers"] == 16, daemon  # 7.4.7's 8 per target, two targets
            assert "beegfs" not in meta["unavailable"], meta["unavailable"]
        # The launcher's sampler (the executor's, a client's) does not look for daemons.
        node1 = json.loads(zlib.decompress(bytes(rows["node1"][5])))["series"]
        assert not any(k.startswith("beegfs_") for k in node1)

        code, page = run_page(stack, "alice", rows["node1"][3])
        assert code == 200
        for name in ("node2", "node3"):
            assert f"BeeGFS storage workers on {name}" in page
            assert f"BeeGFS storage requests on {name}" in page
        assert "workers (16)" in page
        cost = ", ".join(
            f"{n} sampler {r[2]['sampler_cpu_s'] / r[1] * 1000:.2f} ms/s"
            + (
                f" + beegfs-ctl {r[2]['beegfs']['storage'].get('ctl_cpu_s', 0) / r[1] * 1000:.1f}"
                " ms/s"
                if "beegfs" in r[2]
                else ""
            )
            for n, r in sorted(rows.items())
        )
        print(f"\nCPU per second of sampling: {cost}")
    finally:
        stack.close()
