"""BeeGFS server statistics of this node while a run holds it: what ``beegfs-ctl --serverstats``
prints, per second, for the storage and metadata daemons running here.

Why the node itself, one service at a time, with one long-lived process: a node's agent already
samples it for the run (runners.sampler), so the daemon's own statistics land in the same
document, on the same clock, with no central poller that would need to reach every server.
``beegfs-ctl --serverstats --nodetype=<service> --interval=1 <own id>`` (the id is positional:
7.4.7's serverstats mode has no ``--nodeid``) asks the daemon once a
second for its statistics history (the daemon keeps the last 60 s, one entry per second,
stamped by its own collector) and prints the last ``--history`` entries each time; a process
per second would cost the node more than the 1 % of a core telemetry may take.

What the real beegfs-ctl 7.4.7 does here, and why the process is driven as it is:
- it ends when its standard input is readable ("until key pressed"): with /dev/null it prints
  once and exits, so its stdin is a pipe that stays open, and a newline written to it is the
  clean stop (it exits at once and flushes what it printed), and a worker that dies closes the
  pipe, which ends the process too (no orphan polls a daemon for ever);
- its output goes through C stdio, fully buffered on a pipe: it arrives in 4 KiB blocks (every
  ~7 s) and at exit, so it is drained without blocking at each reading and again at the stop;
- every refresh prints the history again: rows are keyed by their ``time_index`` (Unix second),
  the last printing of a second wins.

An entry is the daemon's count over the second before its collector stamped it; the stamp's
phase within the second is not printed, so an entry is placed over ``time_index ± 0.5 s``
(off by half a second at most) and spread onto the sampler's intervals by overlap.

The own node id is found by matching this node's BeeGFS node name (the hostname, or
``BEEWEB_NODE_BEEGFS_NODE_NAME``) in ``--listnodes``: a node that runs no daemon of a service
is simply not a server of it (nothing recorded). ``BEEWEB_BEEGFS_CTL`` is the argv prefix of
beegfs-ctl on this node (shlex-split; default ``beegfs-ctl``). Standard library only.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from runners.beegfs_ctl import CTL_VAR, ctl_prefix

NODE_NAME_VAR = "BEEWEB_NODE_BEEGFS_NODE_NAME"
SERVICES = ("storage", "meta")
# Entries printed per refresh: the process may fall this many seconds behind (a loaded node)
# without losing one; fewer lines than the default 10 keep the pipe quiet.
HISTORY_S = 5
CTL_TIMEOUT_S = 15.0
STOP_TIMEOUT_S = 5.0
# How long the end of the sampling waits for a search for the node's daemons still going.
SEARCH_WAIT_S = 2.0
# Defaults of BeeGFS 7.4.7 when the daemon's config file does not set the key
# (storage/source/app/config/Config.cpp, meta/source/app/config/Config.cpp of the source
# tarball; the shipped beegfs-storage.conf says 12, but a file without the key gets 8).
STORAGE_WORKERS_DEFAULT = 8
PER_TARGET_WORKERS_DEFAULT = True
# Columns of the short output (ctl/source/modes/ModeIOStat.cpp, printStatsRowTitles).
COLUMNS = {
    "storage": ("write_KiB", "read_KiB", "reqs", "qlen", "bsy"),
    "meta": ("reqs", "qlen", "bsy"),
}
LISTNODE = re.compile(r"^(?P<name>\S+) \[ID: (?P<id>\d+)\]\s*$")


def node_name(env: dict[str, str] | None = None) -> str:
    """This node's BeeGFS node name: ``BEEWEB_NODE_BEEGFS_NODE_NAME``, else the hostname."""
    value = (env if env is not None else os.environ).get(NODE_NAME_VAR, "").strip()
    return value or os.uname().nodename


def parse_listnodes(text: str) -> dict[str, int]:
    """``--listnodes`` output ("storage01 [ID: 1]" per node) as node name -> numeric id."""
    out = {}
    for line in text.splitlines():
        m = LISTNODE.match(line.strip())
        if m:
            out[m["name"]] = int(m["id"])
    return out


def parse_getcfg(text: str) -> dict[str, str]:
    """``--genericdebug … getcfg`` output: the ``key = value`` lines of the config file the
    running daemon read (nothing for keys left at their defaults)."""
    out = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        key = key.strip()
        if sep and key and " " not in key and key not in ("Command", "Response"):
            out[key] = value.strip()
    return out


def _bool(value: str) -> bool:
    # BeeGFS's StringTk::strToBool: "1", "y", "yes", "true" (any case) are true.
    return value.strip().lower() in ("1", "y", "yes", "true")


def worker_count(service: str, cfg: dict[str, str], cpus: int) -> tuple[int, str]:
    """(worker threads, how that was found) of a daemon whose config file holds ``cfg``.

    Storage: ``tuneNumWorkers`` (default 8) per target when ``tuneUsePerTargetWorkers``
    (default true), the targets being ``storeStorageDirectory``'s entries. Metadata:
    ``tuneNumWorkers``, where 0 (the default) means twice the online cores, at least 4. The
    one direct worker per queue (internal messages) is not counted: requests wait for the
    others."""
    raw = cfg.get("tuneNumWorkers", "").strip()
    try:
        n = int(raw) if raw else None
    except ValueError:
        n = None
    if service == "meta":
        if not n:
            got = max(2 * cpus, 4)
            return got, f"tuneNumWorkers 0 (the default): 2 × {cpus} cores, at least 4"
        return n, f"tuneNumWorkers = {n}"
    how = (
        f"tuneNumWorkers = {n}" if n else f"tuneNumWorkers {STORAGE_WORKERS_DEFAULT} (the default)"
    )
    n = n or STORAGE_WORKERS_DEFAULT
    per_target = cfg.get("tuneUsePerTargetWorkers")
    per = PER_TARGET_WORKERS_DEFAULT if per_target is None else _bool(per_target)
    targets = [d for d in cfg.get("storeStorageDirectory", "").split(",") if d.strip()]
    if per and len(targets) > 1:
        return n * len(targets), f"{how} × {len(targets)} targets (tuneUsePerTargetWorkers)"
    return n, how


class StatsReader:
    """Rows of ``--serverstats`` output fed in pieces: ``time_index`` -> {column: value}.
    Header lines name the columns; a row that does not fit its header is ignored; a second
    printed again replaces its earlier printing (the newest view of it)."""

    def __init__(self) -> None:
        self.rows: dict[int, dict[str, int]] = {}
        self.columns: list[str] = []
        self._rest = ""

    def feed(self, text: str) -> None:
        text = self._rest + text
        lines = text.split("\n")
        self._rest = lines.pop()
        for line in lines:
            self.line(line)

    def close(self) -> None:
        if self._rest:
            self.line(self._rest)
            self._rest = ""

    def line(self, line: str) -> None:
        f = line.split()
        if not f:
            return
        if f[0] == "time_index":
            self.columns = f[1:]
            return
        if not self.columns or len(f) != len(self.columns) + 1:
            return
        try:
            values = [int(x) for x in f]
        except ValueError:
            return
        self.rows[values[0]] = dict(zip(self.columns, values[1:], strict=True))


def parse_serverstats(text: str) -> dict[int, dict[str, int]]:
    """Every row of ``--serverstats`` output (one node, or totals), by Unix second."""
    reader = StatsReader()
    reader.feed(text)
    reader.close()
    return reader.rows


# Series of one service (DESIGN.md's vocabulary, ``:<service>``): column, factor, rounding.
SERIES = {
    "beegfs_write_bw": ("write_KiB", 1024, "bytes"),
    "beegfs_read_bw": ("read_KiB", 1024, "bytes"),
    "beegfs_reqs": ("reqs", 1, "ops"),
    "beegfs_queue": ("qlen", 1, "level"),
    "beegfs_busy_workers": ("bsy", 1, "level"),
}


def on_grid(
    rows: dict[int, dict[str, int]], start: float, t: list[float], sig4: Any
) -> dict[str, list]:
    """The rows as series on a sampler's axis: ``start`` the Unix time of its first reading,
    value ``i`` over ``start + t[i-1] .. start + t[i]`` (the first from ``start``). Each row
    covers ``time_index ± 0.5 s``; a value is the overlap-weighted mean of the rows that
    cover its interval (rates per second, and the queue and busy workers as mean levels),
    0 where no row does (the daemon had not yet closed the run's last second)."""
    if not rows:
        return {}
    columns = next(iter(rows.values())).keys()
    seconds = sorted(rows)
    out: dict[str, list] = {}
    for name, (column, factor, kind) in SERIES.items():
        if column not in columns:
            continue
        values = []
        prev = 0.0
        for ti in t:
            a, b = start + prev, start + ti
            prev = ti
            acc = weight = 0.0
            for s in seconds:
                lo, hi = s - 0.5, s + 0.5
                if hi <= a:
                    continue
                if lo >= b:
                    break
                w = min(hi, b) - max(lo, a)
                if w > 0:
                    acc += rows[s].get(column, 0) * w
                    weight += w
            v = acc / weight * factor if weight else 0.0
            if kind == "bytes":
                values.append(sig4(v))
            elif kind == "ops":
                values.append(round(v))
            else:
                values.append(round(v, 2))
        out[name] = values
    return out


def _cpu_seconds(pid: int) -> float | None:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            f = fh.read().rpartition(")")[2].split()
        return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


@dataclass
class Service:
    """One BeeGFS daemon of this node being watched by its own ``--serverstats`` process."""

    service: str  # "storage" | "meta"
    node_id: int
    name: str
    workers: int
    workers_from: str
    argv: list[str]
    reader: StatsReader = field(default_factory=StatsReader)
    proc: subprocess.Popen | None = None
    error: str = ""
    cpu_s: float | None = None

    def start(self) -> None:
        self.proc = subprocess.Popen(
            self.argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,  # a terminal's Ctrl-C is the worker's, not this child's
        )
        os.set_blocking(self.proc.stdout.fileno(), False)

    def drain(self) -> None:
        """Read what the process printed so far, without waiting."""
        if self.proc is None or self.proc.stdout is None:
            return
        while True:
            try:
                chunk = os.read(self.proc.stdout.fileno(), 65536)
            except BlockingIOError:
                return
            except OSError:
                return
            if not chunk:
                return
            self.reader.feed(chunk.decode(errors="replace"))

    def stop(self) -> None:
        """The clean stop (a newline on its stdin), then what it printed; killed if it does
        not end within STOP_TIMEOUT_S. A process that ended by itself with an error, or
        printed no row, leaves ``error`` in beegfs-ctl's words."""
        proc = self.proc
        if proc is None:
            return
        self.cpu_s = _cpu_seconds(proc.pid)
        os.set_blocking(proc.stdout.fileno(), True)
        try:
            out, err = proc.communicate(input=b"\n", timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
        self.reader.feed(out.decode(errors="replace"))
        self.reader.close()
        if not self.reader.rows:
            words = " ".join(err.decode(errors="replace").split())[:300]
            self.error = (
                f"beegfs-ctl --serverstats ended with exit code {proc.returncode}"
                + (f": {words}" if words else "")
                + " and printed no statistics"
            )


def _ctl(argv: list[str]) -> tuple[int, str]:
    try:
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=CTL_TIMEOUT_S, stdin=subprocess.DEVNULL
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return -1, str(exc)
    words = done.stdout if done.returncode == 0 else (done.stderr or done.stdout)
    return done.returncode, words


class Source:
    """The BeeGFS daemons of this node for one Sampler: found and started in a thread of its
    own (a few beegfs-ctl calls, off the sampler's first reading; the first refresh prints the
    daemon's history back to before it), drained at every reading, stopped with it.

    ``unavailable``: what could not be sampled and why (``beegfs``: beegfs-ctl missing or the
    management daemon unreachable; ``beegfs:<service>``: that daemon's statistics failed)."""

    def __init__(self, env: dict[str, str] | None = None):
        self.env = dict(env if env is not None else os.environ)
        self.services: list[Service] = []
        self.unavailable: dict[str, str] = {}
        self._lock = threading.Lock()
        self._stopped = False
        self._thread = threading.Thread(target=self._begin, name="beegfs-stats", daemon=True)

    def start(self) -> Source:
        self._thread.start()
        return self

    def _begin(self) -> None:
        try:
            self._find_and_start()
        except Exception as exc:  # never the sampler's failure
            self.unavailable["beegfs"] = f"BeeGFS statistics could not start: {exc}"

    def _find_and_start(self) -> None:
        prefix = ctl_prefix(self.env)
        if shutil.which(prefix[0]) is None:
            self.unavailable["beegfs"] = (
                f"{prefix[0]} is not installed on this node ({CTL_VAR}): no BeeGFS server "
                "statistics"
            )
            return
        name = node_name(self.env)
        for service in SERVICES:
            code, text = _ctl([*prefix, "--listnodes", f"--nodetype={service}"])
            if code != 0:
                words = " ".join(text.split())[:300]
                self.unavailable["beegfs"] = (
                    f"beegfs-ctl --listnodes --nodetype={service} failed (exit code {code}): "
                    f"{words}"
                )
                return
            node_id = parse_listnodes(text).get(name)
            if node_id is None:
                continue  # no daemon of this service here: nothing to say
            code, text = _ctl(
                [
                    *prefix,
                    "--genericdebug",
                    f"--nodetype={service}",
                    f"--nodeid={node_id}",
                    "getcfg",
                ]
            )
            cfg = parse_getcfg(text) if code == 0 else {}
            cpus = os.sysconf("SC_NPROCESSORS_ONLN")
            workers, how = worker_count(service, cfg, cpus)
            if code != 0:
                how += " (getcfg failed: the defaults assumed)"
            argv = [
                *prefix,
                "--serverstats",
                f"--nodetype={service}",
                "--interval=1",
                f"--history={HISTORY_S}",
                str(node_id),
            ]
            svc = Service(service, node_id, name, workers, how, argv)
            with self._lock:
                if self._stopped:
                    return
                try:
                    svc.start()
                except OSError as exc:
                    self.unavailable[f"beegfs:{service}"] = f"beegfs-ctl --serverstats: {exc}"
                    continue
                self.services.append(svc)

    def drain(self) -> None:
        with self._lock:
            for svc in self.services:
                svc.drain()

    def stop(self) -> None:
        """Stop every process. A search still going after SEARCH_WAIT_S (a management daemon
        that does not answer) is left to end by itself, starting nothing: the node's agent
        has other leases to serve."""
        self._thread.join(timeout=SEARCH_WAIT_S)
        with self._lock:
            self._stopped = True
            if self._thread.is_alive():
                self.unavailable.setdefault(
                    "beegfs",
                    f"beegfs-ctl had not answered within {SEARCH_WAIT_S:g} s of the end of the "
                    "sampling (is the management daemon reachable?)",
                )
            for svc in self.services:
                svc.stop()
                if svc.error:
                    self.unavailable[f"beegfs:{svc.service}"] = svc.error

    def series(self, start: float, t: list[float], sig4: Any) -> dict[str, list]:
        out = {}
        for svc in self.services:
            for name, values in on_grid(svc.reader.rows, start, t, sig4).items():
                out[f"{name}:{svc.service}"] = values
        return out

    def meta(self) -> dict[str, Any]:
        """``meta.beegfs``: per service, the daemon watched and its worker count in force."""
        out = {}
        for svc in self.services:
            entry: dict[str, Any] = {
                "node_id": svc.node_id,
                "node_name": svc.name,
                "workers": svc.workers,
                "workers_from": svc.workers_from,
                "seconds": len(svc.reader.rows),
            }
            if svc.cpu_s is not None:
                entry["ctl_cpu_s"] = round(svc.cpu_s, 3)
            out[svc.service] = entry
        return out


def wait_started(source: Source, timeout: float = 30.0) -> bool:
    """For tests and tools: wait until the search for daemons ended."""
    deadline = time.monotonic() + timeout
    while source._thread.is_alive() and time.monotonic() < deadline:
        time.sleep(0.05)
    return not source._thread.is_alive()
