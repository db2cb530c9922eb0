"""A throw-away real Slurm cluster for tests (tests/labs/slurm-cluster.sh: slurmctld, slurmd
and munged of Debian's slurm-wlm, every path under a temporary directory, free ports)."""

from __future__ import annotations

import os
import random
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

SCRIPT = Path(__file__).resolve().with_name("slurm-cluster.sh")
NEEDED = ("slurmctld", "slurmd", "munged", "mungekey", "salloc", "srun", "scontrol", "scancel")


def unavailable() -> str | None:
    """Why a real cluster cannot start here, or None."""
    missing = [name for name in NEEDED if shutil.which(name) is None]
    if missing:
        return f"Slurm is not installed ({', '.join(missing)} missing: apt-get install slurm-wlm)"
    if os.geteuid() != 0:
        return "the Slurm test cluster's fake nodes need root (unshare of UTS and mount)"
    return None


def _free(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port_base(fake_nodes: int) -> int:
    """A base P whose ports P, P+1 and P+101.. are free (slurmctld, slurmd, fake nodes)."""
    for _ in range(200):
        base = random.randrange(20000, 40000, 2)
        ports = [base, base + 1, *(base + 100 + k for k in range(1, fake_nodes + 1))]
        if all(_free(p) for p in ports):
            return base
    raise RuntimeError("no free ports for a Slurm test cluster")


class Cluster:
    """``start`` runs the script (about 1 s); ``env`` is what a client of it needs. Its base
    directory is a fresh one in /tmp, readable by all: munged refuses a socket below a
    private directory (pytest's tmp_path is 0700)."""

    def __init__(self, fake_nodes: int = 1):
        self.base = Path(tempfile.mkdtemp(prefix="beeweb-slurm-"))
        self.base.chmod(0o755)
        self.fake_nodes = fake_nodes
        self.port = free_port_base(fake_nodes)
        self.env = {"SLURM_CONF": str(self.base / "etc" / "slurm.conf")}

    def _script(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [str(SCRIPT), *args],
            env={**os.environ, "PORT_BASE": str(self.port)},
            capture_output=True,
            text=True,
            timeout=120,
        )

    def start(self) -> None:
        proc = self._script("start", str(self.base), str(self.fake_nodes))
        if proc.returncode != 0:
            self.stop()
            raise RuntimeError(f"slurm-cluster.sh start failed:\n{proc.stdout}{proc.stderr}")

    def stop(self) -> None:
        self._script("stop", str(self.base))
        shutil.rmtree(self.base, ignore_errors=True)

    def scontrol(self, *args: str) -> str:
        return subprocess.run(
            ["scontrol", *args],
            env={**os.environ, **self.env},
            capture_output=True,
            text=True,
            timeout=30,
        ).stdout
