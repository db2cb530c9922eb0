"""A node's benchmark directory on a file system that fills up (a 32 MB ext4 on a loop device,
mounted under the test's tmp_path and unmounted even when the test fails): a dd and a fio
that hit ENOSPC end as failed with an error that says the benchmark directory's file system
is full (naming the run's directory and what it had free), their raw output stored, the run's
directory removed and the node's lease freed; once space is freed the next run succeeds."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from experiments.execution import execute
from experiments.models import NodeLease, Run
from tests.helpers.execution import make_matrix, queue

pytestmark = [
    pytest.mark.skipif(shutil.which("fio") is None, reason="fio is not installed"),
    pytest.mark.skipif(
        os.geteuid() != 0 or shutil.which("losetup") is None or shutil.which("mkfs.ext4") is None,
        reason="a loop-mounted file system needs root, losetup and mkfs.ext4",
    ),
]


def _check(argv: list[str]) -> str:
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: {proc.stderr.strip()}")
    return proc.stdout


@pytest.fixture
def small_fs(tmp_path):
    """A 32 MB ext4 file system on a loop device, mounted at tmp_path/small."""
    image, mount = tmp_path / "small.img", tmp_path / "small"
    mount.mkdir()
    with open(image, "wb") as fh:
        fh.truncate(32 * 1024 * 1024)
    loop = _check(["losetup", "--find", "--show", str(image)]).strip()
    try:
        _check(["mkfs.ext4", "-q", "-F", "-m", "0", loop])
        _check(["mount", "-t", "ext4", loop, str(mount)])
        try:
            yield mount
        finally:
            subprocess.run(["umount", "-l", str(mount)], capture_output=True)
    finally:
        subprocess.run(["losetup", "-d", loop], capture_output=True)


@pytest.fixture
def full_bench(executing_bench, small_fs):
    executing_bench.benchmark_dir = str(small_fs)
    executing_bench.save()
    return executing_bench


def _entries(mount: Path) -> set[str]:
    return {p.name for p in mount.iterdir()} - {"lost+found"}


def _run(alice, bench, tool: str, params: dict) -> Run:
    run = make_matrix(alice, bench, tool=tool, params=params).runs.get()
    execute.execute(run.pk, queue(run), "w@test")
    run.refresh_from_db()
    return run


def _assert_full(
    run: Run, mount: Path, left: frozenset = frozenset(), said: str = "No space left on device"
) -> None:
    assert run.status == "failed", (run.status, run.error)
    assert said in run.raw_output, run.raw_output  # what the tool said, stored
    assert "the benchmark directory's file system is full" in run.error, run.error
    assert str(mount) in run.error and " free of " in run.error, run.error
    assert _entries(mount) == left, "the run's directory is removed, nothing else"
    assert not NodeLease.objects.exists(), "the node is freed"


@pytest.mark.django_db
def test_dd_and_fio_fail_clearly_when_the_benchmark_directory_fills_up(alice, full_bench, small_fs):
    dd = _run(alice, full_bench, "dd", {"bs": "1m", "count": 64})
    _assert_full(dd, small_fs)
    assert dd.error.startswith("dd exited with"), dd.error

    fio = _run(alice, full_bench, "fio", {"rw": "write", "size": "64m", "bs": "1m"})
    # fio's stored output is its JSON result file: ENOSPC is its job's error 28.
    _assert_full(fio, small_fs, said='"error" : 28')
    assert fio.error.startswith("fio exited with"), fio.error

    # Something else fills the file system to its last block: a small run fails, and says so.
    filler = _fill(small_fs)
    small = {"bs": "1m", "count": 4}
    # Even the run's own directory cannot be made: it fails before anything starts.
    _assert_full(_run(alice, full_bench, "dd", small), small_fs, frozenset({"filler"}), said="")

    # Once space is freed, the next run on the node succeeds.
    filler.unlink()
    again = _run(alice, full_bench, "dd", small)
    assert again.status == "succeeded", again.error
    assert again.metrics.exists()
    assert _entries(small_fs) == set() and not NodeLease.objects.exists()


def _fill(mount: Path) -> Path:
    """A file that takes every free block of ``mount``'s file system."""
    filler = mount / "filler"
    with open(filler, "wb", buffering=0) as fh:
        for chunk in (1 << 16, 1 << 12, 1 << 10, 1):
            try:
                while True:
                    fh.write(b"\0" * chunk)
            except OSError:
                os.fsync(fh.fileno())
    return filler


@pytest.mark.django_db
def test_a_full_data_directory_fails_the_run_clearly_and_loses_nothing_stored(
    alice, executing_bench, small_fs, settings
):
    """BEEWEB_RUN_DIR (the runs' scratch directories, under the data directory by default)
    on the small file system: a run stored before it fills keeps everything; a run that
    cannot make its scratch directory fails with that reason (not left running), its node
    freed; once space is freed the next run succeeds."""
    settings.RUN_DIR = small_fs / "runs"
    small = {"bs": "64k", "count": 16}
    before = _run(alice, executing_bench, "dd", small)
    assert before.status == "succeeded", before.error
    stored = (before.raw_output, list(before.metrics.values_list("name", "value")))

    filler = _fill(small_fs)
    full = _run(alice, executing_bench, "dd", small)
    assert full.status == "failed", (full.status, full.error)
    assert full.error.startswith("the data directory's file system is full"), full.error
    assert str(small_fs / "runs") in full.error and " free of " in full.error, full.error
    assert not NodeLease.objects.exists()
    assert not list(Path(executing_bench.benchmark_dir).iterdir()), "its run directory is gone"
    before.refresh_from_db()
    assert (before.raw_output, list(before.metrics.values_list("name", "value"))) == stored

    filler.unlink()
    again = _run(alice, executing_bench, "dd", small)
    assert again.status == "succeeded", again.error
    assert list((small_fs / "runs").iterdir()) == []


@pytest.mark.django_db
def test_a_data_directory_that_fills_while_the_tool_writes_its_log(
    alice, executing_bench, small_fs, settings
):
    """BEEWEB_RUN_DIR on the small file system with only a few KiB left: the run's scratch
    directory is made, but its tool's console log and fio's JSON result cannot be written
    whole. The run fails saying the data directory's file system is full and that its output
    was cut short; what was written is stored as its raw output; its directories are removed,
    its node freed; once space is freed the next run succeeds."""
    settings.RUN_DIR = small_fs / "runs"
    (small_fs / "runs").mkdir()
    filler = _fill(small_fs)
    with open(filler, "r+b") as fh:  # a few KiB free: the scratch directory and a little log
        fh.truncate(os.path.getsize(filler) - 6 * 1024)
    params = {"rw": "write", "size": "4m", "bs": "64k", "runtime": 3, "time_based": True}
    run = _run(alice, executing_bench, "fio", params)
    assert run.status == "failed", (run.status, run.error)
    assert run.error.startswith("the data directory's file system is full"), run.error
    assert str(small_fs / "runs") in run.error and " free of " in run.error, run.error
    assert "cut short" in run.error, run.error
    # What fio wrote to its console log before the space ran out is stored (its JSON result
    # could not be written); no primary metric comes from it.
    assert "Jobs: 1" in run.raw_output, run.raw_output
    assert not run.metrics.filter(primary=True).exists()
    assert not NodeLease.objects.exists()
    assert list((small_fs / "runs").iterdir()) == []
    assert not list(Path(executing_bench.benchmark_dir).iterdir())

    filler.unlink()
    again = _run(alice, executing_bench, "fio", params)
    assert again.status == "succeeded", again.error
    assert again.metrics.exists() and '"jobs"' in again.raw_output
    assert list((small_fs / "runs").iterdir()) == [] and not NodeLease.objects.exists()
