"""Parser for fio output: normal text (1.x to 3.x), terse lines, JSON and json+."""

from __future__ import annotations

import json
import math
import re
import shlex
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from runners.parsers.base import (
    KIB,
    ParseError,
    ParseResult,
    guard_parse,
    number_parts,
    parse_int,
    parse_size,
    split_lines,
    time_to_seconds,
)

TOOL = "fio"

DIRECTIONS = ("read", "write", "trim")

# fio's percentile list maps onto the statistics beeweb stores; the others (20th, 99.5th, …)
# stay in ParseResult.extra["jobs"].
_PCT_STATS = {
    1.0: "p1",
    5.0: "p5",
    10.0: "p10",
    50.0: "p50",
    90.0: "p90",
    95.0: "p95",
    99.0: "p99",
    99.9: "p99.9",
    99.99: "p99.99",
}

# Suffixes fio's num2str appends to large latency and IOPS numbers ("44690k", "4490.8K").
_NUM_SUFFIX = {"": 1.0, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}

_NUM = r"\d+(?:\.\d+)?"


@dataclass
class _Dir:
    """What one job report says about one direction (read, write or trim)."""

    io_bytes: float | None = None
    runtime_ms: float | None = None
    bw: float | None = None  # B/s of this job (io/runtime, or as printed)
    iops: float | None = None  # as printed, used when the issued count is unknown
    ios: int | None = None  # issued/total I/Os; fio's own IOPS is ios / runtime
    lat: dict[str, float] = field(default_factory=dict)  # min/max/mean/stddev/N, seconds
    pct: dict[float, float] = field(default_factory=dict)  # percentile -> seconds
    bins: dict[int, int] | None = None  # json+ clat histogram: ns -> count

    def has_io(self) -> bool:
        return bool(self.io_bytes or self.ios or self.bw or self.iops)

    def iops_value(self) -> float | None:
        if self.ios is not None and self.runtime_ms:
            return self.ios * 1000.0 / self.runtime_ms
        return self.iops


@dataclass
class _Job:
    """One job report: a single job, or a whole group under group_reporting."""

    name: str
    group: int
    jobs: int | None = 1  # processes this report stands for; None: the output does not say
    line: int | None = None
    error: int = 0
    dirs: dict[str, _Dir] = field(default_factory=dict)
    params: dict[str, Any] = field(default_factory=dict)
    cpu: dict[str, float] = field(default_factory=dict)
    # The job's own options as the JSON states them ("job options", not the global ones).
    options: dict[str, str] = field(default_factory=dict)


@dataclass
class _GroupLine:
    """A "Run status group" line: fio's own aggregate over the jobs of a group."""

    bw: float
    io_bytes: float | None
    runtime_ms: float | None


# --- detection ---------------------------------------------------------------------------

_TERSE_RE = re.compile(r"^(?:[345];fio-?[^;]*;|2;[^;]*;\d+;\d+;)")


def detect(text: str) -> float:
    """Confidence that ``text`` is fio output."""
    if not text:
        return 0.0
    head = text[:200_000]
    if '"fio version"' in head:
        return 0.99
    score = 0.0
    if re.search(r"^Run status group \d+ \(all jobs\):", head, re.M):
        score = max(score, 0.95)
    if re.search(r"\(groupid=\d+, jobs=\d+\)", head):
        score = max(score, 0.9)
    if re.search(r"^[345];fio-?\d[^;]*;[^;]*;\d+;\d+;", head, re.M):
        score = max(score, 0.95)
    if re.search(r"\(g=\d+\): rw=\w+", head):
        score = max(score, 0.8)
    if re.search(r"^fio[- ]\d+\.\d+", head, re.M):
        score = max(score, 0.5)
    return score


# --- small helpers -----------------------------------------------------------------------


def _num(text: str) -> float:
    """'44690k' -> 44690000.0; ParseError for anything else."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)\s*([kKMGT]?)\s*", text)
    if not m:
        raise ParseError(f"not a number: {text!r}", tool=TOOL)
    return float(m.group(1)) * _NUM_SUFFIX[m.group(2)]


def _unit_factor(unit: str, legacy: bool) -> float:
    """Bytes per unit for fio's size and bandwidth units ('KiB', 'MB/s', 'B', …).

    fio < 3 printed binary multiples as "KB"/"MB" (kb_base=1024), so in that legacy layout
    every prefix is binary; fio 3 writes binary as "KiB" and decimal as "kB"/"MB".
    """
    u = unit.strip()
    if u.endswith("/s"):
        u = u[:-2]
    if u in ("B", ""):
        return 1.0
    m = re.fullmatch(r"([kKMGTP])(i?)B?", u)
    if not m:
        raise ParseError(f"unknown fio unit {unit!r}", tool=TOOL)
    power = "KMGTP".index(m.group(1).upper()) + 1
    binary = bool(m.group(2)) or legacy
    return float((1024 if binary else 1000) ** power)


def _seconds(value: float, unit: str) -> float:
    return time_to_seconds(value, unit)


def _pct_key(text: str) -> float | None:
    try:
        value = float(text.strip().rstrip("%"))
    except ValueError:
        return None
    return round(value, 4) if value > 0 else None


def _runtime_seconds(text: str) -> float | None:
    """fio time option ('60', '60s', '2m', '1h', '500ms') -> seconds; None if unreadable."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(us|usec|ms|msec|s|sec|m|min|h|d)?\s*", str(text))
    if not m:
        return None
    factor = {
        None: 1.0,
        "s": 1.0,
        "sec": 1.0,
        "us": 1e-6,
        "usec": 1e-6,
        "ms": 1e-3,
        "msec": 1e-3,
        "m": 60.0,
        "min": 60.0,
        "h": 3600.0,
        "d": 86400.0,
    }[m.group(2)]
    return float(m.group(1)) * factor


def _size_or_none(text: Any) -> int | None:
    """fio size option ('4k', '8G', '50000Mi') -> bytes; None for percentages or ranges."""
    first = re.split(r"[,:\-]", str(text).strip())[0]
    try:
        return parse_size(first)
    except ParseError:
        return None


def _bool_option(text: Any) -> bool | None:
    value = str(text).strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off"):
        return False
    return None


def _params_from_options(opts: dict[str, Any]) -> dict[str, Any]:
    """Canonical parameters from fio job options (JSON "job options" / "global options")."""
    params: dict[str, Any] = {}
    rw = opts.get("rw", opts.get("readwrite"))
    if rw:
        params["rw"] = str(rw)
    bs = opts.get("bs", opts.get("blocksize"))
    if bs is not None:
        size = _size_or_none(bs)
        if size is not None:
            params["transfer_size"] = size
    for key in ("iodepth",):
        if key in opts:
            value = parse_int(opts[key])
            if value is not None:
                params[key] = value
    if opts.get("ioengine"):
        params["ioengine"] = str(opts["ioengine"])
    if "direct" in opts:
        direct = _bool_option(opts["direct"])
        if direct is not None:
            params["direct"] = direct
    if "size" in opts:
        size = _size_or_none(opts["size"])
        if size is not None:
            params["file_size"] = size
    if "runtime" in opts:
        runtime = _runtime_seconds(opts["runtime"])
        if runtime is not None:
            params["runtime"] = runtime
    return params


def _command_from_text(lines: list[str]) -> str | None:
    """A fio command line kept in the output (a wrapper's comment or a shell prompt)."""
    pattern = re.compile(r"(?:^|[#$]\s*)((?:\S*/)?fio\s+(?:--?\w|\S+\.(?:fio|ini|job)\b).*)$")
    for line in lines[:50]:
        m = pattern.search(line.strip())
        if m:
            return m.group(1).strip()
    return None


_CMD_OPT_RE = re.compile(r"^--?(?P<key>[a-z_]+)(?:=(?P<value>.*))?$")


def _command_numjobs(command: str | None) -> dict[str, int]:
    """numjobs of each job a fio command line defines ("--name=a --numjobs=2 …").

    Options before the first --name are global and every job inherits them; a job without
    numjobs runs one process. Jobs of a job file are not in the output, so a command that
    runs one gives nothing.
    """
    if not command:
        return {}
    try:
        tokens = shlex.split(command)
    except ValueError:
        return {}
    global_numjobs = 1
    jobs: dict[str, int] = {}
    section: str | None = None
    for index, token in enumerate(tokens):
        m = _CMD_OPT_RE.match(token)
        if not m:
            continue
        value = m.group("value")
        if value is None and index + 1 < len(tokens) and not tokens[index + 1].startswith("-"):
            value = tokens[index + 1]  # "--numjobs 2"
        if m.group("key") == "name" and value:
            section = value
            jobs[section] = global_numjobs
        elif m.group("key") == "numjobs" and value is not None:
            number = parse_int(value)
            if number is None or number < 1:
                continue
            if section is None:
                global_numjobs = number
            else:
                jobs[section] = number
    return jobs


# --- normal text -------------------------------------------------------------------------

_JOB_HDR_RE = re.compile(
    r"^(?P<name>.*?):\s*\(g=(?P<g>\d+)\):\s*rw=(?P<rw>[^,]+),\s*bs=(?P<bs>.*?),\s*"
    r"ioengine=(?P<engine>[^,]+),\s*iodepth=(?P<depth>\d+)"
)
_VERSION_RE = re.compile(r"^fio[- ]v?(\d+\.\d+[\w.\-]*)\s*$")
_STARTING_RE = re.compile(r"^Starting (\d+) (?:process|processes|thread|threads)\b")
_LAYOUT_RE = re.compile(
    r"^(?P<name>.*?):\s*Laying out IO files?(?:\(s\))?\s*\((?P<n>\d+) files?(?:\(s\))?\s*/\s*"
    rf"(?P<size>{_NUM})\s*(?P<unit>[KMGTP]i?B|B)\)"
)
_REPORT_RE = re.compile(
    r"^(?P<name>.*?):\s*\(groupid=(?P<g>\d+),\s*jobs=(?P<jobs>\d+)\):\s*err=\s*(?P<err>-?\d+)"
)
_DIR3_RE = re.compile(
    rf"^\s*(?P<dir>read|write|trim|mixed)\s*:\s*IOPS=(?P<iops>{_NUM}[kKMG]?),\s*"
    rf"BW=(?P<bw>{_NUM})\s*(?P<bwu>[KMGTP]?i?B/s)\s*"
    rf"(?:\((?P<bw10>{_NUM})\s*(?P<bw10u>[kKMGTP]?i?B/s)\))?\s*"
    rf"\((?P<io>{_NUM})\s*(?P<iou>[KMGTP]?i?B)/(?P<runt>\d+)msec\)"
)
_DIR1_RE = re.compile(
    rf"^\s*(?P<dir>read|write|trim|mixed)\s*:\s*io=(?P<io>{_NUM})\s*(?P<iou>[KMGTP]?i?B),\s*"
    rf"bw=(?P<bw>{_NUM})\s*(?P<bwu>[KMGTP]?i?B/s),\s*iops=(?P<iops>{_NUM}[kKMG]?)\s*,\s*"
    r"runt=\s*(?P<runt>\d+)\s*msec"
)
_LAT_RE = re.compile(
    r"^\s*(?P<kind>slat|clat|lat)\s*\((?P<unit>nsec|usec|msec|sec)\)\s*:\s*"
    rf"min=\s*(?P<min>{_NUM}[kKMG]?)\s*,\s*max=\s*(?P<max>{_NUM}[kKMG]?)\s*,\s*"
    rf"avg=\s*(?P<avg>{_NUM}[kKMG]?)\s*,\s*stdev=\s*(?P<dev>{_NUM}[kKMG]?)"
)
_PCT_HDR_RE = re.compile(r"^\s*(?P<kind>clat|lat|slat) percentiles \((?P<unit>nsec|usec|msec)\)")
_PCT_ITEM_RE = re.compile(rf"(?P<p>{_NUM})th=\[\s*(?P<v>{_NUM}[kKMG]?)\s*\]")
_ISSUED_RE = re.compile(r"^\s*issued\b[^:]*:\s*total=(?P<total>.*?)(?:,?\s*short=|$)")
_CPU_RE = re.compile(rf"^\s*cpu\s*:\s*usr=(?P<usr>{_NUM})%,\s*sys=(?P<sys>{_NUM})%")
_RUN_STATUS_RE = re.compile(r"^Run status group (?P<g>\d+) \(all jobs\):")
_GROUP3_RE = re.compile(
    rf"^\s*(?P<dir>READ|WRITE|TRIM|MIXED)\s*:\s*bw=(?P<bw>{_NUM})\s*(?P<bwu>[KMGTP]?i?B/s)"
    rf"\s*(?:\((?P<bw10>{_NUM})\s*(?P<bw10u>[kKMGTP]?i?B/s)\))?"
    rf".*?io=(?P<io>{_NUM})\s*(?P<iou>[KMGTP]?i?B).*?run=(?P<mint>\d+)-(?P<maxt>\d+)msec"
)
_GROUP1_RE = re.compile(
    rf"^\s*(?P<dir>READ|WRITE|TRIM|MIXED)\s*:\s*io=(?P<io>{_NUM})\s*(?P<iou>[KMGTP]?i?B),\s*"
    rf"aggrb=(?P<bw>{_NUM})\s*(?P<bwu>[KMGTP]?i?B/s),.*?mint=\s*(?P<mint>\d+)\s*msec,\s*"
    r"maxt=\s*(?P<maxt>\d+)\s*msec"
)
_DISK_RE = re.compile(
    r"^\s*(?P<dev>\S+):\s*ios=(?P<r>\d+)/(?P<w>\d+),.*?util=(?P<util>\d+(?:\.\d+)?)%"
)


def _checked_bw(
    m: re.Match, legacy: bool, io_bytes: float, runtime_ms: float
) -> tuple[float, str | None]:
    """The bandwidth of a job or group line, cross-checked against the other numbers on it.

    fio 3.0/3.1's num2str dropped the carry when the decimal rounded up, printing 11.99 MiB/s
    as "11.0MiB/s" (next to a correct "(12.6MB/s)"). A line states the rate up to three ways:
    binary, parenthesised decimal and io/runtime; when they disagree beyond rounding, the
    median is the value two of them agree on.
    """
    printed = float(m.group("bw")) * _unit_factor(m.group("bwu"), legacy)
    candidates = [printed]
    if m.groupdict().get("bw10"):
        candidates.append(float(m.group("bw10")) * _unit_factor(m.group("bw10u"), False))
    if runtime_ms > 0 and io_bytes > 0:
        candidates.append(io_bytes * 1000.0 / runtime_ms)
    if printed > 0 and all(abs(c - printed) <= 0.02 * printed for c in candidates):
        return printed, None
    if len(candidates) == 1:
        return printed, None
    if len(candidates) == 2:
        # The rounding bug only ever under-reports, so the larger of two is the sound one.
        return max(candidates), (
            f"printed bandwidth {m.group('bw')}{m.group('bwu')} disagrees with io/runtime; "
            "using the larger"
        )
    value = sorted(candidates)[1]
    return value, (
        f"printed bandwidth {m.group('bw')}{m.group('bwu')} disagrees with the other numbers "
        f"on the line (fio num2str rounding bug?); using {value:.0f} B/s"
    )


def _bs_from_header(bs: str, rw: str) -> int | None:
    """Transfer size from "bs=(R) 4096B-4096B, (W) …" or "bs=8K-8K/8K-8K"."""
    sizes = re.findall(r"(\d+(?:\.\d+)?[kKmMgGtT]?i?B?)-", bs)
    if not sizes:
        return None
    index = 1 if ("write" in rw and "read" not in rw and len(sizes) > 1) else 0
    try:
        return parse_size(sizes[index])
    except ParseError:
        return None


def _parse_text(lines: list[str]) -> tuple[list[_Job], dict[int, dict[str, _GroupLine]], dict]:
    jobs: list[_Job] = []
    group_lines: dict[int, dict[str, _GroupLine]] = {}
    info: dict[str, Any] = {
        "version": None,
        "headers": {},  # group -> params from the "(g=N): rw=…" lines
        "layout": {},  # job name -> bytes per file
        "comments": [],
        "disk_util": [],
        "starting": None,
        "mixed": False,
        "warnings": [],
    }
    name_group: dict[str, int] = {}
    job: _Job | None = None
    cur_dir: _Dir | None = None
    pct_target: tuple[_Dir, str] | None = None
    status_group: int | None = None
    in_disk_stats = False

    for number, raw in enumerate(lines, 1):
        line = raw.rstrip()
        stripped = line.strip()
        if pct_target is not None and stripped.startswith("|"):
            target, unit = pct_target
            for m in _PCT_ITEM_RE.finditer(stripped):
                key = _pct_key(m.group("p"))
                if key is not None:
                    target.pct[key] = _seconds(_num(m.group("v")), unit)
            continue
        pct_target = None
        if not stripped:
            continue
        if stripped.startswith("#") and job is None and not jobs:
            info["comments"].append(stripped.lstrip("#").strip())
            continue
        if _TERSE_RE.match(stripped):
            continue  # handled by _parse_terse_lines
        m = _VERSION_RE.match(stripped)
        if m:
            info["version"] = f"fio-{m.group(1)}"
            continue
        m = _JOB_HDR_RE.match(line)
        if m:
            group = int(m.group("g"))
            name_group.setdefault(m.group("name").strip(), group)
            if group not in info["headers"]:
                rw = m.group("rw").strip()
                hdr: dict[str, Any] = {
                    "rw": rw,
                    "ioengine": m.group("engine").strip(),
                    "iodepth": int(m.group("depth")),
                }
                bs = _bs_from_header(m.group("bs"), rw)
                if bs is not None:
                    hdr["transfer_size"] = bs
                info["headers"][group] = hdr
            continue
        m = _STARTING_RE.match(stripped)
        if m:
            info["starting"] = int(m.group(1))
            continue
        m = _LAYOUT_RE.match(stripped)
        if m:
            files = max(int(m.group("n")), 1)
            # fio 1.x wrote "5120MB" for binary megabytes, like every other size it printed.
            total = float(m.group("size")) * _unit_factor(m.group("unit"), legacy=True)
            info["layout"].setdefault(m.group("name").strip(), int(total / files))
            continue
        m = _REPORT_RE.match(line)
        if m:
            job = _Job(
                name=m.group("name").strip(),
                group=int(m.group("g")),
                jobs=int(m.group("jobs")),
                line=number,
                error=int(m.group("err")),
            )
            jobs.append(job)
            cur_dir = None
            status_group = None
            in_disk_stats = False
            continue
        m = _RUN_STATUS_RE.match(stripped)
        if m:
            status_group = int(m.group("g"))
            job = None
            cur_dir = None
            in_disk_stats = False
            continue
        if stripped.startswith("Disk stats"):
            in_disk_stats = True
            job = None
            cur_dir = None
            status_group = None
            continue
        if in_disk_stats:
            m = _DISK_RE.match(line)
            if m:
                info["disk_util"].append(
                    {
                        "device": m.group("dev"),
                        "read_ios": int(m.group("r")),
                        "write_ios": int(m.group("w")),
                        "util_percent": float(m.group("util")),
                    }
                )
            continue
        if status_group is not None:
            m = _GROUP3_RE.match(line)
            legacy = False
            if not m:
                m = _GROUP1_RE.match(line)
                legacy = True
            if m:
                direction = m.group("dir").lower()
                if direction == "mixed":
                    info["mixed"] = True
                    continue
                io_bytes = float(m.group("io")) * _unit_factor(m.group("iou"), legacy)
                bw, problem = _checked_bw(m, legacy, io_bytes, float(m.group("maxt")))
                if problem:
                    info["warnings"].append(f"line {number}: {problem}")
                group_lines.setdefault(status_group, {})[direction] = _GroupLine(
                    bw=bw, io_bytes=io_bytes, runtime_ms=float(m.group("maxt"))
                )
            continue
        if job is None:
            continue
        m = _DIR3_RE.match(line)
        legacy = False
        if not m:
            m = _DIR1_RE.match(line)
            legacy = True
        if m:
            direction = m.group("dir")
            if direction == "mixed":
                info["mixed"] = True
                cur_dir = None
                continue
            io_bytes = float(m.group("io")) * _unit_factor(m.group("iou"), legacy)
            bw, problem = _checked_bw(m, legacy, io_bytes, float(m.group("runt")))
            if problem:
                info["warnings"].append(f"line {number}: {problem}")
            cur_dir = _Dir(
                io_bytes=io_bytes,
                runtime_ms=float(m.group("runt")),
                bw=bw,
                iops=_num(m.group("iops")),
            )
            job.dirs[direction] = cur_dir
            continue
        m = _LAT_RE.match(line)
        if m:
            if cur_dir is not None and m.group("kind") == "clat":
                unit = m.group("unit")
                cur_dir.lat = {
                    "min": _seconds(_num(m.group("min")), unit),
                    "max": _seconds(_num(m.group("max")), unit),
                    "mean": _seconds(_num(m.group("avg")), unit),
                    "stddev": _seconds(_num(m.group("dev")), unit),
                }
            continue
        m = _PCT_HDR_RE.match(line)
        if m:
            if cur_dir is not None and m.group("kind") == "clat":
                pct_target = (cur_dir, m.group("unit"))
            continue
        m = _ISSUED_RE.match(line)
        if m:
            counts = [int(x) for x in re.findall(r"\d+", m.group("total"))]
            for direction, count in zip(DIRECTIONS, counts, strict=False):
                if direction in job.dirs:
                    job.dirs[direction].ios = count
            continue
        m = _CPU_RE.match(line)
        if m:
            job.cpu = {"usr": float(m.group("usr")), "sys": float(m.group("sys"))}
            cur_dir = None
            continue

    info["name_group"] = name_group
    return jobs, group_lines, info


def _apply_text_params(jobs: list[_Job], info: dict[str, Any]) -> None:
    """Parameters from the "(g=N): rw=…" header lines and "Laying out" lines, per job."""
    for j in jobs:
        if j.params:
            continue
        j.params = dict(info["headers"].get(j.group, {}))
        size = info["layout"].get(j.name)
        if size is not None and info["name_group"].get(j.name, j.group) == j.group:
            j.params["file_size"] = size


# --- terse -------------------------------------------------------------------------------


def _terse_processes(jobs: list[_Job], info: dict[str, Any], command: str | None) -> list[str]:
    """How many processes each terse line stands for; the warnings where the output cannot say.

    Without group_reporting fio writes one line per process (numjobs lines of the same name),
    with it one line per group, and the line itself holds no count. A group's only line stands
    for the numjobs of its job on the command line, or for "Starting N processes" when the
    output has one group; otherwise its count is unknown and no threads parameter is given.
    """
    command_numjobs = _command_numjobs(command)
    groups = sorted({j.group for j in jobs})
    unknown = []
    for g in groups:
        members = [j for j in jobs if j.group == g]
        if len(members) > 1:
            continue  # one line per process
        job = members[0]
        if job.name in command_numjobs:
            job.jobs = command_numjobs[job.name]
        elif len(groups) == 1 and info["starting"]:
            job.jobs = info["starting"]
        else:
            job.jobs = None
            unknown.append(job.name)
    if not unknown:
        return []
    return [
        f"terse output does not say how many processes the line of {', '.join(unknown)} "
        "stands for (numjobs with group_reporting); threads is not recorded: parse it with "
        "the fio command line, or use json output"
    ]


def _terse_dir(fields: list[str], pos: int) -> _Dir:
    """One direction of a terse line (41 fields from ``pos``); latencies are in usec."""
    kb = float(fields[pos])
    bw_kib = float(fields[pos + 1])
    iops = float(fields[pos + 2])
    runtime = float(fields[pos + 3])
    d = _Dir(io_bytes=kb * KIB, runtime_ms=runtime, bw=bw_kib * KIB, iops=iops)
    cmin, cmax, cmean, cdev = (float(x) for x in fields[pos + 8 : pos + 12])
    if cmax > 0 or cmean > 0:
        d.lat = {
            "min": cmin * 1e-6,
            "max": cmax * 1e-6,
            "mean": cmean * 1e-6,
            "stddev": cdev * 1e-6,
        }
    for item in fields[pos + 12 : pos + 32]:
        p, _, value = item.partition("=")
        key = _pct_key(p)
        if key is not None and value:
            d.pct[key] = float(value) * 1e-6
    return d


def _parse_terse_line(line: str, number: int) -> tuple[_Job, str | None]:
    fields = line.strip().split(";")
    try:
        version = int(fields[0])
    except ValueError as exc:
        raise ParseError("terse line without a version number", line=number, tool=TOOL) from exc
    if version not in (2, 3, 4, 5):
        raise ParseError(f"unsupported terse version {version}", line=number, tool=TOOL)
    if version == 2:
        fio_version, name, group, error, pos = None, fields[1], fields[2], fields[3], 4
    else:
        if len(fields) < 5:
            raise ParseError("terse line is truncated", line=number, tool=TOOL)
        fio_version, name, group, error, pos = fields[1], fields[2], fields[3], fields[4], 5
    directions = ["read", "write"] + (["trim"] if version in (2, 4, 5) else [])
    width = 41 + (6 if version == 5 else 0)
    if len(fields) < pos + width * len(directions):
        raise ParseError(
            f"terse v{version} line has {len(fields)} fields, expected at least "
            f"{pos + width * len(directions)} (truncated?)",
            line=number,
            tool=TOOL,
        )
    try:
        job = _Job(name=name, group=int(group), error=int(error), line=number)
        for i, direction in enumerate(directions):
            d = _terse_dir(fields, pos + i * width)
            if d.has_io():
                job.dirs[direction] = d
    except ValueError as exc:
        raise ParseError(
            f"terse line has a non-numeric field: {exc}", line=number, tool=TOOL
        ) from exc
    return job, fio_version


def _parse_terse_lines(lines: list[str]) -> tuple[list[_Job], str | None, list[ParseError]]:
    jobs: list[_Job] = []
    version = None
    problems: list[ParseError] = []
    for number, line in enumerate(lines, 1):
        if _TERSE_RE.match(line.strip()):
            try:
                job, fio_version = _parse_terse_line(line, number)
            except ParseError as exc:
                problems.append(exc)
                continue
            jobs.append(job)
            version = version or fio_version
    return jobs, version, problems


# --- JSON --------------------------------------------------------------------------------


def _find_json(text: str) -> tuple[dict | None, ParseError | None]:
    """The first JSON object holding fio results; fio may print notes before it."""
    decoder = json.JSONDecoder()
    error: ParseError | None = None
    for m in re.finditer(r"^\s*\{", text, re.M):
        start = text.index("{", m.start())
        try:
            data, _ = decoder.raw_decode(text, start)
        except (ValueError, RecursionError) as exc:
            if error is None:
                lineno = getattr(exc, "lineno", None)
                msg = getattr(exc, "msg", str(exc))
                error = ParseError(f"invalid JSON: {msg}", line=lineno, tool=TOOL)
            continue
        if isinstance(data, dict) and ("jobs" in data or "client_stats" in data):
            return data, None
        if error is None:
            error = ParseError("JSON object has no 'jobs' list (not fio output?)", tool=TOOL)
    return None, error


def _json_lat(section: dict, ns: bool) -> tuple[dict[str, float], dict[float, float], dict | None]:
    factor = 1e-9 if ns else 1e-6
    lat: dict[str, float] = {}
    for key, stat in (("min", "min"), ("max", "max"), ("mean", "mean"), ("stddev", "stddev")):
        value = section.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            lat[stat] = float(value) * factor
    if isinstance(section.get("N"), int):
        lat["N"] = float(section["N"])
    pct: dict[float, float] = {}
    percentiles = section.get("percentile")
    if isinstance(percentiles, dict):
        for key, value in percentiles.items():
            p = _pct_key(key)
            if p is not None and isinstance(value, (int, float)):
                pct[p] = float(value) * factor
    bins = None
    raw_bins = section.get("bins")
    if isinstance(raw_bins, dict):
        bins = {}
        for key, value in raw_bins.items():
            try:
                bins[int(key)] = int(value)
            except (TypeError, ValueError):
                continue
    return lat, pct, bins


def _json_dir(section: dict) -> _Dir:
    def number(key: str) -> float | None:
        value = section.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        return None

    io_bytes = number("io_bytes")
    if "io_kbytes" not in section and io_bytes is not None:
        io_bytes *= KIB  # fio 2.x wrote KiB under the name "io_bytes"
    runtime = number("runtime")
    if io_bytes and runtime:
        bw = io_bytes * 1000.0 / runtime  # fio's bw_bytes is this division, truncated
    else:
        bw = number("bw_bytes")
        if bw is None and number("bw") is not None:
            bw = number("bw") * KIB
    total_ios = number("total_ios")
    d = _Dir(
        io_bytes=io_bytes,
        runtime_ms=runtime,
        bw=bw,
        iops=number("iops"),
        ios=int(total_ios) if total_ios is not None else None,
    )
    if isinstance(section.get("clat_ns"), dict):
        d.lat, d.pct, d.bins = _json_lat(section["clat_ns"], ns=True)
    elif isinstance(section.get("clat"), dict):  # before fio 3.0: microseconds
        d.lat, d.pct, d.bins = _json_lat(section["clat"], ns=False)
    if not d.lat.get("max") and not d.lat.get("mean"):
        d.lat = {}
        d.pct = {}
    return d


def _parse_json(data: dict, command: str | None = None) -> tuple[list[_Job], dict]:
    entries = data.get("jobs")
    if not isinstance(entries, list):
        entries = data.get("client_stats")
    if not isinstance(entries, list):
        raise ParseError("JSON 'jobs' is not a list", tool=TOOL)
    global_opts = data.get("global options") if isinstance(data.get("global options"), dict) else {}
    command_numjobs = _command_numjobs(command)
    # fio --client sums the hosts itself ("All clients"); we aggregate below.
    reports = [
        (index, entry)
        for index, entry in enumerate(entries)
        if isinstance(entry, dict) and str(entry.get("jobname", "")) != "All clients"
    ]
    # Entries per group on each host: without group_reporting fio writes one entry per process
    # (numjobs entries of the same name), with it one entry for the whole group. The entry
    # count is the sign to go by: a bare --group_reporting never shows in "job options".
    per_group: dict[tuple[int, str], int] = {}
    for _, entry in reports:
        key = (parse_int(entry.get("groupid", 0)) or 0, str(entry.get("hostname") or ""))
        per_group[key] = per_group.get(key, 0) + 1
    jobs: list[_Job] = []
    hosts = set()
    warnings: list[str] = []
    for index, entry in reports:
        name = str(entry.get("jobname", f"job{index}"))
        if entry.get("hostname"):
            hosts.add(str(entry["hostname"]))
        opts = dict(global_opts)
        if isinstance(entry.get("job options"), dict):
            opts.update(entry["job options"])
        group = parse_int(entry.get("groupid", 0)) or 0
        job = _Job(name=name, group=group, error=parse_int(entry.get("error", 0)) or 0)
        if isinstance(entry.get("job options"), dict):
            job.options = {
                str(k): str(v) for k, v in entry["job options"].items() if str(k) != "name"
            }
        if "numjobs" in opts:
            numjobs = parse_int(opts["numjobs"])
        else:  # fio 2.x left numjobs out of "global options"; the command may still say
            numjobs = command_numjobs.get(name, 1)
        single = per_group[(group, str(entry.get("hostname") or ""))] == 1
        # One entry standing for numjobs processes is a group_reporting result.
        job.jobs = max(numjobs or 1, 1) if single else 1
        own_name = opts.get("name")
        if single and own_name is not None and str(own_name) != name:
            # group_reporting over several jobs ("--name=a … --name=b …"): fio names the entry
            # after the first and shows the last one's options, so numjobs is one job's count.
            job.jobs = None
            warnings.append(
                f"entry {name!r} combines several fio jobs (its options are those of "
                f"{own_name!r}); the JSON does not say how many processes: threads not recorded"
            )
        job.params = _params_from_options(opts)
        for direction in DIRECTIONS:
            section = entry.get(direction)
            if isinstance(section, dict):
                d = _json_dir(section)
                if d.has_io():
                    job.dirs[direction] = d
        if isinstance(entry.get("usr_cpu"), (int, float)):
            job.cpu = {"usr": float(entry["usr_cpu"]), "sys": float(entry.get("sys_cpu", 0) or 0)}
        jobs.append(job)
    info = {
        "version": str(data["fio version"]) if data.get("fio version") else None,
        "time": data.get("time"),
        "hosts": sorted(hosts),
        "disk_util": data.get("disk_util") if isinstance(data.get("disk_util"), list) else [],
        "warnings": warnings,
    }
    return jobs, info


# --- aggregation -------------------------------------------------------------------------


def _percentile_from_bins(bins: dict[int, int], p: float) -> float | None:
    total = sum(bins.values())
    if total <= 0:
        return None
    threshold = total * p / 100.0
    running = 0
    for value in sorted(bins):
        running += bins[value]
        if running >= threshold:
            return value * 1e-9
    return max(bins) * 1e-9


def _combine_latency(dirs: list[_Dir]) -> tuple[dict[str, float], dict[float, float]]:
    """Latency over several jobs: min of mins, max of maxes, I/O-weighted mean, pooled stddev.

    Percentiles cannot be combined from per-job percentiles; json+ histograms can be merged.
    """
    parts = [d for d in dirs if d.lat.get("mean") is not None]
    if not parts:
        return {}, {}
    weights = [d.lat.get("N") or d.ios or 1 for d in parts]
    total = float(sum(weights))
    mean = sum(w * d.lat["mean"] for w, d in zip(weights, parts, strict=True)) / total
    lat = {
        "min": min(d.lat.get("min", math.inf) for d in parts),
        "max": max(d.lat.get("max", 0.0) for d in parts),
        "mean": mean,
    }
    if all("stddev" in d.lat for d in parts):
        second = sum(
            w * (d.lat["stddev"] ** 2 + d.lat["mean"] ** 2)
            for w, d in zip(weights, parts, strict=True)
        )
        lat["stddev"] = math.sqrt(max(second / total - mean**2, 0.0))
    if not math.isfinite(lat["min"]):
        del lat["min"]
    pct: dict[float, float] = {}
    if all(d.bins for d in parts):
        merged: dict[int, int] = {}
        for d in parts:
            for value, count in (d.bins or {}).items():
                merged[value] = merged.get(value, 0) + count
        for p in _PCT_STATS:
            value = _percentile_from_bins(merged, p)
            if value is not None:
                pct[p] = value
    return lat, pct


def _add_dir_metrics(
    result: ParseResult,
    direction: str,
    bw: float | None,
    iops: float | None,
    lat: dict[str, float],
    pct: dict[float, float],
    extra: dict[str, Any],
) -> None:
    if direction != "trim" and bw is not None:
        result.add(f"{direction}_bw", bw, **extra)
    if iops is not None:
        result.add(f"{direction}_iops", iops, **extra)
    if direction == "trim":
        return
    for stat in ("mean", "min", "max", "stddev"):
        if stat in lat:
            result.add(f"{direction}_lat", lat[stat], stat=stat, **extra)
    for p, stat in _PCT_STATS.items():
        if p in pct:
            result.add(f"{direction}_lat", pct[p], stat=stat, **extra)


def _job_summary(job: _Job) -> dict[str, Any]:
    summary: dict[str, Any] = {"job": job.name, "group": job.group, "jobs": job.jobs}
    if job.error:
        summary["error"] = job.error
    if job.cpu:
        summary["cpu"] = job.cpu
    for direction, d in job.dirs.items():
        entry: dict[str, Any] = {
            "io_bytes": d.io_bytes,
            "runtime_s": d.runtime_ms / 1000.0 if d.runtime_ms is not None else None,
            "bw": d.bw,
            "iops": d.iops_value(),
            "ios": d.ios,
        }
        if d.lat:
            entry["clat"] = {k: v for k, v in d.lat.items() if k != "N"}
        if d.pct:
            entry["clat_percentiles"] = {f"{p:g}": v for p, v in sorted(d.pct.items())}
        if d.bins:
            entry["clat_bins_ns"] = {str(k): v for k, v in sorted(d.bins.items())}
        summary[direction] = entry
    return summary


def _build(
    jobs: list[_Job],
    group_lines: dict[int, dict[str, _GroupLine]],
    version: str | None,
    command: str | None,
    fmt: str,
) -> ParseResult:
    result = ParseResult(tool=TOOL, tool_version=version, command=command)
    result.extra["format"] = fmt
    groups = sorted({j.group for j in jobs} | set(group_lines))
    group_info: list[dict[str, Any]] = []
    for g in groups:
        members = [j for j in jobs if j.group == g]
        lines = group_lines.get(g, {})
        directions = [d for d in DIRECTIONS if d in lines or any(d in j.dirs for j in members)]
        for direction in directions:
            dirs = [j.dirs[direction] for j in members if direction in j.dirs]
            line = lines.get(direction)
            runtimes = [d.runtime_ms for d in dirs if d.runtime_ms]
            longest = max(runtimes) if runtimes else None
            if line is not None:
                bw = line.bw  # fio's own aggregate: total bytes / longest job runtime
            elif longest and all(d.io_bytes is not None for d in dirs):
                bw = sum(d.io_bytes or 0.0 for d in dirs) * 1000.0 / longest
            else:
                bw = None
            if len(dirs) == 1:
                iops = dirs[0].iops_value()
                lat, pct = dirs[0].lat, dirs[0].pct
            else:
                if longest and dirs and all(d.ios is not None for d in dirs):
                    iops = sum(d.ios or 0 for d in dirs) * 1000.0 / longest
                elif longest and dirs and all(d.iops_value() and d.runtime_ms for d in dirs):
                    iops = sum(d.iops_value() * d.runtime_ms for d in dirs) / longest
                else:
                    iops = None
                lat, pct = _combine_latency(dirs)
            _add_dir_metrics(result, direction, bw, iops, lat, pct, {"group": g})
        counts = [j.jobs for j in members]
        group_info.append(
            {
                "group": g,
                "jobs": [j.name for j in members],
                # processes in the group; None when a report does not say how many it stands for
                "threads": None if None in counts or not counts else sum(counts),
                "params": dict(members[0].params) if members else {},
            }
        )
    # Per-job values, only where a group has several job reports (without group_reporting);
    # a single report already is the group value above.
    for g in groups:
        members = [j for j in jobs if j.group == g]
        if len(members) < 2:
            continue
        for j in members:
            for direction, d in j.dirs.items():
                bw = d.bw
                if bw is None and d.io_bytes is not None and d.runtime_ms:
                    bw = d.io_bytes * 1000.0 / d.runtime_ms
                _add_dir_metrics(
                    result, direction, bw, d.iops_value(), d.lat, d.pct, {"job": j.name, "group": g}
                )
    # Run parameters: those every group agrees on; the rest stay per group in extra.
    threads = {gi["threads"] for gi in group_info}
    if len(threads) == 1 and None not in threads:
        result.params["threads"] = threads.pop()
    keys = set().union(*(gi["params"].keys() for gi in group_info)) if group_info else set()
    for key in sorted(keys):
        values = [gi["params"].get(key) for gi in group_info]
        if all(v == values[0] for v in values) and values[0] is not None:
            result.params[key] = values[0]
    result.extra["groups"] = group_info
    result.extra["jobs"] = [_job_summary(j) for j in jobs]
    return result


# --- entry points ------------------------------------------------------------------------


@dataclass
class _Read:
    """Everything an output states, before it becomes results (``_result``)."""

    jobs: list[_Job]
    group_lines: dict[int, dict[str, _GroupLine]]
    version: str | None
    command: str | None
    fmt: str
    info: dict[str, Any]
    warnings: list[str] = field(default_factory=list)

    def groups(self) -> list[int]:
        return sorted({j.group for j in self.jobs} | set(self.group_lines))


def _read(text: str, **options: Any) -> _Read:
    """Jobs and group lines of fio output (``guard_parse`` has refused empty output)."""
    command = options.get("command")
    if isinstance(command, (list, tuple)):
        command = shlex.join(str(c) for c in command)
    lines = split_lines(text)

    json_error: ParseError | None = None
    if "{" in text:
        data, json_error = _find_json(text)
        if data is not None:
            command = command or _command_from_text(lines)
            jobs, info = _parse_json(data, command)
            if not any(j.dirs for j in jobs):
                raise ParseError("fio JSON holds no job with read, write or trim I/O", tool=TOOL)
            fmt = "json"
            if any(d.bins for j in jobs for d in j.dirs.values()):
                fmt = "json+"
            return _Read(jobs, {}, info["version"], command, fmt, info, info["warnings"])

    jobs, group_lines, info = _parse_text(lines)
    terse_jobs, terse_version, terse_problems = _parse_terse_lines(lines)
    version = info["version"] or terse_version
    fmt = "text"
    if not group_lines and not any(j.dirs for j in jobs) and terse_jobs:
        # Terse-only output (--minimal or --output-format=terse) mixed with other lines.
        jobs, fmt = terse_jobs, "terse"
    elif terse_jobs:
        known = {(j.name, j.group) for j in jobs}
        extra_terse = [j for j in terse_jobs if (j.name, j.group) not in known]
        if extra_terse and not group_lines:
            jobs = jobs + extra_terse
            fmt = "text+terse"

    if not group_lines and not any(j.dirs for j in jobs):
        if json_error is not None and text.lstrip().startswith("{"):
            raise json_error
        if terse_problems:
            raise terse_problems[0]
        empty = [j for j in jobs if not j.dirs]
        if empty:
            raise ParseError(
                f"job report {empty[0].name!r} has no read/write result line (truncated output?)",
                line=empty[0].line,
                tool=TOOL,
            )
        if info["headers"] or version:
            last = max((i for i, line in enumerate(lines, 1) if line.strip()), default=None)
            raise ParseError(
                "fio started but printed no job report or 'Run status group' line "
                f"(output ends at line {last}; killed or still running?)",
                line=last,
                tool=TOOL,
            )
        raise ParseError(
            "no fio result found: no job report, 'Run status group' line, terse line or JSON",
            tool=TOOL,
        )

    command = command or _command_from_text(lines)
    problems: list[str] = []
    if fmt == "terse":
        problems += _terse_processes(jobs, info, command)
    _apply_text_params(jobs, info)
    warnings = info["warnings"] + [str(p) for p in terse_problems] + problems
    if info["mixed"]:
        warnings.append("unified_rw_reporting 'mixed' sections are not mapped to metrics")
    return _Read(jobs, group_lines, version, command, fmt, info, warnings)


def _result(read: _Read, group: int | None = None) -> ParseResult:
    """The result of the whole output, or of one job group (one part) of it."""
    jobs, group_lines = read.jobs, read.group_lines
    if group is not None:
        jobs = [j for j in jobs if j.group == group]
        group_lines = {group: group_lines[group]} if group in group_lines else {}
    result = _build(jobs, group_lines, read.version, read.command, read.fmt)
    info = read.info
    if read.fmt.startswith("json"):
        if info["hosts"]:
            result.extra["hosts"] = info["hosts"]
            result.params["nodes"] = len(info["hosts"])
        if info["disk_util"]:
            result.extra["disk_util"] = info["disk_util"]
        if info["time"]:
            result.extra["time"] = info["time"]
    else:
        if not jobs and len(result.extra["groups"]) == 1 and len(read.groups()) == 1:
            if info["starting"]:
                # Only "Run status group" lines: "Starting N processes" counts the one
                # group's jobs.
                result.extra["groups"][0]["threads"] = info["starting"]
                result.params["threads"] = info["starting"]
        if info["comments"]:
            result.extra["header_comments"] = info["comments"]
        if info["disk_util"]:
            result.extra["disk_util"] = info["disk_util"]
        if info["starting"] is not None:
            result.extra["processes_started"] = info["starting"]
    if read.warnings:
        result.extra["warnings"] = list(read.warnings)
    return result.validate()


def _parse(text: str, **options: Any) -> ParseResult:
    """Body of ``parse`` (``guard_parse`` has refused empty output)."""
    read = _read(text, **options)
    result = _result(read)
    if len(read.groups()) > 1:
        result.extra["parts"] = len(read.groups())
    return result


def _parse_parts(text: str, **options: Any) -> list[ParseResult]:
    """Body of ``parse_parts``."""
    read = _read(text, **options)
    groups = read.groups()
    if len(groups) < 2:
        return [_result(read)]
    results, labels, own = [], [], []
    single = True
    for group in groups:
        members = [j for j in read.jobs if j.group == group]
        names = list(dict.fromkeys(j.name for j in members))
        single = single and len(names) <= 1
        results.append(_result(read, group))
        labels.append(" + ".join(names) if names else f"group {group}")
        own.append(dict(members[0].options) if len(names) == 1 else {})
    options_known = read.fmt.startswith("json")
    return number_parts(
        results, "job" if single else "job group", labels, own if options_known else None
    )


def parse_parts(text: str, **options: Any) -> list[ParseResult]:
    """One result per independent measurement of fio output: per job group (jobs in
    different groups, made by ``stonewall`` or ``new_group``, ran one after the other; the
    jobs of one group ran together and are one measurement, their aggregate). Output of
    one group is one result, ``parse``'s."""
    return guard_parse(TOOL, partial(_parse_parts, **options), text)


def parse(text: str, **options: Any) -> ParseResult:
    """Parse fio output (normal text, terse lines, JSON or json+) into a ParseResult.

    Options: ``command`` (the argv the runner used, kept as ``ParseResult.command``).
    """
    return guard_parse(TOOL, partial(_parse, **options), text)
