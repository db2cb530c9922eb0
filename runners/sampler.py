"""What happened on one node while a run's tool ran: 1 s samples of the kernel's own counters.

``Sampler(interval).start()`` starts a daemon thread that reads /proc/stat, /proc/meminfo,
/proc/diskstats, /proc/net/dev and the InfiniBand port counters (where they exist) every
``interval`` seconds; ``stop()`` returns the series as one JSON-ready document (the format of
docs/telemetry.md). Standard library only and no Django: any process can run it (the executor
around the tool on the launcher; a node's agent for the other nodes of a run).

Why counters and not sar/iostat: the counters are what those tools read, one ``read()`` per
file costs microseconds, and a child process per second would cost more than the 1 % of one
core the sampler may take. For the same reason, the tool's own processes are found without
scanning every process each second: a pid is looked at once (its parent), and only the
descendants of ``watch_pid`` are read again.

Rates are computed between consecutive readings and belong to the end of their interval:
sample ``i`` covers ``t[i-1]..t[i]`` (``t`` in seconds from the first reading). Values are
rounded to what a chart or a verdict can use (fractions to 0.001, bytes and byte rates to
4 significant digits, operations to whole numbers), which lets the stored form compress well.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from runners import beegfs_stats

FORMAT = "beeweb-telemetry/1"
SECTOR = 512
# Block devices that never hold benchmark data: RAM disks, compressed swap, optical drives.
SKIP_DEVICES = ("ram", "zram", "sr", "fd")
IB_ROOT = Path("/sys/class/infiniband")
CLK_TCK = os.sysconf("SC_CLK_TCK")
# A closing reading this soon after a full interval's adds nothing but noise.
MIN_LAST_INTERVAL = 0.05


def sig4(value: float) -> int:
    """A byte count or rate as a whole number with 4 significant digits (0.05 % at most):
    the rest is noise between two readings, and costs a quarter of the stored size."""
    value = round(value)
    if value < 10000:
        return max(value, 0)
    scale = 10 ** (len(str(value)) - 4)
    return (value + scale // 2) // scale * scale


def _read(path: str) -> str:
    with open(path) as fh:
        return fh.read()


def read_cpu(text: str) -> dict[str, tuple[int, int, int, int]]:
    """Per line of /proc/stat ("cpu" is the whole node): (busy, iowait, steal, total) ticks.
    Busy is user + nice + system + irq + softirq (guest time is already inside user)."""
    out = {}
    for line in text.splitlines():
        if not line.startswith("cpu"):
            break
        name, *fields = line.split()
        v = [int(x) for x in fields[:8]] + [0] * (8 - len(fields[:8]))
        user, nice, system, idle, iowait, irq, softirq, steal = v
        busy = user + nice + system + irq + softirq
        out[name] = (busy, iowait, steal, busy + idle + iowait + steal)
    return out


def read_meminfo(text: str) -> dict[str, int]:
    """Used memory (total - available) and page cache, in bytes."""
    kib = {}
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        if key in ("MemTotal", "MemAvailable", "Cached"):
            kib[key] = int(rest.split()[0])
    return {
        "mem_used": (kib.get("MemTotal", 0) - kib.get("MemAvailable", 0)) * 1024,
        "page_cache": kib.get("Cached", 0) * 1024,
    }


def read_diskstats(text: str) -> dict[str, tuple[int, ...]]:
    """Per device: (reads, sectors read, writes, sectors written, ms busy, weighted ms)."""
    out = {}
    for line in text.splitlines():
        f = line.split()
        if len(f) < 14:
            continue
        out[f[2]] = (int(f[3]), int(f[5]), int(f[7]), int(f[9]), int(f[12]), int(f[13]))
    return out


def read_netdev(text: str) -> dict[str, tuple[int, int]]:
    """Per interface: (bytes received, bytes sent)."""
    out = {}
    for line in text.splitlines()[2:]:
        name, _, rest = line.partition(":")
        f = rest.split()
        if len(f) >= 9:
            out[name.strip()] = (int(f[0]), int(f[8]))
    return out


def _whole_disks(names) -> list[str]:
    """Block devices worth sampling: not partitions (their disk is sampled), not RAM disks."""
    keep = []
    for name in names:
        if name.startswith(SKIP_DEVICES):
            continue
        if os.path.exists(f"/sys/class/block/{name}/partition"):
            continue
        keep.append(name)
    return keep


def _nic_speeds(names) -> dict[str, int]:
    """Link speed in Mb/s as the kernel reports it (virtual interfaces have none)."""
    speeds = {}
    for name in names:
        try:
            speed = int(_read(f"/sys/class/net/{name}/speed"))
        except (OSError, ValueError):
            continue
        if speed > 0:
            speeds[name] = speed
    return speeds


def _ib_ports() -> dict[str, tuple[Path, Path]]:
    """ "device/port" -> (port_rcv_data, port_xmit_data) counter files (units of 4 bytes)."""
    ports = {}
    if not IB_ROOT.is_dir():
        return ports
    for counters in sorted(IB_ROOT.glob("*/ports/*/counters")):
        rcv, xmit = counters / "port_rcv_data", counters / "port_xmit_data"
        if rcv.exists() and xmit.exists():
            ports[f"{counters.parent.parent.parent.name}/{counters.parent.name}"] = (rcv, xmit)
    return ports


@dataclass(frozen=True)
class Layout:
    """What a sampler samples on this node: whole disks, interfaces, InfiniBand ports, and
    what it cannot sample and why."""

    disks: list[str]
    interfaces: list[str]
    ib: dict[str, tuple[Path, Path]]
    unavailable: dict[str, str]
    read_at: float


# A disk, link or port added to the node shows in samplers started this long after.
LAYOUT_SECONDS = 60.0
_layout: Layout | None = None


def node_layout() -> Layout:
    """This node's layout, found again at most every LAYOUT_SECONDS: a sampler starts for
    every run, and a run of a few milliseconds should not pay for a search of PATH and
    /sys each time."""
    global _layout
    if _layout is not None and time.monotonic() - _layout.read_at < LAYOUT_SECONDS:
        return _layout
    ib = _ib_ports()
    unavailable = {}
    if not ib:
        unavailable["infiniband"] = f"no ports under {IB_ROOT}"
    _layout = Layout(
        disks=_whole_disks(read_diskstats(_read("/proc/diskstats"))),
        interfaces=list(read_netdev(_read("/proc/net/dev"))),
        ib=ib,
        unavailable=unavailable,
        read_at=time.monotonic(),
    )
    return _layout


class _Processes:
    """CPU use of the descendants of one pid started after the sampler, found without
    rescanning every process: each new pid's parent is read once; known descendants are
    read every sample.

    Per process: CPU seconds and seconds spent runnable but waiting for a CPU (the run
    queue delay of /proc/PID/schedstat). Their sum is what the process asked for: a tool at
    70 % of a core that waited 30 % of the time is as CPU-bound as one at 100 % on an idle
    node."""

    def __init__(self, root: int):
        self.root = root
        self.parent: dict[int, int] = {}
        # Where the kernel lists each task's children, the descendants are found by walking
        # down from ``root`` (a few small reads); elsewhere by scanning /proc for new pids.
        self.walk = os.path.exists(f"/proc/{root}/task/{root}/children")
        # Processes older than the sampler are not the tool's (it starts after the sampler):
        # never read them. Reading every process's stat once costs ~10 ms of CPU and ~40 ms
        # of a short run's wall time.
        self.before = self._descendants() if self.walk else self._all()

    @staticmethod
    def _all() -> set[int]:
        return {int(p) for p in os.listdir("/proc") if p.isdigit()}

    def _descendants(self) -> set[int]:
        """Live descendants of ``root``, from the children lists of every thread."""
        found: set[int] = set()
        todo = [self.root]
        while todo:
            pid = todo.pop()
            try:
                tids = os.listdir(f"/proc/{pid}/task")
            except OSError:
                continue
            for tid in tids:
                try:
                    children = _read(f"/proc/{pid}/task/{tid}/children").split()
                except OSError:
                    continue
                for child in map(int, children):
                    if child not in found:
                        found.add(child)
                        todo.append(child)
        return found

    @staticmethod
    def _stat(pid: int) -> tuple[str, int, float] | None:
        """(comm, ppid, CPU seconds) from /proc/PID/stat."""
        try:
            text = _read(f"/proc/{pid}/stat")
        except OSError:
            return None
        # comm may contain spaces and parentheses: it ends at the last ')'.
        comm = text[text.index("(") + 1 : text.rindex(")")]
        f = text[text.rindex(")") + 2 :].split()
        return comm, int(f[1]), (int(f[11]) + int(f[12])) / CLK_TCK

    def read(self) -> dict[int, tuple[str, float, float]]:
        """pid -> (comm, CPU seconds, run-queue wait seconds) of each live descendant."""
        if self.walk:
            tool = sorted(self._descendants() - self.before)
        else:
            live = self._all()
            for pid in self.parent.keys() - live:
                del self.parent[pid]
            for pid in live - self.parent.keys() - self.before:
                stat = self._stat(pid)
                if stat is not None:
                    self.parent[pid] = stat[1]
            tool = [p for p in self.parent if self._descends(p)]
        out = {}
        for pid in tool:
            stat = self._stat(pid)  # again: comm changes when the shim starts the tool
            if stat is None:
                continue
            comm, _, cpu = stat
            wait = 0.0
            try:
                run_ns, wait_ns, _ = _read(f"/proc/{pid}/schedstat").split()
                cpu, wait = int(run_ns) / 1e9, int(wait_ns) / 1e9
            except (OSError, ValueError):
                pass
            out[pid] = (comm, cpu, wait)
        return out

    def _descends(self, pid: int) -> bool:
        seen = 0
        while pid in self.parent and seen < 64:
            pid = self.parent[pid]
            if pid == self.root:
                return True
            seen += 1
        return False


class Sampler:
    """Samples this node every ``interval`` seconds from ``start()`` to ``stop()``.

    ``devices``/``interfaces`` restrict the block devices and network interfaces (default:
    every whole disk and interface; those that did no I/O during the sampling are left out of
    the result and named in ``meta.idle``). ``watch_pid`` adds the CPU of that process's
    descendants started after the sampler (the tool under the executor): ``tool_cpu`` in
    cores, and for the busiest single process ``tool_cpu_top`` (running) and
    ``tool_cpu_wait`` (runnable, waiting for a CPU), as fractions of one core. ``beegfs``
    adds the per-second statistics of the BeeGFS storage and metadata daemons running on this
    node (``beegfs_*:<service>``, runners.beegfs_stats): what a node's agent asks for."""

    def __init__(
        self,
        interval: float = 1.0,
        devices: list[str] | None = None,
        interfaces: list[str] | None = None,
        watch_pid: int | None = None,
        beegfs: bool = False,
    ):
        if interval <= 0:
            raise ValueError("interval must be positive")
        self.interval = interval
        self.hostname = os.uname().nodename
        layout = node_layout()
        self.devices = devices if devices is not None else layout.disks
        self.interfaces = interfaces if interfaces is not None else layout.interfaces
        self.ib = layout.ib
        self.procs = _Processes(watch_pid) if watch_pid else None
        self.unavailable = dict(layout.unavailable)
        self.t: list[float] = []
        self.series: dict[str, list] = {}
        self._prev: dict[str, Any] | None = None
        self.t0 = 0.0
        self.started_at: datetime | None = None
        self.cpu_seconds = 0.0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._top_comms: list[str] = []
        # The BeeGFS daemons of this node (runners.beegfs_stats), started after the first
        # reading; the executor's sampler (a client) does not look for them.
        self._beegfs_wanted = beegfs
        self.beegfs: beegfs_stats.Source | None = None

    # --- one reading ---------------------------------------------------------------------

    def _reading(self) -> dict[str, Any]:
        reading: dict[str, Any] = {
            "now": time.monotonic(),
            "cpu": read_cpu(_read("/proc/stat")),
            "mem": read_meminfo(_read("/proc/meminfo")),
            "disk": read_diskstats(_read("/proc/diskstats")),
            "net": read_netdev(_read("/proc/net/dev")),
            "ib": {},
        }
        for port, (rcv, xmit) in self.ib.items():
            try:
                reading["ib"][port] = (int(_read(str(rcv))), int(_read(str(xmit))))
            except (OSError, ValueError):
                continue
        if self.procs is not None:
            reading["procs"] = self.procs.read()
        return reading

    def _put(self, name: str, value: float | int) -> None:
        values = self.series.get(name)
        if values is None:
            # A series that appears late (a device attached mid-run) is padded at its start.
            values = self.series[name] = [0] * (len(self.t) - 1)
        values.append(value)

    def sample(self) -> None:
        """Take one reading; from the second on, append one value to every series."""
        cpu_before = time.thread_time()
        if self.beegfs is not None:
            self.beegfs.drain()  # keeps beegfs-ctl's pipe from filling: it would stall it
        cur = self._reading()
        prev, self._prev = self._prev, cur
        if prev is None:
            self.t0 = cur["now"]
            # The wall clock at t0 (not after the reading, which takes milliseconds): other
            # clocks' times (fio's --log_unix_epoch logs) are put on this axis by it.
            self.started_at = datetime.now(UTC) - timedelta(seconds=time.monotonic() - self.t0)
            self.cpu_seconds += time.thread_time() - cpu_before
            return
        dt = cur["now"] - prev["now"]
        # Rounded to the millisecond, yet increasing: a run of a few ms has t = [0.004].
        self.t.append(round(max(cur["now"] - self.t0, (self.t[-1] if self.t else 0) + 0.001), 3))
        for name, (busy, iowait, steal, total) in cur["cpu"].items():
            p = prev["cpu"].get(name)
            span = total - p[3] if p else 0
            suffix = "" if name == "cpu" else f":{name}"
            for key, now_v, then_v in (
                ("cpu_busy", busy, p[0] if p else busy),
                ("cpu_iowait", iowait, p[1] if p else iowait),
                ("cpu_steal", steal, p[2] if p else steal),
            ):
                frac = (now_v - then_v) / span if span > 0 else 0.0
                self._put(key + suffix, round(min(max(frac, 0.0), 1.0), 3))
        for key, value in cur["mem"].items():
            self._put(key, sig4(value))
        for dev in self.devices:
            a, b = cur["disk"].get(dev), prev["disk"].get(dev)
            if a is None or b is None:
                continue
            d = [x - y for x, y in zip(a, b, strict=True)]
            self._put(f"disk_read_iops:{dev}", round(d[0] / dt))
            self._put(f"disk_read_bw:{dev}", sig4(d[1] * SECTOR / dt))
            self._put(f"disk_write_iops:{dev}", round(d[2] / dt))
            self._put(f"disk_write_bw:{dev}", sig4(d[3] * SECTOR / dt))
            self._put(f"disk_util:{dev}", round(min(d[4] / (dt * 1000), 1.0), 3))
            self._put(f"disk_queue:{dev}", round(d[5] / (dt * 1000), 2))
        for nic in self.interfaces:
            a, b = cur["net"].get(nic), prev["net"].get(nic)
            if a is None or b is None:
                continue
            self._put(f"net_rx_bw:{nic}", sig4((a[0] - b[0]) / dt))
            self._put(f"net_tx_bw:{nic}", sig4((a[1] - b[1]) / dt))
        for port, a in cur["ib"].items():
            b = prev["ib"].get(port)
            if b is not None:
                self._put(f"ib_rx_bw:{port}", sig4((a[0] - b[0]) * 4 / dt))
                self._put(f"ib_tx_bw:{port}", sig4((a[1] - b[1]) * 4 / dt))
        if self.procs is not None:
            before = prev.get("procs", {})
            total = top = top_wait = 0.0
            top_comm = ""
            for pid, (comm, cpu, wait) in cur["procs"].items():
                # A process born during the interval spent all of its time within it.
                then = before.get(pid, (comm, 0.0, 0.0))
                used, waited = (cpu - then[1]) / dt, (wait - then[2]) / dt
                total += used
                if used + waited > top + top_wait:
                    top, top_wait, top_comm = used, waited, comm
            self._put("tool_cpu", round(total, 3))
            self._put("tool_cpu_top", round(min(top, 1.0), 3))
            self._put("tool_cpu_wait", round(min(top_wait, 1.0), 3))
            self._top_comms.append(top_comm)
        self.cpu_seconds += time.thread_time() - cpu_before

    # --- the thread ----------------------------------------------------------------------

    def start(self, thread: bool = True) -> Sampler:
        """The first reading, then the sampling thread; ``thread=False`` leaves the thread
        to ``keep_sampling`` (a block that may end before its first interval does not
        start one: each thread costs its creator two wake-ups, dear on a loaded node)."""
        self.sample()
        if self._beegfs_wanted:
            self.beegfs = beegfs_stats.Source().start()
        if thread:
            self.keep_sampling()
        return self

    def keep_sampling(self) -> None:
        """Start the sampling thread unless it runs (or sampling stopped); its readings stay
        on the grid of the first one."""
        if self._thread is None and not self._stop.is_set():
            self._thread = threading.Thread(target=self._loop, name="telemetry", daemon=True)
            self._thread.start()

    def _loop(self) -> None:
        # Readings on a fixed grid from the first one, so a slow reading does not shift the rest.
        n = 1
        while not self._stop.wait(max(0.0, self.t0 + n * self.interval - time.monotonic())):
            self.sample()
            n += 1

    def stop(self) -> dict[str, Any]:
        """Stop sampling (a last reading closes the final, shorter interval) and return the
        document: ``hostname``, ``started_at`` (UTC, ISO 8601), ``interval_s``, ``t``,
        ``series`` and ``meta``."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        # A closing reading, unless the last one was just taken; always when there is no
        # interval yet (a run shorter than one interval: its readings at start and end).
        if self._prev is not None and (
            not self.t or time.monotonic() - self._prev["now"] >= MIN_LAST_INTERVAL
        ):
            self.sample()
        if self.beegfs is not None:
            try:
                self.beegfs.stop()
            except Exception as exc:  # the node's own series are kept whatever BeeGFS did
                self.beegfs.services = []
                self.beegfs.unavailable["beegfs"] = f"BeeGFS statistics failed: {exc}"
        return self.document()

    def document(self) -> dict[str, Any]:
        series, idle = {}, []
        for name, values in self.series.items():
            # Devices and interfaces that did nothing are left out (named in meta.idle);
            # the cores and memory always stay.
            if name.startswith(("disk_", "net_", "ib_")) and not any(values):
                idle.append(name)
                continue
            series[name] = values
        quiet = sorted({n.partition(":")[2] for n in idle} - {n.partition(":")[2] for n in series})
        unavailable = dict(self.unavailable)
        if self.beegfs is not None and self.started_at is not None:
            # The daemons' own statistics: zeros are values here (an idle daemon), never
            # left out as idle devices are.
            series.update(self.beegfs.series(self.started_at.timestamp(), self.t, sig4))
            unavailable.update(self.beegfs.unavailable)
        meta: dict[str, Any] = {
            "cores": sum(1 for n in self.series if n.startswith("cpu_busy:")),
            "nic_speed_mbps": _nic_speeds(
                sorted({n.partition(":")[2] for n in series if n.startswith("net_")})
            ),
            "idle": quiet,
            "unavailable": unavailable,
            "sampler_cpu_s": round(self.cpu_seconds, 4),
        }
        if self.beegfs is not None and self.beegfs.services:
            meta["beegfs"] = self.beegfs.meta()
        if self.procs is not None:
            comms = [c for c in self._top_comms if c]
            if comms:
                meta["tool_top_comm"] = max(set(comms), key=comms.count)
        return {
            "format": FORMAT,
            "hostname": self.hostname,
            "started_at": self.started_at.isoformat() if self.started_at else None,
            "interval_s": self.interval,
            "t": self.t,
            "series": series,
            "meta": meta,
        }


# --- fio's own logs ---------------------------------------------------------------------------

FIO_LOG_PREFIX = "fio"
# fio's log name -> (metric of DESIGN.md's vocabulary per direction, factor to base units).
FIO_LOGS = {
    "bw": ({0: "read_bw", 1: "write_bw"}, 1024),  # KiB/s
    "iops": ({0: "read_iops", 1: "write_iops"}, 1),
    "clat": ({0: "read_lat", 1: "write_lat"}, 1e-9),  # ns
}
# A log time at or above this many ms is a Unix time (--log_unix_epoch: 2001-09-09 on);
# below, ms since fio's job start (31 years of it).
FIO_EPOCH_MS = 10**12


def fio_log_options(scratch: Path | str) -> list[str]:
    """fio options that write its bandwidth, IOPS and latency logs, averaged per second, into
    ``scratch`` (files ``fio_bw.<job>.log`` etc.), stamped with the wall clock in ms
    (``--log_unix_epoch=1``): without it fio counts from its job's start, which comes after
    its start-up and file layout (seconds for large files), so the logs could only be placed
    where the tool was started, late by that much."""
    prefix = f"{scratch}/{FIO_LOG_PREFIX}"
    return [
        f"--write_bw_log={prefix}",
        f"--write_iops_log={prefix}",
        f"--write_lat_log={prefix}",
        "--log_avg_msec=1000",
        "--log_unix_epoch=1",
    ]


def read_fio_logs(
    scratch: Path | str, offset_s: float = 0.0, started_at: float | None = None
) -> dict[str, Any]:
    """fio's per-second logs in ``scratch`` on one time axis: ``{"t": [...], "series": {...}}``
    with ``t`` in seconds. Jobs add up for bandwidth and IOPS; latency is the mean over the
    jobs that logged in that second.

    Logs stamped with the wall clock (``--log_unix_epoch=1``, what ``fio_log_options`` asks
    for) are placed by fio's own clock on the axis that starts at ``started_at`` (Unix
    seconds: a sampler's first reading), whatever fio's start-up took. Logs in ms from fio's
    job start (older runs), or wall-clock logs without ``started_at``, are placed at
    ``offset_s`` (the best guess there is: when the tool was started). Samples go into
    seconds on fio's own grid: ms from its start rounded to the second (a wall-clock log's
    start: its first sample, one second in)."""
    raw: list[tuple[str, int, float]] = []  # (metric, ms, value in base units)
    for kind, (names, factor) in FIO_LOGS.items():
        for path in sorted(Path(scratch).glob(f"{FIO_LOG_PREFIX}_{kind}.*.log")):
            with open(path, errors="replace") as fh:
                for line in fh:
                    f = [x.strip() for x in line.split(",")]
                    try:
                        ms, value, direction = int(f[0]), float(f[1]), int(f[2])
                    except (IndexError, ValueError):
                        continue
                    name = names.get(direction)
                    if name is not None:
                        raw.append((name, ms, value * factor))
    epoch = [ms for _, ms, _ in raw if ms >= FIO_EPOCH_MS]
    base = 0  # fio's start, in the logs' ms
    if epoch:
        base = min(epoch) - 1000
        if started_at is not None and base / 1000 + 1 > started_at:
            # Not before the first reading (else the wall clock stepped back meanwhile).
            offset_s = base / 1000 - started_at
    sums: dict[str, dict[int, float]] = {}
    counts: dict[str, dict[int, int]] = {}
    for name, ms, value in raw:
        second = max(1, round((ms - base if ms >= FIO_EPOCH_MS else ms) / 1000))
        sums.setdefault(name, {})
        counts.setdefault(name, {})
        sums[name][second] = sums[name].get(second, 0.0) + value
        counts[name][second] = counts[name].get(second, 0) + 1
    seconds = sorted({s for per in sums.values() for s in per})
    series = {}
    for name, per in sums.items():
        mean = name.endswith("_lat")
        values = []
        for s in seconds:
            v = per.get(s, 0.0)
            if mean and s in per:
                v /= counts[name][s]
            values.append(round(v, 9) if mean else round(v))
        series[name] = values
    return {"t": [round(s + offset_s, 3) for s in seconds], "series": series}
