"""Nodes and tasks per node as matrix axes (issue 27, part 2): an MPI-mode matrix sweeps how
many of the testbed's client nodes a run uses (``nodes``: the first N by hostname) and how
many ranks each starts (``tasks_per_node``). Each cell's launch names only its nodes, its run
holds only those (and so drops only their caches), its parameters state both for the
comparison; every way in (YAML, form, API) refuses more nodes than the testbed has clients,
and both names outside the modes they belong to. The runs with the real IOR across the
namespace lab's nodes: tests/test_netns_mpi.py."""

from __future__ import annotations

import html

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from experiments.comparison.comparability import _dimension_attributes
from experiments.execution import holding
from experiments.matrices.expansion import expand
from experiments.matrices.files import from_yaml
from experiments.matrices.preview import plan
from experiments.matrices.validation import MatrixInvalid
from experiments.models import Matrix, Node, Run, TestbedNode
from runners.launch import LaunchSpec, tool_params

pytestmark = pytest.mark.django_db

IOR = """\
name: ior over nodes
tool: ior
launch_mode: {mode}
testbeds: [bench]
repetitions: 1
drop_caches: true
params: {{block_size: 4m, transfer_size: 1m}}
axes:
{axes}
"""


def ior(mode: str = "mpi", **axes) -> str:
    lines = "\n".join(f"  {name}: {values}" for name, values in axes.items())
    return IOR.format(mode=mode, axes=lines or "  file_per_proc: [true, false]")


@pytest.fixture
def three_clients(alice, bench, profile):
    """bench with clients c1, c2, c3 (c3 registered first: the order is by hostname), and
    its server stor1 no longer a client."""
    TestbedNode.objects.filter(testbed=bench).update(client=False)
    for name in ("c3", "c1", "c2"):
        node = Node.objects.create(
            owner=alice, hostname=name, address=f"10.0.0.{name[1]}", profile=profile
        )
        TestbedNode.objects.create(testbed=bench, node=node, client=True)
    return bench


def test_nodes_and_tasks_per_node_axes_plan_expand_and_hold(alice, alice_client, three_clients):
    matrix = from_yaml(
        ior(nodes="[1, 3]", tasks_per_node="[1, 2]", file_per_proc="[true, false]"), alice
    )
    planned = plan(matrix)
    assert not [item.error for item in planned.active if item.error]
    seen = {}
    for item in planned.active:
        spec = LaunchSpec.read(item.launch)
        params = item.cell.params
        seen[(params["nodes"], params["tasks_per_node"], params["file_per_proc"])] = spec
        assert spec.launcher == "c1" and spec.mode == "mpi"
        hosts = [(h.name, h.address) for h in spec.hosts]
        assert (
            hosts == [("c1", "10.0.0.1"), ("c2", "10.0.0.2"), ("c3", "10.0.0.3")][: params["nodes"]]
        )
        assert spec.tasks_per_node == params["tasks_per_node"]
        argv = item.argv
        ranks = params["nodes"] * params["tasks_per_node"]
        assert argv[argv.index("-np") + 1] == str(ranks)
        assert f"ppr:{params['tasks_per_node']}:node" in argv
        flags = ["-F"] if params["file_per_proc"] else []
        assert argv[argv.index("ior") : -1] == [
            "ior",
            "-w",
            "-r",
            "-t",
            "1m",
            "-b",
            "4m",
            *flags,
            "-o",
        ]
        assert item.data_bytes == 4 * 2**20 * ranks
        # The launch's parameters never reach the tool adapter.
        assert set(tool_params(params)) == {"block_size", "transfer_size", "file_per_proc"}
    assert len(seen) == 8

    expand(matrix)
    runs = list(Run.objects.filter(matrix=matrix).order_by("pk"))
    assert len(runs) == 8
    TestbedNode.objects.filter(testbed=three_clients).update(storage=False, metadata=False)
    for run in runs:
        nodes, tasks = run.params["nodes"], run.params["tasks_per_node"]
        assert (type(nodes), type(tasks)) == (int, int)
        # Held (so their caches dropped): the launcher and the run's own clients only.
        assert holding.nodes_for(run) == ["c1", "c2", "c3"][:nodes]
        assert run.launch["tasks_per_node"] == tasks
        assert len(run.launch["hosts"]) == nodes
    labels = sorted(run.label for run in runs)
    assert any("nodes=3, tasks_per_node=2" in label for label in labels), labels
    # The matrix page does not state the matrix's own tasks per node, which no run uses.
    page = alice_client.get(matrix.get_absolute_url()).content.decode()
    assert "MPI (mpirun over the testbed&#x27;s client nodes))" in page, page
    assert "1 per node" not in page


def test_nodes_is_at_most_the_testbeds_clients(alice, three_clients):
    with pytest.raises(MatrixInvalid) as err:
        from_yaml(ior(nodes="[2, 4]"), alice)
    assert err.value.errors == {
        "axes": ["nodes: 4 is more than the 3 client nodes of testbed 'bench'"]
    }
    with pytest.raises(MatrixInvalid) as err:
        from_yaml(ior(nodes="[0, 1]"), alice)
    assert err.value.errors["axes"] == ["nodes: 0 is below the minimum 1"]
    # A fixed value is checked alike.
    text = ior().replace("transfer_size: 1m}", "transfer_size: 1m, nodes: 5}")
    with pytest.raises(MatrixInvalid) as err:
        from_yaml(text, alice)
    assert err.value.errors["axes"] == [
        "nodes: 5 is more than the 3 client nodes of testbed 'bench'"
    ]
    # A saved matrix whose testbed lost clients since: the preview names the cells.
    matrix = from_yaml(ior(nodes="[1, 3]"), alice)
    TestbedNode.objects.filter(testbed=three_clients, node__hostname="c3").delete()
    errors = {item.error for item in plan(matrix).active}
    assert errors == {"", "axes: nodes: 3 is more than the 2 client nodes of testbed 'bench'"}


def test_nodes_and_tasks_per_node_belong_to_their_modes(alice, three_clients):
    with pytest.raises(MatrixInvalid) as err:
        from_yaml(ior("single", nodes="[1, 2]", tasks_per_node="[1, 2]"), alice)
    assert err.value.errors["axes"] == [
        "nodes: applies to the MPI and multi-host launch modes only",
        "tasks_per_node: applies to MPI tools in the MPI or Slurm launch mode only",
    ]
    three_clients.slurm_partition = "debug"
    three_clients.save()
    with pytest.raises(MatrixInvalid) as err:
        from_yaml(ior("slurm", nodes="[1, 2]"), alice)
    assert err.value.errors["axes"] == [
        "nodes: in Slurm mode Slurm allocates the nodes: give slurm_nodes instead"
    ]
    # Slurm mode with an MPI tool: tasks per node is srun's --ntasks-per-node.
    matrix = from_yaml(ior("slurm", slurm_nodes="[1, 2]", tasks_per_node="[1, 2]"), alice)
    argvs = [item.argv for item in plan(matrix).active]
    assert [a[3:5] for a in argvs] == [
        ["--nodes=1", "--ntasks-per-node=1"],
        ["--nodes=1", "--ntasks-per-node=2"],
        ["--nodes=2", "--ntasks-per-node=1"],
        ["--nodes=2", "--ntasks-per-node=2"],
    ]
    # Not with a single-process tool in Slurm mode, nor twice over.
    fio = "name: f\ntool: fio\nlaunch_mode: slurm\ntestbeds: [bench]\nparams: {size: 8m}\n"
    with pytest.raises(MatrixInvalid) as err:
        from_yaml(fio + "axes: {tasks_per_node: [1, 2]}", alice)
    assert err.value.errors["axes"] == [
        "tasks_per_node: applies to MPI tools in the MPI or Slurm launch mode only"
    ]
    with pytest.raises(MatrixInvalid) as err:
        from_yaml(ior(tasks_per_node="[1, 2]") + "tasks_per_node: 2\n", alice)
    assert err.value.errors["tasks_per_node"] == [
        "given as a parameter too: leave it at 1 when tasks_per_node is a fixed parameter or "
        "an axis"
    ]
    # A multi-host tool takes nodes (its hosts), not tasks per node.
    fio = fio.replace("slurm", "multihost")
    matrix = from_yaml(fio + "axes: {nodes: [1, 2]}", alice)
    hosts = [len(LaunchSpec.read(item.launch).hosts) for item in plan(matrix).active]
    assert hosts == [1, 2]


def test_the_api_and_the_form_refuse_too_many_nodes(alice, alice_client, three_clients):
    api = APIClient()
    api.force_authenticate(alice)
    response = api.post(
        "/api/matrices/",
        {
            "name": "m",
            "tool": "ior",
            "launch_mode": "mpi",
            "testbeds": [str(three_clients.uuid)],
            "fixed_params": {"block_size": "4m", "transfer_size": "1m"},
            "axes": [{"param": "nodes", "values": [1, 4]}],
            "repetitions": 1,
        },
        format="json",
    )
    assert response.status_code == 400, response.json()
    assert response.json()["axes"] == [
        "nodes: 4 is more than the 3 client nodes of testbed 'bench'"
    ]
    response = alice_client.post(
        reverse("experiments:matrix_new"),
        {
            "name": "sweep",
            "tool": "ior",
            "launch_mode": "mpi",
            "tasks_per_node": 1,
            "testbeds": [three_clients.pk],
            "repetitions": 1,
            "timeout_s": 600,
            "params_text": "block_size = 4m\ntransfer_size = 1m",
            "axes_text": "nodes = 1, 4",
            "exclusions_text": "",
        },
    )
    assert response.status_code == 200 and Matrix.objects.count() == 0
    errors = [html.unescape(m) for ms in response.context["form"].errors.values() for m in ms]
    assert "nodes: 4 is more than the 3 client nodes of testbed 'bench'" in errors, errors


def test_a_slurm_runs_node_count_is_the_same_parameter_as_nodes():
    """x = slurm_nodes (or nodes) in a comparison pools what the other name states."""
    assert _dimension_attributes("param:slurm_nodes") == {"param:slurm_nodes", "param:nodes"}
    assert _dimension_attributes("param:nodes") == {"param:nodes", "param:slurm_nodes"}


def test_an_exclusion_rule_reads_the_nodes_axis(alice, three_clients):
    """In a rule, ``nodes`` is the axis when a matrix sweeps it (the testbed's fact of that
    name, its member count, otherwise)."""
    text = (
        ior(nodes="[1, 2, 3]", tasks_per_node="[1, 2]")
        + 'exclude: ["nodes * tasks_per_node > 4"]\n'
    )
    matrix = from_yaml(text, alice)
    active = [
        (c.cell.params["nodes"], c.cell.params["tasks_per_node"]) for c in plan(matrix).active
    ]
    assert active == [(1, 1), (1, 2), (2, 1), (2, 2), (3, 1)]
