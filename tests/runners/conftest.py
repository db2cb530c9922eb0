"""Adapter tests: launch contexts on temporary directories (running a Command for real is
tests/helpers/tools.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from runners.tools import Host, LaunchContext
from tests.helpers.tools import HOSTS


@pytest.fixture
def ctx(tmp_path: Path) -> LaunchContext:
    """Single mode on a fresh workdir, scratch beside it."""
    (tmp_path / "work").mkdir()
    (tmp_path / "scratch").mkdir()
    return LaunchContext(workdir=tmp_path / "work", scratch=tmp_path / "scratch")


@pytest.fixture
def mpi_ctx(tmp_path: Path) -> LaunchContext:
    return LaunchContext(
        workdir=Path("/mnt/beegfs/bench"),
        scratch=tmp_path,
        mode="mpi",
        hosts=HOSTS,
        tasks_per_node=4,
    )


@pytest.fixture
def multihost_ctx(tmp_path: Path) -> LaunchContext:
    return LaunchContext(
        workdir=Path("/mnt/beegfs/bench"), scratch=tmp_path, mode="multihost", hosts=HOSTS
    )


@pytest.fixture
def local_mpi_ctx(tmp_path: Path) -> LaunchContext:
    """MPI mode on this host alone (mpirun's hostfile names 127.0.0.1), two tasks, on a fresh
    workdir: where the real IOR and mdtest run under mpirun."""
    (tmp_path / "work").mkdir()
    (tmp_path / "scratch").mkdir()
    return LaunchContext(
        workdir=tmp_path / "work",
        scratch=tmp_path / "scratch",
        mode="mpi",
        hosts=(Host("localhost", "127.0.0.1"),),
        tasks_per_node=2,
    )
