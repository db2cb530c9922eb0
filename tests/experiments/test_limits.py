"""Theoretical limits from the inventory, checked against seed 002's own arithmetic."""

from __future__ import annotations

import pytest
from django.urls import reverse

from experiments import comparison
from experiments.inventory.limits import (
    Scope,
    above_limit,
    compute_limits,
    compute_scope_limits,
    measured_links,
    raid_factors,
    run_scope,
)
from experiments.models import Drive, Nic, Node, Run, Target, TestbedNode
from experiments.results.store import replace_metrics

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


# -- bandwidth per link: stated by a study, measured on the testbed, or line rate ------------


def _seed_002_servers(testbed, profile, alice):
    """Seed 002's layout: 5 storage servers x 2 EDR links + the metadata server's 1 link."""
    for i in range(2, 6):
        other = Node.objects.create(owner=alice, hostname=f"stor{i}", profile=profile)
        TestbedNode.objects.create(testbed=testbed, node=other, storage=True)
        Target.objects.create(testbed=testbed, node=other, raid_level="0", disks=4, count=6)
    meta = Node.objects.create(owner=alice, hostname="meta1", profile=profile)
    TestbedNode.objects.create(
        testbed=testbed, node=meta, storage=True, metadata=True, storage_links=1
    )


def _network(testbed):
    return {lim.name: lim for lim in compute_limits(testbed).limits}["network (storage servers)"]


def test_stated_link_bandwidth_gives_seed_002s_136_4_gbs(testbed, profile, alice):
    """ "Each link can provide a theoretical peak performance of 12.4 GB/s which allows a
    theoretical peak performance of 136.4 GB/s" (seed 002, Figure 9 text)."""
    _seed_002_servers(testbed, profile, alice)
    assert _network(testbed).read == pytest.approx(137.5e9)  # line rate: 11 x 12.5 GB/s
    assert "line rate 100 Gb/s" in _network(testbed).detail
    Nic.objects.filter(profile=profile).update(usable_gbytes=12.4, usable_source="the study")
    network = _network(testbed)
    assert network.read == network.write == pytest.approx(136.4e9)
    assert network.detail == (
        "6 storage servers (5 x 2 links, 1 x 1 link): 11 links x 12.4 GB/s as stated by the study"
    )
    # 132 and 121 GB/s peaks: 97% and 89% (not 96.0% / 88.0% of 137.5).
    assert round(132e9 / network.read * 100) == 97
    assert round(121e9 / network.write * 100) == 89


def _network_run(testbed, tool, name, value, status="imported"):
    run = Run.objects.create(testbed=testbed, tool=tool, status=status)
    replace_metrics(run, [{"name": name, "value": value, "unit": "B/s"}])
    return run


def test_measured_link_bandwidth_wins_and_is_named(testbed, profile, alice):
    """Seed 000: "qperf returns 12.0 GB/s" per client-server pair, so 4 servers x 1 link give
    48.0 GB/s, not the 50 GB/s line rate."""
    Nic.objects.filter(profile=profile).update(count=1, usable_gbytes=12.4, usable_source="x")
    for i in range(2, 5):
        other = Node.objects.create(owner=alice, hostname=f"stor{i}", profile=profile)
        TestbedNode.objects.create(testbed=testbed, node=other, storage=True)
    _network_run(testbed, "qperf", "rc_bw", 12.0e9)
    _network_run(testbed, "qperf", "rc_bw", 11.8e9)
    _network_run(testbed, "qperf", "tcp_bw", 20e9)  # IPoIB: not the RDMA fabric's figure
    _network_run(testbed, "qperf", "rc_bw", 30e9, status="failed")
    network = _network(testbed)
    assert network.read == pytest.approx(4 * 11.9e9)
    assert network.detail == (
        "4 storage servers: 4 links x 11.9 GB/s measured with qperf (rc_bw, mean of 2 runs)"
    )
    _network_run(testbed, "perftest", "ib_write_bw", 12.0e9)
    assert measured_links([testbed])[testbed.pk].basis == (
        "measured with perftest (ib_write_bw, mean of 1 run)"
    )
    assert _network(testbed).read == pytest.approx(48.0e9)


def test_ethernet_testbeds_use_tcp_measurements_only(testbed):
    testbed.fabric = "ethernet"
    testbed.save()
    Nic.objects.update(kind="ethernet")
    _network_run(testbed, "qperf", "rc_bw", 12e9)
    assert testbed.pk not in measured_links([testbed])
    _network_run(testbed, "qperf", "tcp_bw", 1.1e9)
    assert _network(testbed).read == pytest.approx(2 * 1.1e9)


# -- scope: a run's limit is that of what it measured -----------------------------------------


def test_run_scope_from_target_and_parameters():
    assert run_scope("dd", {}, 7, 1) == Scope("target", 1, 7, network=False)
    assert run_scope("storagebench", {"targets": 1}, None, 1) == Scope(
        "one target", 1, network=False
    )
    assert run_scope("storagebench", {"targets": 10}, None, 1) == Scope("testbed", 1, network=False)
    assert run_scope("ior", {"storage_targets": 1, "threads": 4}, None, 1) == Scope("one target", 1)
    assert run_scope("ior", {"storage_targets": 40}, None, 1) == Scope("testbed", 1)
    assert run_scope("fio", {"drives": 1}, None, 1) == Scope("drive", 1, network=False)
    assert run_scope("fio", {"storage_targets": True}, None, 1) == Scope("testbed", 1)
    assert run_scope("fio", None, None, 1).label == "testbed"
    assert Scope("target", 1, 7, network=False).label == "one target, on its server"


def test_one_target_scope_takes_its_drives_and_its_servers_links(testbed):
    limits = compute_scope_limits(Scope("one target", testbed.pk), testbed)
    by_name = {lim.name: lim for lim in limits.limits}
    assert limits.scope == "one target"
    assert by_name["drives"].write == pytest.approx(4 * 1.3e9)  # one RAID0 of 4, not 6 of them
    assert by_name["network (one storage server)"].read == pytest.approx(2 * 12.5e9)
    assert (
        "stor1: 2 links x 12.5 GB/s line rate 100 Gb/s"
        in by_name["network (one storage server)"].detail
    )
    assert limits.write_bottleneck.name == "drives"
    local = compute_scope_limits(Scope("one target", testbed.pk, network=False), testbed)
    assert {lim.name for lim in local.limits} == {"drives", "PCIe (drive links)"}


def test_drive_scope_is_one_drive_and_its_pcie_link(testbed):
    limits = compute_scope_limits(Scope("drive", testbed.pk, network=False), testbed)
    by_name = {lim.name: lim for lim in limits.limits}
    assert (by_name["drive"].read, by_name["drive"].write) == (3.2e9, 1.3e9)
    assert by_name["PCIe (drive link)"].read == pytest.approx(4 * 0.985e9)
    assert limits.scope == "one drive"


def test_testbed_scope_of_local_tools_has_no_network(testbed):
    limits = compute_scope_limits(Scope("testbed", testbed.pk, network=False), testbed)
    assert not any(lim.name.startswith("network") for lim in limits.limits)


def test_a_single_target_run_above_its_target_is_flagged(testbed, alice):
    """A dd on one RAID0 target (4 x 1.3 GB/s write) at 6 GB/s is above its target's limit
    although far below the testbed's; the comparison says so."""
    target = testbed.targets.get()
    run = Run.objects.create(
        testbed=testbed, target=target, tool="dd", status="imported", owner=alice
    )
    replace_metrics(run, [{"name": "write_bw", "value": 6e9, "unit": "B/s"}])
    spec = comparison.ComparisonSpec.from_query("metric=write_bw&x=tool")
    (point,) = comparison.compute(spec, Run.objects.all()).points
    assert point.limit_scope == "one target, on its server"
    assert point.limit_value == pytest.approx(5.2)
    assert round(point.efficiency) == 115
    assert point.flags[0].startswith("above the theoretical limit (115% of drives, one target")


def test_slightly_above_a_limit_is_within_its_uncertainty():
    assert not above_limit(48.1e9, 48.0e9)  # seed 000: "100% bandwidth utilization"
    assert above_limit(5.5e9, 5.2e9)  # seed 002: StorageBench 106% of the RAID0 write limit


# -- issue 25, finding 5: no network where none is crossed; disks counted when inventoried ----


@pytest.fixture
def one_node(alice):
    """A localhost-like testbed: one node in every role, a 10 GbE NIC and one SATA SSD
    without datasheet bandwidth under its one target."""
    from experiments.models import HardwareProfile, Testbed

    profile = HardwareProfile.objects.create(owner=alice, name="This machine")
    Nic.objects.create(profile=profile, kind="ethernet", rate_gbps=10)
    Drive.objects.create(profile=profile, kind="ssd", interface="sata", purpose="data")
    node = Node.objects.create(owner=alice, hostname="vm", profile=profile)
    tb = Testbed.objects.create(owner=alice, name="localhost", fabric="ethernet")
    TestbedNode.objects.create(
        testbed=tb, node=node, storage=True, client=True, metadata=True, management=True
    )
    Target.objects.create(testbed=tb, node=node, kind="storage", raid_level="none", disks=1)
    return tb


def test_a_testbed_whose_client_is_its_server_has_no_network_limit(one_node):
    """The finding: local fio runs showed "89% of network (storage servers)" with a 10 GbE NIC
    on the localhost node, though client and server are one machine."""
    limits = compute_limits(one_node)
    assert not any(lim.name.startswith("network") for lim in limits.limits)
    assert limits.notes == [
        "no network limit: the client is the storage server (one node), so the data crosses "
        "no network"
    ]
    # The SATA SSD is counted at its interface's rate, not left out.
    assert limits.read_bottleneck.name == "drives"
    assert limits.read_bottleneck.read == pytest.approx(600e6)
    assert "at most 600 MB/s per SATA link" in limits.read_bottleneck.detail
    for params in ({}, {"storage_targets": 1}):
        scope = run_scope("fio", params, None, one_node.pk)
        found = compute_scope_limits(scope, one_node)
        assert not any(lim.name.startswith("network") for lim in found.limits), params


def test_clients_that_are_the_servers_keep_a_share_of_the_data_local(testbed, node):
    """Two nodes, each client and storage server: half of each client's data stays on its own
    node, so the links (one set, named once) bound twice their rate."""
    TestbedNode.objects.filter(testbed=testbed, node=node).update(client=True)
    other = Node.objects.create(owner=node.owner, hostname="stor2", profile=node.profile)
    TestbedNode.objects.create(testbed=testbed, node=other, storage=True, client=True)
    names = {lim.name: lim for lim in compute_limits(testbed).limits}
    assert "network (clients)" not in names
    network = names["network (storage servers)"]
    assert network.read == pytest.approx(2 * 2 * 12.5e9 * 2)
    assert network.detail.endswith("x 2/1: the 2 clients are the storage servers, so 1/2 of "
                                   "the data stays on its node")  # fmt: skip


def test_a_cached_read_above_the_limit_is_explained_not_a_percentage(alice_client, one_node):
    """The finding: a page-cache IOR read "reached 3596%" of a limit that does not bound it."""
    from experiments.results import telemetry as stored

    run = Run.objects.create(testbed=one_node, tool="ior", status="succeeded", params={})
    replace_metrics(run, [{"name": "read_bw", "value": 21.6e9, "unit": "B/s"}])
    doc = {
        "format": "beeweb-telemetry/1",
        "hostname": "vm",
        "started_at": "2026-01-01T10:00:00+00:00",
        "interval_s": 1.0,
        "t": [1.0, 2.0, 3.0],
        "series": {"cpu_busy": [0.3] * 3, "cpu_busy:cpu0": [0.3] * 3},
        "meta": {"cores": 1},
        "tool": {"t": [1.0, 2.0, 3.0], "series": {"read_bw": [21.6e9] * 3}},
    }
    stored.save(run, doc)
    html = alice_client.get(reverse("experiments:run", args=[run.uuid])).content.decode()
    assert "3600%" not in html and "reached" not in html
    assert (
        "this run's 21.6 GB/s is above it: cached, the data came from memory (the page "
        "cache or the servers' caches), which this limit does not bound"
    ) in html
    assert "No network limit: the client is the storage server" in html
