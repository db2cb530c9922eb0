"""Shared world for view tests: alice owns things, bob is another user, anonymous has nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from experiments.models import (
    Drive,
    HardwareProfile,
    Nic,
    Node,
    Target,
    Testbed,
    TestbedNode,
    TuningSet,
)

# pytest rewrites the asserts of the shared helpers (tests/helpers) as it does a test's, so a
# failing helper shows its values; registered before any test imports one.
pytest.register_assert_rewrite("tests.helpers")


@pytest.fixture(autouse=True, scope="session")
def _fast_password_hasher():
    """Tests hash passwords with MD5: PBKDF2 is slow on purpose, and every create_user and
    login paid for it. Production settings keep Django's default hashers; subprocess tests
    (manage.py, workers) use those."""
    from django.test import override_settings

    with override_settings(PASSWORD_HASHERS=["django.contrib.auth.hashers.MD5PasswordHasher"]):
        yield


@pytest.fixture(autouse=True, scope="session")
def _plain_static_storage():
    """Tests render {% static %} without running collectstatic: plain names, no manifest (the
    live server serves them from the finders). tests/browser/test_first_chart.py checks the
    production setup: collectstatic, then gunicorn with WhiteNoise."""
    from django.test import override_settings

    storages = {
        "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
        "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    }
    with override_settings(STORAGES=storages):
        yield


@pytest.fixture(autouse=True)
def _fresh_api_throttles():
    """Every test starts with empty API throttle counters (they live in Django's cache)."""
    from django.core.cache import cache

    cache.clear()


@pytest.fixture
def alice(django_user_model):
    return django_user_model.objects.create_user("alice", password="alice-pw")


@pytest.fixture
def bob(django_user_model):
    return django_user_model.objects.create_user("bob", password="bob-pw")


@pytest.fixture
def alice_client(client, alice):
    client.force_login(alice)
    return client


@pytest.fixture
def bob_client(alice, bob):
    from django.test import Client

    c = Client()
    c.force_login(bob)
    return c


@pytest.fixture
def profile(alice):
    """A dual-socket NVMe storage server like seed 002's R740xd."""
    p = HardwareProfile.objects.create(
        owner=alice,
        name="R740xd",
        vendor="Dell",
        architecture="x86_64",
        cpu_model="Xeon Platinum 8268",
        sockets=2,
        cores_per_socket=24,
        numa_domains=2,
        memory_gib=384,
    )
    Drive.objects.create(
        profile=p,
        kind="nvme",
        model="P4600",
        count=24,
        capacity_gb=1600,
        interface="pcie",
        pcie_gen=3,
        pcie_lanes=4,
        seq_read_mbps=3200,
        seq_write_mbps=1300,
    )
    Nic.objects.create(
        profile=p, kind="infiniband", model="ConnectX-5", rate_gbps=100, ports=1, count=2
    )
    return p


@pytest.fixture
def node(alice, profile):
    return Node.objects.create(owner=alice, hostname="stor1", profile=profile)


@pytest.fixture
def testbed(alice, node):
    tb = Testbed.objects.create(
        owner=alice, name="bench", fabric="infiniband", beegfs_version="7.4.5"
    )
    TestbedNode.objects.create(testbed=tb, node=node, storage=True, metadata=True, management=True)
    Target.objects.create(
        testbed=tb, node=node, kind="storage", raid_level="0", disks=4, count=6, filesystem="xfs"
    )
    return tb


@pytest.fixture
def bench(testbed, node, tmp_path):
    """alice's testbed "bench": her node stor1 is also its client, and it benchmarks in
    tmp_path/bench (created)."""
    workdir = tmp_path / "bench"
    workdir.mkdir(exist_ok=True)
    testbed.benchmark_dir = str(workdir)
    testbed.save()
    TestbedNode.objects.filter(testbed=testbed, node=node).update(client=True)
    return testbed


@pytest.fixture
def executing_bench(bench, tmp_path, settings):
    """``bench`` with this process as its node: run scratch under tmp_path, quick heartbeats,
    and a node policy (BEEWEB_NODE_DIRS) that lets runs work under tmp_path only."""
    settings.RUN_DIR = tmp_path / "runs"
    settings.RUN_PROGRESS_SECONDS = 0.5
    settings.NODE_DIRS = str(tmp_path)
    return bench


@pytest.fixture
def tuning_set(alice):
    ts = TuningSet.objects.create(owner=alice, name="base")
    ts.replace_params([("storage", "tuneNumWorkers", "48"), ("striping", "chunksize", "512k")])
    return ts


@pytest.fixture
def raid(alice):
    """Two testbeds (tests/helpers/comparison.py) differing only in RAID level, three runs each."""
    from tests.helpers.comparison import add_run, make_testbed

    r0 = make_testbed(alice, "raid0", "x86_64", "0")
    r10 = make_testbed(alice, "raid10", "x86_64", "10")
    for v in (5.1e9, 5.0e9, 5.2e9):
        add_run(r0, v, threads=4, direct=True)
    for v in (3.4e9, 3.3e9, 3.5e9):
        add_run(r10, v, threads=4, direct=True)
    return r0, r10


# --- End-to-end labs (tests/labs) -------------------------------------------------------------


@pytest.fixture
def localhost_stack(tmp_path):
    """An isolated installation (tests/labs/stack.py) with the localhost testbed of its
    administrator; no worker yet."""
    from tests.labs import Stack

    stack = Stack(tmp_path)
    try:
        stack.manage("ensure_localhost")
        yield stack
    finally:
        stack.close()


@pytest.fixture(scope="session")
def netns_available() -> None:
    """Skip, with the reason, when this machine cannot build network namespaces."""
    from tests.labs.netns import NetnsLab

    ok, reason = NetnsLab.available()
    if not ok:
        pytest.skip(f"network-namespace lab unavailable: {reason}")


@pytest.fixture(scope="module")
def netns_lab(request, netns_available):
    """A started network-namespace lab (tests/labs/netns.py) shared by a module's tests: three
    nodes (a module may set ``NETNS_NODES``), forwarding PostgreSQL's and Redis's ports (or
    the module's ``NETNS_FORWARD``) from the gateway to this machine's loopback."""
    from tests.labs.netns import NetnsLab

    lab = NetnsLab(n=getattr(request.module, "NETNS_NODES", 3))
    lab.start()
    try:
        lab.forward(getattr(request.module, "NETNS_FORWARD", (5432, 6379)))
        yield lab
    finally:
        lab.stop()


@pytest.fixture(scope="session")
def beegfs_available() -> None:
    """Skip, with the reason, when the real BeeGFS servers cannot run here."""
    from tests.labs import beegfs

    reason = beegfs.unavailable()
    if reason:
        pytest.skip(f"BeeGFS lab unavailable: {reason}")


@pytest.fixture(scope="module")
def beegfs_host(beegfs_available, tmp_path_factory):
    """A real BeeGFS on this host (tests/labs/beegfs.py ``host_lab``): management, metadata
    ``meta01``, storage ``storage01`` with two targets, Online; shared by a module's tests."""
    from tests.labs import beegfs

    lab = beegfs.host_lab(tmp_path_factory.mktemp("beegfs"))
    try:
        yield lab
    finally:
        lab.stop()


@pytest.fixture(scope="module")
def beegfs_cluster(beegfs_available, netns_lab, tmp_path_factory):
    """A real BeeGFS on the network-namespace lab (``cluster_lab``): node1 management and
    metadata, node2 storage on btrfs RAID0 (2 loop files), node3 storage on btrfs RAID10 (4);
    two targets each, Online."""
    from tests.labs import beegfs

    lab = beegfs.cluster_lab(tmp_path_factory.mktemp("beegfs"), netns_lab)
    try:
        yield lab
    finally:
        lab.stop()
        beegfs.cleanup_volumes()


def block_device(path: Path) -> str | None:
    """The disk holding ``path`` (its /sys/block name), as the worker finds it."""
    from runners.nodeconfig import block_device as device_of
    from runners.nodeconfig import mount_of

    mount = mount_of(path)
    return device_of(mount["source"]) if mount else None


@pytest.fixture
def read_ahead(localhost_stack):
    """The benchmark disk's read_ahead_kb file; put back after the test whatever happens
    (the machine is shared)."""
    bench = Path(localhost_stack.env["BEEWEB_DATA_DIR"])
    device = block_device(bench)
    if device is None:
        pytest.skip("the data directory is not on a block device: no read-ahead to tune")
    path = Path(f"/sys/block/{device}/queue/read_ahead_kb")
    before = path.read_text().strip()
    try:
        path.write_text(before)
    except OSError:
        pytest.skip(f"{path} is not writable here (not root?)")
    yield path, before
    if path.read_text().strip() != before:
        path.write_text(before)
