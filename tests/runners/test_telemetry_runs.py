"""Real fio runs through the executor with telemetry: a disk-bound run on btrfs RAID0 over loop
devices and a CPU-bound run on tmpfs, each with the verdict naming what was saturated.

The loop devices of this VM do not saturate on their own (the host's page cache and disks
are faster than one fio job), so the disk-bound case makes them the limit the way a slow
disk would: the loop devices do direct I/O to their backing files, and a blkio throttle of
10 MiB/s on the backing disk, for the cgroup the test (and so the tool) runs in, holds each
of their requests until the "disk" takes it; their utilisation then sits near 100 %."""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from contextlib import contextmanager
from pathlib import Path

import pytest

from experiments.execution import execute
from experiments.models import Run
from experiments.results import telemetry as stored
from experiments.shared import bottleneck
from runners.reaper import reaper
from tests.helpers.execution import make_matrix, queue

BLKIO = Path("/sys/fs/cgroup/blkio")
THROTTLE_BPS = 10 * 2**20

pytestmark = [
    pytest.mark.slow,
    pytest.mark.django_db,
    pytest.mark.skipif(shutil.which("fio") is None, reason="fio is not installed"),
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root (loop devices, mounts, cgroups)"),
]


def sh(*argv: str) -> str:
    return subprocess.run(argv, check=True, capture_output=True, text=True).stdout.strip()


def whole_disk(path: Path) -> str:
    """major:minor of the disk (not the partition) holding ``path``."""
    dev = os.stat(path).st_dev
    sys_dir = Path(f"/sys/dev/block/{os.major(dev)}:{os.minor(dev)}")
    if (sys_dir / "partition").exists():
        return (sys_dir.resolve().parent / "dev").read_text().strip()
    return f"{os.major(dev)}:{os.minor(dev)}"


@contextmanager
def btrfs_raid0(root: Path, disks: int = 2):
    """btrfs -d raid0 -m raid0 over ``disks`` loop devices (direct I/O to their files),
    mounted at root/mnt; always unmounted, detached and removed afterwards."""
    if shutil.which("mkfs.btrfs") is None:
        pytest.skip("btrfs-progs is not installed")
    loops: list[str] = []
    mnt = root / "mnt"
    mounted = False
    try:
        for i in range(disks):
            image = root / f"disk{i}.img"
            image.touch()
            os.truncate(image, 1 << 30)
            loops.append(sh("losetup", "--find", "--show", "--direct-io=on", str(image)))
        sh("mkfs.btrfs", "-q", "-f", "-d", "raid0", "-m", "raid0", *loops)
        mnt.mkdir()
        sh("mount", loops[0], str(mnt))
        mounted = True
        yield mnt, [Path(loop).name for loop in loops]
    finally:
        if mounted:
            subprocess.run(["umount", str(mnt)], check=False)
        for loop in loops:
            subprocess.run(["losetup", "-d", loop], check=False)


@contextmanager
def blkio_throttle(device: str, write_bps: int):
    """This process and its reaper (and so the tool the reaper starts) in a blkio cgroup
    whose writes to ``device`` are throttled; back in their own cgroup afterwards."""
    if not (BLKIO / "cgroup.procs").exists():
        pytest.skip("no cgroup v1 blkio hierarchy to throttle the loop devices' backing disk")
    before = next(
        line.split(":", 2)[2]
        for line in Path("/proc/self/cgroup").read_text().splitlines()
        if line.split(":")[1] == "blkio"
    )
    group = BLKIO / f"beeweb-test-{uuid.uuid4().hex[:8]}"
    group.mkdir()
    pids = [os.getpid(), reaper().pid]
    try:
        (group / "blkio.throttle.write_bps_device").write_text(f"{device} {write_bps}")
        for pid in pids:
            (group / "cgroup.procs").write_text(str(pid))
        yield
    finally:
        for pid in pids:
            (BLKIO / before.lstrip("/") / "cgroup.procs").write_text(str(pid))
        group.rmdir()


def run_fio(owner, testbed, params) -> Run:
    matrix = make_matrix(owner, testbed, params=params)
    run = matrix.runs.get()
    assert execute.execute(run.pk, queue(run), "w@test") == Run.Status.SUCCEEDED, Run.objects.get(
        pk=run.pk
    ).error
    return Run.objects.get(pk=run.pk)


def test_disk_bound_fio_on_btrfs_raid0_names_the_loop_devices(alice, executing_bench, tmp_path):
    root = tmp_path / "raid"
    root.mkdir()
    with btrfs_raid0(root) as (mnt, loops), blkio_throttle(whole_disk(root), THROTTLE_BPS):
        executing_bench.benchmark_dir = str(mnt)
        executing_bench.save()
        params = {"rw": "write", "bs": "1m", "size": "256m", "direct": True}
        run = run_fio(alice, executing_bench, {**params, "runtime": "8", "time_based": True})
    docs = stored.for_run(run)
    assert [d["hostname"] for d in docs] == [os.uname().nodename]
    doc = docs[0]
    assert doc["format"] == "beeweb-telemetry/1" and len(doc["t"]) >= 8
    for loop in loops:
        util = doc["series"][f"disk_util:{loop}"]
        written = doc["series"][f"disk_write_bw:{loop}"]
        assert len(util) == len(doc["t"]) and max(util) > 0.9
        # Both halves of the RAID0 carry the data: about half the throttled rate each.
        assert sum(written) > 0
    tool = doc["tool"]
    assert len(tool["t"]) >= 6 and max(tool["series"]["write_bw"]) > 0
    steady = sorted(tool["series"]["write_bw"])[len(tool["t"]) // 2]
    assert 0.5 * THROTTLE_BPS < steady < 1.5 * THROTTLE_BPS  # fio saw the disks' pace
    assert doc["meta"]["sampler_cpu_s"] < 0.05 * doc["t"][-1]
    (verdict,) = bottleneck.verdicts(docs)
    assert verdict.phase == "write"
    disk = [f for f in verdict.saturated if f.resource == "disk"]
    # Both halves of the array are busy; on a loaded machine (the loop devices' worker
    # threads wait for a CPU too) one of them may dip under 90 % for a few seconds.
    assert {f.entity for f in disk} <= set(loops) and disk, verdict
    for loop in loops:
        util = doc["series"][f"disk_util:{loop}"]
        assert sorted(util)[len(util) // 2] > 0.7, (loop, util)
    assert verdict.headline.startswith(tuple(loops)), verdict.headline
    assert "utilisation during" in verdict.headline and "of the write phase" in verdict.headline
    print("\nverdict:", verdict.headline, "| also:", [f.text for f in verdict.saturated[1:]])


def test_cpu_bound_fio_on_tmpfs_gets_a_cpu_verdict(alice, executing_bench, tmp_path):
    """Buffered 4 KiB writes to tmpfs: no disk at all, one fio job keeps one core busy."""
    mnt = tmp_path / "shm"
    mnt.mkdir()
    sh("mount", "-t", "tmpfs", "-o", "size=300m", "tmpfs", str(mnt))
    try:
        executing_bench.benchmark_dir = str(mnt)
        executing_bench.save()
        params = {"rw": "write", "bs": "4k", "size": "128m", "runtime": "6", "time_based": True}
        run = run_fio(alice, executing_bench, params)
    finally:
        subprocess.run(["umount", str(mnt)], check=False)
    docs = stored.for_run(run)
    (verdict,) = bottleneck.verdicts(docs)
    assert verdict.phase == "write"
    assert verdict.saturated and verdict.saturated[0].resource == "cpu", verdict
    assert verdict.headline.startswith(f"one core of {os.uname().nodename} at ")
    assert "(fio, the tool's busiest process" in verdict.headline
    assert not [f for f in verdict.saturated if f.resource == "disk"]
    print("\nverdict:", verdict.headline)
