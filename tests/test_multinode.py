"""Several nodes for real: three network namespaces behind a bridge (tests/labs/netns.py), each
with its own Celery worker on its own queue (``node.<hostname>``) and its own hostname,
reaching the database and the broker over the network. A matrix sweeping one target per node
runs each run on its node's worker; qperf between two nodes gives the network baseline."""

from __future__ import annotations

import math
import shutil

import pytest

from tests.labs import Stack, metrics, runs, wait_for, wait_for_workers

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("qperf") is None, reason="qperf is not installed"),
]

DD_PER_NODE = """\
name: dd on every node
tool: dd
testbeds: [lab]
repetitions: 1
drop_caches: false
timeout_s: 120
params: {bs: 1m, count: 8, fdatasync: true}
axes:
  target: [t1, t2, t3]
"""

FIO_MULTIHOST = """\
name: fio on two clients
tool: fio
testbeds: [clients]
launch_mode: multihost
repetitions: 1
drop_caches: false
timeout_s: 120
params: {rw: write, size: 4m, bs: 1m, numjobs: 2}
"""

QPERF = """\
name: network baseline
tool: qperf
testbeds: [net]
repetitions: 1
drop_caches: false
timeout_s: 120
params: {{server: "{server}", tests: [tcp_bw, tcp_lat], time: 2}}
"""


def inventory(bench: str, nodes: list) -> dict:
    """The administrator's testbeds on the lab's nodes: "lab", every node a client and
    storage server with a target t<i> of its own; "net", for qperf, node1 the client (the
    launcher) and node2 the server; "clients", for fio's own multi-host mode, node2 and node3
    as clients running `fio --server`."""
    names = [node.hostname for node in nodes]
    return {
        "nodes": {node.hostname: {"owner": "admin", "address": node.address} for node in nodes},
        "testbeds": [
            {
                "name": "lab",
                "owner": "admin",
                "benchmark_dir": bench,
                "members": dict.fromkeys(names, ["storage", "client"]),
                "targets": [
                    {"node": name, "name": f"t{i}", "path": f"{bench}/{name}"}
                    for i, name in enumerate(names, 1)
                ],
            },
            {
                "name": "net",
                "owner": "admin",
                "benchmark_dir": bench,
                "members": {names[0]: ["client"], names[1]: ["storage"]},
            },
            {
                "name": "clients",
                "owner": "admin",
                "benchmark_dir": bench,
                "members": {"node2": ["client"], "node3": ["client"]},
            },
        ],
    }


@pytest.fixture
def cluster(netns_lab, tmp_path):
    stack = Stack(tmp_path)
    try:
        bench = tmp_path / "bench"
        for node in netns_lab.nodes:
            (bench / node.hostname).mkdir(parents=True)
        stack.call("inventory", inventory(str(bench), netns_lab.nodes))
        # The shared benchmark area is outside the data directory: each node's operator
        # allows it.
        stack.node_workers(netns_lab, {"BEEWEB_NODE_DIRS": str(bench)})
        wait_for_workers(stack, "node1@node1", "node2@node2", "node3@node3")
        yield stack, netns_lab, tmp_path
    finally:
        stack.close()


def test_one_run_per_node_on_that_nodes_worker(cluster):
    stack, lab, tmp = cluster
    (tmp / "dd.yaml").write_text(DD_PER_NODE)
    result = stack.manage(
        "launch_matrix",
        str(tmp / "dd.yaml"),
        "--wait",
        "--timeout",
        "180",
        check=False,
        timeout=240,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    rows = sorted(
        [r["target"], r["queue"], r["worker"], r["effective_config"]["hostname"]]
        + [r["metrics"]["write_bw"]]
        for r in runs(stack)
    )
    assert [r[:4] for r in rows] == [
        ["t1", "node.node1", "node1@node1", "node1"],
        ["t2", "node.node2", "node2@node2", "node2"],
        ["t3", "node.node3", "node3@node3", "node3"],
    ]
    assert all(r[4] > 0 for r in rows)
    for node in ("node1", "node2", "node3"):
        assert (tmp / "bench" / node).is_dir()


def test_qperf_between_two_nodes_is_the_network_baseline(cluster):
    stack, lab, tmp = cluster
    server = lab.popen(lab.nodes[1], ["qperf"])  # the qperf daemon on node2
    try:
        (tmp / "qperf.yaml").write_text(QPERF.format(server=lab.nodes[1].address))
        result = stack.manage(
            "launch_matrix",
            str(tmp / "qperf.yaml"),
            "--wait",
            "--timeout",
            "120",
            check=False,
            timeout=180,
        )
        assert result.returncode == 0, result.stdout + result.stderr
        (run,) = runs(stack)
    finally:
        lab.kill(server)
    worker, argv, primary = run["worker"], run["argv"], run["metrics"]
    assert worker == "node1@node1"
    assert argv[:2] == ["qperf", lab.nodes[1].address]
    # What the link measured is the machine's business (issue 24): a bandwidth and a latency,
    # one value each in base units, measured (above zero), stored as the run's primary metrics.
    rows = {m["name"]: m for m in metrics(stack, run["pk"])}
    assert {name: (m["unit"], m["stat"], m["primary"]) for name, m in rows.items()} == {
        "tcp_bw": ("B/s", "value", True),
        "tcp_lat": ("s", "value", True),
    }, rows
    assert set(primary) == {"tcp_bw", "tcp_lat"}, primary
    assert all(0 < primary[name] < math.inf for name in primary), primary
    assert "tcp_bw:" in run["raw_output"] and "tcp_lat:" in run["raw_output"]


def test_fio_multihost_mode_drives_two_client_nodes(cluster):
    stack, lab, tmp = cluster
    servers = [lab.popen(node, ["fio", "--server"]) for node in lab.nodes[1:]]
    try:
        assert wait_for(lambda: all(_listening(lab, n.address, 8765) for n in lab.nodes[1:]), 30), (
            "fio --server did not start"
        )
        (tmp / "fio.yaml").write_text(FIO_MULTIHOST)
        result = stack.manage(
            "launch_matrix",
            str(tmp / "fio.yaml"),
            "--wait",
            "--timeout",
            "120",
            check=False,
            timeout=180,
        )
        assert result.returncode == 0, result.stdout + result.stderr
        (run,) = runs(stack)
        worker, argv, params, bw = (
            run["worker"],
            run["argv"],
            run["params"],
            run["metrics"]["write_bw"],
        )
        p99 = [
            m["value"]
            for m in metrics(stack, run["pk"])
            if (m["name"], m["stat"], m["iteration"]) == ("write_lat", "p99", None)
            and "job" not in m["extra"]
        ]
    finally:
        for server in servers:
            lab.kill(server)
    assert worker == "node2@node2"  # the first client launches
    assert [a for a in argv if a.startswith("--client=")] == [
        f"--client={lab.nodes[1].address}",
        f"--client={lab.nodes[2].address}",
    ]
    assert (params["nodes"], params["threads"]) == (2, 4)
    assert bw > 0
    # Two clients' reports pool their latency percentiles through json+'s histograms.
    assert argv[1] == "--output-format=json+"
    assert len(p99) == 1 and p99[0] > 0, p99


def _listening(lab, address: str, port: int) -> bool:
    try:
        lab.connect(lab.nodes[0], address, port, timeout=1).close()
        return True
    except OSError:
        return False
