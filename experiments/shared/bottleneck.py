"""The bottleneck verdict of a run: which resource was saturated, with its evidence.

A pure function of the nodes' telemetry documents (runners.sampler's format) and the link
rates the hardware profiles state; no database, so it is tested with synthetic series and
reused by anything that holds documents (the run page, an export, a comparison).

A resource counts as saturated when it stays at or above its threshold during at least half of
a phase (``MIN_SHARE``): a disk busy ≥ 90 % of the time (``disk_util``, iostat's %util), one
core ≥ 95 % busy (the tool's busiest process, or the busiest core of /proc/stat), every core
≥ 90 % busy or stolen by the hypervisor (whoever loaded them: a CPU other work holds is
saturated for the tool all the same), the tool's busiest process waiting for a CPU (the run
queue) ≥ 10 % of each second, a link ≥ 90 % of its rate, or a BeeGFS server's workers: every
worker of the daemon busy with requests waiting in its queue (``beegfs_busy_workers`` at the
worker count in force, ``meta.beegfs``, and ``beegfs_queue`` above 0). Phases come from the
tool's own series (the seconds in which fio logged writes are the write phase); without them
the whole run is one phase. Nothing saturated means the run waited on something no counter shows:
latency; a resource saturated during part of the phase (``PARTIAL_SHARE``) is named instead.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

DISK_UTIL = 0.9
CORE_BUSY = 0.95
ALL_CORES_BUSY = 0.9
LINK_SHARE = 0.9
CPU_WAIT = 0.1  # the tool's busiest process runnable, waiting for a CPU, this share of a second
MIN_SHARE = 0.5
# Nothing saturated for MIN_SHARE of a phase, yet something at its threshold for this share of
# it: the headline names it rather than "no resource saturated".
PARTIAL_SHARE = 0.2
WHERE = "\x00phase\x00"  # in a finding's text: the phase it covers ("the write phase", "it")
LATENCY_BOUND = "no resource saturated: likely latency-bound"


# A BeeGFS daemon's busy workers at this share of its worker count (the series is a mean over
# each interval: a hair under the count is all of them) with requests queued.
WORKERS_BUSY = 0.999
BEEGFS_SERVICES = {"storage": "storage", "meta": "metadata"}


@dataclass
class Finding:
    resource: str  # "disk", "cpu", "network", "beegfs"
    host: str
    entity: str  # device, core/process, interface
    level: float  # mean during the saturated samples (fraction of capacity)
    share: float  # fraction of the phase's samples at or above the threshold
    text: str
    by_tool: bool = True  # False: the load came mostly from other processes than the tool

    @property
    def score(self) -> float:
        return (self.share * self.level) if self.by_tool else -1 + self.share * self.level


@dataclass
class Verdict:
    phase: str
    start: float  # seconds from the earliest node's first reading
    end: float
    headline: str
    saturated: list[Finding] = field(default_factory=list)
    busiest: list[str] = field(default_factory=list)  # evidence when nothing saturated
    limit: dict[str, Any] | None = None  # the theoretical limit, set by the run page

    def as_dict(self) -> dict[str, Any]:
        return {
            "phase": self.phase,
            "start": self.start,
            "end": self.end,
            "headline": self.headline,
            "saturated": [f.__dict__ for f in self.saturated],
            "busiest": self.busiest,
            "limit": self.limit,
        }


def _pct(x: float) -> str:
    return f"{x * 100:.0f}%"


def _rate_text(bytes_per_s: float) -> str:
    gbit = bytes_per_s * 8 / 1e9
    return f"{gbit:g} Gb/s" if gbit >= 1 else f"{gbit * 1000:g} Mb/s"


def _origin(docs: list[dict]) -> datetime | None:
    # A node without readings (its policy refused sampling) does not move time 0.
    starts = [
        datetime.fromisoformat(d["started_at"])
        for d in docs
        if d.get("started_at") and (d.get("t") or d.get("tool"))
    ]
    return min(starts) if starts else None


def shift(doc: dict, origin: datetime | None) -> float:
    """Seconds from ``origin`` (the earliest node's first reading) to this node's."""
    if origin is None or not doc.get("started_at"):
        return 0.0
    return (datetime.fromisoformat(doc["started_at"]) - origin).total_seconds()


# Nodes whose clocks differ by more than this are shifted onto the first node's clock and the
# run page says so; below it, the nodes are left where their own clocks put them (the issue's
# "aligned within a second", and a correction within the measurement's noise would only move
# them by that noise).
CLOCK_TOLERANCE_S = 1.0


@dataclass
class ClockNote:
    """What the run page says about one node's clock against the reference node's (the
    launcher's, the first document with a clock measurement)."""

    hostname: str
    ahead_s: float | None  # this node's clock minus the reference's; None: not measured
    uncertainty_s: float | None
    shifted: bool
    text: str


# An imported document's meta is free-form: a clock beyond these is no measurement.
MAX_CLOCK_OFFSET_S = 366 * 86400.0
MAX_CLOCK_RTT_S = 60.0


def _seconds(value: Any, bound: float) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) and abs(value) <= bound else None


def _clock(doc: dict) -> dict | None:
    """The node's clock measurement (``meta.clock``), as numbers, if it is one."""
    meta = doc.get("meta")
    clock = meta.get("clock") if isinstance(meta, dict) else None
    if not isinstance(clock, dict):
        return None
    offset = _seconds(clock.get("offset_s"), MAX_CLOCK_OFFSET_S)
    rtt = _seconds(clock.get("rtt_s", 0.0), MAX_CLOCK_RTT_S)
    if offset is None or rtt is None or rtt < 0:
        return None
    return {"offset_s": offset, "rtt_s": rtt}


def align_clocks(docs: list[dict]) -> tuple[list[dict], list[ClockNote]]:
    """Documents whose node clocks the run can trust on one axis, and what was found.

    Each node measures its clock against the database server's when it stores its document
    (``meta.clock.offset_s`` = database's clock minus the node's, from the round trip of
    ``SELECT clock_timestamp()`` with the shortest wait, ``rtt_s``). A node whose clock is
    more than CLOCK_TOLERANCE_S ahead of or behind the reference node's gets its
    ``started_at`` moved onto the reference's clock (a copy: the stored document stays as
    the node sent it), and a note. Nodes without a measurement (imported documents, a
    database other than PostgreSQL) cannot be checked: a note says so when the run has
    several nodes."""
    readings = [d for d in docs if d.get("started_at") and (d.get("t") or d.get("tool"))]
    if len(readings) < 2:
        return docs, []
    ref = next((d for d in readings if _clock(d) is not None), None)
    sampled = {id(d) for d in readings}  # by identity: comparing documents reads every value
    notes: list[ClockNote] = []
    out = []
    for doc in docs:
        if id(doc) not in sampled or doc is ref:
            out.append(doc)
            continue
        host = doc["hostname"]
        clock = _clock(doc)
        if ref is None or clock is None:
            out.append(doc)
            notes.append(
                ClockNote(
                    host,
                    None,
                    None,
                    False,
                    f"the clock of {host} was not checked (its document carries no clock "
                    "measurement): its panels line up only if the clocks are synchronised",
                )
            )
            continue
        ref_clock = _clock(ref)
        ahead = ref_clock["offset_s"] - clock["offset_s"]
        spread = (clock["rtt_s"] + ref_clock["rtt_s"]) / 2
        if abs(ahead) <= CLOCK_TOLERANCE_S:
            out.append(doc)
            notes.append(ClockNote(host, ahead, spread, False, ""))
            continue
        started = datetime.fromisoformat(doc["started_at"]) - timedelta(seconds=ahead)
        out.append({**doc, "started_at": started.isoformat()})
        word = "ahead of" if ahead > 0 else "behind"
        moved = "earlier" if ahead > 0 else "later"
        notes.append(
            ClockNote(
                host,
                ahead,
                spread,
                True,
                f"the clock of {host} is {abs(ahead):.1f} s {word} {ref['hostname']}'s "
                f"(each measured against the database server's clock, ± {spread:.3f} s): "
                f"its panels are moved {abs(ahead):.1f} s {moved} to line up",
            )
        )
    return out, notes


def phases(docs: list[dict]) -> list[tuple[str, float, float]]:
    """(name, start, end) in seconds from the earliest node's first reading: per direction
    the span of the tool's nonzero bandwidth (or IOPS) samples; one "run" phase without them."""
    origin = _origin(docs)
    found = []
    for doc in docs:
        tool = doc.get("tool") or {}
        t = tool.get("t") or []
        offset = shift(doc, origin)
        for op in ("write", "read"):
            values = tool.get("series", {}).get(f"{op}_bw") or tool.get("series", {}).get(
                f"{op}_iops"
            )
            if not values:
                continue
            live = [t[i] for i, v in enumerate(values) if v]
            if live:
                # A tool sample at t covers the second before it.
                found.append((op, offset + max(0.0, live[0] - 1), offset + live[-1]))
    if found:
        return sorted(found, key=lambda p: p[1])
    ends = [shift(d, origin) + (d["t"][-1] if d.get("t") else 0.0) for d in docs]
    return [("run", 0.0, max(ends, default=0.0))]


def _window(doc: dict, offset: float, start: float, end: float) -> list[int]:
    """Indexes of the samples whose interval's middle lies within [start, end]."""
    t = doc.get("t") or []
    out = []
    for i, ti in enumerate(t):
        prev = t[i - 1] if i else max(0.0, ti - doc.get("interval_s", 1.0))
        mid = offset + (prev + ti) / 2
        if start <= mid <= end:
            out.append(i)
    return out


def _share(values: list, idx: list[int], threshold: float, scale: float = 1.0):
    """(share of samples >= threshold, mean level of those samples) over ``idx``."""
    hits = [values[i] / scale for i in idx if i < len(values) and values[i] / scale >= threshold]
    if not idx:
        return 0.0, 0.0
    return len(hits) / len(idx), (sum(hits) / len(hits) if hits else 0.0)


def _mean(values: list, idx: list[int], scale: float = 1.0) -> float:
    picked = [values[i] / scale for i in idx if i < len(values)]
    return sum(picked) / len(picked) if picked else 0.0


def _link_rates(doc: dict, stated: float | None) -> dict[str, float]:
    """Bytes/s per interface: the kernel's link speed, else the rate the node's hardware
    profile states (for interfaces the kernel gives none, loopback excepted)."""
    speeds = doc.get("meta", {}).get("nic_speed_mbps", {})
    rates = {}
    for name in doc.get("series", {}):
        if not name.startswith(("net_rx_bw:", "net_tx_bw:")):
            continue
        nic = name.partition(":")[2]
        if nic in speeds:
            rates[nic] = speeds[nic] * 1e6 / 8
        elif stated and nic != "lo":
            rates[nic] = stated
    return rates


def busiest_core(series: dict[str, list]) -> list[float]:
    """Per sample, the busy fraction of the busiest core: ``cpu_busy_max`` where storage
    derived it already, else from the per-core series."""
    if "cpu_busy_max" in series:
        return series["cpu_busy_max"]
    cores = [v for n, v in series.items() if n.startswith("cpu_busy:")]
    return [max(values) for values in zip(*cores, strict=False)] if cores else []


def _node_findings(
    doc: dict, idx: list[int], phase: str, stated_rate: float | None
) -> tuple[list[Finding], list[tuple[float, str]], list[Finding]]:
    """(saturated, busiest, partly saturated) of one node over the samples ``idx``: a
    resource at its threshold during at least MIN_SHARE of the phase is saturated, during at
    least PARTIAL_SHARE of it partly (named in the headline when nothing is saturated, whose
    texts end in "of it")."""
    host = doc.get("hostname", "?")
    series = doc.get("series", {})
    findings: list[Finding] = []
    partial: list[Finding] = []
    busiest: list[tuple[float, str]] = []
    where = "the run" if phase == "run" else f"the {phase} phase"

    def found(resource, entity, level, share, text, by_tool=True) -> bool:
        """Record a resource at its threshold during ``share`` of the phase; ``text`` says so,
        WHERE standing for the phase. True when it counts as saturated."""
        if share >= MIN_SHARE:
            text = text.replace(WHERE, where)
            findings.append(Finding(resource, host, entity, level, share, text, by_tool))
            return True
        if share >= PARTIAL_SHARE:
            text = text.replace(WHERE, "it")
            partial.append(Finding(resource, host, entity, level, share, text, by_tool))
        return False

    for name, values in series.items():
        if name.startswith("disk_util:"):
            dev = name.partition(":")[2]
            share, level = _share(values, idx, DISK_UTIL)
            found(
                "disk",
                dev,
                level,
                share,
                f"{dev} on {host} at {_pct(level)} utilisation during {_pct(share)} of {WHERE}",
            )
            busiest.append((_mean(values, idx), f"{dev} on {host} {_pct(_mean(values, idx))} busy"))
    comm = doc.get("meta", {}).get("tool_top_comm") or "the tool"
    tool_top = series.get("tool_cpu_top")
    wait = series.get("tool_cpu_wait")
    waited = _mean(wait, idx) if wait else 0.0
    ncores = doc.get("meta", {}).get("cores") or sum(1 for n in series if n.startswith("cpu_busy:"))
    tool_bound = False
    if tool_top:
        # What the busiest process asked for: running plus waiting in the run queue.
        demand = [
            min(1.0, a + b) for a, b in zip(tool_top, wait or [0] * len(tool_top), strict=False)
        ]
        share, level = _share(demand, idx, CORE_BUSY)
        ran = _mean(tool_top, idx)
        how = f"running {_pct(ran)}"
        if waited >= 0.05:
            how += f", waiting for a CPU {_pct(waited)}: other processes share the cores"
        tool_bound = found(
            "cpu",
            comm,
            level,
            share,
            f"one core of {host} at {_pct(level)} ({comm}, the tool's busiest "
            f"process; {how}) during {_pct(share)} of {WHERE}",
        )
        busiest.append(
            (_mean(demand, idx), f"{comm} on {host} at {_pct(_mean(demand, idx))} of one core")
        )
    elif top := busiest_core(series):
        share, level = _share(top, idx, CORE_BUSY)
        found(
            "cpu",
            "one core",
            level,
            share,
            f"one core of {host} at {_pct(level)} during {_pct(share)} of {WHERE}",
        )
    busy = series.get("cpu_busy")
    steal = series.get("cpu_steal") or []
    all_cores = False
    if busy and ncores > 1:
        # Time the hypervisor gave to other guests is as lost to the tool as time other
        # processes used: the node's CPU is taken by busy + steal.
        taken = [min(1.0, b + (steal[i] if i < len(steal) else 0.0)) for i, b in enumerate(busy)]
        share, level = _share(taken, idx, ALL_CORES_BUSY)
        tool_cores = _mean(series.get("tool_cpu", []), idx) if "tool_cpu" in series else None
        stolen = _mean(steal, idx) if steal else 0.0
        mine = tool_cores is None or tool_cores >= _mean(busy, idx) * ncores / 2
        notes = []
        if stolen >= 0.05:
            notes.append(f"{_pct(stolen)} stolen by the hypervisor")
        if not mine:
            notes.append(f"the tool used {tool_cores:.1f} of them: other processes loaded the node")
        if waited >= 0.05 and not tool_bound:
            notes.append(f"{comm} waited for a CPU {_pct(waited)} of the time")
        extra = f" ({'; '.join(notes)})" if notes else ""
        all_cores = found(
            "cpu",
            "all cores",
            level,
            share,
            f"all {ncores} cores of {host} at {_pct(level)} during {_pct(share)} of {WHERE}{extra}",
            by_tool=mine and stolen < 0.05,
        )
        busiest.append((_mean(taken, idx), f"CPU of {host} {_pct(_mean(taken, idx))} busy"))
    if wait and not tool_bound and not all_cores:
        # The run queue: the tool was ready to run and no core was free for it.
        share, _ = _share(wait, idx, CPU_WAIT)
        found(
            "cpu",
            f"{comm} run queue",
            waited,
            share,
            f"{comm} on {host} waited for a CPU {_pct(waited)} of the time (the run queue) "
            f"during {_pct(share)} of {WHERE}: other work held the cores",
            by_tool=False,
        )
    for nic, rate in _link_rates(doc, stated_rate).items():
        for way in ("rx", "tx"):
            values = series.get(f"net_{way}_bw:{nic}")
            if not values:
                continue
            share, level = _share(values, idx, LINK_SHARE, rate)
            found(
                "network",
                f"{nic} {way}",
                level,
                share,
                f"network of {host} at {_pct(level)} of {_rate_text(rate)} "
                f"({nic} {way}) during {_pct(share)} of {WHERE}",
            )
            mean = _mean(values, idx, rate)
            busiest.append((mean, f"{nic} {way} on {host} at {_pct(mean)} of {_rate_text(rate)}"))
    _beegfs_findings(doc, idx, found, busiest)
    return findings, busiest, partial


def beegfs_workers(doc: dict, service: str) -> int | None:
    """The daemon's worker count in force as the node's sampler found it (``meta.beegfs``)."""
    meta = doc.get("meta")
    info = meta.get("beegfs") if isinstance(meta, dict) else None
    info = info.get(service) if isinstance(info, dict) else None
    n = info.get("workers") if isinstance(info, dict) else None
    return n if isinstance(n, int) and not isinstance(n, bool) and 0 < n < 1_000_000 else None


def _beegfs_findings(doc: dict, idx: list[int], found: Any, busiest: list) -> None:
    """A BeeGFS server whose workers were all busy while requests waited: the daemon could take
    no more work, whatever its disks and CPU did (too few workers for the load, or workers
    each waiting on a slow device)."""
    host = doc.get("hostname", "?")
    series = doc.get("series", {})
    for name, values in series.items():
        base, _, service = name.partition(":")
        workers = beegfs_workers(doc, service)
        if base != "beegfs_busy_workers" or workers is None:
            continue
        queue = series.get(f"beegfs_queue:{service}") or []
        full = [
            1.0
            if v >= WORKERS_BUSY * workers and i < len(queue) and queue[i] > 0
            else min(v / workers, 0.99)
            for i, v in enumerate(values)
        ]
        share, _ = _share(full, idx, 1.0)
        waiting = [queue[i] for i in idx if i < len(queue) and full[i] >= 1.0]
        queued = sum(waiting) / len(waiting) if waiting else 0.0
        label = BEEGFS_SERVICES.get(service, service)
        found(
            "beegfs",
            f"{service} workers",
            1.0,
            share,
            f"the BeeGFS {label} service on {host} had all its workers busy ({workers} of "
            f"{workers}, {queued:.1f} requests queued on average) for {_pct(share)} of {WHERE}",
        )
        mean = _mean([min(v / workers, 1.0) for v in values], idx)
        busiest.append((mean, f"BeeGFS {label} workers on {host} {_pct(mean)} busy"))


def verdicts(docs: list[dict], stated_rates: dict[str, float] | None = None) -> list[Verdict]:
    """One verdict per phase over every node's document. ``stated_rates``: hostname -> link
    rate in bytes/s from the node's hardware profile (used where the kernel states none)."""
    stated_rates = stated_rates or {}
    origin = _origin(docs)
    out = []
    for name, start, end in phases(docs):
        findings: list[Finding] = []
        partial: list[Finding] = []
        busiest: list[tuple[float, str]] = []
        for doc in docs:
            idx = _window(doc, shift(doc, origin), start, end)
            if not idx:
                continue
            f, b, p = _node_findings(doc, idx, name, stated_rates.get(doc.get("hostname", "")))
            findings += f
            busiest += b
            partial += p
        # The tool's own saturation first; then a resource other work saturated (it is
        # saturated all the same: never "no resource saturated" beside it).
        findings.sort(key=lambda f: f.score, reverse=True)
        if findings:
            headline = findings[0].text
        elif partial:
            where = "the run" if name == "run" else f"the {name} phase"
            most = max(partial, key=lambda f: f.share * f.level)
            headline = f"no resource saturated during half of {where}; {most.text}"
        else:
            headline = LATENCY_BOUND
        busiest.sort(reverse=True)
        out.append(
            Verdict(name, round(start, 3), round(end, 3), headline, findings,
                    [text for _, text in busiest[:4]])
        )  # fmt: skip
    return out


# What a run's stored verdict says (Run.bottleneck): the resource of the headline, "none"
# when nothing saturated (latency-bound), "unknown" when the run has telemetry documents but
# no samples in them; "" on a run without telemetry.
KINDS = ("disk", "cpu", "network", "beegfs", "none", "unknown")
# A run collapsed when the mean of the last third of its tool's live throughput samples is
# below this share of the first third's (a cache that filled, a device that throttled).
COLLAPSE_RATIO = 0.5
# Fewer live samples than this say nothing about a trend: no steady state, no collapse.
MIN_TREND_SAMPLES = 6


def _median(values: list[float]) -> float:
    s = sorted(values)
    mid = len(s) // 2
    return s[mid] if len(s) % 2 else (s[mid - 1] + s[mid]) / 2


def steadiness(docs: list[dict]) -> dict[str, dict[str, Any]]:
    """Per direction (``write_bw``, ``read_bw``) of the tool's own series, B/s: ``whole`` =
    mean over the live span (first to last nonzero sample, what a whole-run average says),
    ``steady`` = median of its second half (the rate the storage settled into once caches
    filled; a median so that one stall or burst does not move it), ``first``/``last`` = means
    of its first and last thirds, ``collapsed`` = last < COLLAPSE_RATIO × first. Runs with
    fewer than MIN_TREND_SAMPLES live samples get ``whole`` only."""
    out: dict[str, dict[str, Any]] = {}
    for doc in docs:
        series = (doc.get("tool") or {}).get("series") or {}
        for name in ("write_bw", "read_bw"):
            values = [v for v in series.get(name) or [] if v is not None]
            nonzero = [i for i, v in enumerate(values) if v]
            if name in out or not nonzero:
                continue
            live = values[nonzero[0] : nonzero[-1] + 1]
            entry: dict[str, Any] = {"samples": len(live), "whole": sum(live) / len(live)}
            if len(live) >= MIN_TREND_SAMPLES:
                third = len(live) // 3
                first = sum(live[:third]) / third
                last = sum(live[-third:]) / third
                entry.update(
                    steady=_median(live[len(live) // 2 :]),
                    first=first,
                    last=last,
                    collapsed=last < COLLAPSE_RATIO * first,
                )
            out[name] = {k: round(v, 1) if isinstance(v, float) else v for k, v in entry.items()}
    return out


def summary(docs: list[dict], stated_rates: dict[str, float] | None = None) -> dict[str, Any]:
    """What a run stores of its verdicts so that a comparison reads no series: ``bottleneck``
    (one of KINDS, "" without documents), ``evidence`` (the headline of each phase, the
    longest phase first: its kind is the run's, being where the run spent its time),
    ``steady`` (steadiness) and ``collapsed`` (any direction collapsed)."""
    if not docs:
        return {"bottleneck": "", "evidence": "", "steady": {}, "collapsed": False}
    steady = steadiness(docs)
    collapsed = any(s.get("collapsed") for s in steady.values())
    if not any(d.get("t") for d in docs):
        return {
            "bottleneck": "unknown",
            "evidence": "the telemetry holds no samples",
            "steady": steady,
            "collapsed": collapsed,
        }
    found = sorted(verdicts(docs, stated_rates), key=lambda v: v.end - v.start, reverse=True)
    main = found[0]
    kind = main.saturated[0].resource if main.saturated else "none"
    evidence = "; ".join(
        v.headline if v.phase == "run" else f"{v.phase}: {v.headline}" for v in found
    )
    return {"bottleneck": kind, "evidence": evidence, "steady": steady, "collapsed": collapsed}
