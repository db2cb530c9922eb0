"""A testbed's topology read from a real, running BeeGFS (tests/labs/beegfs.py ``beegfs_host``)
through a node request that a node agent answers (experiments.execution.noderequests), as a
node's worker runs it: a thread beside the test, polling the real database.

What the import makes of the live listings is checked against the daemons themselves, not
against the parser: the storage targets' capacities against statvfs of their directories, the
node names against what each daemon was started as (and the management daemon against this
host's name, which it registers under), the states against the lab's own reading.
"""

from __future__ import annotations

import os
import socket
import time

import pytest
from django.urls import reverse
from django.utils import timezone

from experiments.execution import agent, noderequests
from experiments.execution.noderequests import NodeRequestError, NodeRequests, ask
from experiments.inventory.live import (
    LiveError,
    LiveTarget,
    LiveTopology,
    differences,
    plan_live,
    read_answer,
)
from experiments.inventory.topology import apply_topology
from experiments.models import Node, NodeRequest, Target, Testbed, TestbedNode, Worker
from runners import beegfs_ctl, beegfs_topology

pytestmark = pytest.mark.slow
KIND = NodeRequest.Kind.BEEGFS_TOPOLOGY
HOST = "mgmt01"  # the beeweb node whose worker reaches the lab's management daemon


def worker_row(name: str, node: str) -> Worker:
    now = timezone.now()
    return Worker.objects.create(
        name=name, hostname=node, queues=[f"node.{node}"], started_at=now, last_seen=now
    )


def wait_for(predicate, what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, what
        time.sleep(0.02)


@pytest.fixture
def node_agent(beegfs_host, monkeypatch):
    """The node agent of HOST's worker, as the NodeAgent bootstep starts it (its default
    jobs), with BEEWEB_BEEGFS_CTL pointing at the lab (the worker's own environment)."""
    monkeypatch.setenv(beegfs_ctl.CTL_VAR, " ".join(beegfs_host.ctl_argv()))
    started = []

    def start(name: str = HOST, jobs=None) -> agent.Agent:
        worker_row(f"{name}@{name}", name)
        one = agent.Agent(f"{name}@{name}", [name], jobs=jobs).start()
        started.append(one)
        wait_for(lambda: noderequests.agent_alive(name), "the agent's first poll")
        return one

    yield start
    for one in started:
        one.stop()


@pytest.mark.django_db(transaction=True)
def test_the_live_plan_is_what_the_daemons_have(beegfs_host, node_agent, alice, profile):
    node_agent()
    # A few round trips: the first includes the agent's first look at the table.
    trips = []
    for _ in range(3):
        began = time.monotonic()
        answer = ask(HOST, KIND, user=alice, timeout=60)
        trips.append(time.monotonic() - began)
    assert answer.error == "" and answer.taken_by == f"{HOST}@{HOST}"
    assert answer.requested_by == alice and answer.round_trip is not None
    live = read_answer(answer.result)
    # The fixed listings, with the lab's beegfs-ctl, each answered.
    rows = answer.result["listings"]
    assert [r["name"] for r in rows] == [listing.name for listing in beegfs_topology.LISTINGS]
    assert answer.result["ctl"] == beegfs_host.ctl_argv()
    for row in rows:
        assert row["rc"] == 0, row
    # States as the lab reads them (``--listtargets --state``), lower-cased.
    assert {t.target_id: t.reachability for t in live.targets.values() if t.kind == "storage"} == {
        k: v.lower() for k, v in beegfs_host.targets().items()
    }
    assert {(t.kind, t.target_id, t.node, t.consistency) for t in live.targets.values()} == {
        ("metadata", 1, "meta01", "good"),
        ("storage", 1, "storage01", "good"),
        ("storage", 2, "storage01", "good"),
    }

    testbed = Testbed.objects.create(owner=alice, name="live")
    plan = plan_live(testbed, live)
    assert not plan.errors and not plan.warnings, (plan.errors, plan.warnings)
    mgmt_name = socket.gethostname()  # the management daemon registers under its host's name
    assert {(n.type, n.beegfs_id, n.hostname) for n in plan.nodes.values()} == {
        ("management", 1, mgmt_name),
        ("meta", 1, "meta01"),
        ("storage", 1, "storage01"),
    }
    summary = apply_topology(testbed, plan, alice, profile=profile)
    assert summary.count("created", "target") == 3
    roles = {
        m.node.hostname: m.role_names
        for m in TestbedNode.objects.filter(testbed=testbed).select_related("node")
    }
    assert roles == {
        mgmt_name: ["management"],
        "meta01": ["metadata"],
        "storage01": ["storage"],
    }
    # Capacities: what the storage daemon reports of its target directories is their file
    # system's size (BeeGFS prints GiB with one decimal: within 0.05 GiB).
    for target_id in (1, 2):
        stored = Target.objects.get(testbed=testbed, kind="storage", target_id=target_id)
        assert stored.node.hostname == "storage01" and stored.pool.name == "Default"
        fs = os.statvfs(beegfs_host.base / "data" / f"target{target_id}")
        size_gb = fs.f_blocks * fs.f_frsize / 1e9
        assert abs(stored.capacity_gb - size_gb) <= 0.05 * 1.074 + 0.01, (stored, size_gb)
    meta = Target.objects.get(testbed=testbed, kind="metadata", target_id=1)
    assert meta.node.hostname == "meta01"
    # Addresses from --nicdetails; nodes are alice's, with the profile given.
    assert all(n.address for n in Node.objects.filter(owner=alice, profile=profile))
    # Stored as read: the running cluster and the testbed agree; a second import changes
    # nothing.
    assert differences(testbed, live) == []
    again = apply_topology(testbed, plan_live(testbed, live), alice)
    assert again.created == again.updated == 0
    print(
        f"\nlive topology round trip {min(trips) * 1000:.0f} ms (best of 3; "
        f"{', '.join(f'{t * 1000:.0f}' for t in trips)} ms), of which beegfs-ctl "
        f"{live.seconds * 1000:.0f} ms for {len(rows)} listings"
    )


@pytest.mark.django_db(transaction=True)
def test_drift_names_targets_added_removed_moved_and_not_online(beegfs_host, node_agent, alice):
    node_agent()
    live = read_answer(ask(HOST, KIND, timeout=60).result)
    testbed = Testbed.objects.create(owner=alice, name="drift")
    apply_topology(testbed, plan_live(testbed, live), alice)
    assert differences(testbed, live) == []
    # The stored testbed changes under the live one: target 2 forgotten, metadata target 1
    # on another node, a storage target 7 that BeeGFS does not have.
    Target.objects.filter(testbed=testbed, kind="storage", target_id=2).delete()
    other = Node.objects.create(
        owner=alice, hostname="meta02", profile=Node.objects.get(hostname="meta01").profile
    )
    Target.objects.filter(testbed=testbed, kind="metadata").update(node=other)
    Target.objects.create(
        testbed=testbed, kind="storage", target_id=7, node=other, raid_level="none"
    )
    TestbedNode.objects.create(testbed=testbed, node=other, storage=True)
    found = differences(testbed, live)
    assert found == [
        "metadata target 1 moved from meta02 to meta01",
        "storage target 2 on storage01 was added",
        "storage target 7 (on meta02) is not in the cluster any more",
        "storage server meta02 is not in the cluster any more",
    ], found
    # A target's state as BeeGFS says it.
    live.targets[("storage", 1)].reachability = "offline"
    assert "storage target 1 on storage01 is offline" in differences(testbed, live)


@pytest.mark.django_db(transaction=True)
def test_no_agent_an_old_agent_and_a_failing_beegfs_ctl_say_so(
    beegfs_host, node_agent, monkeypatch
):
    # No worker with an agent serves the node: said at once, not after the timeout.
    began = time.monotonic()
    with pytest.raises(NodeRequestError, match="no beeweb worker with a node agent runs on s9"):
        ask("s9", KIND, timeout=30)
    assert time.monotonic() - began < 10  # (only against a wait for the timeout)
    closed = NodeRequest.objects.get(hostname="s9")
    assert closed.answered_at and "no beeweb worker" in closed.error

    # A worker older than node requests: its agent runs without the job; the wait ends at
    # the timeout and says the request was not taken, and a later agent never takes it.
    node_agent("old1", jobs=[agent.CacheDrop()])
    with pytest.raises(NodeRequestError, match="did not take the request"):
        ask("old1", KIND, timeout=1.0)
    request = NodeRequest.objects.get(hostname="old1")
    NodeRequests(["old1"], "new@old1").tick([])
    request.refresh_from_db()
    assert request.taken_at is None and "did not take" in request.error

    # beegfs-ctl missing on the node: BeeGFS's (here the system's) words reach the user.
    node_agent("bad1")
    monkeypatch.setenv(beegfs_ctl.CTL_VAR, "/nonexistent/beegfs-ctl --cfgFile=/x")
    answer = ask("bad1", KIND, timeout=60)
    with pytest.raises(LiveError, match="/nonexistent/beegfs-ctl: not found on this node"):
        read_answer(answer.result)
    # A management daemon that does not answer: beegfs-ctl's own complaint, after one listing.
    monkeypatch.setenv(
        beegfs_ctl.CTL_VAR,
        f"{beegfs_host.bin_dir / 'beegfs-ctl'} --cfgFile=/nonexistent.conf",
    )
    answer = ask("bad1", KIND, timeout=60)
    assert len(answer.result["listings"]) >= 1
    with pytest.raises(LiveError, match="beegfs-ctl --listnodes --nodetype=mgmt --nicdetails"):
        read_answer(answer.result)

    # Parameters are choices the node validates: this kind has none.
    request = NodeRequest.objects.create(hostname="bad1", kind=KIND, params={"args": "--x"})
    wait_for(lambda: NodeRequest.objects.get(pk=request.pk).answered_at is not None, "the answer")
    request.refresh_from_db()
    assert request.result is None
    assert request.error == "beegfs-topology takes no parameters (got args)"


def test_a_ctl_prefix_is_split_without_a_shell():
    env = {beegfs_ctl.CTL_VAR: "/opt/beegfs/sbin/beegfs-ctl '--cfgFile=/etc/a b.conf'"}
    assert beegfs_ctl.ctl_prefix(env) == [
        "/opt/beegfs/sbin/beegfs-ctl",
        "--cfgFile=/etc/a b.conf",
    ]
    assert beegfs_ctl.ctl_prefix({}) == ["beegfs-ctl"]
    with pytest.raises(beegfs_ctl.CtlConfigError, match="No closing quotation"):
        beegfs_ctl.ctl_prefix({beegfs_ctl.CTL_VAR: "beegfs-ctl '"})


def test_an_answer_without_listings_is_refused():
    for bad in (None, {}, {"listings": "x"}, {"listings": []}):
        with pytest.raises(LiveError):
            read_answer(bad)
    # An optional listing (an Enterprise Feature) that fails only warns.
    ok = {"listings": [], "seconds": 0.1}
    ok["listings"] = [
        {"name": "mgmt nodes", "rc": 0, "stdout": "mgmt01 [ID: 1]\n"},
        {"name": "storage pools", "rc": 1, "stdout": "", "stderr": "not licensed"},
    ]
    live = read_answer(ok)
    assert live.nodes == {"management": {"mgmt01"}}
    assert live.warnings == ["beegfs-ctl --liststoragepools exited with 1: not licensed"]
    assert isinstance(live, LiveTopology)
    assert LiveTarget("storage", 1, "s", "online", "needs-resync").healthy is False


# --- the pages and the API ------------------------------------------------------------------


@pytest.fixture
def mgmt_node(alice, profile):
    """alice's node whose worker reaches the lab's management daemon."""
    return Node.objects.create(owner=alice, hostname=HOST, profile=profile)


def live_url(testbed: Testbed) -> str:
    return reverse("experiments:testbed_topology_live", args=[testbed.uuid])


@pytest.mark.django_db(transaction=True)
def test_import_from_the_live_cluster_preview_then_save(
    beegfs_host, node_agent, alice, alice_client, mgmt_node
):
    node_agent()
    testbed = Testbed.objects.create(owner=alice, name="fresh")
    page = alice_client.get(testbed.get_absolute_url()).content.decode()
    assert 'id="topology-live"' in page and "Import from the live cluster" in page
    page = alice_client.get(live_url(testbed)).content.decode()
    assert "Read the live cluster" in page and f">{HOST}</option>" in page
    response = alice_client.post(live_url(testbed), {"action": "preview", "node": mgmt_node.uuid})
    page = response.content.decode()
    assert response.status_code == 200, page
    # The preview: the live states, the paste import's change table, nothing saved yet.
    assert 'id="live-targets"' in page and "storage 2" in page and "online" in page
    assert 'id="topology-changes"' in page and "Nothing is saved yet" in page
    assert not Target.objects.filter(testbed=testbed).exists()
    answer = NodeRequest.objects.get(hostname=HOST)
    assert f'value="{answer.uuid}"' in page
    saved = alice_client.post(
        live_url(testbed), {"action": "save", "node": mgmt_node.uuid, "answer": answer.uuid}
    )
    assert saved.status_code == 302 and saved["Location"] == testbed.get_absolute_url()
    testbed.refresh_from_db()
    assert testbed.live_node == mgmt_node and testbed.live_imported_at is not None
    assert set(
        Target.objects.filter(testbed=testbed).values_list("kind", "target_id", "node__hostname")
    ) == {("metadata", 1, "meta01"), ("storage", 1, "storage01"), ("storage", 2, "storage01")}
    page = alice_client.get(testbed.get_absolute_url()).content.decode()
    assert "Refresh from the live cluster" in page and f"read by {HOST}" in page
    # The paste page offers the live import too.
    page = alice_client.get(
        reverse("experiments:testbed_topology_import", args=[testbed.uuid])
    ).content.decode()
    assert 'id="live-link"' in page and "Refresh from the live cluster" in page


@pytest.mark.django_db(transaction=True)
def test_who_may_ask_which_node_and_bad_input(
    beegfs_host, node_agent, alice, bob, alice_client, bob_client, mgmt_node, profile
):
    from django.test import Client

    testbed = Testbed.objects.create(owner=alice, name="alice-live")
    url = live_url(testbed)
    # Anonymous: to the sign-in page.
    anonymous = Client()
    for response in (anonymous.get(url), anonymous.post(url, {"node": mgmt_node.uuid})):
        assert response.status_code == 302 and "/login" in response["Location"]
    # bob may not change alice's testbed, so may not ask for it.
    assert bob_client.get(url).status_code == 403
    assert bob_client.post(url, {"action": "preview", "node": mgmt_node.uuid}).status_code == 403
    # Nor may bob ask alice's node (not shared) for his own testbed: not offered, refused.
    bobs = Testbed.objects.create(owner=bob, name="bob-live")
    assert f">{HOST}<" not in bob_client.get(live_url(bobs)).content.decode()
    response = bob_client.post(live_url(bobs), {"action": "preview", "node": mgmt_node.uuid})
    assert response.status_code == 403
    assert not NodeRequest.objects.exists()  # nothing was asked of the node
    # Bad input: 400 / 404, never a 500, nothing asked.
    for data, code in (
        ({"action": "preview"}, 400),
        ({"action": "preview", "node": "not-a-uuid"}, 400),
        ({"action": "preview", "node": "00000000-0000-0000-0000-000000000000"}, 404),
        ({"action": "preview", "node": mgmt_node.uuid, "profile": "x"}, 400),
    ):
        assert alice_client.post(url, data).status_code == code, data
    assert not NodeRequest.objects.exists()
    # A save with no, or someone else's, answer: back to the form, nothing saved.
    for answer in ("", "00000000-0000-0000-0000-000000000000"):
        response = alice_client.post(
            url, {"action": "save", "node": mgmt_node.uuid, "answer": answer}, follow=True
        )
        assert "gone or too old" in response.content.decode()
    bob_answer = NodeRequest.objects.create(
        hostname=HOST, kind=KIND, requested_by=bob, answered_at=timezone.now(), result={}
    )
    response = alice_client.post(
        url, {"action": "save", "node": mgmt_node.uuid, "answer": bob_answer.uuid}, follow=True
    )
    assert "gone or too old" in response.content.decode()
    assert not Target.objects.filter(testbed=testbed).exists()
    # A node without a worker: the page says so, at once.
    offline = Node.objects.create(owner=alice, hostname="offline1", profile=profile)
    page = alice_client.post(url, {"action": "preview", "node": offline.uuid}).content.decode()
    assert "no beeweb worker with a node agent runs on offline1" in page


def launch_url(matrix) -> str:
    return reverse("experiments:matrix_launch", args=[matrix.uuid])


@pytest.mark.django_db(transaction=True)
def test_a_launch_on_a_drifted_testbed_asks_and_records_launch_anyway(
    beegfs_host, node_agent, alice, alice_client, mgmt_node, tmp_path
):
    from rest_framework.test import APIClient

    from experiments.models import Matrix

    mgmt_agent = node_agent()
    testbed = Testbed.objects.create(owner=alice, name="live-bench", benchmark_dir=str(tmp_path))
    live = read_answer(ask(HOST, KIND, timeout=60).result)
    apply_topology(testbed, plan_live(testbed, live), alice)
    TestbedNode.objects.create(testbed=testbed, node=mgmt_node, client=True)
    Testbed.objects.filter(pk=testbed.pk).update(live_node=mgmt_node)
    matrix = Matrix.objects.create(
        owner=alice, name="dd", tool="dd", fixed_params={"bs": "64k", "count": 4}
    )
    matrix.testbeds.set([testbed])
    # As stored: the launch goes ahead without a question.
    response = alice_client.post(launch_url(matrix))
    assert response.status_code == 302 and matrix.runs.exists()
    matrix.refresh_from_db()
    assert matrix.topology_overrides == []
    matrix.runs.all().delete()
    Matrix.objects.filter(pk=matrix.pk).update(launched_at=None)

    # The stored testbed lost target 2: the launch page names the difference and asks.
    Target.objects.filter(testbed=testbed, kind="storage", target_id=2).delete()
    response = alice_client.post(launch_url(matrix))
    page = response.content.decode()
    assert response.status_code == 200
    assert "storage target 2 on storage01 was added" in page and 'id="launch-anyway"' in page
    assert not matrix.runs.exists()
    # The API refuses with 409 and the differences, unless told to override.
    api = APIClient()
    api.force_authenticate(alice)
    api_url = f"/api/matrices/{matrix.uuid}/launch/"
    refused = api.post(api_url, {}, format="json")
    assert refused.status_code == 409, refused.content
    added = ["storage target 2 on storage01 was added"]
    assert refused.json()["testbeds"][0]["differences"] == added
    assert api.post(api_url, {"override_topology": "yes"}, format="json").status_code == 400
    assert not matrix.runs.exists()
    # Launch anyway: launched, and the matrix records who, when and what differed.
    response = alice_client.post(launch_url(matrix), {"anyway": "1"})
    assert response.status_code == 302 and matrix.runs.exists()
    matrix.refresh_from_db()
    (entry,) = matrix.topology_overrides
    assert entry["by"] == "alice"
    assert entry["testbeds"][0]["differences"] == added
    page = alice_client.get(matrix.get_absolute_url()).content.decode()
    assert 'id="topology-overrides"' in page and "launched anyway by alice" in page
    ok = api.post(api_url, {"override_topology": True}, format="json")
    assert ok.status_code == 200, ok.content
    matrix.refresh_from_db()
    assert len(matrix.topology_overrides) == 2

    # The live node's worker is gone: the page says the node could not be asked, and the
    # user may still launch.
    mgmt_agent.stop()
    Worker.objects.filter(name=f"{HOST}@{HOST}").update(agent_seen=None)
    page = alice_client.post(launch_url(matrix)).content.decode()
    assert f"{HOST} could not tell its live topology: no beeweb worker" in page
    assert 'id="launch-anyway"' in page


SILENT_TARGETS = """\
TargetID     Reachability  Consistency        Total         Free    %      ITotal       IFree    %   NodeID
========     ============  ===========        =====         ====    =      ======       =====    =   ======
       1           Online         Good       0.0GiB       0.0GiB   0%        0.0M        0.0M   0%   beegfs-storage storage01 [ID: 1]
       2           Online         Good     252.0GiB     228.3GiB  91%       16.8M       16.1M  96%   beegfs-storage storage02 [ID: 2]
"""  # noqa: E501 - beegfs-ctl 7.4.7 a second after storage01's daemon was killed (exit 3)


@pytest.mark.django_db
def test_a_server_that_does_not_answer_keeps_its_targets_without_sizes(alice):
    answer = {
        "listings": [
            {"name": "mgmt nodes", "rc": 0, "stdout": "mgmt01 [ID: 1]\n"},
            {
                "name": "storage targets",
                "rc": 3,
                "stdout": SILENT_TARGETS,
                "stderr": "[ERROR from beegfs-storage storage01 [ID: 1]: Communication error]\n",
            },
        ]
    }
    live = read_answer(answer)
    assert live.targets[("storage", 1)].error == "Communication error"
    assert not live.targets[("storage", 1)].healthy and live.targets[("storage", 2)].healthy
    assert live.warnings == [
        "storage server storage01 did not answer beegfs-ctl (Communication error): its "
        "targets' sizes are unknown"
    ]
    testbed = Testbed.objects.create(owner=alice, name="silent")
    plan = plan_live(testbed, live)
    # The 0.0GiB printed for the silent server is no capacity.
    assert plan.targets[("storage", 1)].capacity_gb is None
    assert plan.targets[("storage", 2)].capacity_gb == 270.58
    apply_topology(testbed, plan, alice)
    assert differences(testbed, live) == [
        "storage target 1 on storage01 does not answer (Communication error; the management "
        "daemon says online)"
    ]
    # Without a table, a failed listing is the node's answer: BeeGFS's words.
    answer["listings"][1]["stdout"] = ""
    with pytest.raises(LiveError, match="exited with 3: .ERROR from beegfs-storage storage01"):
        read_answer(answer)


@pytest.mark.django_db(transaction=True)
def test_the_api_reads_previews_and_saves_the_live_topology(
    beegfs_host, node_agent, alice, bob, mgmt_node, profile
):
    from rest_framework.test import APIClient

    node_agent()
    testbed = Testbed.objects.create(owner=alice, name="api-live")
    url = f"/api/testbeds/{testbed.uuid}/live-topology/"
    api = APIClient()
    assert api.post(url, {}, format="json").status_code in (401, 403)  # anonymous
    api.force_authenticate(bob)
    assert api.post(url, {"node": str(mgmt_node.uuid)}, format="json").status_code == 403
    api.force_authenticate(alice)
    for body in ({"node": "x"}, {"node": 3}, {"save": "yes"}, {"profile": "nope"}):
        response = api.post(url, body, format="json")
        assert response.status_code == 400, (body, response.content)
    offline = Node.objects.create(owner=alice, hostname="offline2", profile=profile)
    response = api.post(url, {"node": str(offline.uuid)}, format="json")
    assert response.status_code == 503
    assert "no beeweb worker with a node agent runs on offline2" in response.json()["detail"]
    # Preview, then save.
    preview = api.post(url, {"node": str(mgmt_node.uuid)}, format="json")
    assert preview.status_code == 200, preview.content
    body = preview.json()
    assert body["saved"] is False and body["node"] == HOST
    assert {(t["kind"], t["target_id"], t["reachability"]) for t in body["targets"]} == {
        ("metadata", 1, "online"),
        ("storage", 1, "online"),
        ("storage", 2, "online"),
    }
    assert {c["action"] for c in body["changes"] if c["model"] == "target"} == {"created"}
    assert not Target.objects.filter(testbed=testbed).exists()
    saved = api.post(url, {"node": str(mgmt_node.uuid), "save": True}, format="json").json()
    assert saved["saved"] is True
    assert Target.objects.filter(testbed=testbed).count() == 3
    shown = api.get(f"/api/testbeds/{testbed.uuid}/").json()
    assert shown["live_node"] == HOST and shown["live_imported_at"]
    # Asked again without a node: the testbed's live node; nothing differs, nothing changes.
    again = api.post(url, {}, format="json").json()
    assert again["node"] == HOST and again["differences"] == []
    assert {c["action"] for c in again["changes"]} == {"unchanged"}


@pytest.mark.django_db(transaction=True)
def test_launch_matrix_refuses_a_drifted_testbed_unless_told(
    beegfs_host, node_agent, alice, mgmt_node, tmp_path
):
    from django.core.management import call_command

    from experiments.models import Matrix

    node_agent()
    testbed = Testbed.objects.create(owner=alice, name="cli-live", benchmark_dir=str(tmp_path))
    live = read_answer(ask(HOST, KIND, timeout=60).result)
    apply_topology(testbed, plan_live(testbed, live), alice)
    TestbedNode.objects.create(testbed=testbed, node=mgmt_node, client=True)
    Testbed.objects.filter(pk=testbed.pk).update(live_node=mgmt_node)
    Target.objects.filter(testbed=testbed, kind="metadata").delete()
    path = tmp_path / "m.yaml"
    path.write_text(
        "name: cli\ntool: dd\ntestbeds: [cli-live]\nrepetitions: 1\nparams: {bs: 64k, count: 4}\n"
    )
    with pytest.raises(SystemExit) as exited:
        call_command("launch_matrix", str(path), "--owner", "alice")
    assert exited.value.code == 4
    assert not Matrix.objects.filter(name="cli").exists()  # nothing kept
    call_command("launch_matrix", str(path), "--owner", "alice", "--override-topology")
    matrix = Matrix.objects.get(name="cli")
    assert matrix.runs.exists()
    assert matrix.topology_overrides[0]["testbeds"][0]["differences"] == [
        "metadata target 1 on meta01 was added"
    ]


@pytest.mark.django_db(transaction=True)
def test_re_run_and_resume_on_a_drifted_testbed_ask_too(
    beegfs_host, node_agent, alice, alice_client, mgmt_node, tmp_path
):
    """Re-run failed and Resume start runs as a launch does: the same question, the same
    record (with the action); only the testbeds of the runs they send are asked, and nothing
    when they send nothing."""
    from experiments.models import Matrix, Run

    node_agent()
    testbed = Testbed.objects.create(owner=alice, name="live-rerun", benchmark_dir=str(tmp_path))
    live = read_answer(ask(HOST, KIND, timeout=60).result)
    apply_topology(testbed, plan_live(testbed, live), alice)
    TestbedNode.objects.create(testbed=testbed, node=mgmt_node, client=True)
    Testbed.objects.filter(pk=testbed.pk).update(live_node=mgmt_node)
    matrix = Matrix.objects.create(
        owner=alice, name="dd-again", tool="dd", fixed_params={"bs": "64k", "count": 4}
    )
    # A second testbed without a live node: nothing says how to ask its cluster.
    plain = Testbed.objects.create(owner=alice, name="plain", benchmark_dir=str(tmp_path))
    TestbedNode.objects.create(testbed=plain, node=mgmt_node, client=True)
    matrix.testbeds.set([testbed, plain])
    assert alice_client.post(launch_url(matrix)).status_code == 302
    runs = list(matrix.runs.filter(testbed=testbed).values_list("pk", flat=True))
    others = matrix.runs.filter(testbed=plain)
    assert runs and others.exists()

    def statuses() -> set[str]:
        return set(Run.objects.filter(pk__in=runs).values_list("status", flat=True))

    rerun = reverse("experiments:matrix_rerun", args=[matrix.uuid])
    resume = reverse("experiments:matrix_resume", args=[matrix.uuid])
    added = ["storage target 2 on storage01 was added"]
    Target.objects.filter(testbed=testbed, kind="storage", target_id=2).delete()

    # Nothing failed: "Re-run failed" has nothing to send, so nothing is asked.
    Run.objects.filter(pk__in=runs).update(status=Run.Status.SUCCEEDED)
    others.update(status=Run.Status.SUCCEEDED)
    asked = NodeRequest.objects.count()
    response = alice_client.post(rerun)
    assert response.status_code == 302
    assert NodeRequest.objects.count() == asked
    # Failed runs only on the testbed without a live node: sent without a question.
    others.update(status=Run.Status.FAILED, dispatch_token=None)
    response = alice_client.post(rerun)
    assert response.status_code == 302
    assert NodeRequest.objects.count() == asked
    assert set(others.values_list("status", flat=True)) == {Run.Status.QUEUED}
    others.update(status=Run.Status.SUCCEEDED)

    # Failed runs on the drifted testbed: the page asks, names the difference, sends nothing.
    Run.objects.filter(pk__in=runs).update(status=Run.Status.FAILED, dispatch_token=None)
    response = alice_client.post(rerun)
    page = response.content.decode()
    assert response.status_code == 200, page
    assert "Re-run the failed runs of" in page and added[0] in page
    assert 'id="launch-anyway"' in page and "Re-run anyway" in page
    assert f'action="{rerun}"' in page
    assert statuses() == {Run.Status.FAILED}
    matrix.refresh_from_db()
    assert matrix.topology_overrides == []
    # Re-run anyway: queued again, recorded as a re-run.
    response = alice_client.post(rerun, {"anyway": "1"})
    assert response.status_code == 302
    assert statuses() == {Run.Status.QUEUED}
    matrix.refresh_from_db()
    (entry,) = matrix.topology_overrides
    assert entry["action"] == "rerun" and entry["by"] == "alice"
    assert entry["testbeds"][0]["differences"] == added

    # Resume of the queued runs: asked too; only "Resume anyway" sends them.
    tokens = dict(matrix.runs.values_list("pk", "dispatch_token"))
    response = alice_client.post(resume)
    page = response.content.decode()
    assert response.status_code == 200, page
    assert "Resume anyway" in page and added[0] in page and f'action="{resume}"' in page
    assert dict(matrix.runs.values_list("pk", "dispatch_token")) == tokens  # not sent
    response = alice_client.post(resume, {"anyway": "1"}, follow=True)
    assert "differences were overridden (recorded)" in response.content.decode()
    assert dict(matrix.runs.values_list("pk", "dispatch_token")) != tokens  # sent again
    matrix.refresh_from_db()
    assert [o["action"] for o in matrix.topology_overrides] == ["rerun", "resume"]
    page = alice_client.get(matrix.get_absolute_url()).content.decode()
    assert "re-ran failed runs anyway by alice" in page and "resumed anyway by alice" in page

    # As stored again: neither asks.
    live = read_answer(ask(HOST, KIND, timeout=60).result)
    apply_topology(testbed, plan_live(testbed, live), alice)
    assert alice_client.post(resume).status_code == 302
    Run.objects.filter(pk__in=runs).update(status=Run.Status.CANCELLED, dispatch_token=None)
    assert alice_client.post(rerun).status_code == 302
    assert statuses() == {Run.Status.QUEUED}
    matrix.refresh_from_db()
    assert len(matrix.topology_overrides) == 2
