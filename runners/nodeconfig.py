"""What a worker reads from (and, through an allowlist, applies to) its node before a run.

Reading never fails a run: what cannot be read is recorded as such. Writing goes only to the
allowlisted sysctl, block-device and transparent-huge-page files and to BeeGFS's own striping
command, only for the keys the node's BEEWEB_NODE_TUNING allows
(``experiments.execution.nodepolicy``), each
value checked against a strict pattern first; commands are argv lists. Every value written is
put back after the run (``restore_tuning``).
"""

from __future__ import annotations

import os
import platform
import re
import shutil
import socket
import subprocess
import time
from collections.abc import Collection
from pathlib import Path
from typing import Any

SYSCTLS = (
    "vm.dirty_background_ratio",
    "vm.dirty_ratio",
    "vm.dirty_background_bytes",
    "vm.dirty_bytes",
    "vm.vfs_cache_pressure",
    "vm.min_free_kbytes",
    "vm.zone_reclaim_mode",
    "vm.swappiness",
    "kernel.numa_balancing",
    "net.core.rmem_max",
    "net.core.wmem_max",
    "net.ipv4.tcp_rmem",
    "net.ipv4.tcp_wmem",
)
QUEUE_KEYS = ("scheduler", "nr_requests", "read_ahead_kb", "max_sectors_kb")
THP = {
    "transparent_hugepage": "/sys/kernel/mm/transparent_hugepage/enabled",
    "transparent_hugepage_defrag": "/sys/kernel/mm/transparent_hugepage/defrag",
}
STRIPING_FLAGS = {
    "chunksize": "--chunksize",
    "numtargets": "--numtargets",
    "pattern": "--pattern",
    "storagepoolid": "--storagepoolid",
}
COMMAND_TIMEOUT = 15
_SAFE_VALUE = re.compile(r"^[A-Za-z0-9+_\-][A-Za-z0-9+_\- \t]{0,63}$")
_PROC_SYS = Path("/proc/sys")
_SYS_BLOCK = Path("/sys/block")


def _read_text(path: Path | str) -> str | None:
    """The file's text, stripped; None when unreadable. Plain os.open/os.read: a run reads
    ~20 of these files, and pathlib plus a text wrapper per file cost more than the reads."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    chunks = []
    try:
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
    except OSError:
        return None
    finally:
        os.close(fd)
    return b"".join(chunks).decode(errors="replace").strip()


def _run(argv: list[str]) -> tuple[int, str]:
    try:
        proc = subprocess.run(
            argv, capture_output=True, text=True, timeout=COMMAND_TIMEOUT, stdin=subprocess.DEVNULL
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return -1, str(exc)
    return proc.returncode, (proc.stdout + proc.stderr).strip()


def _unescape(field: str) -> str:
    """The kernel's mount tables escape blanks, tabs, newlines and backslashes as octal."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


_mount_table: tuple[str, list[dict[str, str]]] = ("", [])


def _mounts() -> list[dict[str, str]]:
    """This mount namespace's mounts, from /proc/self/mountinfo: read for every run, parsed
    again only when its text changed (a mount or unmount)."""
    global _mount_table
    text = _read_text("/proc/self/mountinfo") or ""
    if text == _mount_table[0]:
        return _mount_table[1]
    mounts = []
    for line in text.splitlines():
        left, _, right = line.partition(" - ")
        fields, rest = left.split(), right.split()
        if len(fields) < 6 or len(rest) < 2:
            continue
        options = fields[5].split(",") + (rest[2].split(",") if len(rest) > 2 else [])
        mounts.append(
            {
                "mount_point": _unescape(fields[4]),
                "fstype": rest[0],
                "source": _unescape(rest[1]),
                "options": ",".join(dict.fromkeys(options)),
            }
        )
    _mount_table = (text, mounts)
    return mounts


def mount_of(path: Path | str) -> dict[str, str]:
    """The mount holding ``path`` (the topmost at the deepest mount point), from this mount
    namespace's /proc/self/mountinfo: mount point, file system type, source device and
    options (the mount's, then the file system's, as /proc/mounts merges them); {} when
    unreadable."""
    path = os.path.realpath(path)
    best: dict[str, str] = {}
    for mount in _mounts():
        point = mount["mount_point"]
        inside = path == point or path.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= len(best.get("mount_point", "")):
            best = dict(mount)
    return best


def block_device(source: str) -> str | None:
    """The /sys/block name of a mount source (a partition maps to its disk)."""
    if not source.startswith("/dev/"):
        return None
    name = os.path.basename(os.path.realpath(source))
    if (_SYS_BLOCK / name).exists():
        return name
    for disk in _SYS_BLOCK.iterdir() if _SYS_BLOCK.exists() else []:
        if (disk / name).exists():
            return disk.name
    return None


def read(workdir: Path | str, version_argv: list[str] | None = None) -> dict[str, Any]:
    """The configuration this run sees: kernel, sysctls, the benchmark directory's mount and
    device queue settings, BeeGFS striping of the directory, and the tool's version."""
    config: dict[str, Any] = {
        "hostname": socket.gethostname(),
        "kernel": platform.release(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "sysctl": {},
    }
    for key in SYSCTLS:
        value = _read_text(f"/proc/sys/{key.replace('.', '/')}")
        if value is not None:
            config["sysctl"][key] = " ".join(value.split())
    for key, path in THP.items():
        value = _read_text(path)
        if value is not None:
            config[key] = value
    governor = _read_text("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor")
    if governor:
        config["cpu_governor"] = governor
    mount = mount_of(workdir)
    if mount:
        config["mount"] = mount
        device = block_device(mount["source"])
        if device:
            config["device"] = {
                "name": device,
                **{key: _read_text(f"{_SYS_BLOCK}/{device}/queue/{key}") for key in QUEUE_KEYS},
            }
    config["beegfs_entry"] = beegfs_entry_info(workdir)
    if version_argv:
        version = tool_version(tuple(version_argv))
        if version:
            config["tool_version"] = version
    return config


_VERSIONS: dict[tuple, str | None] = {}
# Where a command is found on PATH (inventory, not the run's) is reused for this long
# (seconds): a search of PATH is a dozen stat calls, three times per run.
WHICH_MAX_AGE_S = 60.0
_found: dict[tuple[str, str], tuple[float, str | None]] = {}


def which(name: str) -> str | None:
    """``shutil.which(name)``, searched again when this process's last search for it (on
    the same PATH) is older than WHICH_MAX_AGE_S."""
    key = (name, os.environ.get("PATH", ""))
    cached = _found.get(key)
    now = time.monotonic()
    if cached is not None and now - cached[0] <= WHICH_MAX_AGE_S:
        return cached[1]
    path = shutil.which(name)
    _found[key] = (now, path)
    return path


def tool_version(version_argv: tuple[str, ...]) -> str | None:
    """First line of the tool's version output, cached per worker process for as long as
    the binary stays the same file (path, inode, mtime): asking costs a process per run."""
    path = which(version_argv[0])
    if not path:
        return None
    try:
        st = os.stat(path)
    except OSError:
        return None
    key = (version_argv, path, st.st_ino, st.st_mtime_ns)
    if key not in _VERSIONS:
        code, text = _run(list(version_argv))
        _VERSIONS[key] = text.splitlines()[0][:200] if text else None
    return _VERSIONS[key]


def beegfs_entry_info(workdir: Path | str) -> str | None:
    """The stripe pattern of the benchmark directory, when BeeGFS's CLI is installed."""
    if which("beegfs"):
        code, text = _run(["beegfs", "entry", "info", "--", str(workdir)])
    elif which("beegfs-ctl"):
        code, text = _run(["beegfs-ctl", "--getentryinfo", "--", str(workdir)])
    else:
        return None
    return text[:8000] if code == 0 else f"not available: {text[:500]}"


def drop_caches() -> str:
    """Flush dirty pages and drop the page cache, dentries and inodes."""
    os.sync()
    try:
        with open(_PROC_SYS / "vm" / "drop_caches", "w") as fh:
            fh.write("3\n")
    except OSError as exc:
        return f"not permitted: {exc.strerror or exc}"
    return "dropped"


def apply_tuning(
    values: dict[str, str], workdir: Path | str, allowed: Collection[str] = ()
) -> list[dict[str, str]]:
    """Apply a tuning set's OS and striping settings (keys ``scope.key``) that the node allows
    (``allowed``, from BEEWEB_NODE_TUNING) and the allowlist knows; one record per key with
    the value before, the value asked for and the result (applied, refused, skipped or
    failed). ``restore_tuning`` puts back what was applied."""
    actions: list[dict[str, str]] = []
    striping: dict[str, str] = {}
    mount = mount_of(workdir)
    device = block_device(mount.get("source", "")) if mount else None
    for full_key, raw in sorted(values.items()):
        scope, _, key = full_key.partition(".")
        value = str(raw).strip()
        record = {"key": full_key, "value": value}
        actions.append(record)
        if scope in ("storage", "meta"):
            record["result"] = (
                "not a setting of this node: made true on the BeeGFS servers by their own "
                'workers (effective_config["beegfs"])'
            )
            continue
        if full_key not in allowed:
            record["result"] = "refused: this node's BEEWEB_NODE_TUNING does not allow it"
            continue
        if not _SAFE_VALUE.match(value):
            record["result"] = "skipped: value has characters outside [A-Za-z0-9+_- ]"
            continue
        path = None
        if scope == "striping" and key in STRIPING_FLAGS:
            striping[key] = value
            record["result"] = "pending"
        elif scope == "os" and key in SYSCTLS:
            path = _PROC_SYS / key.replace(".", "/")
        elif scope == "os" and key in QUEUE_KEYS:
            if device is None:
                record["result"] = "skipped: the benchmark directory is not on a block device"
            else:
                path = _SYS_BLOCK / device / "queue" / key
        elif scope == "os" and key in THP:
            path = Path(THP[key])
        else:
            record["result"] = (
                "skipped: not in the allowlist (needs a service restart or is not a node setting)"
            )
        if path is not None:
            before = _current(path)
            if before is None:
                record["result"] = "failed: the current value cannot be read to restore it"
                continue
            record["before"] = before
            record["path"] = str(path)
            record["result"] = _write(path, value)
    if striping:
        result = _set_pattern(striping, workdir)
        for record in actions:
            if record.get("result") == "pending":
                # The pattern is set on the run's own directory, which goes with the run.
                record["result"] = result
    return actions


def restore_tuning(actions: list[dict[str, str]]) -> list[dict[str, str]]:
    """Write back the value each applied setting had before the run; records ``restored``
    (``restored``, or ``failed: ...``) on each record that was applied and returns them."""
    for record in reversed(actions):
        if record.get("result") != "applied":
            continue
        if "path" not in record:
            record["restored"] = "not needed: striping was set on the run's own directory"
            continue
        result = _write(Path(record["path"]), record["before"])
        record["restored"] = "restored" if result == "applied" else result
    return actions


def _current(path: Path) -> str | None:
    """A setting's current value as it can be written back: the bracketed choice of a
    selector file ("always [madvise] never" -> "madvise"), else the whitespace-normalised
    text ("4096\t131072\t6291456" -> "4096 131072 6291456")."""
    text = _read_text(path)
    if text is None:
        return None
    chosen = re.search(r"\[([^\]]+)\]", text)
    return chosen.group(1) if chosen else " ".join(text.split())


def _write(path: Path, value: str) -> str:
    try:
        path.write_text(value + "\n")
    except OSError as exc:
        return f"failed: {exc.strerror or exc}"
    return "applied"


def _set_pattern(striping: dict[str, str], workdir: Path | str) -> str:
    if shutil.which("beegfs-ctl"):
        argv = ["beegfs-ctl", "--setpattern"]
        argv += [f"{STRIPING_FLAGS[k]}={v}" for k, v in sorted(striping.items())]
        argv += ["--", str(workdir)]
    elif shutil.which("beegfs"):
        names = {
            "chunksize": "--chunk-size",
            "numtargets": "--num-targets",
            "pattern": "--pattern",
            "storagepoolid": "--pool",
        }
        argv = ["beegfs", "entry", "set"]
        argv += [f"{names[k]}={v}" for k, v in sorted(striping.items())]
        argv += ["--", str(workdir)]
    else:
        return "skipped: no BeeGFS command-line tool on this node"
    code, text = _run(argv)
    return "applied" if code == 0 else f"failed: {text[:300]}"
