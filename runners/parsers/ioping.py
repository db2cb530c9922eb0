"""Parser for ioping (storage latency): its normal output, its raw statistics (-B, -p/-P) and
its JSON (-J), as ioping 1.x prints them.

ioping issues one request at a time and times each one. The run's statistics cover the valid
requests (not the warmup ones, nor those outside -t/-T): ``<op>_lat`` (min, mean, max and
stddev = ioping's "mdev"; p50/p90/p99 when the output lists each request), ``<op>_iops``
(valid requests / their summed time), ``<op>_bw`` (iops × request size) and ``elapsed`` (the
whole run, sleeps between requests included). ``<op>`` is ``read`` (``<<<``), or ``write``
(``>>>``, ioping -W); read-write mode (-G) gives both, from the request lines.

Raw lines hold ten numbers, times in nanoseconds: valid requests, their summed time, iops,
bytes/s, min, avg, max, mdev, all requests, run time. They do not say the operation: ``op``
("read", ioping's default, or "write") tells it.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from decimal import Decimal
from functools import partial
from typing import Any

from runners.parsers.base import ParseError, ParseResult, guard_parse, split_lines

TOOL = "ioping"

_NUM = r"\d+(?:\.\d+)?"
_SIZES = {"B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40, "PiB": 2**50}
_TIMES = {
    "ns": Decimal("1e-9"),
    "us": Decimal("1e-6"),
    "ms": Decimal("1e-3"),
    "s": Decimal(1),
    "min": Decimal(60),
    "hour": Decimal(3600),
}
_INTS = {"": 1, "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12}
NS = 10**9  # raw and JSON times are nanoseconds
_SIZE = rf"{_NUM} (?:{'|'.join(_SIZES)})"
_TIME = rf"{_NUM} (?:{'|'.join(_TIMES)})"
_INT = rf"{_NUM}(?: [kMGT])?"
_OPS = {"<<<": "read", ">>>": "write"}

# "4 KiB <<< bench (ext4 /dev/vda 252.0 GiB): request=2 time=38.3 us (fast)"; -I puts the
# local time in front.
_REQUEST_RE = re.compile(
    rf"(?P<size>{_SIZE}) (?P<op><<<|>>>) (?P<target>.*)\): request=(?P<n>\d+) "
    rf"time=(?P<time>{_TIME})(?: \((?P<notice>[^)]*)\))?\s*$"
)
_HEADER_RE = re.compile(r"^--- (?P<target>.*) ioping statistics ---\s*$")
_COMPLETED_RE = re.compile(
    rf"^(?P<valid>{_INT}) requests completed in (?P<sum>{_TIME}), (?P<size>{_SIZE})"
    rf"(?: (?P<op>read|written))?, (?P<iops>{_INT}) iops, (?P<bw>{_SIZE})/s\s*$"
)
_GENERATED_RE = re.compile(
    rf"^(?:(?P<fast>{_INT}) too fast, )?(?:(?P<slow>{_INT}) too slow, )?"
    rf"generated (?P<count>{_INT}) requests in (?P<time>{_TIME}), (?P<size>{_SIZE}), "
    rf"(?P<iops>{_INT}) iops, (?P<bw>{_SIZE})/s\s*$"
)
_MINMAX_RE = re.compile(
    rf"^min/avg/max/mdev = (?P<min>{_TIME}) / (?P<avg>{_TIME}) / (?P<max>{_TIME}) / "
    rf"(?P<mdev>{_TIME})\s*$"
)
_RAW_RE = re.compile(r"^\s*\d+(?: \d+){9}\s*$")
# Requests that do not count: ioping's notices for them.
_IGNORED = {"warmup", "too fast", "too slow", "EAGAIN"}
# Percentiles of the request times, each given when there are enough requests for it not to
# be the maximum (p99: 100 requests).
PERCENTILES = (("p50", 0.50, 2), ("p90", 0.90, 10), ("p99", 0.99, 100))


@dataclass
class _Stats:
    """One statistics block in base units (seconds, op/s, B/s)."""

    valid: int
    iops: float
    bw: float
    min: float
    avg: float
    max: float
    mdev: float
    count: int | None = None  # every request, warmup and ignored ones included
    elapsed: float | None = None  # the whole run
    moved: float | None = None  # bytes of the valid requests
    busy: float | None = None  # summed time of the valid requests


@dataclass
class _Request:
    number: int
    op: str
    size: int
    seconds: float
    valid: bool


@dataclass
class _Read:
    """What one output says."""

    form: str
    total: _Stats | None = None
    requests: list[_Request] = field(default_factory=list)
    intervals: list[_Stats] = field(default_factory=list)
    target: dict[str, Any] = field(default_factory=dict)
    op: str | None = None  # the summary's operation; None: not stated, "mixed": -G


def detect(text: str) -> float:
    """Confidence that ``text`` is ioping output."""
    if not text:
        return 0.0
    head = text[:100_000]
    if re.search(r"^--- .* ioping statistics ---\s*$", head, re.M):
        return 0.95
    if head.lstrip().startswith("[") and '"target": {' in head and '"fstype": ' in head:
        if '"io": {' in head or '"load": {' in head:
            return 0.9
    if re.search(r"(?:<<<|>>>) .*\): request=\d+ time=", head):
        return 0.8
    lines = [line for line in split_lines(head) if line.strip()]
    if lines and all(_RAW_RE.match(line) for line in lines):
        return 0.5
    return 0.0


# Printed numbers are read as decimals ("431.2 us" is 0.0004312 s, not 0.00043119999…).


def _size(text: str) -> float:
    number, unit = text.split()
    return float(Decimal(number) * _SIZES[unit])


def _time(text: str) -> float:
    number, unit = text.split()
    return float(Decimal(number) * _TIMES[unit])


def _int(text: str) -> float:
    number, _, prefix = text.partition(" ")
    return float(Decimal(number) * _INTS[prefix])


def _target(text: str) -> dict[str, Any]:
    """ "bench (ext4 /dev/vda 252.0 GiB" -> path, file system, device."""
    path, sep, rest = text.rpartition(" (")
    if not sep:
        return {"path": text}
    words = rest.rstrip(")").split()
    info: dict[str, Any] = {"path": path}
    if len(words) >= 2:
        info["fstype"], info["device"] = words[0], words[1]
    return info


# --- normal output ---------------------------------------------------------------------------


def _read_text(lines: list[str]) -> _Read:
    read = _Read("text")
    completed = generated = minmax = None
    for number, line in enumerate(lines, 1):
        m = _REQUEST_RE.search(line)
        if m:
            notice = m.group("notice") or ""
            read.requests.append(
                _Request(
                    int(m.group("n")),
                    _OPS[m.group("op")],
                    int(_size(m.group("size"))),
                    _time(m.group("time")),
                    notice not in _IGNORED,
                )
            )
            read.target = read.target or _target(m.group("target"))
            continue
        stripped = line.strip()
        if _RAW_RE.match(stripped):  # -p/-P lines between the requests
            read.intervals.append(_raw_stats(stripped, number))
        elif m := _HEADER_RE.match(stripped):
            read.target = _target(m.group("target").rstrip(")"))
        elif m := _COMPLETED_RE.match(stripped):
            completed = m
        elif m := _GENERATED_RE.match(stripped):
            generated = m
        elif m := _MINMAX_RE.match(stripped):
            minmax = m
    if completed is not None and minmax is not None:
        read.total = _Stats(
            valid=round(_int(completed.group("valid"))),
            iops=_int(completed.group("iops")),
            bw=_size(completed.group("bw")),
            min=_time(minmax.group("min")),
            avg=_time(minmax.group("avg")),
            max=_time(minmax.group("max")),
            mdev=_time(minmax.group("mdev")),
            moved=_size(completed.group("size")),
            busy=_time(completed.group("sum")),
        )
        op = completed.group("op")
        read.op = {"read": "read", "written": "write", None: "mixed"}[op]
        if generated is not None:
            read.total.count = round(_int(generated.group("count")))
            read.total.elapsed = _time(generated.group("time"))
    elif completed is not None or minmax is not None:
        raise ParseError("the statistics are cut off (one of their lines is missing)", tool=TOOL)
    return read


# --- raw statistics (-B, -p, -P) -------------------------------------------------------------


def _raw_stats(line: str, number: int) -> _Stats:
    valid, total_ns, iops, bps, lo, avg, hi, mdev, count, run_ns = (int(x) for x in line.split())
    if valid and not lo <= avg <= hi:
        raise ParseError("raw statistics out of order (min <= avg <= max)", line=number, tool=TOOL)
    stats = _Stats(valid, float(iops), float(bps), lo / NS, avg / NS, hi / NS, mdev / NS)
    stats.count, stats.elapsed, stats.busy = count, run_ns / NS, total_ns / NS
    # iops is valid / summed time: a line whose numbers disagree is not ioping's.
    if (
        valid
        and total_ns
        and not math.isclose(iops, valid * NS / total_ns, rel_tol=0.01, abs_tol=1)
    ):
        raise ParseError(
            "raw statistics disagree (iops != requests / time)", line=number, tool=TOOL
        )
    return stats


def _merge(parts: list[_Stats]) -> _Stats:
    """The run's statistics from its intervals (-q -p prints no total)."""
    valid = sum(p.valid for p in parts)
    if not valid:
        return parts[-1]
    counted = [p for p in parts if p.valid]
    busy = sum(p.busy or 0.0 for p in counted)
    mean = busy / valid
    square = sum(p.valid * (p.mdev**2 + p.avg**2) for p in counted) / valid
    iops = valid / busy if busy else 0.0
    sizes = {_snap(p.bw / p.iops) for p in counted if p.iops}
    size = sizes.pop() if len(sizes) == 1 else None
    if size is None:  # mixed or unreadable sizes: the requests' mean size
        size = sum(p.bw / p.iops * p.valid for p in counted if p.iops) / valid
    return _Stats(
        valid=valid,
        iops=iops,
        bw=iops * size,
        min=min(p.min for p in counted),
        avg=mean,
        max=max(p.max for p in counted),
        mdev=math.sqrt(max(square - mean**2, 0.0)),
        count=sum(p.count or 0 for p in parts),
        elapsed=sum(p.elapsed or 0.0 for p in parts),
        busy=busy,
    )


def _is_total(last: _Stats, before: list[_Stats]) -> bool:
    """Whether the last raw line sums up the ones before it (-B with -p/-P) rather than being
    one more interval (-q -p)."""
    counted = [p for p in before if p.valid]
    return (
        last.valid >= sum(p.valid for p in before)
        and (last.count or 0) >= sum(p.count or 0 for p in before)
        and all(last.min <= p.min and last.max >= p.max for p in counted)
    )


def _read_raw(lines: list[str]) -> _Read:
    read = _Read("raw")
    rows = [(n, line.strip()) for n, line in enumerate(lines, 1) if line.strip()]
    stats = [_raw_stats(line, n) for n, line in rows]
    if len(stats) == 1 or _is_total(stats[-1], stats[:-1]):
        read.total, read.intervals = stats[-1], stats[:-1]
    else:
        read.total, read.intervals = _merge(stats), stats
        read.form = "raw intervals"
    return read


# --- JSON (-J) -------------------------------------------------------------------------------


def _read_json(text: str) -> _Read:
    try:
        entries = json.loads(text)
    except ValueError as exc:
        raise ParseError(f"not valid JSON ({exc}); is the output cut off?", tool=TOOL) from None
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise ParseError("expected ioping's JSON array of objects", tool=TOOL)
    read = _Read("json")
    blocks = []
    for entry in entries:
        target = entry.get("target")
        if isinstance(target, dict) and not read.target:
            read.target = {k: target[k] for k in ("path", "fstype", "device") if k in target}
        io, stat, load = entry.get("io"), entry.get("stat"), entry.get("load")
        if isinstance(io, dict):
            try:
                read.requests.append(
                    _Request(
                        int(io["request"]),
                        str(io["operation"]),
                        int(io["size"]),
                        float(io["time"]) / NS,
                        io["ignored"] is False,
                    )
                )
            except (KeyError, TypeError, ValueError):
                raise ParseError(
                    "a request entry lacks request/operation/size/time", tool=TOOL
                ) from None
        elif isinstance(stat, dict):
            load = load if isinstance(load, dict) else {}
            try:
                block = _Stats(
                    valid=int(stat["count"]),
                    iops=float(stat["iops"]),
                    bw=float(stat["bps"]),
                    min=float(stat["min"]) / NS,
                    avg=float(stat["avg"]) / NS,
                    max=float(stat["max"]) / NS,
                    mdev=float(stat["mdev"]) / NS,
                    moved=float(stat["size"]) if "size" in stat else None,
                    busy=float(stat["time"]) / NS if "time" in stat else None,
                )
                if "count" in load and "time" in load:
                    block.count, block.elapsed = int(load["count"]), float(load["time"]) / NS
            except (KeyError, TypeError, ValueError):
                raise ParseError(
                    "a statistics entry lacks count/iops/bps/min/avg/max", tool=TOOL
                ) from None
            blocks.append(block)
    if blocks:
        # The last block is the whole run; earlier ones are -p/-P intervals.
        read.total, read.intervals = blocks[-1], blocks[:-1]
    return read


# --- result ----------------------------------------------------------------------------------


def _percentile(values: list[float], q: float) -> float:
    """Nearest rank: the smallest value with at least ``q`` of the values at or below it."""
    ordered = sorted(values)
    return ordered[max(math.ceil(q * len(ordered)) - 1, 0)]


def _from_requests(requests: list[_Request]) -> _Stats:
    times = [r.seconds for r in requests]
    busy = sum(times)
    mean = busy / len(times)
    iops = len(times) / busy if busy else 0.0
    size = sum(r.size for r in requests) / len(requests)
    mdev = math.sqrt(max(sum(t * t for t in times) / len(times) - mean**2, 0.0))
    return _Stats(len(times), iops, iops * size, min(times), mean, max(times), mdev)


def _add(result: ParseResult, op: str, stats: _Stats, requests: list[_Request]) -> None:
    name = f"{op}_lat"
    result.add(name, stats.avg, "mean")
    result.add(name, stats.min, "min")
    result.add(name, stats.max, "max")
    result.add(name, stats.mdev, "stddev")
    for stat, q, enough in PERCENTILES:
        if len(requests) >= enough:
            result.add(name, _percentile([r.seconds for r in requests], q), stat)
    result.add(f"{op}_iops", stats.iops)
    result.add(f"{op}_bw", stats.bw)


def _request_size(read: _Read) -> int | None:
    """Bytes per request: as the requests state it, else from the statistics."""
    sizes = {r.size for r in read.requests if r.size}
    if sizes:
        return sizes.pop() if len(sizes) == 1 else None
    total = read.total
    if total is None or total.valid <= 0:
        return None
    if total.moved:
        size = total.moved / total.valid
    elif total.iops > 0:
        size = total.bw / total.iops
    else:
        return None
    return _snap(size)


def _snap(size: float) -> int | None:
    """A request size read from rounded numbers, snapped to the multiple of 512 within 0.5%
    of it (None when there is none)."""
    snapped = round(size / 512) * 512
    return snapped if snapped and abs(size - snapped) <= 0.005 * snapped else None


def _result(read: _Read, op_option: str | None) -> ParseResult:
    result = ParseResult(tool=TOOL)
    valid = [r for r in read.requests if r.valid]
    total = read.total
    if read.op is None and read.requests:
        ops = {r.op for r in read.requests}
        read.op = ops.pop() if len(ops) == 1 else "mixed"
    op = read.op or op_option or "read"
    if op == "mixed":
        # -G: the summary mixes reads and writes; each operation from its own requests.
        for name in ("read", "write"):
            mine = [r for r in valid if r.op == name]
            if mine:
                _add(result, name, _from_requests(mine), mine)
        if not result.metrics:
            raise ParseError(
                "read-write mode (-G) needs the request lines to tell reads from writes",
                tool=TOOL,
            )
        result.params["rw"] = "readwrite"
    else:
        if total is None:
            if not valid:
                raise ParseError("no ioping statistics and no valid request found", tool=TOOL)
            total = _from_requests(valid)  # the statistics were cut off or never printed
            result.extra["computed_from_requests"] = True
        if total.valid <= 0:
            raise ParseError(
                "no valid request: every one was warmup, too fast or too slow", tool=TOOL
            )
        _add(result, op, total, valid)
        result.params["rw"] = op
    if total is not None and total.elapsed is not None:
        result.add("elapsed", total.elapsed)
    size = _request_size(read)
    if size is not None:
        result.params["transfer_size"] = size
    result.params["threads"] = 1
    count = total.count if total is not None and total.count is not None else None
    if count is None and read.requests:
        count = max(r.number for r in read.requests)
    if count is not None:
        result.params["count"] = count
    result.extra["format"] = read.form
    if read.target:
        result.extra["target"] = read.target
    if total is not None:
        result.extra["valid_requests"] = total.valid
    ignored = [r.number for r in read.requests if not r.valid]
    if ignored:
        result.extra["ignored_requests"] = ignored
    if read.intervals:
        result.extra["intervals"] = [
            {"requests": s.valid, "iops": s.iops, "mean_lat": s.avg, "max_lat": s.max}
            for s in read.intervals
        ]
    return result


def _parse(text: str, op: str | None) -> ParseResult:
    stripped = text.lstrip()
    lines = split_lines(text)
    if stripped.startswith("["):
        read = _read_json(text)
    elif all(_RAW_RE.match(line) for line in lines if line.strip()):
        read = _read_raw(lines)
    else:
        read = _read_text(lines)
        if read.total is None and not read.requests and read.intervals:
            raw = [line for line in lines if _RAW_RE.match(line.strip())]
            read = _read_raw(raw)
    if read.total is None and not read.requests:
        raise ParseError("no ioping statistics or request lines found", tool=TOOL)
    return _result(read, op).validate()


def parse(text: str, op: str | None = None, **_options: Any) -> ParseResult:
    """Parse ioping output (normal, -B/-p/-P raw lines, or -J JSON). ``op`` ("read" or
    "write") names the operation of raw lines, which do not say it; the normal and JSON
    outputs do, and win."""
    if op is not None and op not in ("read", "write"):
        raise ParseError(f"op must be 'read' or 'write', not {op!r}", tool=TOOL)
    return guard_parse(TOOL, partial(_parse, op=op), text)
