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
    assert said in run.raw_output, run.raw_output
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

    # Something else fills the file system: even a small run fails, and says so.
    filler = small_fs / "filler"
    with open(filler, "wb") as fh:
        try:
            while True:
                fh.write(b"\0" * (1 << 20))
                fh.flush()
                os.fsync(fh.fileno())
        except OSError:
            pass
    small = {"bs": "1m", "count": 4}
    _assert_full(_run(alice, full_bench, "dd", small), small_fs, frozenset({"filler"}))

    # Once space is freed, the next run on the node succeeds.
    filler.unlink()
    again = _run(alice, full_bench, "dd", small)
    assert again.status == "succeeded", again.error
    assert again.metrics.exists()
    assert _entries(small_fs) == set() and not NodeLease.objects.exists()
