"""Comparison test data shared by the statistics, report and API tests: testbeds with known
hardware (so known theoretical limits), runs with known headline values; and the specs over
every dimension of a configuration that a comparison from the configuration summaries must
answer as the metric rows do, with the equality that checks it."""

from __future__ import annotations

import math
import re

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


# Specs over every dimension of the configuration, normalisations, peaks, repetitions drawn
# and pooled configurations: each summarisable (tests/experiments/test_comparison_summaries.py).
SUMMARISABLE_SPECS = [
    "metric=write_bw&x=param:threads&series=arch",
    "metric=write_bw&metric=read_bw&x=param:threads&series=raid&baseline=10&ignore=hardware",
    "metric=write_bw&x=tool&series=testbed",
    "metric=write_bw&x=param:threads&series=tuning&reps=1",
    "metric=write_bw&x=param:threads&series=source",
    "metric=write_bw&x=param:threads&series=arch&norm=server",
    "metric=write_bw&x=param:threads&series=arch&norm=client",
    "metric=write_bw&x=param:threads&series=arch&norm=core",
    "metric=write_bw&x=param:threads&series=arch&norm=target",
    "metric=write_bw&x=param:threads&series=arch&stat=peak",
    "metric=write_bw&x=param:threads&y=arch&chart=heatmap",
    "metric=write_bw&x=param:bs&series=hw:cores&f=param:threads:4",
    "metric=write_bw&x=param:threads&series=arch&tool=fio&ignore=param:bs",
    "metric=write_bw&x=param:threads&series=fs&f=arch:aarch64&f=arch:x86_64",
    "metric=read_bw&x=&series=arch&error=minmax",
    "metric=write_bw&x=param:threads&series=tuning:storage.tuneNumWorkers",
]


def assert_same(a, b, where="") -> None:
    """``a`` and ``b`` (a comparison's JSON) are equal: floats to 1e-9, sentences once the numbers
    in them are equal to three digits; ``where`` names the place that differs."""
    if isinstance(a, float) and isinstance(b, float):
        assert math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12) or (a != a and b != b), where
    elif isinstance(a, dict) and isinstance(b, dict):
        assert set(a) == set(b), where
        for key in a:
            assert_same(a[key], b[key], f"{where}.{key}")
    elif isinstance(a, list) and isinstance(b, list):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            assert_same(x, y, f"{where}[{i}]")
    elif isinstance(a, str) and isinstance(b, str) and a != b:
        # Sentences print statistics to a few digits: equal once the numbers are.
        numbers = re.compile(r"-?\d+(?:\.\d+)?(?:e[-+]?\d+)?")
        assert numbers.sub("#", a) == numbers.sub("#", b), where
        for x, y in zip(numbers.findall(a), numbers.findall(b), strict=True):
            assert math.isclose(float(x), float(y), rel_tol=1e-3), where
    else:
        assert a == b, where


def comparable(result) -> dict:
    """A comparison result's JSON without its time, points in a fixed order."""
    out = result.to_json()
    out.pop("generated_at", None)
    out["points"] = sorted(out["points"], key=lambda p: repr(sorted(p.items())))
    return out
