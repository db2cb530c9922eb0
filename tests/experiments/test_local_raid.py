"""``local_raid`` for real (root, loop devices, btrfs) and ``ensure_localhost_testbed``."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from experiments.inventory.localhost import PROFILE_NAME, ensure_localhost_testbed
from experiments.management.commands import local_raid
from experiments.models import (
    Architecture,
    Drive,
    HardwareProfile,
    Node,
    Run,
    Target,
    Testbed,
    TestbedNode,
)


@pytest.fixture
def data_dir(settings, tmp_path) -> Path:
    settings.DATA_DIR = tmp_path / "data"
    return settings.DATA_DIR


# --- ensure_localhost_testbed --------------------------------------------------------------------


def counts() -> dict[str, int]:
    return {
        model.__name__: model.objects.count()
        for model in (Testbed, Node, HardwareProfile, TestbedNode, Drive)
    }


@pytest.mark.django_db
def test_ensure_localhost_testbed_is_idempotent(alice, data_dir):
    testbed = ensure_localhost_testbed(alice)
    first = counts()
    node = Node.objects.get(owner=alice)
    updated = (testbed.updated, node.updated, node.profile.updated)
    again = ensure_localhost_testbed(alice)
    assert again.pk == testbed.pk
    assert (
        counts()
        == first
        == {
            "Testbed": 1,
            "Node": 1,
            "HardwareProfile": 1,
            "TestbedNode": 1,
            "Drive": first["Drive"],
        }
    )
    node.refresh_from_db()
    again.refresh_from_db()
    assert (again.updated, node.updated, node.profile.updated) == updated  # nothing rewritten

    assert testbed.name == "localhost" and testbed.owner == alice
    assert testbed.benchmark_dir == str(data_dir / "bench")
    assert (data_dir / "bench").is_dir()
    assert node.hostname == socket.gethostname()
    assert node.kernel == os.uname().release
    member = TestbedNode.objects.get(testbed=testbed, node=node)
    assert member.storage and member.client and member.metadata and member.management

    profile = node.profile
    assert profile.name == PROFILE_NAME and profile.owner == alice
    assert profile.architecture in Architecture.values
    if os.uname().machine == "x86_64":
        assert profile.architecture == "x86_64"
    assert profile.memory_gib and profile.memory_gib > 0
    assert profile.sockets and profile.cores_per_socket and profile.threads_per_core
    topologies = list(Path("/sys/devices/system/cpu").glob("cpu[0-9]*/topology"))
    if topologies:
        cpus = profile.sockets * profile.cores_per_socket * profile.threads_per_core
        assert cpus == len(topologies)
    assert "nproc" in profile.notes
    numa = len(list(Path("/sys/devices/system/node").glob("node[0-9]*")))
    assert profile.numa_domains == (numa or None)
    drive = profile.drives.first()
    if drive is not None:  # a real block device under the data directory
        assert drive.purpose == "data" and drive.capacity_gb > 0


@pytest.mark.django_db
def test_ensure_localhost_testbed_keeps_what_the_owner_chose(alice, bob, profile, data_dir):
    Node.objects.create(owner=alice, hostname=socket.gethostname(), profile=profile)
    mine = Testbed.objects.create(owner=alice, name="localhost", benchmark_dir="/mnt/beegfs/x")
    testbed = ensure_localhost_testbed(alice)
    assert testbed.pk == mine.pk
    assert testbed.benchmark_dir == "/mnt/beegfs/x"
    node = Node.objects.get(owner=alice, hostname=socket.gethostname())
    assert node.profile == profile  # the datasheet profile, not "This machine"
    profile.refresh_from_db()
    assert profile.name == "R740xd" and profile.memory_gib == 384
    # Another owner gets their own rows.
    theirs = ensure_localhost_testbed(bob, name="bob's box")
    assert theirs.owner == bob and theirs.pk != testbed.pk
    assert Node.objects.filter(hostname=socket.gethostname()).count() == 2


# --- argument and environment checks (no root needed) --------------------------------------------


def test_parse_size():
    assert local_raid.parse_size("2G") == 2 * 2**30
    assert local_raid.parse_size("300M") == 300 * 2**20
    assert local_raid.parse_size("512MiB") == 512 * 2**20
    assert local_raid.parse_size("1.5g") == 3 * 2**29
    assert local_raid.parse_size("4096") == 4096
    with pytest.raises(CommandError, match="2G or 300M"):
        local_raid.parse_size("lots")


@pytest.mark.django_db
def test_bad_arguments(alice, tmp_path):
    with pytest.raises(CommandError, match="even and at least 4"):
        call_command("local_raid", dir=str(tmp_path), disks=3, owner="alice")
    with pytest.raises(CommandError, match="even and at least 4"):
        call_command("local_raid", dir=str(tmp_path), disks=2, owner="alice")
    with pytest.raises(CommandError, match="at least 125M"):
        call_command("local_raid", dir=str(tmp_path), disk_size="64M", owner="alice")


def test_needs_root(monkeypatch, tmp_path):
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(CommandError, match="needs root"):
        call_command("local_raid", dir=str(tmp_path))


def test_names_the_missing_package(monkeypatch, tmp_path):
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    real_which = shutil.which
    monkeypatch.setattr(
        shutil,
        "which",
        lambda name, **kw: None if name in {"mkfs.btrfs", "btrfs"} else real_which(name, **kw),
    )
    with pytest.raises(CommandError) as info:
        call_command("local_raid", dir=str(tmp_path))
    assert str(info.value) == "btrfs-progs is not installed: apt-get install btrfs-progs"
    monkeypatch.setattr(shutil, "which", lambda name, **kw: None)
    with pytest.raises(CommandError, match="apt-get install mount"):
        call_command("local_raid", dir=str(tmp_path))


def test_btrfs_super_ignores_other_files(tmp_path):
    plain = tmp_path / "plain.img"
    plain.write_bytes(b"\0" * 0x20000)
    assert local_raid.btrfs_super(plain) is None
    assert local_raid.btrfs_super(tmp_path / "missing.img") is None


# --- the real thing ------------------------------------------------------------------------------


def raid_unavailable(tmp_path: Path) -> str | None:
    """Why loop devices or btrfs cannot work here, or None."""
    try:
        local_raid.check_requirements()
    except CommandError as exc:
        return str(exc)
    probe = subprocess.run(["losetup", "-f"], capture_output=True, text=True)
    if probe.returncode != 0 and not Path("/dev/loop-control").exists():
        return f"no free loop device and no /dev/loop-control: {probe.stderr.strip()}"
    image = tmp_path / "probe.img"
    with open(image, "wb") as handle:
        handle.truncate(2**20)
    try:
        device = local_raid.attach_loop(image)  # falls back to mknod via /dev/loop-control
    except (CommandError, OSError) as exc:
        return f"loop devices do not work here: {exc}"
    else:
        subprocess.run(["losetup", "-d", device], check=True)
    finally:
        image.unlink()
    return None


def findmnt(path: Path) -> str:
    return subprocess.run(
        ["findmnt", "-n", "-o", "FSTYPE", "--mountpoint", str(path)], capture_output=True, text=True
    ).stdout.strip()


@pytest.mark.slow
@pytest.mark.django_db
def test_local_raid_for_real(alice, data_dir, tmp_path, capsys):
    reason = raid_unavailable(tmp_path)
    if reason:
        pytest.skip(f"local RAID cannot be built here: {reason}")
    root = tmp_path / "raid"
    build = {"dir": str(root), "disks": 4, "disk_size": "300M", "owner": "alice"}
    disk_files = [
        root / "disks" / f"raid{level}-{i}.img" for level in ("0", "10") for i in range(1, 5)
    ]
    try:
        call_command("local_raid", **build)
        out = capsys.readouterr().out
        assert "mkfs.btrfs -d raid0 -m raid0" in out and "mkfs.btrfs -d raid10 -m raid10" in out

        testbed = Testbed.objects.get(owner=alice, name="localhost")
        targets = {t.name: t for t in Target.objects.filter(testbed=testbed)}
        assert set(targets) == {"btrfs-raid0", "btrfs-raid10"}
        for level in ("0", "10"):
            target = targets[f"btrfs-raid{level}"]
            assert (target.kind, target.raid_level, target.disks, target.filesystem) == (
                "storage",
                level,
                4,
                "btrfs",
            )
            assert target.path == str(root / f"raid{level}" / "bench")
            assert target.node.hostname == socket.gethostname()
            assert findmnt(root / f"raid{level}") == "btrfs"
            usage = subprocess.run(
                ["btrfs", "filesystem", "df", str(root / f"raid{level}")],
                capture_output=True,
                text=True,
                check=True,
            ).stdout
            assert f"Data, RAID{level}" in usage
            dd = subprocess.run(
                [
                    "dd",
                    "if=/dev/zero",
                    f"of={target.path}/dd.bin",
                    "bs=1M",
                    "count=64",
                    "oflag=direct",
                    "conv=fsync",
                ],
                capture_output=True,
                text=True,
            )
            assert dd.returncode == 0, dd.stderr
            assert Path(target.path, "dd.bin").stat().st_size == 64 * 2**20
        # RAID10 keeps two copies: half of RAID0's capacity over the same disks.
        raid0, raid10 = targets["btrfs-raid0"].capacity_gb, targets["btrfs-raid10"].capacity_gb
        assert 1.8 < raid0 / raid10 < 2.2
        member = TestbedNode.objects.get(testbed=testbed)
        assert member.role_names == ["management", "metadata", "storage", "client"]

        # Again: mounted already, nothing rebuilt, nothing duplicated, the data still there.
        call_command("local_raid", **build)
        out = capsys.readouterr().out
        assert out.count("already mounted") == 2 and "mkfs" not in out
        assert Target.objects.filter(testbed=testbed).count() == 2
        assert Path(targets["btrfs-raid10"].path, "dd.bin").exists()
    finally:
        call_command("local_raid", dir=str(root), owner="alice", teardown=True)

    for level in ("0", "10"):
        assert findmnt(root / f"raid{level}") == ""
    assert not any(path.exists() for path in disk_files)
    backing = subprocess.run(["losetup", "-a"], capture_output=True, text=True).stdout
    assert str(root) not in backing
    assert not Target.objects.filter(testbed__owner=alice).exists()
    assert Testbed.objects.filter(owner=alice, name="localhost").exists()  # the testbed stays
    assert not root.exists()


@pytest.mark.slow
@pytest.mark.django_db
def test_reassembles_from_existing_disk_files(alice, data_dir, tmp_path, capsys):
    """After a reboot the loop devices are gone but the files remain: mount them, keep data."""
    reason = raid_unavailable(tmp_path)
    if reason:
        pytest.skip(f"local RAID cannot be built here: {reason}")
    root = tmp_path / "raid"
    build = {"dir": str(root), "disks": 4, "disk_size": "200M", "owner": "alice"}
    try:
        call_command("local_raid", **build)
        bench = root / "raid10" / "bench"
        (bench / "keep.txt").write_text("still here")
        array_files = sorted((root / "disks").glob("*.img"))
        for level in ("0", "10"):
            subprocess.run(["umount", str(root / f"raid{level}")], check=True)
        for path in array_files:
            for device in local_raid.loops_of(path):
                subprocess.run(["losetup", "-d", device], check=True)
        capsys.readouterr()
        call_command("local_raid", **build)
        out = capsys.readouterr().out
        assert out.count("reused the btrfs on 4 existing disk files") == 2
        assert (bench / "keep.txt").read_text() == "still here"
        assert Target.objects.filter(testbed__owner=alice).count() == 2
        measured = Target.objects.get(testbed__owner=alice, name="btrfs-raid10")
        Run.objects.create(owner=alice, testbed=measured.testbed, target=measured, tool="dd")
    finally:
        call_command("local_raid", dir=str(root), owner="alice", teardown=True)
    assert not root.exists()
    # A measured target outlives the teardown, so its results keep their RAID level.
    out = capsys.readouterr().out
    assert "kept target btrfs-raid10: 1 run(s) refer to it" in out
    assert list(Target.objects.filter(testbed__owner=alice).values_list("name", flat=True)) == [
        "btrfs-raid10"
    ]
