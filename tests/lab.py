"""Comparison test data shared by the statistics, report and API tests: testbeds with known
hardware (so known theoretical limits), runs with known headline values and a node's
telemetry."""

from __future__ import annotations

from experiments.models import Drive, HardwareProfile, Nic, Node, Run, Target, Testbed, TestbedNode
from experiments.results.store import replace_metrics

# RAID0 vs RAID10 at 4 threads, three repetitions each, baseline RAID10.
# The two RAID levels are on two different machines (arm, x86): the comparison ignores that
# explicitly (and its sentences say so).
RAID_QUERY = "metric=write_bw&x=param:threads&series=raid&baseline=10&ignore=hardware"


def make_testbed(owner, name, arch, raid, *, cores=(2, 32), client_memory=64):
    profile = HardwareProfile.objects.create(
        owner=owner,
        name=f"{name} server",
        architecture=arch,
        cpu_model=f"{arch} cpu",
        sockets=cores[0],
        cores_per_socket=cores[1],
        memory_gib=256,
    )
    Drive.objects.create(
        profile=profile,
        kind="nvme",
        count=4,
        seq_read_mbps=3000,
        seq_write_mbps=2000,
        pcie_gen=3,
        pcie_lanes=4,
    )
    Nic.objects.create(profile=profile, kind="infiniband", rate_gbps=100)
    client_hw = HardwareProfile.objects.create(
        owner=owner, name=f"{name} client", architecture=arch, memory_gib=client_memory
    )
    tb = Testbed.objects.create(
        owner=owner,
        name=name,
        fabric="infiniband",
        beegfs_version="7.4.5" if arch == "x86_64" else "7.4.4",
    )
    for i in (1, 2):
        server = Node.objects.create(owner=owner, hostname=f"{name}-s{i}", profile=profile)
        TestbedNode.objects.create(testbed=tb, node=server, storage=True)
        Target.objects.create(
            testbed=tb, node=server, raid_level=raid, disks=4, count=2, filesystem="xfs"
        )
    for i in (1, 2, 3, 4):
        client = Node.objects.create(owner=owner, hostname=f"{name}-c{i}", profile=client_hw)
        TestbedNode.objects.create(testbed=tb, node=client, client=True)
    return tb


def add_run(tb, value, metric="write_bw", tuning=None, **params):
    run = Run.objects.create(
        testbed=tb, tool="fio", status="succeeded", tuning_set=tuning, params=params
    )
    replace_metrics(
        run,
        [
            {"name": metric, "value": value, "unit": "B/s"},
            {"name": metric, "value": value * 3, "unit": "B/s", "extra": {"job": "j0"}},
        ],
    )
    return run


def add_alike(run: Run, status: str) -> Run:
    """Another run of ``run``'s configuration (tool, parameters, testbed, target, tuning set,
    data source) and matrix, with its stored verdict, without metrics."""
    return Run.objects.create(
        testbed_id=run.testbed_id,
        tool=run.tool,
        status=status,
        params=run.params,
        matrix_id=run.matrix_id,
        target_id=run.target_id,
        tuning_set_id=run.tuning_set_id,
        published=run.published,
        source=run.source,
        bottleneck=run.bottleneck,
        collapsed=run.collapsed,
        write_steady=run.write_steady,
        write_whole=run.write_whole,
    )


def telemetry_doc(host, start, n=10, **series):
    """A node's telemetry document (beeweb-telemetry/1) of ``n`` one-second samples from
    ``start``; ``series`` adds or replaces series."""
    return {
        "format": "beeweb-telemetry/1",
        "hostname": host,
        "started_at": start,
        "interval_s": 1.0,
        "t": [float(i + 1) for i in range(n)],
        "series": {
            "cpu_busy": [0.2] * n,
            "cpu_busy:cpu0": [0.3] * n,
            "cpu_iowait": [0.1] * n,
            "mem_used": [2e9] * n,
            "page_cache": [1e9] * n,
            "disk_write_bw:sdb": [5e8] * n,
            "net_tx_bw:ib0": [1e9] * n,
            **series,
        },
        "meta": {"cores": 1, "nic_speed_mbps": {}, "unavailable": {"beegfs": "not installed"}},
    }
