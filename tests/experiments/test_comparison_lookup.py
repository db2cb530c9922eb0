"""The storage side's attributes as per-testbed constants (dimensions.TestbedLookup) give every
metric row the same value as the correlated subqueries they replace, including the edge cases:
the first storage server by hostname, runs that measured one target, testbeds without storage
servers or targets, missing profile fields, floats and integers compared as text by filters."""

from __future__ import annotations

import pytest
from django.db.models import CharField
from django.db.models.functions import Cast

from experiments.comparison import ComparisonSpec, compute, dimensions
from experiments.models import HardwareProfile, Metric, Node, Target, Testbed, TestbedNode
from tests.helpers.comparison import add_run, make_testbed

KEYS = [
    "arch",
    "cpu",
    "hardware",
    "raid",
    "fs",
    *(f"hw:{field}" for field in dimensions.HARDWARE_FIELDS),
]


@pytest.fixture
def odd_lab(alice):
    """Two regular testbeds plus the awkward ones, each with a run."""
    arm = make_testbed(alice, "arm", "aarch64", "0")
    x86 = make_testbed(alice, "x86", "x86_64", "10", cores=(1, 48))
    # Storage servers of different hardware: the first by hostname ("a-…") counts.
    mixed = Testbed.objects.create(owner=alice, name="mixed")
    bare = HardwareProfile.objects.create(  # no sockets
        owner=alice,
        name="bare",
        architecture="ppc64le",
        vendor="IBM",
        clock_ghz=2.9,
        memory_gib=31.5,
        threads_per_core=8,
        numa_domains=2,
        memory_channels=4,
    )
    big = HardwareProfile.objects.create(
        owner=alice,
        name="big",
        architecture="x86_64",
        sockets=2,
        cores_per_socket=16,
        memory_gib=512,
    )
    for hostname, profile in (("z-server", big), ("a-server", bare)):
        node = Node.objects.create(owner=alice, hostname=hostname, profile=profile)
        TestbedNode.objects.create(testbed=mixed, node=node, storage=True)
    Target.objects.create(testbed=mixed, raid_level="6", disks=8, count=3, filesystem="ext4")
    Target.objects.create(testbed=mixed, raid_level="0", disks=2, count=1, filesystem="xfs")
    # No storage servers and no targets at all: every storage attribute is unknown.
    empty = Testbed.objects.create(owner=alice, name="empty")
    client = Node.objects.create(owner=alice, hostname="lonely-client", profile=bare)
    TestbedNode.objects.create(testbed=empty, node=client, client=True)
    for tb in (arm, x86, mixed, empty):
        add_run(tb, 2e9, threads=4)
        add_run(tb, 3e9, threads=8, nodes=1)
    # A run that measured one target: its own node's hardware and RAID level win.
    device = x86.targets.order_by("id").last()
    device.raid_level = "1"
    device.save()
    run = add_run(x86, 1e9, threads=4)
    run.target = device
    run.save()
    return arm, x86, mixed, empty


@pytest.mark.django_db
@pytest.mark.parametrize("key", KEYS)
def test_lookup_gives_every_row_the_subquerys_value(odd_lab, key):
    def values(lookup):
        expr = dimensions.expression(key, lookup)
        rows = (
            Metric.objects.primary_values()
            .annotate(_v=expr, _t=Cast(expr, CharField()))
            .order_by("run_id")
            .values_list("run_id", "_v", "_t")
        )
        return list(rows)

    expected = values(None)
    assert values(dimensions.TestbedLookup()) == expected
    assert {type(v) for _, v, _ in expected} - {type(None)}  # not all unknown


@pytest.mark.django_db
def test_lookup_edge_cases(odd_lab):
    _, x86, mixed, empty = odd_lab
    lookup = dimensions.TestbedLookup()
    members, targets = lookup.members(), lookup.targets()
    assert members["architecture"][mixed.pk] == "ppc64le"  # a-server before z-server
    assert members["cores"][mixed.pk] is None  # its first server has no sockets
    assert members["server_cores"][mixed.pk] == 32  # the sum skips the unknown one
    assert members["servers"][mixed.pk] == 2 and members["clients"][empty.pk] == 1
    assert empty.pk not in members["servers"] and empty.pk not in targets["count"]
    assert (targets["raid_level"][mixed.pk], targets["count"][mixed.pk]) == ("6", 4)
    assert members["cores"][x86.pk] == 48


@pytest.mark.django_db
@pytest.mark.parametrize(
    "norm, expected",
    [
        ("server", {"arm": 1.25, "x86": (1 + 1.5 + 1) / 3, "mixed": 1.25, "empty": None}),
        ("target", {"arm": 0.625, "x86": (0.5 + 0.75 + 1) / 3, "mixed": 0.625, "empty": None}),
        ("client", {"arm": 1.75, "x86": (0.5 + 3 + 0.25) / 3, "mixed": 3.0, "empty": 2.5}),
        (
            "core",
            {"arm": 2.5 / 128, "x86": (5 / 96 + 1 / 48) / 3, "mixed": 2.5 / 32, "empty": None},
        ),
    ],
)
def test_normalisations_per_testbed(odd_lab, norm, expected):
    """2 GB/s (no nodes parameter) and 3 GB/s (nodes=1) per testbed, and on x86 1 GB/s
    measured on one target: divided by the testbed's storage servers, targets, clients (or
    the nodes the run used) or cores (the target's own node's); a run on a testbed without
    such members has no value. The runs differ in nodes and target, so the comparison pools
    them only because it is told to ignore those."""
    spec = ComparisonSpec.from_query(
        f"metric=write_bw&x=&series=testbed&norm={norm}&f=param:threads:4&f=param:threads:8"
        "&ignore=param:nodes&ignore=target"
    )
    points = {p.series: p for p in compute(spec).points}
    for name, mean in expected.items():
        if mean is None:
            assert name not in points or points[name].n == 0
        else:
            assert points[name].mean == pytest.approx(mean), name


@pytest.mark.django_db
@pytest.mark.parametrize(
    "query",
    [
        "metric=write_bw&x=hw:memory_gib&series=hw:cores&f=hw:memory_gib:31.5&f=hw:memory_gib:256",
        "metric=write_bw&x=raid&series=fs&f=raid:6&f=raid:1&f=raid:0&f=fs:xfs",
        "metric=write_bw&x=hw:clock_ghz&series=arch&f=hw:clock_ghz:2.9&f=arch:ppc64le",
        "metric=write_bw&x=param:threads&series=hw:cores&f=hw:cores:48&f=hw:cores:64",
    ],
)
def test_filters_on_storage_attributes_match_the_subquery_form(odd_lab, query):
    from experiments.comparison import filtered_metrics

    spec = ComparisonSpec.from_query(query)
    subquery = sorted(filtered_metrics(spec).values_list("pk", flat=True))
    lookup = sorted(
        filtered_metrics(spec, None, dimensions.TestbedLookup()).values_list("pk", flat=True)
    )
    assert lookup == subquery and lookup
