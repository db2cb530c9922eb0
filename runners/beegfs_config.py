"""A BeeGFS service's config file on this node, changed key by key, the service restarted and
what the running daemon uses read back; the original file kept and put back (issue 26).

Django-free: the node's worker (experiments.execution.beegfs) decides what to write, under its
node's policy, and records the outcome; this module only does it. Everything is an argv list
(the restart command and beegfs-ctl come from the node's own environment), never a shell.

- ``rewrite`` changes only the lines of the asked keys (comments, order and every other line
  kept), appending a key the file does not have;
- the first change saves the file as ``<conf>.beeweb-original`` (once: a later change keeps
  the first original), ``restore_original`` writes those bytes back;
- ``restart`` runs the node's restart argv, ``wait_online`` polls beegfs-ctl until this
  server is reachable and its targets are Online;
- ``getcfg`` is ``beegfs-ctl --genericdebug getcfg`` of this server: BeeGFS answers with the
  text of the config file the running daemon was started with (re-read when asked), so it
  proves which file the daemon reads; ``daemon_started_after`` proves that the daemon process
  reading that file started after it was written, i.e. that its values are the ones in force.
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

ORIGINAL_SUFFIX = ".beeweb-original"
COMMAND_TIMEOUT_S = 30.0
RESTART_TIMEOUT_S = 120.0
ONLINE_TIMEOUT_S = 90.0
ONLINE_POLL_S = 0.2
NODE_TYPES = {"storage": "storage", "meta": "meta"}
_LINE = re.compile(r"^(\s*)([A-Za-z0-9_.\-]+)(\s*=\s*)(.*?)(\s*(?:#.*)?)$")
_NODE = re.compile(r"^(\S+) \[ID: (\d+)\]\s*$")


class BeegfsConfigError(Exception):
    """A step on a BeeGFS service failed; the message says which and BeeGFS's words."""


@dataclass(frozen=True)
class Service:
    """One BeeGFS service of this node as its operator configured it."""

    scope: str  # storage | meta
    conf: Path
    restart_argv: tuple[str, ...]
    ctl_argv: tuple[str, ...]
    node_name: str

    @property
    def original(self) -> Path:
        return self.conf.with_name(self.conf.name + ORIGINAL_SUFFIX)

    @property
    def nodetype(self) -> str:
        return NODE_TYPES[self.scope]


@dataclass
class Timing:
    restart_s: float | None = None
    online_s: float | None = None
    restarted: bool = False
    notes: list[str] = field(default_factory=list)


# --- The file -------------------------------------------------------------------------------


def conf_values(text: str) -> dict[str, str]:
    """``key = value`` lines of a BeeGFS config text (comments and blanks skipped; the last
    line of a key wins, as BeeGFS reads it)."""
    values: dict[str, str] = {}
    for line in text.splitlines():
        if line.lstrip().startswith("#"):
            continue
        m = _LINE.match(line)
        if m:
            values[m.group(2)] = m.group(4).strip()
    return values


def rewrite(text: str, values: dict[str, str]) -> str:
    """``text`` with the value of every key in ``values`` replaced on its line(s), keeping
    indentation, spacing and a trailing comment; keys the file lacks are appended."""
    missing = dict(values)
    lines = text.splitlines(keepends=True)
    out = []
    for line in lines:
        body = line.rstrip("\r\n")
        ending = line[len(body) :]
        m = None if body.lstrip().startswith("#") else _LINE.match(body)
        if m and m.group(2) in values:
            key = m.group(2)
            body = f"{m.group(1)}{key}{m.group(3)}{values[key]}{m.group(5)}"
            missing.pop(key, None)
        out.append(body + ending)
    if missing:
        if out and not out[-1].endswith("\n"):
            out[-1] += "\n"
        out.extend(f"{key} = {value}\n" for key, value in missing.items())
    return "".join(out)


def save_original(service: Service) -> bool:
    """Keep the file as it is now beside it, unless an original is kept already; whether it
    was saved now. Written to a temporary name and renamed: never half an original."""
    if service.original.exists():
        return False
    data = service.conf.read_bytes()
    tmp = service.original.with_name(service.original.name + ".tmp")
    tmp.write_bytes(data)
    os.chmod(tmp, service.conf.stat().st_mode & 0o777)
    os.replace(tmp, service.original)
    return True


def write_conf(service: Service, text: str) -> None:
    """Replace the config file's content in place (same inode, owner and mode, as an editor
    that keeps the file would), flushed to disk before the restart reads it."""
    with open(service.conf, "r+b") as fh:
        fh.write(text.encode())
        fh.truncate()
        fh.flush()
        os.fsync(fh.fileno())


def restore_original(service: Service) -> bool:
    """Write the kept original back (byte for byte) and drop it; whether there was one."""
    if not service.original.exists():
        return False
    write_conf(service, service.original.read_bytes().decode())
    service.original.unlink()
    return True


# --- The daemon -----------------------------------------------------------------------------


def ctl(service: Service, *args: str, timeout: float = COMMAND_TIMEOUT_S) -> str:
    """beegfs-ctl (the node's BEEWEB_BEEGFS_CTL) with ``args``; its output, or
    BeegfsConfigError with BeeGFS's words."""
    argv = [*service.ctl_argv, *args]
    try:
        proc = subprocess.run(
            argv, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise BeegfsConfigError(f"{' '.join(argv[:1] + list(args))}: {exc}") from None
    if proc.returncode != 0:
        words = (proc.stdout + proc.stderr).strip()[-500:]
        raise BeegfsConfigError(f"beegfs-ctl {' '.join(args)} exited {proc.returncode}: {words}")
    return proc.stdout


def node_id(service: Service) -> str:
    """This server's numeric node id, found by its node name in ``--listnodes``."""
    out = ctl(service, "--listnodes", f"--nodetype={service.nodetype}")
    for line in out.splitlines():
        m = _NODE.match(line.strip())
        if m and m.group(1) == service.node_name:
            return m.group(2)
    raise BeegfsConfigError(
        f"no {service.scope} server named {service.node_name!r} in beegfs-ctl --listnodes "
        f"--nodetype={service.nodetype} (BEEWEB_NODE_BEEGFS_NODE_NAME names it)"
    )


def getcfg(service: Service, nid: str) -> dict[str, str]:
    """The ``key = value`` lines of the config file the running daemon was started with."""
    out = ctl(
        service, "--genericdebug", f"--nodetype={service.nodetype}", f"--nodeid={nid}", "getcfg"
    )
    _, _, body = out.partition("Response:")
    if "No config file defined" in body:
        raise BeegfsConfigError(f"the {service.scope} daemon was started without a config file")
    return conf_values(body)


def online(service: Service, nid: str) -> tuple[bool, str]:
    """Whether this server is reachable and all its targets are Online; (ok, what was seen)."""
    mine = f"{service.node_name} [ID: {nid}]"
    nodes = ctl(service, "--listnodes", f"--nodetype={service.nodetype}", "--reachable")
    lines = nodes.splitlines()
    reachable = False
    for i, line in enumerate(lines):
        if line.strip() == mine:
            reachable = any("Reachable: <yes>" in after for after in lines[i + 1 : i + 2])
    if not reachable:
        return False, f"{service.node_name} not reachable"
    targets = ctl(
        service, "--listtargets", "--state", "--longnodes", f"--nodetype={service.nodetype}"
    )
    states = [line.split()[1] for line in targets.splitlines() if line.rstrip().endswith(mine)]
    if not states:
        return False, f"no targets of {service.node_name} listed"
    if any(state != "Online" for state in states):
        return False, f"targets of {service.node_name}: {', '.join(states)}"
    return True, f"{len(states)} target(s) Online"


def wait_online(
    service: Service,
    nid: str,
    timeout: float = ONLINE_TIMEOUT_S,
    keep_going: Callable[[], bool] | None = None,
) -> float:
    """Poll until ``online``; the seconds waited. BeegfsConfigError after ``timeout`` or when
    ``keep_going()`` says stop."""
    started = time.monotonic()
    seen = ""
    while True:
        try:
            ok, seen = online(service, nid)
        except BeegfsConfigError as exc:
            ok, seen = False, str(exc)
        if ok:
            return time.monotonic() - started
        if time.monotonic() - started >= timeout:
            raise BeegfsConfigError(
                f"the {service.scope} server {service.node_name} was not Online within "
                f"{timeout:g} s of its restart (last seen: {seen})"
            )
        if keep_going is not None and not keep_going():
            raise BeegfsConfigError("stopped while waiting for the server to come back")
        time.sleep(ONLINE_POLL_S)


def restart(service: Service, timeout: float = RESTART_TIMEOUT_S) -> float:
    """Run the node's restart argv; its duration, or BeegfsConfigError with its output."""
    started = time.monotonic()
    try:
        proc = subprocess.run(
            list(service.restart_argv),
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise BeegfsConfigError(f"restart {' '.join(service.restart_argv)}: {exc}") from None
    if proc.returncode != 0:
        words = (proc.stdout + proc.stderr).strip()[-500:]
        raise BeegfsConfigError(
            f"restart {' '.join(service.restart_argv)} exited {proc.returncode}: {words}"
        )
    return time.monotonic() - started


def daemon_pids(service: Service) -> list[int]:
    """Processes of this node started with ``cfgFile=<conf>`` (how BeeGFS daemons are given
    their file, by systemd's unit files as by the lab)."""
    wanted = f"cfgFile={os.path.realpath(service.conf)}".encode()
    also = f"cfgFile={service.conf}".encode()
    pids = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/cmdline", "rb") as fh:
                args = fh.read().split(b"\0")
        except OSError:
            continue
        if wanted in args or also in args:
            pids.append(int(entry.name))
    return pids


def process_started(pid: int) -> float:
    """A process's start as a Unix time, to a clock tick: its start in ticks since boot
    (/proc/PID/stat) against the time since boot now (/proc/uptime, 10 ms; /proc/stat's
    btime is whole seconds, too coarse to tell a restart from a file written just after)."""
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    with open("/proc/uptime") as fh:
        uptime = float(fh.read().split()[0])
    return time.time() - uptime + int(fields[19]) / os.sysconf("SC_CLK_TCK")


def daemon_started_after(service: Service, written_at: float) -> bool | None:
    """Whether the daemon reading ``conf`` started after ``written_at`` (Unix time): True,
    False, or None when no such process is seen on this node (a daemon started in a way that
    hides its file, or in another PID namespace)."""
    pids = daemon_pids(service)
    if not pids:
        return None
    # Ticks and uptime are 10 ms: that much slack.
    return all(process_started(pid) >= written_at - 0.02 for pid in pids)
