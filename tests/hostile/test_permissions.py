"""Who may run where (issue 11, findings 1 and 2): testbed operators, shared nodes, published
testbeds that take no runs, and benchmark paths checked on the server.

alice and bob are two non-staff colleagues (tests/conftest.py). bob tries to launch on alice's
testbed, to put alice's machine into his own testbed (by hand, through the API, through a
BeeGFS import and by naming a node of his after it), to add runs to a published study, and
to point a benchmark at /etc; each is refused until alice allows it, where she may.
"""

from __future__ import annotations

from io import StringIO

import pytest
from django.contrib.auth.models import Group
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client
from django.urls import reverse

from experiments.inventory.topology import apply_topology, plan_topology
from experiments.matrices.axes import MatrixError
from experiments.matrices.expansion import expand, launch, resume
from experiments.matrices.files import from_data
from experiments.models import (
    HardwareProfile,
    Matrix,
    Node,
    Run,
    Target,
    Testbed,
    TestbedNode,
)
from experiments.shared.validators import work_path_problem
from tests.helpers.api import token_client

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def no_broker(monkeypatch):
    """Runs are queued in the database; no message leaves for a worker."""
    from experiments.execution.tasks import execute_run

    sent = []
    monkeypatch.setattr(execute_run, "apply_async", lambda *a, **k: sent.append((a, k)))
    return sent


@pytest.fixture
def bob_bench(bob, tmp_path):
    """bob's own testbed, with a node of his."""
    profile = HardwareProfile.objects.create(owner=bob, name="bob box", architecture="x86_64")
    box = Node.objects.create(owner=bob, hostname="bobbox", profile=profile)
    tb = Testbed.objects.create(owner=bob, name="bobs", benchmark_dir=str(tmp_path / "bob"))
    TestbedNode.objects.create(testbed=tb, node=box, client=True, storage=True)
    return tb


def fio_matrix(owner, *testbeds) -> Matrix:
    """A matrix stored directly: as if made before its owner lost (or without) the right."""
    matrix = Matrix.objects.create(
        owner=owner,
        name="sweep",
        tool="fio",
        repetitions=1,
        fixed_params={"size": "8m", "bs": "1m", "rw": "write"},
    )
    matrix.testbeds.set(testbeds)
    return matrix


def messages_of(response) -> str:
    return " ".join(str(m) for m in response.context["messages"]) if response.context else ""


def form_errors(page, field: str) -> str:
    return " ".join(page.context["form"].errors[field])


def web_launch(client, matrix):
    return client.post(reverse("experiments:matrix_launch", args=[matrix.uuid]), follow=True)


def grant(client, testbed, kind: str, name: str, action: str = "add"):
    return client.post(
        reverse("experiments:testbed_operators", args=[testbed.uuid]),
        {"kind": kind, "name": name, "action": action},
        follow=True,
    )


# --- Operators -----------------------------------------------------------------------------


def test_can_operate_owner_staff_granted_users_and_groups(alice, bob, bench, django_user_model):
    staff = django_user_model.objects.create_user("carol", is_staff=True)
    assert bench.can_operate(alice) and bench.can_operate(staff)
    assert not bench.can_operate(bob)
    assert list(Testbed.objects.operable_by(bob)) == []
    bench.operators.add(bob)
    assert bench.can_operate(bob)
    assert list(Testbed.objects.operable_by(bob)) == [bench]
    bench.operators.remove(bob)
    lab = Group.objects.create(name="lab")
    bob.groups.add(lab)
    bench.operator_groups.add(lab)
    assert bench.can_operate(bob)
    assert list(Testbed.objects.operable_by(bob)) == [bench]
    Testbed.objects.filter(pk=bench.pk).update(published=True)
    bench.refresh_from_db()
    assert not bench.can_operate(alice) and not bench.can_operate(staff)
    assert not bench.can_operate(bob)


def test_bob_cannot_launch_on_alices_testbed_until_she_grants_him(
    alice_client, bob_client, bob, bench
):
    bob_api = token_client(bob)
    matrix = fio_matrix(bob, bench)

    assert 'id="launch-refused"' in bob_client.get(matrix.get_absolute_url()).content.decode()
    page = web_launch(bob_client, matrix)
    assert "not an operator of testbed 'bench'" in messages_of(page)
    assert "ask its owner (alice)" in messages_of(page)
    answer = bob_api.post(f"/api/matrices/{matrix.uuid}/launch/")
    assert answer.status_code == 403 and "not an operator" in answer.json()["detail"]
    for action in ("matrix_rerun", "matrix_resume"):
        page = bob_client.post(reverse(f"experiments:{action}", args=[matrix.uuid]), follow=True)
        assert "not an operator" in messages_of(page)
    assert not Run.objects.exists()

    # alice grants bob by name on her testbed's page.
    assert "now operates bench" in messages_of(grant(alice_client, bench, "user", "bob"))
    assert list(bench.operators.all()) == [bob]
    page = web_launch(bob_client, matrix)
    assert "Launched: 1 run queued" in messages_of(page)
    assert Run.objects.filter(matrix=matrix, status=Run.Status.QUEUED).count() == 1

    # ... then takes it back: the API refuses again.
    assert "no longer operates" in messages_of(grant(alice_client, bench, "user", "bob", "remove"))
    answer = bob_api.post(f"/api/matrices/{matrix.uuid}/launch/")
    assert answer.status_code == 403


def test_a_granted_group_lets_its_members_launch(alice_client, bob, bench):
    bob_api = token_client(bob)
    lab = Group.objects.create(name="storage-lab")
    matrix = fio_matrix(bob, bench)
    assert bob_api.post(f"/api/matrices/{matrix.uuid}/launch/").status_code == 403
    assert "now operates" in messages_of(grant(alice_client, bench, "group", "storage-lab"))
    assert bob_api.post(f"/api/matrices/{matrix.uuid}/launch/").status_code == 403  # not a member
    bob.groups.add(lab)
    answer = bob_api.post(f"/api/matrices/{matrix.uuid}/launch/")
    assert answer.status_code == 200 and answer.json()["queued"] == 1


def test_only_the_owner_grants(alice, bob, bob_client, bench):
    page = grant(bob_client, bench, "user", "bob")
    assert page.status_code == 403 and not bench.operators.exists()
    bob_api = token_client(bob)
    answer = bob_api.patch(f"/api/testbeds/{bench.uuid}/", {"operators": ["bob"]}, format="json")
    assert answer.status_code == 403 and not bench.operators.exists()
    # Unknown names are explained, not stored.
    alice_client = Client()
    alice_client.force_login(alice)
    assert "no user 'mallory'" in messages_of(grant(alice_client, bench, "user", "mallory"))
    assert "no group 'ghosts'" in messages_of(grant(alice_client, bench, "group", "ghosts"))


def test_operators_through_the_api(alice, bob, bench):
    api = token_client(alice)
    Group.objects.create(name="lab")
    answer = api.patch(
        f"/api/testbeds/{bench.uuid}/",
        {"operators": ["bob"], "operator_groups": ["lab"]},
        format="json",
    )
    assert answer.status_code == 200, answer.content
    assert answer.json()["operators"] == ["bob"] and answer.json()["operator_groups"] == ["lab"]
    assert bench.can_operate(bob)
    bad = api.patch(f"/api/testbeds/{bench.uuid}/", {"operators": ["mallory"]}, format="json")
    assert bad.status_code == 400 and "operators" in bad.json()


def test_a_matrix_naming_a_testbed_bob_does_not_operate_is_refused(bob, bob_client, bench):
    # The page (form), the API and a YAML file.
    page = bob_client.post(
        reverse("experiments:matrix_new"),
        {
            "name": "mine",
            "tool": "fio",
            "launch_mode": "single",
            "tasks_per_node": 1,
            "testbeds": [bench.pk],
            "repetitions": 1,
            "timeout_s": 60,
            "params_text": "size = 8m",
        },
    )
    assert page.status_code == 200
    assert "not an operator of testbed" in form_errors(page, "testbeds")
    answer = token_client(bob).post(
        "/api/matrices/",
        {"name": "mine", "tool": "fio", "testbeds": [str(bench.uuid)]},
        format="json",
    )
    assert answer.status_code == 400 and "not an operator" in str(answer.json()["testbeds"])
    with pytest.raises(MatrixError, match="not an operator"):
        from_data({"name": "mine", "tool": "fio", "testbeds": [str(bench.uuid)]}, bob)
    assert not Matrix.objects.filter(owner=bob).exists()


# --- Shared nodes --------------------------------------------------------------------------


def add_member(client, testbed, node):
    return client.post(
        reverse("experiments:part_new", args=["testbeds", testbed.uuid, "member"]),
        {"node": node.pk, "client": "on"},
    )


def test_bob_cannot_add_alices_node_until_she_shares_it(
    alice_client, bob, bob_client, node, bob_bench
):
    page = add_member(bob_client, bob_bench, node)
    assert page.status_code == 200
    assert "alice's node stor1 is not shared" in form_errors(page, "node")
    bob_api = token_client(bob)
    members = f"/api/testbeds/{bob_bench.uuid}/members/"
    answer = bob_api.post(members, {"node": str(node.uuid), "client": True}, format="json")
    assert answer.status_code == 400 and "not shared" in str(answer.json()["node"])
    assert not bob_bench.members.filter(node=node).exists()

    # alice ticks "shared" on her node's page.
    edit = alice_client.post(
        reverse("experiments:node_edit", args=[node.uuid]),
        {"hostname": "stor1", "profile": node.profile.pk, "shared": "on"},
    )
    assert edit.status_code == 302
    node.refresh_from_db()
    assert node.shared
    assert add_member(bob_client, bob_bench, node).status_code == 302
    assert bob_bench.members.filter(node=node).exists()
    # And through the API into a second testbed of bob's.
    other = Testbed.objects.create(owner=bob, name="bobs2")
    answer = bob_api.post(
        f"/api/testbeds/{other.uuid}/members/",
        {"node": str(node.uuid), "client": True},
        format="json",
    )
    assert answer.status_code == 201, answer.content


def test_the_api_shows_and_sets_shared(alice, node):
    api = token_client(alice)
    assert api.get(f"/api/nodes/{node.uuid}/").json()["shared"] is False
    assert api.patch(f"/api/nodes/{node.uuid}/", {"shared": True}, format="json").status_code == 200
    node.refresh_from_db()
    assert node.shared


def test_staff_may_add_any_node(bob_bench, node, django_user_model):
    staff = django_user_model.objects.create_user("carol", is_staff=True)
    answer = token_client(staff).post(
        f"/api/testbeds/{bob_bench.uuid}/members/",
        {"node": str(node.uuid), "storage": True},
        format="json",
    )
    assert answer.status_code == 201, answer.content


def test_a_target_cannot_move_onto_an_unshared_node(alice, bob, node, bob_bench):
    """A member node that its owner stopped sharing takes no new targets."""
    node.shared = True
    node.save()
    TestbedNode.objects.create(testbed=bob_bench, node=node, storage=True)
    node.shared = False
    node.save()
    answer = token_client(bob).post(
        f"/api/testbeds/{bob_bench.uuid}/targets/",
        {"node": str(node.uuid), "raid_level": "0", "kind": "storage"},
        format="json",
    )
    assert answer.status_code == 400 and "not shared" in str(answer.json()["node"])


def topology(testbed, user):
    plan = plan_topology(testbed, [("stor1 [ID: 1]\n", "storage")])
    assert plan.errors == []
    return apply_topology(testbed, plan, user)


def test_a_beegfs_import_takes_alices_node_only_when_she_shares_it(
    bob, bob_client, node, bob_bench
):
    # The testbed page's import (its save step, as the preview posts it).
    page = bob_client.post(
        reverse("experiments:testbed_topology_import", args=[bob_bench.uuid]),
        {
            "action": "save",
            "item_label": "output 1",
            "item_text": "stor1 [ID: 1]\n",
            "item_node_type": "storage",
        },
        follow=True,
    )
    assert "alice&#x27;s node, who does not share it" in page.content.decode()
    member = bob_bench.members.get(node__hostname__iexact="stor1")
    assert member.node.owner == bob and member.node != node  # a node of bob's, not alice's
    # Importing again finds bob's own stor1 and warns no more.
    assert not any("does not share it" in w for w in topology(bob_bench, bob).warnings)
    # Naming a node of his after alice's machine does not route runs to it: she was first.
    matrix = fio_matrix(bob, bob_bench)
    Target.objects.create(testbed=bob_bench, node=member.node, raid_level="0", name="t")
    with pytest.raises(MatrixError, match="alice registered first"):
        launch(matrix)
    assert not Run.objects.exists()

    member.delete()
    Target.objects.filter(testbed=bob_bench).delete()
    member.node.delete()
    node.shared = True
    node.save()
    topology(bob_bench, bob)
    assert bob_bench.members.filter(node=node).exists()
    node.refresh_from_db()
    assert node.address == ""  # bob's import changes nothing on alice's node


def test_launch_rechecks_every_node_a_run_uses(alice, bob, bob_client, node, bob_bench):
    node.shared = True
    node.save()
    TestbedNode.objects.create(testbed=bob_bench, node=node, client=True)
    matrix = fio_matrix(bob, bob_bench)
    assert "Launched" in messages_of(web_launch(bob_client, matrix))
    Run.objects.update(status=Run.Status.FAILED)

    # alice stops sharing: the matrix page says so, and re-running, resuming and launching
    # name her node.
    node.shared = False
    node.save()
    text = bob_client.get(matrix.get_absolute_url()).content.decode()
    assert 'id="launch-refused"' in text and "stor1 belongs to alice" in text
    page = bob_client.post(reverse("experiments:matrix_rerun", args=[matrix.uuid]), follow=True)
    assert "stor1 belongs to alice and is not shared" in messages_of(page)
    assert not Run.objects.filter(status=Run.Status.QUEUED).exists()
    answer = token_client(bob).post(f"/api/matrices/{matrix.uuid}/launch/")
    assert answer.status_code == 400 and "stor1" in str(answer.json())
    with pytest.raises(MatrixError, match="stor1"):
        resume(matrix)


def test_a_target_node_is_checked_too(alice, bob, node, bob_bench, tmp_path):
    node.shared = True
    node.save()
    TestbedNode.objects.create(testbed=bob_bench, node=node, storage=True)
    Target.objects.create(
        testbed=bob_bench, node=node, raid_level="0", name="nvme", path=str(tmp_path / "t")
    )
    matrix = fio_matrix(bob, bob_bench)
    matrix.axes = [{"param": "target", "values": ["nvme"]}]
    matrix.save()
    node.shared = False
    node.save()
    with pytest.raises(MatrixError, match="stor1 belongs to alice"):
        launch(matrix)


# --- Published testbeds take no runs -------------------------------------------------------


@pytest.fixture
def published():
    call_command("load_published", stdout=StringIO())
    run = (
        Run.objects.filter(published=True, metrics__name="write_bw", metrics__primary=True)
        .select_related("testbed")
        .order_by("pk")
        .first()
    )
    return run.testbed


def compare_point(api, testbed) -> tuple[int, float]:
    data = api.get(
        "/api/compare/", {"metric": "write_bw", "x": "tool", "testbed": str(testbed.uuid)}
    ).json()
    point = data["points"][0]
    return point["n"], point["mean"]


DD_OUTPUT = "1073741824 bytes (1.1 GB, 1.0 GiB) copied, 10 s, 107 MB/s\n"


def test_nobody_ingests_into_a_published_testbed(
    alice, bob, bob_client, published, django_user_model
):
    staff = django_user_model.objects.create_user("carol", is_staff=True)
    bob_api = token_client(bob)
    before_runs = Run.objects.count()
    before = compare_point(bob_api, published)
    assert before[0] >= 1

    # The browser import: the preview step and a crafted save step.
    fields = {"testbed": published.uuid, "tool": "dd", "op": "write", "text": DD_OUTPUT}
    page = bob_client.post(reverse("experiments:run_import"), fields)
    assert "published study data (read-only): it accepts no runs" in form_errors(page, "testbed")
    save = {**fields, "action": "save", "item_name": "x", "item_text": DD_OUTPUT}
    page = bob_client.post(reverse("experiments:run_import"), save, follow=True)
    assert "accepts no runs" in messages_of(page)

    # The API: bulk (also beeweb-push) and single, for bob and for staff alike.
    item = {
        "testbed": str(published.uuid),
        "tool": "dd",
        "metrics": [{"name": "write_bw", "value": 1e6}],
    }
    for api in (bob_api, token_client(staff)):
        answer = api.post("/api/runs/bulk/", [item], format="json")
        assert answer.status_code in (200, 400)
        assert "accepts no runs" in answer.content.decode()
        assert answer.json().get("created", 0) == 0
        single = api.post("/api/runs/", item, format="json")
        assert single.status_code == 400 and "accepts no runs" in single.content.decode()
    # By name too.
    by_name = bob_api.post("/api/runs/bulk/", [{**item, "testbed": published.name}], format="json")
    assert "accepts no runs" in by_name.content.decode()

    with pytest.raises(CommandError, match="accepts no runs"):
        call_command("import_results", __file__, "--testbed", str(published.uuid))

    assert Run.objects.count() == before_runs
    assert compare_point(bob_api, published) == before
    # load_published still works (idempotent: nothing new).
    call_command("load_published", stdout=StringIO())
    assert Run.objects.count() == before_runs


def test_only_operators_ingest_into_a_testbed(alice, bob, bob_client, bench):
    bob_api = token_client(bob)
    item = {"testbed": str(bench.uuid), "tool": "dd", "metrics": [{"name": "write_bw", "value": 1}]}
    answer = bob_api.post("/api/runs/bulk/", [item], format="json")
    assert "not an operator of testbed 'bench'" in answer.content.decode()
    assert bob_api.post("/api/runs/", item, format="json").status_code == 400
    page = bob_client.post(
        reverse("experiments:run_import"),
        {"testbed": bench.uuid, "tool": "dd", "op": "write", "text": DD_OUTPUT},
    )
    assert "not an operator" in form_errors(page, "testbed")
    assert not Run.objects.exists()

    bench.operators.add(bob)
    answer = bob_api.post("/api/runs/bulk/", [item], format="json")
    assert answer.status_code == 200 and answer.json()["created"] == 1
    # alice's own imports keep working; her form offers only what she operates.
    alice_client = Client()
    alice_client.force_login(alice)
    form = alice_client.get(reverse("experiments:run_import")).context["form"]
    assert [label for value, label in form.fields["testbed"].choices if value] == ["bench"]


# --- Paths ---------------------------------------------------------------------------------

BAD_DIRS = [
    "/",
    "/etc",
    "/etc/beegfs",
    "/data/../etc",
    "data/bench",
    "./bench",
    "/usr/local/x",
    "/lib64",
    "/proc/1",
    "/var",
    "/home",
    "/tmp",
    "/root/x",
    "//etc",
    "/mnt/beegfs/",
    "/mnt/beegfs/./x",
    "/mnt/beegfs\n/x",
    "/mnt/be\x00gfs",
]
GOOD_DIRS = ["/mnt/beegfs/bench", "/tmp/bench", "/home/alice/bench", "/var/lib/beeweb/bench"]


@pytest.mark.parametrize("path", BAD_DIRS)
def test_bad_paths_are_explained(path):
    assert work_path_problem(path)


@pytest.mark.parametrize("path", GOOD_DIRS)
def test_good_paths_pass(path):
    assert work_path_problem(path) is None


@pytest.mark.parametrize("path", ["/", "/etc", "/data/../etc", "relative/dir", "/sys/kernel"])
def test_benchmark_dir_refused_by_form_and_api(alice, alice_client, bench, path):
    page = alice_client.post(
        reverse("experiments:testbed_edit", args=[bench.uuid]),
        {"name": "bench", "benchmark_dir": path},
    )
    assert page.status_code == 200 and page.context["form"].errors["benchmark_dir"]
    api = token_client(alice)
    answer = api.patch(f"/api/testbeds/{bench.uuid}/", {"benchmark_dir": path}, format="json")
    assert answer.status_code == 400 and "benchmark_dir" in answer.json()
    created = api.post("/api/testbeds/", {"name": "new", "benchmark_dir": path}, format="json")
    assert created.status_code == 400
    bench.refresh_from_db()
    assert bench.benchmark_dir.endswith("/bench")
    assert not Testbed.objects.filter(name="new").exists()


@pytest.mark.parametrize("path", ["/", "/etc", "/data/../etc", "mnt/t0", "/boot/efi"])
def test_target_mount_point_refused_by_form_and_api(alice, alice_client, bench, path):
    page = alice_client.post(
        reverse("experiments:part_new", args=["testbeds", bench.uuid, "target"]),
        {"kind": "storage", "raid_level": "0", "count": 1, "path": path},
    )
    assert page.status_code == 200 and page.context["form"].errors["path"]
    answer = token_client(alice).post(
        f"/api/testbeds/{bench.uuid}/targets/",
        {"kind": "storage", "raid_level": "0", "path": path},
        format="json",
    )
    assert answer.status_code == 400 and "path" in answer.json()
    assert bench.targets.count() == 1  # the fixture's


def test_a_good_path_is_accepted(alice, alice_client, bench):
    page = alice_client.post(
        reverse("experiments:testbed_edit", args=[bench.uuid]),
        {"name": "bench", "benchmark_dir": "/mnt/beegfs/bench"},
    )
    assert page.status_code == 302
    answer = token_client(alice).post(
        f"/api/testbeds/{bench.uuid}/targets/",
        {"kind": "storage", "raid_level": "0", "path": "/data/nvme0"},
        format="json",
    )
    assert answer.status_code == 201, answer.content


def test_the_preview_no_longer_shows_dd_writing_etc_shadow(alice, alice_client, bench):
    """A row stored before the check (or written around it) holds "/": the preview and the
    launch refuse it instead of showing dd of=/etc/shadow."""
    Testbed.objects.filter(pk=bench.pk).update(benchmark_dir="/")
    matrix = Matrix.objects.create(
        owner=alice, name="dd", tool="dd", fixed_params={"file": "etc/shadow", "count": 1}
    )
    matrix.testbeds.set([bench])
    page = alice_client.get(matrix.get_absolute_url())
    body = page.content.decode()
    assert page.status_code == 200
    assert "/etc/shadow" not in body
    assert "is a system directory" in body
    with pytest.raises(MatrixError, match="system directory"):
        launch(matrix)
    assert not Run.objects.exists()
    # A target's mount point stored as /etc is refused the same way.
    Testbed.objects.filter(pk=bench.pk).update(benchmark_dir="/mnt/beegfs/bench")
    Target.objects.filter(testbed=bench).update(path="/etc", name="t0")
    matrix.axes = [{"param": "target", "values": ["t0"]}]
    matrix.save()
    with pytest.raises(MatrixError, match="system directory"):
        expand(matrix)
