"""A real BeeGFS 7.4.7 server set for tests: ``../shared/tools/beegfs/beegfs-lab.sh`` driven
from Python, on this host or on the nodes of a network-namespace lab (tests/labs/netns.py), and
btrfs RAID volumes over loop files to put its storage targets on.

The daemons (management, metadata, storage) and beegfs-ctl are ThinkParQ's, built from their
source (``../shared/tools/beegfs/build.sh``); the client is a kernel module these machines cannot
load, so nothing mounts BeeGFS. Everything that talks to the servers is real: StorageBench,
``--listnodes``/``--listtargets``/``--serverstats``, ``--genericdebug … getcfg``, config files and
restarts.

Every path lies under one base directory; every port comes from a free ``port_base`` (the
daemons use ``port_base`` + 3 storage / 5 meta / 8 management, + 10 per daemon instance, and the
client side + 4 / + 6), so labs of parallel test runs do not meet.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import random
import re
import shlex
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

from tests.labs.stack import ROOT

TOOLS = ROOT.parent / "shared" / "tools" / "beegfs"
SCRIPT = TOOLS / "beegfs-lab.sh"
TARBALL = TOOLS / "beegfs-7.4.7-x86_64-debian12.tar.xz"
LIBS = ("libnl-3.so.200", "libnl-route-3.so.200")
ONLINE_TIMEOUT_S = 90.0


def unavailable() -> str | None:
    """Why a real BeeGFS cannot run here, or None."""
    if not SCRIPT.is_file() or not TARBALL.is_file():
        return f"{TOOLS} is absent: the BeeGFS servers come from ../shared/tools/beegfs"
    if os.geteuid() != 0:
        return "the BeeGFS lab's daemons and loop-mounted targets need root"
    found = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True).stdout
    missing = [lib for lib in LIBS if lib not in found]
    if missing:
        return f"{', '.join(missing)} missing: apt-get install libnl-3-200 libnl-route-3-200"
    return None


def _free(port: int, kind: int = socket.SOCK_STREAM) -> bool:
    with socket.socket(socket.AF_INET, kind) as sock:
        try:
            sock.bind(("0.0.0.0", port))
        except OSError:
            return False
    return True


def free_port_base() -> int:
    """A base P whose lab ports (P+3 .. P+58, TCP and UDP) are free on this host."""
    for _ in range(200):
        base = random.randrange(30000, 60000, 100)
        ports = range(base + 3, base + 59)
        if all(_free(p) and _free(p, socket.SOCK_DGRAM) for p in ports):
            return base
    raise RuntimeError("no free ports for a BeeGFS lab")


class BeegfsLab:
    """One lab: its daemons, config files (``conf``), logs and data under ``base``."""

    def __init__(self, base: Path, port_base: int | None = None):
        self.base = Path(base)
        self.base.mkdir(parents=True, exist_ok=True)
        self.port_base = port_base or free_port_base()
        self.script = SCRIPT
        self.bin_dir = self.base / "bin"
        self.netns: dict[str, str] = {}  # daemon name -> the namespace it runs in

    def __repr__(self) -> str:
        return f"BeegfsLab({self.base}, port_base={self.port_base})"

    def _env(self, netns: str | None = None, **extra: str) -> dict[str, str]:
        env = {**os.environ, "PORT_BASE": str(self.port_base)}
        env.pop("NETNS", None)
        if netns:
            env["NETNS"] = netns
        env.update(extra)
        return env

    def sh(self, *args: str, netns: str | None = None, timeout: float = 60, **extra: str) -> str:
        """``beegfs-lab.sh VERB BASE ARGS…``; its output, or RuntimeError with it."""
        verb, *rest = args
        argv = ["bash", str(self.script), verb, str(self.base), *rest]
        proc = subprocess.run(
            argv,
            env=self._env(netns, **extra),
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )
        if proc.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)} exited {proc.returncode}: {proc.stderr.strip()}")
        return proc.stdout

    # --- daemons --------------------------------------------------------------------------

    def mgmtd(
        self, netns: str | None = None, host: str = "localhost", node_id: str | None = None
    ) -> None:
        """The management daemon; ``host`` is its address as clients and servers reach it.
        ``node_id``: the name it registers under (BeeGFS takes the machine's hostname, which a
        daemon in a namespace node shares with this host); fixed at its first start."""
        if node_id:
            store = self.base / "data" / "mgmtd"
            store.mkdir(parents=True, exist_ok=True)
            if not (store / "originalNodeID").exists():
                (store / "nodeID").write_text(f"{node_id}\n")
        self.sh("mgmtd", netns=netns, MGMTD_HOST=host)
        self.netns["mgmtd"] = netns or ""

    def meta(self, node_id: str, mgmtd_host: str = "localhost", netns: str | None = None) -> None:
        self.sh("meta", mgmtd_host, node_id, netns=netns)
        self.netns[f"meta-{node_id}"] = netns or ""

    def storage(
        self,
        node_id: str,
        dirs: list[Path],
        mgmtd_host: str = "localhost",
        netns: str | None = None,
    ) -> None:
        """A storage daemon named ``node_id`` with a target per directory."""
        self.sh("storage", mgmtd_host, node_id, ",".join(str(d) for d in dirs), netns=netns)
        self.netns[f"storage-{node_id}"] = netns or ""

    def ctl_argv(self, netns: str | None = None) -> list[str]:
        """beegfs-ctl against this lab, as BEEWEB_BEEGFS_CTL of a node in ``netns`` says it
        (a worker already inside the namespace leaves ``netns`` out)."""
        argv = [str(self.bin_dir / "beegfs-ctl"), f"--cfgFile={self.base}/etc/beegfs-client.conf"]
        return ["ip", "netns", "exec", netns, *argv] if netns else argv

    def ctl(self, *args: str, netns: str | None = None, timeout: float = 30) -> str:
        proc = subprocess.run(
            [*self.ctl_argv(netns), *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )
        if proc.returncode != 0:
            raise RuntimeError(f"beegfs-ctl {' '.join(args)}: {(proc.stdout + proc.stderr)[-800:]}")
        return proc.stdout

    def conf(self, name: str) -> Path:
        """The config file daemon ``name`` (``mgmtd``, ``meta-ID``, ``storage-ID``) reads."""
        return self.base / "etc" / f"{name}.conf"

    def restart_argv(self, name: str) -> list[str]:
        """How a node restarts daemon ``name`` (its BEEWEB_NODE_BEEGFS_*_RESTART). ``setsid``:
        the daemon outlives the worker that restarted it, as under systemd."""
        return ["setsid", "bash", str(self.script), "restart", str(self.base), name]

    def pid(self, name: str) -> int:
        return int((self.base / "run" / f"{name}.pid").read_text())

    def kill(self, name: str, sig: int = signal.SIGKILL) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid(name), sig)

    def log(self, name: str) -> str:
        path = self.base / "log" / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def targets(self, netns: str | None = None) -> dict[int, str]:
        """Storage target id -> reachability (``Online``, ``Probably-offline``, ``Offline``)."""
        states = {}
        for line in self.ctl("--listtargets", "--state", netns=netns).splitlines():
            fields = line.split()
            if len(fields) >= 3 and fields[0].isdigit():
                states[int(fields[0])] = fields[1]
        return states

    def wait_online(
        self, n_targets: int, timeout: float = ONLINE_TIMEOUT_S, netns: str | None = None
    ) -> dict[int, str]:
        """Wait until ``n_targets`` storage targets are Online (a storage daemon's targets are
        Probably-offline for a few seconds after it starts); their states."""
        deadline = time.monotonic() + timeout
        states: dict[int, str] = {}
        while time.monotonic() < deadline:
            with contextlib.suppress(RuntimeError, subprocess.TimeoutExpired):
                states = self.targets(netns)
                if sum(s == "Online" for s in states.values()) >= n_targets:
                    return states
            time.sleep(0.3)
        raise RuntimeError(f"{n_targets} targets not Online after {timeout:.0f} s: {states}")

    def stop(self) -> None:
        with contextlib.suppress(Exception):
            self.sh("stop", timeout=60)


# --- btrfs RAID volumes over loop files --------------------------------------------------------

_volumes: list[tuple[Path, list[str]]] = []
# A loop device of a lab volume whose test process died before its cleanup: its image (under a
# pytest base directory) was deleted with the directory, and nothing has it mounted.
_STALE_IMAGE = re.compile(
    r"^(?P<loop>/dev/loop\d+): .*\((?P<image>/tmp/\S*/beegfs\d*/\S+\.img) \(deleted\)\)$"
)


def detach_stale_loops() -> list[str]:
    """Detach the loop devices crashed labs left behind (see _STALE_IMAGE); their names."""
    listing = subprocess.run(["losetup", "-a"], capture_output=True, text=True).stdout
    mounted = Path("/proc/mounts").read_text()
    detached = []
    for line in listing.splitlines():
        match = _STALE_IMAGE.match(line.strip())
        if match and f"{match['loop']} " not in mounted:
            if (
                subprocess.run(["losetup", "-d", match["loop"]], capture_output=True).returncode
                == 0
            ):
                detached.append(match["loop"])
    return detached


def btrfs_volume(base: Path, name: str, profile: str, devices: int, size_mb: int = 300) -> Path:
    """A btrfs file system with data and metadata in ``profile`` (``raid0``, ``raid10``, …)
    over ``devices`` loop files of ``size_mb`` each, mounted at ``base/name``: a server's RAID
    volume in miniature (md RAID is absent from these kernels). ``cleanup_volumes`` unmounts
    it and frees its loop devices."""
    if shutil.which("mkfs.btrfs") is None:
        raise RuntimeError("mkfs.btrfs is not installed: apt-get install btrfs-progs")
    detach_stale_loops()
    loops: list[str] = []
    mount = Path(base) / name
    mount.mkdir(parents=True, exist_ok=True)
    try:
        for i in range(devices):
            image = Path(base) / f"{name}-{i}.img"
            with open(image, "wb") as fh:
                fh.truncate(size_mb * 1024 * 1024)
            loops.append(_check(["losetup", "--find", "--show", str(image)]).strip())
        _check(["mkfs.btrfs", "-q", "-f", "-d", profile, "-m", profile, *loops])
        _check(["mount", "-t", "btrfs", loops[0], str(mount)])
    except Exception:
        for loop in loops:
            subprocess.run(["losetup", "-d", loop], capture_output=True)
        raise
    _volumes.append((mount, loops))
    return mount


@atexit.register
def cleanup_volumes() -> None:
    """Unmount every volume ``btrfs_volume`` made and detach its loop devices."""
    while _volumes:
        mount, loops = _volumes.pop()
        subprocess.run(["umount", "-l", str(mount)], capture_output=True)
        for loop in loops:
            subprocess.run(["losetup", "-d", loop], capture_output=True)


def _check(argv: list[str]) -> str:
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: {proc.stderr.strip()}")
    return proc.stdout


# --- the two labs the tests share ---------------------------------------------------------------


def host_lab(base: Path, targets: int = 2) -> BeegfsLab:
    """Management, metadata ``meta01`` and storage ``storage01`` with ``targets`` target
    directories, all on this host, targets Online."""
    lab = BeegfsLab(base)
    try:
        lab.mgmtd()
        lab.meta("meta01")
        lab.storage("storage01", [lab.base / "data" / f"target{t}" for t in range(1, targets + 1)])
        lab.wait_online(targets)
    except Exception:
        lab.stop()
        raise
    return lab


def cluster_lab(base: Path, netns_lab) -> BeegfsLab:
    """On a 3-node network-namespace lab: node1 runs the management daemon and metadata
    server ``node1``; node2 the storage server ``node2`` with two targets on a btrfs RAID0
    over two loop files; node3 the storage server ``node3`` with two targets on a btrfs
    RAID10 over four. BeeGFS node names are the hostnames (the management daemon's too);
    targets Online."""
    lab = BeegfsLab(base)
    node1, node2, node3 = netns_lab.nodes[:3]
    try:
        raid0 = btrfs_volume(lab.base, "raid0", "raid0", 2)
        raid10 = btrfs_volume(lab.base, "raid10", "raid10", 4)
        lab.mgmtd(netns=node1.netns, host=node1.address, node_id=node1.hostname)
        lab.meta("node1", node1.address, netns=node1.netns)
        lab.storage("node2", [raid0 / "t1", raid0 / "t2"], node1.address, netns=node2.netns)
        lab.storage("node3", [raid10 / "t1", raid10 / "t2"], node1.address, netns=node3.netns)
        lab.wait_online(4)
    except Exception:
        lab.stop()
        cleanup_volumes()
        raise
    return lab


def node_env(
    lab: BeegfsLab, service: str | None = None, name: str = "", allow: bool = False
) -> dict[str, str]:
    """A lab node's BeeGFS settings for its worker: beegfs-ctl against the lab and, for a
    server node (``service`` ``storage`` or ``meta``, daemon ``name`` such as
    ``storage-node2``), its config file and restart command; changing them stays refused
    (BEEWEB_NODE_BEEGFS) unless ``allow``. Commands are joined as a shell would quote them,
    so the worker's split gives back each path as one argument."""
    env = {"BEEWEB_BEEGFS_CTL": shlex.join(lab.ctl_argv())}
    if service:
        up = service.upper()
        env[f"BEEWEB_NODE_BEEGFS_{up}_CONF"] = str(lab.conf(name))
        env[f"BEEWEB_NODE_BEEGFS_{up}_RESTART"] = shlex.join(lab.restart_argv(name))
    if allow:
        env["BEEWEB_NODE_BEEGFS"] = "true"
    return env
