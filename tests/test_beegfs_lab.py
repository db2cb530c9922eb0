"""The BeeGFS labs the tests build (tests/labs/beegfs.py) stand up as they say: real daemons,
targets Online, on this host and across the network-namespace nodes with their targets on btrfs
RAID0 and RAID10 volumes."""

from __future__ import annotations

import os

import pytest

from tests.labs.beegfs import BeegfsLab

pytestmark = pytest.mark.slow


def test_the_host_lab_has_two_online_targets_on_one_storage_server(beegfs_host):
    assert beegfs_host.targets() == {1: "Online", 2: "Online"}
    nodes = beegfs_host.ctl("--listnodes", "--nodetype=storage")
    assert "storage01 [ID: 1]" in nodes
    # getcfg prints the file the running daemon read.
    cfg = beegfs_host.ctl("--genericdebug", "--nodetype=storage", "--nodeid=1", "getcfg")
    assert f"storeStorageDirectory = {beegfs_host.base}/data/target1" in cfg


def test_the_cluster_lab_spreads_the_servers_over_the_nodes(beegfs_cluster, netns_lab):
    lab: BeegfsLab = beegfs_cluster
    listing = lab.ctl("--listtargets", "--longnodes", "--state")
    node_of = {}
    for line in listing.splitlines():
        fields = line.split()
        if fields and fields[0].isdigit():
            assert fields[1] == "Online", listing
            node_of[int(fields[0])] = line.split("beegfs-storage ")[1].split(" [")[0]
    assert sorted(node_of.values()) == ["node2", "node2", "node3", "node3"]
    # Each storage daemon runs in its node's namespace, reached from the others by address.
    for name, node in (("storage-node2", "node2"), ("storage-node3", "node3")):
        netns = netns_lab.node(node).netns
        assert lab.netns[name] == netns
        assert (
            os.stat(f"/proc/{lab.pid(name)}/ns/net").st_ino == os.stat(f"/run/netns/{netns}").st_ino
        )
    assert "node1 [ID: 1]" in lab.ctl(
        "--listnodes", "--nodetype=meta", netns=netns_lab.node(1).netns
    )
    # The targets lie on the btrfs volumes, RAID0 over 2 devices and RAID10 over 4.
    for volume, profile, devices in (("raid0", "RAID0", 2), ("raid10", "RAID10", 4)):
        out = os.popen(f"btrfs filesystem df {lab.base / volume}").read()
        assert f"Data, {profile}" in out, out
        show = os.popen(f"btrfs filesystem show {lab.base / volume}").read()
        assert f"Total devices {devices}" in show, show
