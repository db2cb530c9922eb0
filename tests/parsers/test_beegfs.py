"""BeeGFS topology parser against the real samples in shared/samples/beegfs (values from files)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runners.parsers import beegfs, get_parser
from runners.parsers.base import ParseError
from tests.helpers.samples import SAMPLES, read_sample
from tests.parsers.properties import check_only_parse_error, check_truncated

GIB = 1024**3
MIB = 1024**2

BEEGFS_SAMPLES = sorted(
    p.name for p in (SAMPLES / "beegfs").iterdir() if "storagebench" not in p.name
)
OTHER_SAMPLES = sorted(
    f"{d.name}/{p.name}"
    for d in SAMPLES.iterdir()
    if d.is_dir()
    for p in d.iterdir()
    if d.name != "beegfs" or "storagebench" in p.name
)


def topo(sample, name, **options):
    result = beegfs.parse(sample(f"beegfs/{name}"), **options)
    assert result.tool == "beegfs"
    assert result.metrics == []
    return result.extra["topology"]


def by_id(items):
    return {item["id"]: item for item in items}


# --- beegfs-df (7.x) ---------------------------------------------------------------------


def test_df_42_storage_targets_low_normal_pools(sample):
    t = topo(sample, "beegfs-df-42-storage-targets-capacity-pools-low-normal.txt")
    assert t["kind"] == "df" and t["cli"] == "beegfs-df"
    meta = [x for x in t["targets"] if x["type"] == "meta"]
    storage = by_id(x for x in t["targets"] if x["type"] == "storage")
    assert len(meta) == 1 and len(storage) == 42
    # "       3      normal     238.4GiB     144.2GiB  61%      125.0M      125.0M 100%"
    assert meta[0]["id"] == 3
    assert meta[0]["cap_pool"] == "normal"
    assert meta[0]["total_bytes"] == round(238.4 * GIB)
    assert meta[0]["free_bytes"] == round(144.2 * GIB)
    assert meta[0]["inodes_total"] == 125_000_000
    # "     114      normal    1589.2GiB    1578.1GiB  99%      166.7M      166.7M 100%"
    assert storage[114]["cap_pool"] == "normal"
    assert storage[114]["total_bytes"] == round(1589.2 * GIB)
    assert storage[114]["inodes_free"] == 166_700_000
    assert storage[102]["cap_pool"] == "low"
    assert storage[314]["free_bytes"] == round(1578.1 * GIB)


def test_df_4meta_6storage(sample):
    t = topo(sample, "beegfs-df-4meta-6storage-targets-7x.txt")
    targets = by_id(t["targets"])
    assert sorted(i for i, x in targets.items() if x["type"] == "meta") == [1, 2, 3, 4]
    assert sorted(i for i, x in targets.items() if x["type"] == "storage") == [
        1011, 1012, 1021, 1022, 1031, 1032,
    ]  # fmt: skip
    # "    1011      normal    7152.0GiB    7102.1GiB  99%      750.1M      750.1M 100%"
    assert targets[1011]["total_bytes"] == round(7152.0 * GIB)
    assert targets[1011]["free_bytes"] == round(7102.1 * GIB)
    assert targets[1011]["inodes_total"] == 750_100_000
    # "       1      normal     879.1GiB     878.9GiB 100%       58.6M       58.5M 100%"
    assert targets[1]["inodes_free"] == 58_500_000
    assert targets[1]["inodes_used"] == 100_000


# --- beegfs-ctl --listnodes / --listmirrorgroups (7.x) ---------------------------------


def test_listnodes_meta(sample):
    t = topo(sample, "listnodes-nodetype-meta.txt", node_type="meta")
    assert t["kind"] == "nodes"
    assert t["nodes"] == [
        {"id": 1, "type": "meta", "name": "oneasia-c1-cpu-node10"},
        {"id": 2, "type": "meta", "name": "beegfs-slave1"},
        {"id": 3, "type": "meta", "name": "beegfs-slave2"},
        {"id": 4, "type": "meta", "name": "beegfs-slave3"},
    ]


def test_listnodes_storage_type_unknown_without_option(sample):
    t = topo(sample, "listnodes-nodetype-storage.txt")
    assert [(n["id"], n["name"]) for n in t["nodes"]] == [
        (101, "beegfs-slave1"),
        (102, "beegfs-slave2"),
        (103, "beegfs-slave3"),
    ]
    assert {n["type"] for n in t["nodes"]} == {None}  # --listnodes does not print the type


def test_listmirrorgroups_meta(sample):
    t = topo(sample, "listmirrorgroups-nodetype-meta.txt")
    assert t["kind"] == "mirror_groups"
    # header "BuddyGroupID PrimaryNodeID SecondaryNodeID" -> metadata groups
    assert t["mirror_groups"] == [
        {"id": 1, "type": "meta", "primary": 2, "secondary": 3},
        {"id": 2, "type": "meta", "primary": 1, "secondary": 4},
    ]


def test_listmirrorgroups_storage(sample):
    t = topo(sample, "listmirrorgroups-nodetype-storage.txt")
    groups = by_id(t["mirror_groups"])
    assert groups[101] == {"id": 101, "type": "storage", "primary": 1011, "secondary": 1021}
    assert groups[102]["secondary"] == 1031
    assert groups[103]["primary"] == 1022


# --- beegfs-ctl --listtargets (7.x) ------------------------------------------------------


def test_listtargets_mirrorgroups(sample):
    t = topo(sample, "listtargets-mirrorgroups.txt", node_type="storage")
    assert t["kind"] == "targets"
    targets = by_id(t["targets"])
    # "            1    secondary     3021      302"
    assert targets[3021]["mirror_group"] == 1
    assert targets[3021]["mirror_role"] == "secondary"
    assert targets[3021]["node_id"] == 302
    assert targets[3012]["mirror_group"] == 2
    groups = by_id(t["mirror_groups"])
    assert groups[2] == {
        "id": 2,
        "type": "storage",
        "primary": 3031,
        "primary_node_id": 303,
        "secondary": 3012,
        "secondary_node_id": 301,
    }
    assert groups[3]["primary"] == 3022


def test_listtargets_probably_offline(sample):
    t = topo(sample, "listtargets-state-meta-probably-offline.txt")
    targets = by_id(t["targets"])
    # "     201 Probably-offline         Good      201"
    assert targets[201]["reachability"] == "probably-offline"
    assert targets[201]["consistency"] == "good"
    assert targets[201]["node_id"] == 201
    assert targets[202]["reachability"] == "online"


def test_listtargets_state_meta(sample):
    t = topo(sample, "listtargets-state-nodetype-meta.txt", node_type="meta")
    assert [(x["id"], x["node_id"], x["reachability"]) for x in t["targets"]] == [
        (1, 1, "online"),
        (2, 2, "online"),
        (3, 3, "online"),
        (4, 4, "online"),
    ]
    assert {x["type"] for x in t["targets"]} == {"meta"}


def test_listtargets_state_storage(sample):
    t = topo(sample, "listtargets-state-nodetype-storage.txt")
    targets = by_id(t["targets"])
    assert len(targets) == 6
    assert targets[1012]["node_id"] == 101  # "    1012           Online         Good      101"
    assert targets[1031]["node_id"] == 103
    assert {x["consistency"] for x in t["targets"]} == {"good"}


def test_listtargets_needs_resync(sample):
    t = topo(sample, "listtargets-state-storage-needs-resync.txt")
    targets = by_id(t["targets"])
    assert targets[3012]["consistency"] == "needs-resync"  # "3012  Online Needs-resync  301"
    assert targets[3012]["node_id"] == 301
    assert targets[3011]["consistency"] == "good"
    assert [x["id"] for x in t["targets"] if x["consistency"] != "good"] == [3012]


def test_listtargets_offline(sample):
    t = topo(sample, "listtargets-state-storage-offline-targets.txt")
    targets = by_id(t["targets"])
    assert targets[3011]["reachability"] == "offline"
    assert targets[3012]["reachability"] == "offline"
    assert targets[3021]["reachability"] == "online"
    assert targets[3032]["node_id"] == 303


# --- beegfs-ctl --getentryinfo (7.x) -----------------------------------------------------


def test_getentryinfo_buddy_mirror_pattern(sample):
    t = topo(sample, "getentryinfo-dir-buddymirror-pattern.txt")
    assert t["kind"] == "entry_info"
    e = t["entry"]
    assert e["entry_id"] == "0-5E9E7791-C9"
    assert e["pattern"] == "Buddy Mirror"
    assert e["chunk_size"] == 1 * MIB  # "+ Chunksize: 1M"
    assert e["num_targets"] == 4
    assert e["meta_mirror_group"] == 1
    assert (e["meta_node_name"], e["meta_node_id"]) == ("node201", 201)
    assert (e["pool"], e["pool_name"]) == (1, "Default")


def test_getentryinfo_chunk512k_4_targets(sample):
    e = topo(sample, "getentryinfo-dir-chunk512K-4targets.txt")["entry"]
    assert e["entry_id"] == "0-5D9BC186-2"
    assert (e["meta_node_name"], e["meta_node_id"]) == ("hpc-10ke2.hpcc.usc.edu", 2)
    assert e["pattern"] == "RAID0"
    assert e["chunk_size"] == 512 * 1024
    assert e["num_targets"] == 4
    assert e["meta_mirror_group"] is None


def test_getentryinfo_chunk8m_1_target(sample):
    e = topo(sample, "getentryinfo-dir-chunk8M-1target.txt")["entry"]
    assert e["entry_id"] == "0-5D9C0429-2"
    assert e["chunk_size"] == 8 * MIB
    assert e["num_targets"] == 1
    assert e["meta_node_id"] == 1


def test_getentryinfo_root_metadata_buddy_group(sample):
    e = topo(sample, "getentryinfo-root-metadata-buddy-group.txt")["entry"]
    assert e["entry_id"] == "root"
    assert e["meta_mirror_group"] == 1
    assert e["meta_node_id"] == 201
    assert e["pattern"] == "RAID0"
    assert e["chunk_size"] == 512 * 1024


# --- BeeGFS 8 `beegfs` CLI ---------------------------------------------------------------


def test_v8_entry_info_after_migrate_archive_pool(sample):
    t = topo(sample, "beegfs8-entry-info-file-after-migrate-archive-pool.txt")
    assert t["kind"] == "entry_info" and t["cli"] == "beegfs"
    e = t["entry"]
    assert e["path"] == "/archive/flights-1m_v3.csv"
    assert e["entry_id"] == "1-68289D0B-1"
    assert e["entry_type"] == "file"
    assert e["meta_node_id"] == 1  # "m:1"
    assert e["meta_mirror_group"] is None  # "(unmirrored)"
    assert (e["pool"], e["pool_name"]) == (2, "archive")  # "archive (2)"
    # "RAID0 (4x512K)"
    assert (e["pattern"], e["num_targets"], e["chunk_size"]) == ("RAID0", 4, 512 * 1024)
    assert e["storage_targets"] == [102]  # "s:102"
    assert e["remote_targets"] == []  # "(none)"


def test_v8_entry_info_default_pool(sample):
    e = topo(sample, "beegfs8-entry-info-file-default-pool-unmirrored.txt")["entry"]
    assert e["entry_id"] == "4-68289A9B-1"
    assert (e["pool"], e["pool_name"]) == (1, "storage_pool_default")
    assert e["storage_targets"] == [101]
    assert e["chunk_size"] == 512 * 1024
    assert e["storage_mirror_groups"] == []


def test_v8_entry_info_verbose_retro(sample):
    t = topo(sample, "beegfs8-entry-info-verbose-retro-file-VENDOR-DOC-EXAMPLE.txt")
    e = t["entry"]
    assert e["entry_type"] == "file"
    assert e["entry_id"] == "1-6705972F-1"
    assert e["pattern"] == "RAID0"
    assert e["chunk_size"] == 512 * 1024
    assert (e["num_targets"], e["actual_targets"]) == (2, 2)  # "desired: 2; actual: 2"
    assert e["storage_targets"] == [101, 201]
    assert e["chunk_path"] == "u0/0/r/root/1-6705972F-1"
    assert e["inlined_inode"] is True
    assert e["dentry_path"] == "38/51/root"
    assert (e["meta_node_name"], e["meta_node_id"]) == ("node_meta_1", 1)
    assert e["client_sessions"] == {"reading": 0, "writing": 0}
    # "+ 201 @ node_storage_2 [ID: 2]"
    assert by_id(t["targets"])[201] == {
        "id": 201,
        "type": "storage",
        "node_id": 2,
        "node_name": "node_storage_2",
    }


def test_v8_entry_migrate_summary(sample):
    t = topo(sample, "beegfs8-entry-migrate-summary-line.txt")
    assert t["kind"] == "migrate"
    assert t["migrate"]["migrated_files"] == 1
    assert t["migrate"]["migration_errors"] == 0
    assert t["migrate"]["migration_skipped_dirs"] == 0
    assert len(t["migrate"]) == 8


def test_v8_health_df(sample):
    t = topo(sample, "beegfs8-health-df-1meta-2storage-cap-pools.txt")
    assert t["kind"] == "df" and t["cli"] == "beegfs"
    targets = by_id(t["targets"])
    # "m:2  meta  target_meta_2  m:2   (n/a)  Low  11.7GiB  150.4MiB (1.25%)  11.6GiB
    #  6.2M  66.1k (1.07%)  6.1M"
    m2 = targets[2]
    assert (m2["type"], m2["name"], m2["node_id"], m2["pool"]) == ("meta", "target_meta_2", 2, None)
    assert m2["cap_pool"] == "low"
    assert m2["total_bytes"] == round(11.7 * GIB)
    assert m2["used_bytes"] == round(150.4 * MIB)
    assert m2["free_bytes"] == round(11.6 * GIB)
    assert (m2["inodes_total"], m2["inodes_used"], m2["inodes_free"]) == (
        6_200_000,
        66_100,
        6_100_000,
    )
    # "s:302  storage  target_0-682AD7A2-3  s:3  s:1  Normal  893.8GiB  14.3GiB (1.60%) ..."
    s302 = targets[302]
    assert (s302["type"], s302["node_id"], s302["pool"]) == ("storage", 3, 1)
    assert s302["cap_pool"] == "normal"
    assert s302["used_bytes"] == round(14.3 * GIB)
    assert s302["inodes_used"] == 17  # "17.0 (0.00%)"
    assert targets[301]["inodes_free"] == 52_400_000


def test_v8_node_list(sample):
    t = topo(sample, "beegfs8-node-list-client-meta-storage-mgmt.txt")
    assert t["kind"] == "nodes"
    assert t["nodes"] == [
        {"id": 9, "type": "client", "name": "c2EA3-68271449-luminen"},
        {"id": 2, "type": "meta", "name": "node_meta_2"},
        {"id": 2, "type": "storage", "name": "node_storage_2"},
        {"id": 3, "type": "storage", "name": "node_storage_3"},
        {"id": 1, "type": "management", "name": "management"},
    ]


def test_v8_pool_list(sample):
    t = topo(sample, "beegfs8-pool-list-default-and-archive.txt")
    assert t["kind"] == "pools"
    assert t["pools"] == [
        {"id": 1, "name": "storage_pool_default", "targets": [101], "mirror_groups": []},
        {"id": 2, "name": "archive", "targets": [102], "mirror_groups": []},
    ]


def test_v8_target_list(sample):
    t = topo(sample, "beegfs8-target-list-aliases-2storage-1meta.txt")
    assert t["kind"] == "targets"
    assert t["targets"] == [
        {"id": 101, "type": "storage", "name": "s101_default_0", "node_id": 1, "pool": 1},
        {"id": 102, "type": "storage", "name": "s102_archive_0", "node_id": 1, "pool": 2},
        {"id": 1, "type": "meta", "name": "target_meta_1", "node_id": 1, "pool": None},
    ]


def test_every_beegfs_sample_is_covered():
    covered = {
        "beegfs-df-42-storage-targets-capacity-pools-low-normal.txt",
        "beegfs-df-4meta-6storage-targets-7x.txt",
        "beegfs8-entry-info-file-after-migrate-archive-pool.txt",
        "beegfs8-entry-info-file-default-pool-unmirrored.txt",
        "beegfs8-entry-info-verbose-retro-file-VENDOR-DOC-EXAMPLE.txt",
        "beegfs8-entry-migrate-summary-line.txt",
        "beegfs8-health-df-1meta-2storage-cap-pools.txt",
        "beegfs8-node-list-client-meta-storage-mgmt.txt",
        "beegfs8-pool-list-default-and-archive.txt",
        "beegfs8-target-list-aliases-2storage-1meta.txt",
        "getentryinfo-dir-buddymirror-pattern.txt",
        "getentryinfo-dir-chunk512K-4targets.txt",
        "getentryinfo-dir-chunk8M-1target.txt",
        "getentryinfo-root-metadata-buddy-group.txt",
        "listmirrorgroups-nodetype-meta.txt",
        "listmirrorgroups-nodetype-storage.txt",
        "listnodes-nodetype-meta.txt",
        "listnodes-nodetype-storage.txt",
        "listtargets-mirrorgroups.txt",
        "listtargets-state-meta-probably-offline.txt",
        "listtargets-state-nodetype-meta.txt",
        "listtargets-state-nodetype-storage.txt",
        "listtargets-state-storage-needs-resync.txt",
        "listtargets-state-storage-offline-targets.txt",
    }
    assert set(BEEGFS_SAMPLES) == covered  # the two storagebench files: test_storagebench.py


@pytest.mark.parametrize("name", BEEGFS_SAMPLES)
def test_every_sample_validates_and_serialises(name):
    data = get_parser("beegfs").parse(read_sample(f"beegfs/{name}")).to_dict()
    assert data["metrics"] == []
    topology = data["extra"]["topology"]
    assert topology["kind"] in {
        "nodes", "targets", "mirror_groups", "entry_info", "df", "pools", "migrate",
    }  # fmt: skip
    assert "warnings" not in topology
    for key in ("nodes", "targets", "pools", "mirror_groups"):
        assert isinstance(topology[key], list)


# --- other printed forms -----------------------------------------------------------------


def test_liststoragepools_and_longnodes():
    # `beegfs-ctl --liststoragepools` as printed in public notes, and a --longnodes row.
    pools = beegfs.parse(
        "Pool ID   Pool Description                      Targets                 Buddy Groups\n"
        "======= ================== ============================ ============================\n"
        "      1            Default 2,4\n"
        "      2           hdd_pool 1,3\n"
    ).extra["topology"]
    assert pools["kind"] == "pools"
    assert pools["pools"][1] == {
        "id": 2,
        "name": "hdd_pool",
        "targets": [1, 3],
        "mirror_groups": [],
    }
    longnodes = beegfs.parse(
        "TargetID   NodeID\n"
        "========   ======\n"
        "61   beegfs-storage ubuntu-PowerEdge-R750xa [ID: 6]\n"
    ).extra["topology"]
    assert longnodes["targets"][0]["node_id"] == 6
    assert longnodes["targets"][0]["node_name"] == "ubuntu-PowerEdge-R750xa"


# --- detection ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", BEEGFS_SAMPLES)
def test_detect_own_samples(name):
    assert beegfs.detect(read_sample(f"beegfs/{name}")) >= 0.8


@pytest.mark.parametrize("name", OTHER_SAMPLES)
def test_detect_low_on_other_tools(name):
    assert beegfs.detect(read_sample(name)) < 0.3


# --- errors ------------------------------------------------------------------------------


def test_empty_input_is_a_parse_error():
    with pytest.raises(ParseError, match="empty"):
        beegfs.parse(" \n")


def test_unrecognised_text_names_the_first_line():
    with pytest.raises(ParseError, match="no BeeGFS listing recognised") as e:
        beegfs.parse("\n\nhello world\n")
    assert e.value.line == 3


def test_v7_table_header_only_names_its_line(sample):
    text = sample("beegfs/listtargets-state-storage-offline-targets.txt")
    header = "".join(text.splitlines(keepends=True)[:2])
    with pytest.raises(ParseError, match="table at line 1 has no readable rows") as e:
        beegfs.parse(header)
    assert e.value.line == 1


def test_v8_table_header_only(sample):
    text = sample("beegfs/beegfs8-target-list-aliases-2storage-1meta.txt")
    with pytest.raises(ParseError, match="targets table has no readable rows"):
        beegfs.parse(text.splitlines(keepends=True)[0])


def test_df_section_headers_only(sample):
    text = sample("beegfs/beegfs-df-4meta-6storage-targets-7x.txt")
    with pytest.raises(ParseError, match="no beegfs-df target rows"):
        beegfs.parse("".join(text.splitlines(keepends=True)[:3]))


def test_entry_info_without_entry(sample):
    with pytest.raises(ParseError, match="Stripe pattern details"):
        beegfs.parse("Stripe pattern details:\n")


def test_storagebench_is_not_topology(sample):
    text = sample("beegfs/storagebench-status-verbose-read-10targets-usc.txt")
    with pytest.raises(ParseError):
        beegfs.parse(text)


# --- properties --------------------------------------------------------------------------


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=st.sampled_from(BEEGFS_SAMPLES), data=st.data())
def test_truncated_prefixes_parse_or_raise_parse_error(name, data):
    text = read_sample(f"beegfs/{name}")
    cut = data.draw(st.integers(min_value=0, max_value=len(text)))
    check_truncated(beegfs.parse, text, cut)


@settings(max_examples=300, deadline=None)
@given(text=st.text())
def test_random_text_only_raises_parse_error(text):
    check_only_parse_error(beegfs.parse, text)


@settings(max_examples=200, deadline=None)
@given(
    rows=st.text(alphabet=st.sampled_from(list("0123456789 .:smgc()\n=GiBMk%[]ID")), max_size=300)
)
def test_table_like_noise_only_raises_parse_error(rows):
    for header in (
        "TargetID     Reachability  Consistency   NodeID\n========     ============  "
        "===========   ======\n",
        "ID     TYPE     ALIAS           NODE  STORAGE_POOL\n",
    ):
        check_only_parse_error(beegfs.parse, header + rows)
