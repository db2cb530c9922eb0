"""Testbed import from BeeGFS CLI output: the real samples in shared/samples/beegfs, the
preview/save pages, idempotency, permissions and bad input.

Expected values are read from the sample files by eye; the lines they come from are quoted.
"""

from __future__ import annotations

import os

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse

from experiments.inventory.topology import IMPORTED_PROFILE_NAME, apply_topology, plan_topology
from experiments.models import (
    HardwareProfile,
    MirrorGroup,
    Node,
    StoragePool,
    Target,
    Testbed,
    TestbedNode,
)
from tests.helpers.samples import SAMPLES, read_sample

pytestmark = pytest.mark.django_db
# As in tests/parsers: a clone without ../shared/samples skips these, CI never does.
needs_samples = pytest.mark.skipif(
    not SAMPLES.is_dir() and not os.environ.get("CI"), reason=f"no samples at {SAMPLES}"
)

GIB = 1024**3


def beegfs(name: str) -> str:
    return read_sample(f"beegfs/{name}")


@pytest.fixture
def lab(alice):
    """An empty testbed of alice's: the import fills it."""
    return Testbed.objects.create(owner=alice, name="lab", beegfs_version="7.2")


def url(testbed) -> str:
    return reverse("experiments:testbed_topology_import", args=[testbed.uuid])


def import_texts(testbed, user, texts, **options):
    plan = plan_topology(testbed, texts)
    assert plan.errors == []
    return apply_topology(testbed, plan, user, **options)


def v7_texts() -> list[tuple[str, str | None]]:
    return [
        (beegfs("listnodes-nodetype-meta.txt"), "meta"),
        (beegfs("listnodes-nodetype-storage.txt"), "storage"),
        (beegfs("listtargets-state-nodetype-storage.txt"), "storage"),
        (beegfs("listmirrorgroups-nodetype-storage.txt"), None),
        (beegfs("listmirrorgroups-nodetype-meta.txt"), None),
        (beegfs("beegfs-df-4meta-6storage-targets-7x.txt"), None),
    ]


def targets_of(testbed, kind) -> dict[int, Target]:
    return {
        t.target_id: t for t in testbed.targets.filter(kind=kind).select_related("node", "pool")
    }


def roles_of(testbed) -> dict[str, set[str]]:
    return {m.node.hostname: set(m.role_names) for m in testbed.members.select_related("node")}


def groups_of(testbed, kind) -> dict[int, tuple[int, int]]:
    return {
        g.group_id: (g.primary.target_id, g.secondary.target_id)
        for g in MirrorGroup.objects.filter(testbed=testbed, kind=kind).select_related(
            "primary", "secondary"
        )
    }


# --- BeeGFS 7 (beegfs-ctl, beegfs-df) --------------------------------------------------------


@needs_samples
def test_v7_listings_build_nodes_roles_targets_and_buddy_groups(lab, alice):
    summary = import_texts(lab, alice, v7_texts())

    # listnodes-nodetype-meta: "oneasia-c1-cpu-node10 [ID: 1]", "beegfs-slave1 [ID: 2]",
    # "beegfs-slave2 [ID: 3]", "beegfs-slave3 [ID: 4]"; -storage: beegfs-slave1..3 [ID: 101..103]
    assert roles_of(lab) == {
        "oneasia-c1-cpu-node10": {"metadata"},
        "beegfs-slave1": {"metadata", "storage"},
        "beegfs-slave2": {"metadata", "storage"},
        "beegfs-slave3": {"metadata", "storage"},
    }
    nodes = Node.objects.filter(owner=alice)
    assert sorted(n.hostname for n in nodes) == [
        "beegfs-slave1",
        "beegfs-slave2",
        "beegfs-slave3",
        "oneasia-c1-cpu-node10",
    ]
    profile = HardwareProfile.objects.get(owner=alice, name=IMPORTED_PROFILE_NAME)
    assert profile.architecture == "other"
    assert {n.profile_id for n in nodes} == {profile.pk}

    # listtargets-state-nodetype-storage: "1011 ... 101", "1012 ... 101", "1021 ... 102", ...
    storage = targets_of(lab, "storage")
    assert {tid: t.node.hostname for tid, t in storage.items()} == {
        1011: "beegfs-slave1",
        1012: "beegfs-slave1",
        1021: "beegfs-slave2",
        1022: "beegfs-slave2",
        1031: "beegfs-slave3",
        1032: "beegfs-slave3",
    }
    # A meta node's target has the node's ID: 1..4 on the four meta nodes.
    meta = targets_of(lab, "metadata")
    assert {tid: t.node.hostname for tid, t in meta.items()} == {
        1: "oneasia-c1-cpu-node10",
        2: "beegfs-slave1",
        3: "beegfs-slave2",
        4: "beegfs-slave3",
    }
    # beegfs-df: "1011      normal    7152.0GiB ..." and "1      normal     879.1GiB ..."
    assert storage[1011].capacity_gb == pytest.approx(7152.0 * GIB / 1e9, abs=0.01)
    assert storage[1032].capacity_gb == pytest.approx(7679.40, abs=0.01)
    assert meta[4].capacity_gb == pytest.approx(879.1 * GIB / 1e9, abs=0.01)
    assert {t.raid_level for t in lab.targets.all()} == {"none"}
    assert not StoragePool.objects.filter(testbed=lab).exists()

    # listmirrorgroups-nodetype-storage: "101  1011  1021", "102  1012  1031", "103  1022  1032"
    assert groups_of(lab, "storage") == {101: (1011, 1021), 102: (1012, 1031), 103: (1022, 1032)}
    # listmirrorgroups-nodetype-meta (node IDs): "1  2  3", "2  1  4"
    assert groups_of(lab, "metadata") == {1: (2, 3), 2: (1, 4)}

    counts = summary.counts
    assert counts["node"]["created"] == 4
    assert counts["target"]["created"] == 10
    assert counts["buddy group"]["created"] == 5
    assert summary.updated == 0
    assert summary.warnings == []


@needs_samples
def test_second_import_changes_nothing(lab, alice):
    import_texts(lab, alice, v7_texts())
    before = (
        Node.objects.count(),
        Target.objects.count(),
        MirrorGroup.objects.count(),
        TestbedNode.objects.count(),
        HardwareProfile.objects.count(),
    )
    again = import_texts(lab, alice, v7_texts())
    assert (again.created, again.updated) == (0, 0)
    assert again.unchanged == len(again.changes) > 0
    assert before == (
        Node.objects.count(),
        Target.objects.count(),
        MirrorGroup.objects.count(),
        TestbedNode.objects.count(),
        HardwareProfile.objects.count(),
    )


@needs_samples
def test_update_keeps_what_the_user_entered_and_never_clears_roles(lab, alice, profile):
    # Parts of the testbed typed in by hand before the import.
    slave1 = Node.objects.create(
        owner=alice, hostname="beegfs-slave1", profile=profile, address="10.0.0.1"
    )
    TestbedNode.objects.create(testbed=lab, node=slave1, client=True, monitoring=True)
    Target.objects.create(
        testbed=lab,
        kind="storage",
        target_id=1011,
        raid_level="6",
        disks=10,
        filesystem="xfs",
        name="md0",
        path="/data/md0",
        capacity_gb=1.0,
    )

    summary = import_texts(lab, alice, v7_texts())

    slave1.refresh_from_db()
    assert slave1.profile == profile  # an existing node keeps its hardware profile
    assert roles_of(lab)["beegfs-slave1"] == {"client", "monitoring", "metadata", "storage"}
    t = lab.targets.get(kind="storage", target_id=1011)
    assert (t.raid_level, t.disks, t.filesystem, t.name, t.path) == (
        "6",
        10,
        "xfs",
        "md0",
        "/data/md0",
    )
    assert t.node == slave1  # BeeGFS says where it lives, and how big it is
    assert t.capacity_gb == pytest.approx(7152.0 * GIB / 1e9, abs=0.01)
    changed = {c.label: c for c in summary.changes if c.action == "updated"}
    assert any(label.startswith("storage target 1011") for label in changed)
    assert lab.targets.filter(kind="storage", target_id=1011).count() == 1
    # The other nodes are new and get the catch-all profile.
    assert Node.objects.get(owner=alice, hostname="beegfs-slave2").profile.name == (
        IMPORTED_PROFILE_NAME
    )


@needs_samples
def test_chosen_profile_and_command_lines_in_one_paste(lab, alice, profile):
    session = (
        "[root@mgmt ~]# beegfs-ctl --listnodes --nodetype=meta\n"
        + beegfs("listnodes-nodetype-meta.txt")
        + "[root@mgmt ~]# beegfs-ctl --listnodes --nodetype=storage\n"
        + beegfs("listnodes-nodetype-storage.txt")
        + "[root@mgmt ~]# beegfs-ctl --listtargets --nodetype=meta --state\n"
        + beegfs("listtargets-state-nodetype-meta.txt")
        + "[root@mgmt ~]# \n"
    )
    import_texts(lab, alice, [(session, None)], profile=profile)
    assert roles_of(lab)["oneasia-c1-cpu-node10"] == {"metadata"}
    assert roles_of(lab)["beegfs-slave3"] == {"metadata", "storage"}
    # listtargets-state-nodetype-meta: "4  Online  Good  4"
    assert targets_of(lab, "metadata")[4].node.hostname == "beegfs-slave3"
    assert not lab.targets.filter(kind="storage").exists()
    assert {n.profile for n in Node.objects.filter(owner=alice)} == {profile}
    assert not HardwareProfile.objects.filter(name=IMPORTED_PROFILE_NAME).exists()


@needs_samples
def test_targets_without_their_node_list_are_kept_with_a_warning(lab, alice):
    summary = import_texts(lab, alice, [(beegfs("listtargets-mirrorgroups.txt"), None)])
    # "1  primary  3011  301", "1  secondary  3021  302": storage nodes 301..303 are unnamed.
    assert groups_of(lab, "storage") == {1: (3011, 3021), 2: (3031, 3012), 3: (3022, 3032)}
    assert all(t.node is None for t in lab.targets.all())
    assert any("3011, 3012" in w and "storage node 301" in w for w in summary.warnings)


def test_nodes_match_by_hostname_ignoring_case_and_domain(testbed, alice, node):
    # The testbed fixture: node "stor1" (storage, metadata, management) and one hand-entered
    # target row without a BeeGFS target ID.
    nodes = "STOR1.lab.example [ID: 7]\n"
    targets = (
        "TargetID     Reachability  Consistency   NodeID\n"
        "========     ============  ===========   ======\n"
        "     701           Online         Good        7\n"
    )
    summary = import_texts(testbed, alice, [(nodes, "storage"), (targets, "storage")])
    assert list(Node.objects.values_list("hostname", flat=True)) == ["stor1"]
    assert testbed.targets.get(target_id=701).node == node
    assert roles_of(testbed) == {"stor1": {"management", "metadata", "storage"}}
    assert summary.count("unchanged", "role") == 1
    assert any("1 target row without a BeeGFS target ID" in w for w in summary.warnings)


@needs_samples
def test_listnodes_needs_a_node_type(lab):
    plan = plan_topology(lab, [(beegfs("listnodes-nodetype-storage.txt"), None)])
    assert len(plan.errors) == 1
    assert "does not print node types" in plan.errors[0].message


# --- BeeGFS 8 (beegfs) -----------------------------------------------------------------------


@needs_samples
def test_v8_node_target_and_pool_lists(lab, alice):
    summary = import_texts(
        lab,
        alice,
        [
            (beegfs("beegfs8-node-list-client-meta-storage-mgmt.txt"), None),
            (beegfs("beegfs8-target-list-aliases-2storage-1meta.txt"), None),
            (beegfs("beegfs8-pool-list-default-and-archive.txt"), None),
        ],
    )
    # "c:9  client  c2EA3-68271449-luminen": a client's ID ends in its hostname.
    assert roles_of(lab) == {
        "luminen": {"client"},
        "node_meta_2": {"metadata"},
        "node_storage_2": {"storage"},
        "node_storage_3": {"storage"},
        "management": {"management"},
    }
    # "s:1  storage_pool_default  s:101", "s:2  archive  s:102"
    assert {p.pool_id: p.name for p in lab.pools.all()} == {1: "storage_pool_default", 2: "archive"}
    storage = targets_of(lab, "storage")
    # "s:101  storage  s101_default_0  s:1  s:1", "s:102  storage  s102_archive_0  s:1  s:2"
    assert {tid: (t.name, t.pool.pool_id) for tid, t in storage.items()} == {
        101: ("s101_default_0", 1),
        102: ("s102_archive_0", 2),
    }
    meta = targets_of(lab, "metadata")
    # "m:1  meta  target_meta_1  m:1": meta node 1 is not in the node list; m:2 is.
    assert meta[1].name == "target_meta_1" and meta[1].node is None
    assert meta[2].node.hostname == "node_meta_2"
    assert storage[101].node is None  # on storage node s:1, not in this node list
    assert any("101, 102 are on storage node 1" in w for w in summary.warnings)
    assert any("metadata target 1 is on meta node 1" in w for w in summary.warnings)


@needs_samples
def test_v8_health_df_places_targets_with_capacity(lab, alice):
    import_texts(
        lab,
        alice,
        [
            (beegfs("beegfs8-node-list-client-meta-storage-mgmt.txt"), None),
            (beegfs("beegfs8-health-df-1meta-2storage-cap-pools.txt"), None),
        ],
    )
    storage = targets_of(lab, "storage")
    # "s:301  storage  target_0-682AD65E-2  s:2  s:1  Low  99.9GiB ..."
    # "s:302  storage  target_0-682AD7A2-3  s:3  s:1  Normal  893.8GiB ..."
    assert storage[301].node.hostname == "node_storage_2"
    assert storage[302].node.hostname == "node_storage_3"
    assert storage[301].capacity_gb == pytest.approx(99.9 * GIB / 1e9, abs=0.01)
    assert storage[302].capacity_gb == pytest.approx(893.8 * GIB / 1e9, abs=0.01)
    assert storage[302].pool.pool_id == 1
    # "m:2  meta  target_meta_2  m:2  (n/a)  Low  11.7GiB ..."
    meta = targets_of(lab, "metadata")
    assert list(meta) == [2]
    assert meta[2].node.hostname == "node_meta_2"
    assert meta[2].capacity_gb == pytest.approx(11.7 * GIB / 1e9, abs=0.01)


# --- the pages -------------------------------------------------------------------------------


@needs_samples
def test_preview_saves_nothing_then_save_imports(alice_client, lab, alice):
    form = {
        "text_1": beegfs("listnodes-nodetype-storage.txt"),
        "node_type_1": "storage",
        "text_2": beegfs("listtargets-state-nodetype-storage.txt"),
        "node_type_2": "storage",
        "text_3": beegfs("listmirrorgroups-nodetype-storage.txt"),
        "node_type_3": "",
        "action": "preview",
    }
    response = alice_client.post(url(lab), form)
    html = response.content.decode()
    assert response.status_code == 200
    assert 'id="topology-changes"' in html
    assert "beegfs-slave2 (BeeGFS storage 102)" in html
    assert "storage buddy group 102: 1012 + 1031" in html
    assert not Node.objects.exists() and not lab.targets.exists()
    assert not HardwareProfile.objects.exists()  # the dry run rolled the profile back too

    save = {
        "action": "save",
        "profile": "",
        "item_label": ["Output 1", "Output 2", "Output 3"],
        "item_text": [form["text_1"], form["text_2"], form["text_3"]],
        "item_node_type": ["storage", "storage", ""],
    }
    response = alice_client.post(url(lab), save)
    assert response.status_code == 302 and response.url == lab.get_absolute_url()
    assert set(roles_of(lab)) == {"beegfs-slave1", "beegfs-slave2", "beegfs-slave3"}
    assert groups_of(lab, "storage") == {101: (1011, 1021), 102: (1012, 1031), 103: (1022, 1032)}
    page = alice_client.get(lab.get_absolute_url()).content.decode()
    assert 'id="mirror-groups"' in page and "1031 on beegfs-slave3" in page
    assert "Imported the BeeGFS topology: " in page

    # The same output again: the preview shows nothing to change.
    response = alice_client.post(url(lab), form)
    summary = response.context["summary"]
    assert (summary.created, summary.updated) == (0, 0)
    alice_client.post(url(lab), save)
    assert Target.objects.filter(testbed=lab).count() == 6


@needs_samples
def test_upload_with_a_profile(alice_client, lab, profile):
    upload = SimpleUploadedFile(
        "listnodes-meta.txt", beegfs("listnodes-nodetype-meta.txt").encode()
    )
    response = alice_client.post(
        url(lab),
        {
            "files": upload,
            "files_node_type": "meta",
            "profile": str(profile.uuid),
            "action": "preview",
        },
    )
    assert response.status_code == 200
    items = response.context["items"]
    assert [i["label"] for i in items] == ["listnodes-meta.txt"]
    save = {
        "action": "save",
        "profile": str(profile.uuid),
        "item_label": items[0]["label"],
        "item_text": items[0]["text"],
        "item_node_type": "meta",
    }
    assert alice_client.post(url(lab), save).status_code == 302
    assert {n.profile for n in Node.objects.all()} == {profile}
    assert roles_of(lab)["oneasia-c1-cpu-node10"] == {"metadata"}


def test_garbage_is_refused_with_its_line_number(alice_client, lab):
    response = alice_client.post(
        url(lab),
        {
            "text_1": "hello world\nthis is not BeeGFS output\n",
            "node_type_1": "",
            "action": "preview",
        },
    )
    html = response.content.decode()
    assert response.status_code == 200
    assert "Output 1: line 1: no BeeGFS listing recognised" in html
    assert 'id="topology-changes"' not in html
    assert not Node.objects.exists()


def test_errors_count_lines_from_the_start_of_the_paste(lab):
    session = (
        "$ beegfs-ctl --listnodes --nodetype=meta\n"  # line 1
        "meta01 [ID: 1]\n"
        "$ beegfs-ctl --listtargets --nodetype=meta\n"
        "TargetID   NodeID\n"  # line 4: the table's header
        "========   ======\n"
        "       1   meta01-not-a-number\n"
    )
    plan = plan_topology(lab, [(session, None)])
    [error] = plan.errors
    assert error.label == "Output 1 (beegfs-ctl --listtargets --nodetype=meta)"
    assert str(error) == "line 4: the beegfs-ctl table at line 4 has no readable rows"
    assert list(plan.nodes) == [("meta", 1)]  # the first output was still read


def test_untyped_listnodes_and_entry_info_are_refused(alice_client, lab):
    response = alice_client.post(
        url(lab),
        {
            "text_1": "node01 [ID: 1]\nnode02 [ID: 2]\n",
            "node_type_1": "",
            "text_2": "EntryID: root\nMetadata node: meta01 [ID: 1]\n",
            "node_type_2": "",
            "action": "preview",
        },
    )
    html = response.content.decode()
    assert response.status_code == 200
    assert "does not print node types" in html
    assert "not a listing of nodes, targets, pools or buddy groups" in html
    assert not Node.objects.exists()


def test_an_empty_form_asks_for_output(alice_client, lab):
    response = alice_client.post(url(lab), {"action": "preview"})
    assert response.status_code == 200
    assert "Paste BeeGFS output or choose output files." in response.content.decode()


def test_a_tampered_save_changes_nothing(alice_client, lab):
    response = alice_client.post(
        url(lab),
        {"action": "save", "item_label": "x", "item_text": "garbage", "item_node_type": ""},
    )
    assert response.status_code == 302 and response.url == url(lab)
    assert not Node.objects.exists()


def test_only_owner_and_staff_import(alice_client, bob_client, lab, django_user_model):
    assert alice_client.get(url(lab)).status_code == 200
    assert bob_client.get(url(lab)).status_code == 403
    response = bob_client.post(
        url(lab),
        {
            "action": "save",
            "item_label": "x",
            "item_text": "node1 [ID: 1]",
            "item_node_type": "meta",
        },
    )
    assert response.status_code == 403
    assert not Node.objects.exists()
    response = Client().get(url(lab))  # anonymous (the client fixture is alice's)
    assert response.status_code == 302 and response.url.startswith(reverse("login"))

    # The detail page offers the import only to those who may use it.
    assert 'id="topology-import"' in alice_client.get(lab.get_absolute_url()).content.decode()
    assert 'id="topology-import"' not in bob_client.get(lab.get_absolute_url()).content.decode()

    # Staff may import into alice's testbed; the nodes go to alice's inventory.
    staff = django_user_model.objects.create_user("carol", password="pw", is_staff=True)
    carol = Client()
    carol.force_login(staff)
    response = carol.post(
        url(lab),
        {
            "action": "save",
            "item_label": "x",
            "item_text": "node1 [ID: 1]\n",
            "item_node_type": "meta",
        },
    )
    assert response.status_code == 302
    assert Node.objects.get().owner == lab.owner


def test_published_testbeds_are_read_only(alice_client, alice):
    published = Testbed.objects.create(owner=alice, name="study", published=True)
    assert alice_client.get(url(published)).status_code == 403
    response = alice_client.post(
        url(published), {"text_1": "node1 [ID: 1]", "node_type_1": "meta", "action": "preview"}
    )
    assert response.status_code == 403
