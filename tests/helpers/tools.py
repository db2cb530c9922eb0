"""The runners kit's tool commands run here for real, as the executor would; two hosts for
multi-node launch contexts."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from runners.tools import Command, Host

HOSTS = (Host("c1", "10.0.0.1"), Host("c2", "c2.ib.example"))


def need(binary: str) -> str:
    """Path of ``binary``, or skip the test saying it is missing (CI installs them all)."""
    path = shutil.which(binary)
    if path is None:
        pytest.skip(f"{binary} not installed")
    return path


def run(cmd: Command, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Launch ``cmd`` as the executor would: write its files, no shell, its env added."""
    for path, content in cmd.files.items():
        Path(path).write_text(content, encoding="utf-8")
    return subprocess.run(
        cmd.argv,
        cwd=cmd.cwd,
        env={**os.environ, **cmd.env},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
