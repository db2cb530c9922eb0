"""Who may change a BeeGFS server's config and restart its services (issue 26): only the node's
operator, through the worker's environment (BEEWEB_NODE_BEEGFS), never the server or its
database.

- bob, a colleague who does not operate alice's testbed, cannot get a run that holds her
  servers: his matrix on her testbed is refused at launch, and so is his own testbed naming
  her storage server (not shared), so nothing ever asks her nodes for a config change.
- alice herself, on a node whose operator left BEEWEB_NODE_BEEGFS at its default (false), gets
  a run that fails before its tool starts, saying the node refused; her config file is
  untouched.
- A request that reaches a node which allows changes but names a key that would move data or
  identity, or smuggles a line into a value (a forged lease row, as a compromised database
  could write), is refused by the node itself; the file is untouched.
"""

from __future__ import annotations

import hashlib
import shutil

import pytest
from django.urls import reverse

from experiments.execution import beegfs, execute, nodepolicy
from experiments.models import (
    BeegfsConfigChange,
    HardwareProfile,
    Matrix,
    Node,
    NodeLease,
    Run,
    Testbed,
    TestbedNode,
    TuningSet,
)
from tests.helpers.execution import make_matrix, queue

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(shutil.which("dd") is None, reason="dd is not installed"),
]

CONF = """# alice's storage server
sysMgmtdHost          = mgmt01
storeStorageDirectory = /data/t1,/data/t2
connStoragePortTCP    = 8003
tuneNumWorkers        = 12
"""


@pytest.fixture
def conf(tmp_path, settings):
    """alice's storage server's config file, on a node whose worker's environment names it
    (and a restart command that would fail loudly if it were ever run)."""
    path = tmp_path / "beegfs-storage.conf"
    path.write_text(CONF)
    settings.NODE_BEEGFS_STORAGE_CONF = str(path)
    settings.NODE_BEEGFS_STORAGE_RESTART = "false"
    settings.DATA_DIR = tmp_path
    return path


def digest(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(autouse=True)
def no_broker(monkeypatch):
    from experiments.execution.tasks import execute_run

    monkeypatch.setattr(execute_run, "apply_async", lambda *a, **k: None)


def tuned(owner, name="workers2") -> TuningSet:
    ts = TuningSet.objects.create(owner=owner, name=name)
    ts.replace_params([("storage", "tuneNumWorkers", "2")])
    return ts


def test_bob_cannot_get_a_run_that_holds_alices_servers(bob, bob_client, bench, conf):
    before = digest(conf)
    # His matrix on her testbed, with his tuning set of server keys: refused at launch.
    matrix = Matrix.objects.create(
        owner=bob,
        name="retune alice",
        tool="dd",
        repetitions=1,
        apply_tuning=True,
        fixed_params={"bs": "1m", "count": 1},
    )
    matrix.testbeds.set([bench])
    matrix.tuning_sets.set([tuned(bob)])
    page = bob_client.post(reverse("experiments:matrix_launch", args=[matrix.uuid]), follow=True)
    assert "not an operator of testbed 'bench'" in " ".join(
        str(m) for m in page.context["messages"]
    )
    # His own testbed naming her storage server (not shared): refused as he adds it.
    profile = HardwareProfile.objects.create(owner=bob, name="b", architecture="x86_64")
    own = Testbed.objects.create(owner=bob, name="mine", benchmark_dir="/tmp/bob")
    Node.objects.create(owner=bob, hostname="bobbox", profile=profile)
    page = bob_client.post(
        reverse("experiments:part_new", args=["testbeds", own.uuid, "member"]),
        {"node": Node.objects.get(hostname="stor1").pk, "storage": "on"},
    )
    assert "alice's node stor1 is not shared" in " ".join(page.context["form"].errors["node"])
    assert not TestbedNode.objects.filter(testbed=own).exists()
    assert not Run.objects.exists() and not NodeLease.objects.exists()
    assert digest(conf) == before and not BeegfsConfigChange.objects.exists()


def test_a_node_that_refuses_refuses_its_owner_too(alice, executing_bench, conf, settings):
    settings.NODE_BEEGFS = "false"  # the default, said out loud
    before = digest(conf)
    matrix = make_matrix(
        alice, executing_bench, tool="dd", params={"bs": "1m", "count": 1}, apply_tuning=True
    )
    matrix.tuning_sets.set([tuned(alice)])
    Run.objects.filter(matrix=matrix).update(tuning_set=matrix.tuning_sets.get())
    run = matrix.runs.get()
    assert execute.execute(run.pk, queue(run), "w@test") == Run.Status.FAILED
    run.refresh_from_db()
    assert run.error == (
        "the tuning set's BeeGFS server settings are not in force: "
        f"stor1: {nodepolicy.BEEGFS_REFUSED}"
    )
    assert run.effective_config["beegfs"] == {
        "stor1": {"outcome": nodepolicy.BEEGFS_REFUSED, "services": {}}
    }
    assert run.raw_output == "" and run.exit_code is None  # dd never started
    assert digest(conf) == before and not BeegfsConfigChange.objects.exists()


@pytest.mark.parametrize(
    "values",
    [
        {"storeStorageDirectory": "/tmp/elsewhere"},
        {"sysMgmtdHost": "evil.example"},
        {"connStoragePortTCP": "9999"},
        {"logStdFile": "/etc/passwd"},
        {"tuneNumWorkers": "2\nstoreStorageDirectory = /tmp/elsewhere"},
        {"tuneUnheardOf": "1"},
    ],
)
def test_a_forged_request_is_refused_by_the_node_itself(conf, settings, values):
    settings.NODE_BEEGFS = "true"
    before = digest(conf)
    answer = beegfs.answer("stor1", {"values": {"storage": values}})
    assert answer["outcome"].startswith("refused: storage."), answer
    assert answer["services"] == {}
    assert digest(conf) == before and not BeegfsConfigChange.objects.exists()
    assert not conf.with_name(conf.name + ".beeweb-original").exists()
