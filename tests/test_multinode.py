"""Several nodes for real: three network namespaces behind a bridge (tests/netns.py), each
with its own Celery worker on its own queue (``node.<hostname>``) and its own hostname,
reaching the database and the broker over the network. A matrix sweeping one target per node
runs each run on its node's worker; qperf between two nodes gives the network baseline."""

from __future__ import annotations

import json
import shutil

import pytest

from tests.e2e import Stack, wait_for

pytest_plugins = ["tests.netns_fixtures"]
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("qperf") is None, reason="qperf is not installed"),
]

INVENTORY = """
import json
from django.contrib.auth import get_user_model
from experiments.models import HardwareProfile, Node, Target, Testbed, TestbedNode
lab = json.loads('''{lab}''')
owner = get_user_model().objects.get(is_superuser=True)
profile = HardwareProfile.objects.create(owner=owner, name="lab node", architecture="x86_64")
storage = Testbed.objects.create(owner=owner, name="lab", benchmark_dir=lab["bench"])
network = Testbed.objects.create(owner=owner, name="net", benchmark_dir=lab["bench"])
for i, (name, address) in enumerate(lab["nodes"], 1):
    node = Node.objects.create(owner=owner, hostname=name, address=address, profile=profile)
    TestbedNode.objects.create(testbed=storage, node=node, storage=True, client=True)
    Target.objects.create(testbed=storage, node=node, kind="storage", raid_level="none",
                          name=f"t{{i}}", path=f"{{lab['bench']}}/{{name}}")
    # qperf: node1 is the client (the launcher), node2 the server.
    if i <= 2:
        TestbedNode.objects.create(testbed=network, node=node, client=(i == 1), storage=(i == 2))
# fio's own multi-host mode: node2 and node3 are clients running `fio --server`.
clients = Testbed.objects.create(owner=owner, name="clients", benchmark_dir=lab["bench"])
for node in Node.objects.filter(hostname__in=["node2", "node3"]):
    TestbedNode.objects.create(testbed=clients, node=node, client=True)
"""

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


@pytest.fixture
def cluster(netns_lab, tmp_path):
    stack = Stack(tmp_path)
    bench = tmp_path / "bench"
    for node in netns_lab.nodes:
        (bench / node.hostname).mkdir(parents=True)
    lab = {"bench": str(bench), "nodes": [[n.hostname, n.address] for n in netns_lab.nodes]}
    stack.shell(INVENTORY.format(lab=json.dumps(lab)))
    # The shared benchmark area is outside the data directory: each node's operator allows it.
    stack.node_workers(netns_lab, tmp_path, {"BEEWEB_NODE_DIRS": str(bench)})
    registered = (
        "from experiments.models import Worker;"
        "print(sorted(w.hostname for w in Worker.objects.all()))"
    )
    assert wait_for(lambda: stack.shell(registered) == "['node1', 'node2', 'node3']", 90), (
        tmp_path / "node1.log"
    ).read_text()[-3000:]
    yield stack, netns_lab, tmp_path
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
    rows = json.loads(
        stack.shell(
            "import json; from experiments.models import Run\n"
            "print(json.dumps([[r.target.name, r.queue, r.worker, r.effective_config['hostname'],"
            " r.metrics.get(name='write_bw', primary=True).value] for r in "
            "Run.objects.select_related('target').order_by('target__name')]))"
        )
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
        values = json.loads(
            stack.shell(
                "import json; from experiments.models import Run\n"
                "r = Run.objects.get()\n"
                "print(json.dumps([r.worker, r.argv, {m.name: m.value for m in "
                "r.metrics.filter(primary=True)}]))"
            )
        )
    finally:
        lab.kill(server)
    worker, argv, metrics = values
    assert worker == "node1@node1"
    assert argv[:2] == ["qperf", lab.nodes[1].address]
    assert metrics["tcp_bw"] > 1e6 and 0 < metrics["tcp_lat"] < 0.01


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
        worker, argv, params, bw, p99 = json.loads(
            stack.shell(
                "import json; from experiments.models import Run\n"
                "r = Run.objects.get()\n"
                "p99 = r.metrics.filter(name='write_lat', stat='p99', iteration=None)"
                ".exclude(extra__has_key='job').values_list('value', flat=True)\n"
                "print(json.dumps([r.worker, r.argv, r.params, "
                "r.metrics.get(name='write_bw', primary=True).value, list(p99)]))"
            )
        )
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
