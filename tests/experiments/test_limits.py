"""Theoretical limits from the inventory, checked against seed 002's own arithmetic."""

from __future__ import annotations

import pytest
from django.urls import reverse

from experiments.limits import compute_limits, raid_factors
from experiments.models import Drive, Node, Target, TestbedNode

pytestmark = pytest.mark.django_db


def test_raid_levels_scale_reads_and_writes():
    assert raid_factors("0", 4) == (4, 4)
    assert raid_factors("10", 4) == (4, 2)  # RAID10 halves writes (DESIGN.md)
    assert raid_factors("1", 2) == (2, 1)
    assert raid_factors("6", 10) == (8, 8)
    assert raid_factors("none", 1) == (1, 1)


def test_seed_002_layout_gives_its_stated_peaks(testbed, node, profile, alice):
    """Seed 002: 33 RAID0 targets of 4 P4600 (3.2 GB/s read, 1.3 GB/s write) give a
    theoretical 422 GB/s read and 172 GB/s write; the network is the bottleneck."""
    for i in range(2, 6):
        other = Node.objects.create(owner=alice, hostname=f"stor{i}", profile=profile)
        TestbedNode.objects.create(testbed=testbed, node=other, storage=True)
        Target.objects.create(testbed=testbed, node=other, raid_level="0", disks=4, count=6)
    meta = Node.objects.create(owner=alice, hostname="meta1", profile=profile)
    TestbedNode.objects.create(
        testbed=testbed, node=meta, storage=True, metadata=True, storage_links=1
    )
    Target.objects.create(testbed=testbed, node=meta, raid_level="0", disks=4, count=3)
    limits = compute_limits(testbed)
    by_name = {lim.name: lim for lim in limits.limits}
    assert by_name["drives"].read == pytest.approx(422.4e9)
    assert by_name["drives"].write == pytest.approx(171.6e9)
    # 5 servers x 2 EDR links + 1 link of the metadata server = 11 links of 100 Gb/s.
    assert by_name["network (storage servers)"].read == pytest.approx(11 * 12.5e9)
    assert limits.read_bottleneck.name == "network (storage servers)"
    assert limits.write_bottleneck.name == "network (storage servers)"
    # PCIe 3 x4 per drive: 132 drives x 3.94 GB/s.
    assert by_name["PCIe (drive links)"].read == pytest.approx(132 * 4 * 0.985e9)


def test_raid10_halves_the_drive_write_limit(testbed):
    testbed.targets.update(raid_level="10")
    drives = {lim.name: lim for lim in compute_limits(testbed).limits}["drives"]
    assert drives.read == pytest.approx(6 * 4 * 3.2e9)
    assert drives.write == pytest.approx(6 * 2 * 1.3e9)


def test_missing_inventory_is_named(testbed, profile):
    Drive.objects.filter(profile=profile).update(seq_read_mbps=None)
    limits = compute_limits(testbed)
    assert "drives" not in {lim.name for lim in limits.limits}
    assert any("datasheet" in m for m in limits.missing)


def test_testbed_page_names_the_bottleneck(alice_client, testbed):
    html = alice_client.get(reverse("experiments:testbed", args=[testbed.uuid])).content.decode()
    assert "Bottleneck:" in html
    assert "network (storage servers)" in html
