"""The launch context of a cell: the node whose worker starts the tool, the client nodes, the
work directory, the typed launch spec stored on the run (``runners.launch.LaunchSpec``), and
which nodes a matrix's runs may use and who may launch it."""

from __future__ import annotations

from typing import Any

from django.db.models import Prefetch, Q

from experiments.matrices.axes import (
    NODES,
    SLURM_NODES,
    TASKS_PER_NODE,
    TUNING_PREFIX,
    MatrixError,
)
from experiments.matrices.cells import Cell
from experiments.models import LaunchMode, Matrix, Node, Target, Testbed, TestbedNode
from experiments.shared.validators import work_path_problem
from runners.launch import LaunchSpec
from runners.tools.base import Host


def as_host(node: Node) -> Host:
    """A node as the tool adapters name it (its address, else its hostname)."""
    return Host(name=node.hostname, address=node.address or node.hostname)


def launcher_and_hosts(testbed: Testbed, target: Target | None) -> tuple[Node | None, list[Node]]:
    """The node whose worker starts the tool, and the client nodes (MPI/multi-host)."""
    members = list(testbed.members.all())  # prefetched by cells(), ordered by hostname
    clients = [m.node for m in members if m.client]
    if target is not None and target.node_id:
        return target.node, clients
    if clients:
        return clients[0], clients
    return (members[0].node if members else None), clients


def used_clients(testbed: Testbed, clients: list[Node], params: dict[str, Any]) -> list[Node]:
    """The client nodes a cell's MPI or multi-host run uses: the first ``nodes`` of the
    testbed's clients (ordered by hostname, as ``cells()`` reads them), default all.
    MatrixError when the testbed has fewer (it lost clients since the matrix was saved)."""
    if NODES not in params:
        return clients
    count = int(params[NODES])
    if count > len(clients):
        raise MatrixError("axes", too_many_nodes(testbed, count, len(clients)))
    return clients[:count]


def too_many_nodes(testbed: Testbed, count: int, clients: int) -> str:
    return (
        f"{NODES}: {count} is more than the {clients} client node"
        f"{'' if clients == 1 else 's'} of testbed {testbed.name!r}"
    )


def tasks_per_node(matrix: Matrix, params: dict[str, Any]) -> int:
    """MPI ranks per node of a cell: its ``tasks_per_node`` parameter (fixed or an axis), else
    the matrix's."""
    return int(params.get(TASKS_PER_NODE, matrix.tasks_per_node))


def workdir_for(testbed: Testbed, target: Target | None) -> str:
    """The directory the run works in: the target's mount point, else the testbed's benchmark
    directory. Checked again here: rows stored before the check existed may hold any path."""
    if target is not None and target.path:
        problem = work_path_problem(target.path)
        if problem:
            raise MatrixError("testbeds", f"target {target} of {testbed.name!r}: {problem}")
        return target.path
    if testbed.benchmark_dir:
        problem = work_path_problem(testbed.benchmark_dir)
        if problem:
            raise MatrixError(
                "testbeds", f"benchmark directory of testbed {testbed.name!r}: {problem}"
            )
        return testbed.benchmark_dir
    raise MatrixError(
        "testbeds",
        f"testbed {testbed.name!r} has no benchmark directory "
        "(set it on the testbed, or sweep over targets with a "
        "mount point)",
    )


def node_problem(testbed: Testbed, node: Node) -> str | None:
    """Why a run of ``testbed`` may not use ``node`` (as launcher, client or target node), or
    None. The node must be the testbed owner's or shared by its owner. Workers listen on
    ``node.<hostname>``, so a node of the same hostname or address that another user
    registered earlier and does not share decides too (no aliasing a colleague's machine)."""
    if node.published:
        return f"node {node.hostname} is published study data: no worker runs there"
    if node.owner_id is None:
        return f"node {node.hostname} has no owner any more: staff must give it one"
    if node.owner_id != testbed.owner_id and not node.shared:
        return (
            f"node {node.hostname} belongs to {node.owner.username} and is not shared "
            f"with the owner of testbed {testbed.name!r}"
        )
    names = {node.hostname.lower()} | ({node.address.lower()} if node.address else set())
    same = Q()
    for name in names:
        same |= Q(hostname__iexact=name) | Q(address__iexact=name)
    earlier = (
        Node.objects.filter(same, pk__lt=node.pk, published=False, shared=False)
        .exclude(owner__isnull=True)
        .exclude(owner_id=testbed.owner_id)
        .select_related("owner")
        .order_by("pk")
        .first()
    )
    if earlier is not None:
        return (
            f"node {node.hostname} is the machine {earlier.owner.username} registered first "
            f"(as {earlier.hostname}) and does not share"
        )
    return None


def check_nodes(matrix: Matrix, runs=None) -> None:
    """MatrixError naming the first node a run of ``matrix`` would use but may not: the
    launcher, the clients and the targets' nodes of each testbed, and the launcher nodes
    stored on ``runs`` (those about to be sent again)."""
    pairs: dict[tuple[int, int], tuple[Testbed, Node]] = {}
    testbeds = matrix.testbeds.select_related("owner").prefetch_related(
        Prefetch(
            "members",
            queryset=TestbedNode.objects.select_related("node__owner").order_by(
                "node__hostname", "pk"
            ),
        ),
        Prefetch("targets", queryset=Target.objects.select_related("node__owner")),
    )
    for testbed in testbeds:
        for target in [None, *testbed.targets.all()]:
            launcher, clients = launcher_and_hosts(testbed, target)
            for node in [launcher, *clients]:
                if node is not None:
                    pairs.setdefault((testbed.pk, node.pk), (testbed, node))
    if runs is not None:
        used = set(runs.filter(node__isnull=False).values_list("testbed_id", "node_id").distinct())
        missing = used - set(pairs)
        if missing:
            testbed_by_pk = Testbed.objects.select_related("owner").in_bulk({t for t, _ in missing})
            node_by_pk = Node.objects.select_related("owner").in_bulk({n for _, n in missing})
            for t, n in sorted(missing):
                pairs[(t, n)] = (testbed_by_pk[t], node_by_pk[n])
    for testbed, node in pairs.values():
        problem = node_problem(testbed, node)
        if problem:
            raise MatrixError("testbeds", problem)


def launch_refused(matrix: Matrix, user) -> str | None:
    """Why ``user`` may not launch (or re-run, or resume) ``matrix``, or None: they must
    operate every testbed it names (published testbeds take no runs)."""
    for testbed in matrix.testbeds.select_related("owner").order_by("name", "pk"):
        problem = testbed.runs_refused(user)
        if problem:
            return problem
    return None


def slurm_refusal(testbed: Testbed) -> str:
    return (
        f"testbed {testbed.name!r} has no Slurm partition: set one on the testbed, or "
        "choose another launch mode"
    )


def launch_spec(matrix: Matrix, cell: Cell) -> tuple[dict[str, Any], Node]:
    """What the worker needs besides the parameters (``runners.launch.LaunchSpec``, stored
    on the run as ``launch``), and the launcher node."""
    launcher, clients = launcher_and_hosts(cell.testbed, cell.target)
    if launcher is None:
        raise MatrixError("testbeds", f"testbed {cell.testbed.name!r} has no nodes")
    slurm_mode = matrix.launch_mode == LaunchMode.SLURM
    if slurm_mode and not cell.testbed.slurm_partition:
        raise MatrixError("launch_mode", slurm_refusal(cell.testbed))
    spec = LaunchSpec(
        workdir=workdir_for(cell.testbed, cell.target),
        launcher=launcher.hostname,
        mode=matrix.launch_mode,
        # Slurm chooses the clients when the job starts (the run records them then).
        hosts=()
        if slurm_mode
        else tuple(map(as_host, used_clients(cell.testbed, clients, cell.params))),
        partition=cell.testbed.slurm_partition if slurm_mode else "",
        account=cell.testbed.slurm_account if slurm_mode else "",
        nodes=int(cell.params.get(SLURM_NODES, 1)) if slurm_mode else 1,
        tasks_per_node=tasks_per_node(matrix, cell.params),
        timeout_s=matrix.timeout_s,
        drop_caches=matrix.drop_caches,
        apply_tuning=matrix.apply_tuning,
        tuning={
            k[len(TUNING_PREFIX) :]: v
            for k, v in cell.params.items()
            if k.startswith(TUNING_PREFIX)
        },
        target_ids=beegfs_target_ids(cell.target),
    )
    return spec.to_json(), launcher


def beegfs_target_ids(target: Target | None) -> tuple[int, ...]:
    """The BeeGFS target id of a cell's target, when the inventory states it (StorageBench
    on that target benchmarks it and no other)."""
    if target is None or target.target_id is None:
        return ()
    return (target.target_id,)
