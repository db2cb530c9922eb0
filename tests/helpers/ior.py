"""IOR 4.0.0 and mdtest for real: built from ../shared/tools/ior (hpc/ior tag 4.0.0) with
Debian's Open MPI by .ci/run into /usr/local. Tests that run them call ``need_ior``: without
../shared they skip saying so; with it, CI fails where the binaries are missing and a
developer's machine skips saying how to build them."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
IOR_TOOLS = ROOT.parent / "shared" / "tools" / "ior"
BUILD = IOR_TOOLS / "build.sh"


def unavailable(*binaries: str) -> tuple[str, bool] | None:
    """Why ``binaries`` (default ior, mdtest, mpirun) cannot run here, and whether that is a
    reason to skip (True) rather than to fail; None when they can."""
    wanted = binaries or ("ior", "mdtest", "mpirun")
    if not BUILD.is_file():
        return f"{IOR_TOOLS} is absent: IOR and mdtest are built from ../shared/tools/ior", True
    missing = [b for b in wanted if shutil.which(b) is None]
    if missing:
        why = (
            f"{', '.join(missing)} not on PATH: .ci/run builds IOR and mdtest "
            f"(apt-get install libopenmpi-dev openmpi-bin autoconf automake pkg-config; "
            f"bash {BUILD} /usr/local)"
        )
        return why, not os.environ.get("CI")
    return None


def need_ior(*binaries: str) -> None:
    """Skip (or, in CI with ../shared present, fail) unless ``binaries`` can run."""
    reason = unavailable(*binaries)
    if reason is None:
        return
    why, skip = reason
    if skip:
        pytest.skip(why)
    pytest.fail(why)
