"""Shared vocabulary for the pure output parsers: result objects, units and ParseError.

Nothing here imports Django: a parser takes text and returns a validated ``ParseResult``.
Names and units follow ../shared/DESIGN.md ("Metrics: one vocabulary, base units"), as
``runners.metrics`` lists them.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from runners import metrics


class ParseError(ValueError):
    """Input holds no result this parser can read. ``line`` is 1-based when known."""

    def __init__(self, message: str, line: int | None = None, tool: str | None = None):
        self.message = message
        self.line = line
        self.tool = tool
        super().__init__(str(self))

    def __str__(self) -> str:
        where = f"line {self.line}: " if self.line is not None else ""
        who = f"{self.tool}: " if self.tool else ""
        return f"{who}{where}{self.message}"


# Metric name -> base unit (``runners.metrics``, the one vocabulary). Parsers may only emit
# these names (plus per-job extras through ``Metric.extra``); ``ParseResult.validate``
# enforces it.
METRIC_UNITS: dict[str, str] = metrics.UNITS

STATS = {
    "value",
    "mean",
    "min",
    "max",
    "stddev",
    "median",
    "parent",
    "p1",
    "p5",
    "p10",
    "p50",
    "p90",
    "p95",
    "p99",
    "p99.9",
    "p99.99",
    "first",
    "last",
    "sum",
}

# Canonical parameter names every parser uses in ``ParseResult.params`` (all sizes in bytes).
# Tool-specific parameters keep the tool's own flag name (e.g. "ioengine", "api").
PARAMS_DOC: dict[str, str] = {
    "threads": "total concurrent streams over all clients: IOR/mdtest tasks, IOzone -t, "
    "fio numjobs x clients, elbencho threads x hosts, dd 1",
    "nodes": "number of client hosts",
    "tasks_per_node": "processes or threads per client host",
    "block_size": "bytes per task per file (IOR -b, elbencho -s, dd bs x count)",
    "transfer_size": "bytes per I/O call (IOR -t, fio bs, elbencho -b, dd bs, qperf msg_size)",
    "record_size": "IOzone record size in bytes (-r)",
    "file_size": "bytes per file (IOzone -s, fio size, dd total)",
    "aggregate_size": "bytes moved over all tasks",
    "file_per_process": "True for N-N (IOR -F, fio separate files), False for N-1 shared file",
    "direct": "True when O_DIRECT was used",
    "iodepth": "queue depth per job (fio iodepth, elbencho --iodepth)",
    "iterations": "tool's own repetitions (IOR -i, mdtest -i)",
    "items": "mdtest/elbencho files or directories per task",
    "api": "I/O interface (POSIX, MPIIO, HDF5, DFS, libaio, …)",
    "pattern": "'seq' or 'rand'",
    "rw": "fio rw= value or equivalent: write, read, randwrite, randread, randrw, …",
    "ops": "IOzone test list or elbencho phases",
    "storage_targets": "BeeGFS storage targets the run used (1: one target, its limit applies)",
    "targets": "StorageBench: storage targets benchmarked",
    "drives": "raw drives measured without BeeGFS or RAID (1: one drive, its limit applies)",
}

# The kind of each canonical parameter (and of the other parameters parsers state): what its
# one normal form is (``runners.params``: sizes in bytes, durations in seconds, booleans,
# whole numbers), whichever spelling a tool or a user gave. The adapters' ``Param`` kinds add
# the tools' own parameter names (fio ``bs``, dd ``count`` …).
PARAM_KINDS: dict[str, str] = {
    "threads": "int",
    "nodes": "int",
    "tasks_per_node": "int",
    "block_size": "size",
    "transfer_size": "size",
    "record_size": "size",
    "file_size": "size",
    "aggregate_size": "size",
    "file_per_process": "bool",
    "direct": "bool",
    "iodepth": "int",
    "iterations": "int",
    "items": "int",
    "storage_targets": "int",
    "targets": "int",
    "drives": "int",
    "segments": "int",
    "collective": "bool",
    "network_distribution": "bool",
    "runtime": "seconds",
    "count": "int",
    "slurm_nodes": "int",
}


@dataclass
class Metric:
    """One number in base units. ``iteration`` is None for the run as a whole."""

    name: str
    value: float
    unit: str
    stat: str = "value"
    iteration: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        if not data["extra"]:
            del data["extra"]
        return data


@dataclass
class ParseResult:
    """What a parser read from one run of one tool."""

    tool: str
    tool_version: str | None = None
    command: str | None = None
    params: dict[str, Any] = field(default_factory=dict)
    metrics: list[Metric] = field(default_factory=list)
    # Anything else worth keeping (per-host rows, topology tables, warnings printed by the tool).
    extra: dict[str, Any] = field(default_factory=dict)

    def add(
        self,
        name: str,
        value: float,
        stat: str = "value",
        iteration: int | None = None,
        **extra: Any,
    ) -> Metric:
        metric = Metric(name, float(value), METRIC_UNITS.get(name, "?"), stat, iteration, extra)
        self.metrics.append(metric)
        return metric

    def validate(self) -> ParseResult:
        """Raise ParseError unless this holds at least one well-formed metric (or topology)."""
        if not self.metrics and not self.extra.get("topology"):
            raise ParseError("no result found in the output", tool=self.tool)
        for m in self.metrics:
            if m.name not in METRIC_UNITS:
                raise ParseError(f"unknown metric name {m.name!r}", tool=self.tool)
            if m.unit != METRIC_UNITS[m.name]:
                raise ParseError(
                    f"metric {m.name} has unit {m.unit}, expected {METRIC_UNITS[m.name]}",
                    tool=self.tool,
                )
            if m.stat not in STATS:
                raise ParseError(f"unknown statistic {m.stat!r} for {m.name}", tool=self.tool)
            if not math.isfinite(m.value):
                raise ParseError(f"metric {m.name} is not a finite number", tool=self.tool)
        return self

    def get(self, name: str, stat: str = "value", iteration: int | None = None) -> float:
        """Value of one metric (handy in tests); KeyError when absent."""
        for m in self.metrics:
            if m.name == name and m.stat == stat and m.iteration == iteration:
                return m.value
        raise KeyError((name, stat, iteration))

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "tool": self.tool,
            "tool_version": self.tool_version,
            "command": self.command,
            "params": self.params,
            "metrics": [m.to_dict() for m in self.metrics],
        }
        if self.extra:
            data["extra"] = self.extra
        return data


# --- units -------------------------------------------------------------------------------

KIB = 1024
MIB = 1024**2
GIB = 1024**3
TIB = 1024**4

# Bandwidth units exactly as the tools print them (DESIGN.md): binary for Ki/Mi/Gi, decimal
# for kB/MB/GB, except IOzone whose "kB" / "KB" / "kBytes/sec" are 1024 bytes (pass
# ``iozone=True``).
_BW_UNITS = {
    "b/s": 1,
    "bytes/sec": 1,
    "bytes/s": 1,
    "kib/s": KIB,
    "mib/s": MIB,
    "gib/s": GIB,
    "tib/s": TIB,
    "kb/s": 1000,
    "mb/s": 1000**2,
    "gb/s": 1000**3,
    "tb/s": 1000**4,
    "kb/sec": 1000,
    "mb/sec": 1000**2,
    "gb/sec": 1000**3,
    "mib/sec": MIB,
    "gib/sec": GIB,
}


def bw_to_bytes(value: float, unit: str, iozone: bool = False) -> float:
    """Convert a bandwidth printed as ``value unit`` into B/s."""
    key = unit.strip().lower()
    if iozone and key in {"kb/sec", "kbytes/sec", "kb/s", "kb"}:
        return value * KIB
    if key not in _BW_UNITS:
        raise ParseError(f"unknown bandwidth unit {unit!r}")
    return value * _BW_UNITS[key]


_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgtpe]?)(i?)(b?)\s*$", re.IGNORECASE)


def parse_size(text: str, default_binary: bool = True) -> int:
    """'512k', '1m', '4KiB', '2 MB', '1G' -> bytes.

    Tool flags (IOR -t 1m, fio bs=4k, dd bs=4M, beegfs chunk 512k) mean binary multiples; an
    explicit "kB"/"MB" with ``default_binary=False`` means decimal.
    """
    m = _SIZE_RE.match(str(text))
    if not m:
        raise ParseError(f"not a size: {text!r}")
    number, prefix, binary_i, b = m.groups()
    power = "kmgtpe".find(prefix.lower()) + 1 if prefix else 0
    binary = bool(binary_i) or default_binary or not b
    base = 1024 if binary else 1000
    return int(round(float(number) * base**power))


def time_to_seconds(value: float, unit: str) -> float:
    """'usec', 'us', 'µs', 'ms', 'msec', 'nsec', 'ns', 's', 'sec' -> seconds."""
    key = unit.strip().lower().replace("µ", "u")
    factors = {
        "ns": 1e-9,
        "nsec": 1e-9,
        "us": 1e-6,
        "usec": 1e-6,
        "ms": 1e-3,
        "msec": 1e-3,
        "s": 1.0,
        "sec": 1.0,
        "secs": 1.0,
        "seconds": 1.0,
        "min": 60.0,
    }
    if key not in factors:
        raise ParseError(f"unknown time unit {unit!r}")
    return value * factors[key]


def guard_parse(tool: str, parse: Callable[..., Any], text: str, *args: Any) -> Any:
    """``parse(text, *args)`` with the checks every parser shares: empty output is a
    ParseError, and so is a ValueError/OverflowError/ZeroDivisionError escaping (a corrupted
    field such as "9999…9" or "1e999" reads as a number but breaks arithmetic deep inside)."""
    if not isinstance(text, str) or not text.strip():
        raise ParseError("the output is empty", tool=tool)
    try:
        return parse(text, *args)
    except ParseError:
        raise
    except (ValueError, OverflowError, ZeroDivisionError) as exc:
        raise ParseError(f"unreadable number: {exc}", tool=tool) from exc


# --- numbers -----------------------------------------------------------------------------


def mean(values: list[float]) -> float:
    """The mean of finite values (``fsum`` over the count), finite however large they are:
    where the sum overflows (two iterations of 1e308 B/s: ``fsum`` raises OverflowError),
    each value is divided before the sum."""
    n = len(values)
    try:
        return math.fsum(values) / n
    except OverflowError:
        return math.fsum(v / n for v in values)


def to_float(token: Any) -> float | None:
    """A finite float, or None for '-', 'NA', garbage or inf/nan (IOR prints '-' for n/a)."""
    try:
        value = float(token)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None


def parse_int(text: Any) -> int | None:
    """A whole number written as one ('4', ' 4 '), or None: unlike ``to_int``, '4.0' is
    not read as 4 (a tool's option value, not a measured number)."""
    try:
        return int(str(text).strip())
    except (TypeError, ValueError):
        return None


def to_int(token: Any) -> int | None:
    """A whole number ('4' or '4.0'), or None for fractions and anything ``to_float`` refuses."""
    value = to_float(token)
    if value is None or value != int(value):
        return None
    return int(value)


def split_lines(text: str) -> list[str]:
    """Lines without their endings; CRLF and lone CR become plain line breaks."""
    return text.replace("\r\n", "\n").replace("\r", "\n").split("\n")


# --- logs holding several runs (IOR, mdtest) ----------------------------------------------


def chunk_runs(lines: list[str], starts: list[int]) -> list[tuple[int, list[str]]]:
    """(first line number, lines) per run, each run beginning at an index of ``starts``
    (ascending); lines before the first start form a chunk of their own."""
    if not starts:
        return [(1, lines)]
    chunks = []
    if starts[0] > 0:
        chunks.append((1, lines[: starts[0]]))  # wrapper noise, or the tail of a cut run
    for n, start in enumerate(starts):
        end = starts[n + 1] if n + 1 < len(starts) else len(lines)
        chunks.append((start + 1, lines[start:end]))
    return chunks


def number_runs(results: list[ParseResult]) -> list[ParseResult]:
    """Record each result's position (``run_index``) and the run count (``runs_in_file``)."""
    for index, result in enumerate(results):
        result.extra["run_index"] = index
        result.extra["runs_in_file"] = len(results)
    return results


def pick_run(tool: str, results: list[ParseResult], wanted: Any, index: int | None) -> ParseResult:
    """``results[index]`` when a run was asked for (``wanted`` as given, ``index`` as read),
    else the first complete run, else the first one."""
    if wanted is not None:
        if index is None or not 0 <= index < len(results):
            raise ParseError(
                f"run {wanted!r} not found; the output holds {len(results)} run(s)", tool=tool
            )
        return results[index]
    for result in results:
        if result.extra.get("complete"):
            return result
    return results[0]


# --- outputs holding several independent measurements (parts) -------------------------------

# What a part is called, by kind, in the plural ("15 independent jobs").
PART_PLURALS = {"job": "jobs", "job group": "job groups", "run": "runs", "test": "tests"}
# Parameters shown as sizes in a description of parts.
_SIZE_PARAMS = {"transfer_size", "block_size", "file_size", "record_size", "aggregate_size"}


def command_label(command: str | None, index: int) -> str:
    """A part's name from the command line that produced it: its options (the command
    without the program, at most 100 characters), else "run N" (``index`` counts from 0)."""
    words = (command or "").split()
    options = " ".join(words[1:]) if len(words) > 1 else ""
    if not options:
        return f"run {index + 1}"
    return options if len(options) <= 100 else options[:99] + "…"


def number_parts(
    results: list[ParseResult],
    kind: str,
    labels: list[str],
    options: list[dict[str, Any]] | None = None,
) -> list[ParseResult]:
    """Mark each of several independent measurements read from one output as its part:
    ``extra["part"] = {"index", "count", "kind", "label"}`` (and the part's own tool
    options, where the output states them). A single result stays unmarked: an output of
    one measurement is one part."""
    if len(results) < 2:
        return results
    for index, result in enumerate(results):
        part: dict[str, Any] = {
            "index": index,
            "count": len(results),
            "kind": kind,
            "label": labels[index],
        }
        if options is not None:
            part["options"] = options[index]
        result.extra["part"] = part
    return results


def _shown(key: str, value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if key in _SIZE_PARAMS and isinstance(value, int):
        for unit, size in (("TiB", TIB), ("GiB", GIB), ("MiB", MIB), ("KiB", KIB)):
            if value >= size and value % size == 0:
                return f"{value // size} {unit}"
        return f"{value} B"
    return str(value)


def varying(parts: list[ParseResult], limit: int = 2) -> list[tuple[str, str]]:
    """What differs between the parts: (name, "first … last") of at most ``limit`` names;
    the tool's own options where the output states them per part
    (fio's "bs"), the canonical parameters otherwise."""
    options = [p.extra.get("part", {}).get("options") for p in parts]
    for source, shown in (
        (options, lambda key, value: str(value)),
        ([p.params for p in parts], _shown),
    ):
        if not all(isinstance(s, dict) for s in source):
            continue
        keys: list[str] = []
        for mapping in source:
            keys += [k for k in mapping if k not in keys]
        found = []
        for key in keys:
            values = [shown(key, mapping.get(key)) for mapping in source]
            if any(v != values[0] for v in values):
                found.append((key, values))
        if found:
            return [_span(key, values) for key, values in found[:limit]]
    return []


def _span(key: str, values: list[str]) -> tuple[str, str]:
    """(name, "first … last"), or the distinct values when the first and last agree."""
    if values[0] != values[-1]:
        return key, f"{values[0]} … {values[-1]}"
    return key, ", ".join(dict.fromkeys(values))


def summarise_parts(parts: list[ParseResult]) -> tuple[str, str]:
    """("15 independent jobs", "bs 1k … 16M"): what an output of several independent
    measurements holds, and what differs between them ("" when nothing the output states
    does); ("", "") for one measurement."""
    if len(parts) < 2:
        return "", ""
    kind = parts[0].extra.get("part", {}).get("kind", "run")
    held = f"{len(parts)} independent {PART_PLURALS.get(kind, kind + 's')}"
    return held, "; ".join(f"{key} {span}" for key, span in varying(parts))


def describe_parts(parts: list[ParseResult]) -> str:
    """What an output of several independent measurements holds, "15 independent jobs (bs
    1k … 16M)"; "" for one."""
    held, differs = summarise_parts(parts)
    return f"{held} ({differs})" if differs else held
