"""Parser for elbencho results: console/--resfile tables, mtelbencho sweeps, CSV and live CSV."""

from __future__ import annotations

import csv
import re
import shlex
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from runners.parsers.base import (
    MIB,
    ParseError,
    ParseResult,
    guard_parse,
    number_parts,
    number_runs,
    parse_int,
    parse_size,
    split_lines,
)

TOOL = "elbencho"

# Metric for the entries/s row of each phase (Dirs/s or Files/s).
_ENTRY_METRIC = {
    "MKDIRS": "dir_create",
    "RMDIRS": "dir_remove",
    "WRITE": "file_create",
    "MKFILES": "file_create",  # elbencho 1.0's name of the file write phase
    "READ": "file_read",
    "RMFILES": "file_remove",
    "STAT": "file_stat",
}
# Phases that move data and which direction they are.
_IO_DIRECTION = {"WRITE": "write", "MKFILES": "write", "READ": "read"}
# Housekeeping phases: kept in extra, not turned into metrics.
_HOUSEKEEPING = {"DROPCACHE", "SYNC", "IDLE", "QUIT"}

_PCT_STATS = {1.0: "p1", 50.0: "p50", 99.0: "p99", 99.9: "p99.9", 99.99: "p99.99"}


@dataclass
class _Phase:
    name: str
    line: int
    # metric name -> {stat: value}; stats are "value" (last done), "first", "min", "mean", …
    values: dict[str, dict[str, float]] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)

    def put(self, metric: str, stat: str, value: float) -> None:
        self.values.setdefault(metric, {})[stat] = value


@dataclass
class _Block:
    """One elbencho invocation: a resfile entry, a sweep step, or a plain console run."""

    line: int
    phases: list[_Phase] = field(default_factory=list)
    params: dict[str, Any] = field(default_factory=dict)
    command: str | None = None
    version: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


# --- detection ---------------------------------------------------------------------------


def detect(text: str) -> float:
    """Confidence that ``text`` is elbencho output."""
    if not text:
        return 0.0
    head = text[:200_000]
    if re.search(r"^OPERATION\s+RESULT TYPE\s+FIRST DONE\s+LAST DONE", head, re.M):
        return 0.97
    first = head.lstrip().split("\n", 1)[0].lower()
    if "operation" in first and "[last]" in first and "," in first:
        return 0.97
    if "runtimems" in first and "phase" in first and "rank" in first:
        return 0.95
    if re.search(r"^[A-Z]+\s+Elapsed (?:ms|time)\s+:", head, re.M):
        return 0.9
    if "mtelbencho" in head:
        return 0.8
    if re.search(r"\belbencho\b", head):
        return 0.4
    return 0.0


# --- value helpers -----------------------------------------------------------------------


def _elapsed_seconds(text: str) -> float:
    """elbencho's elapsed strings: '559ms', '11.559s', '2m3.241s', '1h2m3s' -> seconds."""
    s = text.strip()
    m = re.fullmatch(r"(\d+(?:\.\d+)?)ms", s)
    if m:
        return float(m.group(1)) / 1000.0
    m = re.fullmatch(r"(?:(\d+)h)?(?:(\d+)m)?(?:(\d+(?:\.\d+)?)s)?", s)
    if m and any(m.groups()):
        hours, minutes, seconds = m.groups()
        return int(hours or 0) * 3600 + int(minutes or 0) * 60 + float(seconds or 0)
    raise ParseError(f"not an elbencho elapsed time: {text!r}", tool=TOOL)


def _latency_seconds(text: str, default_unit: str = "us") -> float:
    """'229us', '4.34ms', '1.23s', or a bare number in ``default_unit`` -> seconds."""
    m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*(us|ms|s|ns)?", text.strip())
    if not m:
        raise ParseError(f"not an elbencho latency: {text!r}", tool=TOOL)
    factor = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}[m.group(2) or default_unit]
    return float(m.group(1)) * factor


def _number(text: str) -> float:
    try:
        return float(text.strip())
    except ValueError as exc:
        raise ParseError(f"not a number: {text!r}", tool=TOOL) from exc


def _count_hosts(spec: str) -> int:
    """Hosts in an elbencho --hosts value: 'a,b', 'a b', 'node[1-4]', '10.0.0.[1,3,5]'."""
    items = [i for i in re.split(r"[,\s]+(?![^\[]*\])", spec.strip()) if i]
    total = 0
    for item in items:
        count = 1
        for group in re.findall(r"\[([^\]]*)\]", item):
            n = 0
            for part in group.split(","):
                lo, sep, hi = part.partition("-")
                if sep and lo.strip().isdigit() and hi.strip().isdigit():
                    n += abs(int(hi) - int(lo)) + 1
                elif part.strip():
                    n += 1
            count *= max(n, 1)
        total += count
    return total


# Value-taking options -> beeweb parameter (None: kept under the option's own name).
_VALUE_OPTS = {
    "-t": "threads",
    "--threads": "threads",
    "-b": "transfer_size",
    "--block": "transfer_size",
    "-s": "block_size",
    "--size": "block_size",
    "--iodepth": "iodepth",
    "--hosts": "hosts",
    "--label": "label",
    "-n": "dirs",
    "--dirs": "dirs",
    "-N": "files",
    "--files": "files",
    "--hostsfile": "hostsfile",
    "--timelimit": "timelimit",
    "--rwmixpct": "rwmixpct",
}
_PHASE_FLAGS = {
    "-d": "MKDIRS",
    "--mkdirs": "MKDIRS",
    "-w": "WRITE",
    "--write": "WRITE",
    "-r": "READ",
    "--read": "READ",
    "--stat": "STAT",
    "-F": "RMFILES",
    "--delfiles": "RMFILES",
    "-D": "RMDIRS",
    "--deldirs": "RMDIRS",
}


def _params_from_command(command: str) -> dict[str, Any]:
    """Canonical parameters from an elbencho command line (resfile, CSV or the runner)."""
    try:
        tokens = shlex.split(command, posix=True)
    except ValueError:
        tokens = command.split()
    raw: dict[str, str] = {}
    flags: set[str] = set()
    ops: list[str] = []
    i = 1 if tokens and "elbencho" in tokens[0] else 0
    while i < len(tokens):
        token = tokens[i]
        name, eq, value = token.partition("=")
        if name in _VALUE_OPTS:
            if not eq:
                if i + 1 >= len(tokens):
                    break
                value = tokens[i + 1]
                i += 1
            raw[_VALUE_OPTS[name]] = value
        elif token in _PHASE_FLAGS:
            ops.append(_PHASE_FLAGS[token])
        elif re.fullmatch(r"-[a-zA-Z]{2,}", token):  # combined short flags like "-wr"
            for ch in token[1:]:
                if f"-{ch}" in _PHASE_FLAGS:
                    ops.append(_PHASE_FLAGS[f"-{ch}"])
        elif token.startswith("-"):
            flags.add(token)
        i += 1
    params: dict[str, Any] = {}
    hosts = _count_hosts(raw["hosts"]) if raw.get("hosts") else 1
    params["nodes"] = hosts
    threads = parse_int(raw.get("threads"))
    if threads is not None:
        params["threads"] = threads * hosts
        params["tasks_per_node"] = threads
    for key in ("transfer_size", "block_size"):
        if raw.get(key):
            size = _size(raw[key])
            if size is not None:
                params[key] = size
    if "block_size" in params:
        params["file_size"] = params["block_size"]
    if raw.get("iodepth"):
        depth = parse_int(raw["iodepth"])
        if depth is not None:
            params["iodepth"] = depth
    params["direct"] = "--direct" in flags
    if "--rand" in flags:
        params["pattern"] = "rand"
    if raw.get("label"):
        params["label"] = raw["label"]
    for key in ("dirs", "files"):
        value = parse_int(raw.get(key))
        if value is not None:
            params[key] = value
    if ops:
        params["ops"] = ops
    return params


def _size(text: str) -> int | None:
    # elbencho sizes are binary ("4K" = 4096, "1G" = 1 GiB), as in its UnitTk.
    try:
        return parse_size(str(text).strip())
    except ParseError:
        return None


# --- text tables (console output, --resfile, mtelbencho sweeps) ---------------------------

_ROW_RE = re.compile(r"^(?P<phase>[A-Z][A-Z0-9_]*)\s+(?P<label>\S.*?)\s*:\s*(?P<rest>.*)$")
_CONT_RE = re.compile(r"^\s+(?P<label>\S.*?)\s*:\s*(?P<rest>.*)$")
_PAIR_RE = re.compile(r"^(?P<first>\S+)\s+(?P<last>\S+)\s*$")
_LAT_ITEM_RE = re.compile(r"(min|avg|max)=(\d+(?:\.\d+)?(?:ns|us|ms|s)?)")
_PCT_ITEM_RE = re.compile(r"(\d+(?:\.\d+)?)%<=(\d+(?:\.\d+)?)")
_WORKING_RE = re.compile(r"^Working on (?P<path>\S+) with (?P<threads>\d+) threads")
_SWEEP_HDR_RE = re.compile(r"^(?P<key>[a-z_]+)\s*:\s*(?P<value>.*)$")

_ROW_LABELS = re.compile(
    r"^(Elapsed (ms|time)|IOPS( write| read| total)?|Throughput M(i)?B/s"
    r"|M(i)?B/s (write|read|total)|Total MiB|MiB (write|read)"
    r"|(Dirs|Files|Entries|Objects)/s( write| read| total)?"
    r"|Total (dirs|files)|(Dirs|Files|Objects) (total|write|read)|IOs (total|write|read)"
    r"|CPU util %|.* latency|.* lat % us|.* lat hist|Time ms each|Svc compl\. time)$"
)


def _direction_of(label: str, phase: str) -> str | None:
    words = label.lower().split()
    if "write" in words or "wr" in words:
        return "write"
    if "read" in words or "rd" in words:
        return "read"
    return _IO_DIRECTION.get(phase)


def _apply_row(phase: _Phase, label: str, rest: str, number: int) -> None:
    """Store one "LABEL : first last" row of a phase."""
    name = phase.name
    if label in ("Elapsed ms", "Elapsed time"):
        m = _PAIR_RE.match(rest)
        if not m:
            raise ParseError(f"elapsed row without two values: {rest!r}", line=number, tool=TOOL)
        if label == "Elapsed ms":
            first, last = _number(m.group("first")) / 1000.0, _number(m.group("last")) / 1000.0
        else:
            first, last = _elapsed_seconds(m.group("first")), _elapsed_seconds(m.group("last"))
        phase.put("elapsed", "first", first)
        phase.put("elapsed", "value", last)
        return
    if label.endswith("latency"):
        items = dict(_LAT_ITEM_RE.findall(rest))
        # "IO latency" is per block I/O; "Files latency"/"Dirs latency" are per entry.
        kind = label.split()[0]
        direction = _direction_of(label, name)
        target = f"{direction}_lat" if kind == "IO" and direction else None
        stats = {
            "min": items.get("min"),
            "mean": items.get("avg"),
            "max": items.get("max"),
        }
        for stat, value in stats.items():
            if value is None:
                continue
            seconds = _latency_seconds(value)
            if target:
                phase.put(target, stat, seconds)
            else:
                phase.extra.setdefault(label, {})[stat] = seconds
        return
    if label.endswith("lat % us"):
        kind = label.split()[0]
        direction = _direction_of(label, name)
        for pct, value in _PCT_ITEM_RE.findall(rest):
            stat = _PCT_STATS.get(round(float(pct), 4))
            seconds = float(value) * 1e-6
            if kind == "IO" and direction and stat:
                phase.put(f"{direction}_lat", stat, seconds)
            else:
                phase.extra.setdefault(label, {})[f"p{pct}"] = seconds
        return
    if label in ("Time ms each", "Svc compl. time") or label.endswith("lat hist"):
        phase.extra[label] = rest.strip().strip("[]").strip()
        return
    m = _PAIR_RE.match(rest)
    if not m:
        phase.extra[label] = rest.strip()
        return
    first, last = _number(m.group("first")), _number(m.group("last"))
    if label.startswith("IOPS"):
        if label == "IOPS total":
            phase.extra[label] = [first, last]
            return
        direction = _direction_of(label, name)
        if direction:
            phase.put(f"{direction}_iops", "first", first)
            phase.put(f"{direction}_iops", "value", last)
        else:
            phase.extra[label] = [first, last]
        return
    bw = re.fullmatch(r"(?:Throughput (M(?:i)?B)/s|(M(?:i)?B)/s (write|read|total))", label)
    if bw:
        unit = bw.group(1) or bw.group(2)
        factor = MIB if unit == "MiB" else 1_000_000
        direction = _direction_of(label, name)
        if label.endswith("total") or not direction:
            phase.extra[label] = [first, last]
            return
        phase.put(f"{direction}_bw", "first", first * factor)
        phase.put(f"{direction}_bw", "value", last * factor)
        return
    entries = re.fullmatch(r"(Dirs|Files|Entries|Objects)/s(?: (write|read|total))?", label)
    if entries:
        kind, suffix = entries.group(1), entries.group(2)
        metric = _ENTRY_METRIC.get(name)
        if suffix == "read":
            metric = "file_read"
        elif suffix == "total":
            metric = None
        # "Dirs/s" inside a file phase is a derived per-directory rate (--dirstats).
        if kind == "Dirs" and name not in ("MKDIRS", "RMDIRS"):
            metric = None
        if metric:
            phase.put(metric, "first", first)
            phase.put(metric, "value", last)
        else:
            phase.extra[label] = [first, last]
        return
    if label == "CPU util %":
        phase.put("cpu_util", "first", first)
        phase.put("cpu_util", "value", last)
        return
    if label in ("Total MiB", "MiB write", "MiB read"):
        phase.extra[label.replace("MiB", "bytes").strip()] = [first * MIB, last * MIB]
        return
    phase.extra[label] = [first, last]


def _sweep_dataset(path: str) -> dict[str, Any]:
    """mtelbencho data set directory '…/1024x1GiB' -> file count and size per file."""
    m = re.search(r"(\d+)x(\d+(?:\.\d+)?[KMGTP]i?B?)$", path.rstrip("/"))
    if not m:
        return {}
    info: dict[str, Any] = {"dataset": m.group(0), "file_count": int(m.group(1))}
    size = _size(m.group(2))
    if size is not None:
        info["file_size"] = size
    return info


def _parse_text(lines: list[str]) -> tuple[list[_Block], dict[str, Any]]:
    blocks: list[_Block] = []
    block: _Block | None = None
    phase: _Phase | None = None
    sweep: dict[str, str] = {}
    header_line: int | None = None
    notes: list[str] = []

    def new_block(number: int) -> _Block:
        nonlocal block, phase
        block = _Block(line=number)
        blocks.append(block)
        phase = None
        return block

    for number, raw in enumerate(lines, 1):
        line = raw.rstrip()
        stripped = line.strip()
        if not stripped:
            continue
        if stripped.startswith("ISO DATE:"):
            new_block(number).extra["iso_date"] = stripped.split(":", 1)[1].strip()
            continue
        if stripped.startswith("LABEL:"):
            target = block or new_block(number)
            target.params["label"] = stripped.split(":", 1)[1].strip()
            continue
        if stripped.startswith("COMMAND LINE:"):
            target = block or new_block(number)
            target.command = stripped.split(":", 1)[1].strip()
            continue
        m = _WORKING_RE.match(stripped)
        if m:
            b = new_block(number)
            b.params["threads"] = int(m.group("threads"))
            b.extra["path"] = m.group("path")
            b.extra.update(_sweep_dataset(m.group("path")))
            continue
        if stripped.startswith("OPERATION") and "RESULT TYPE" in stripped:
            header_line = header_line or number
            if block is None:
                new_block(number)
            phase = None
            continue
        if stripped.startswith("=====") or stripped.startswith("===>"):
            continue
        if stripped == "---":
            phase = None  # elbencho ends every phase block with this separator
            continue
        m = _ROW_RE.match(line)
        if m and _ROW_LABELS.match(m.group("label")):
            if block is None:
                new_block(number)
            phase = _Phase(m.group("phase"), number)
            block.phases.append(phase)
            _apply_row(phase, m.group("label"), m.group("rest"), number)
            continue
        m = _CONT_RE.match(line)
        if m and phase is not None and _ROW_LABELS.match(m.group("label")):
            _apply_row(phase, m.group("label"), m.group("rest"), number)
            continue
        if not blocks:
            m = _SWEEP_HDR_RE.match(stripped)
            if m:
                sweep[m.group("key")] = m.group("value").strip()
                continue
        if stripped.startswith(("NOTE:", "WARNING:", "ERROR:")) and stripped not in notes:
            notes.append(stripped)
    info = {"sweep": sweep, "header_line": header_line, "notes": notes}
    return blocks, info


# --- CSV (--csvfile) ---------------------------------------------------------------------


def _csv_rows(lines: list[str]) -> tuple[list[str], list[tuple[int, list[str], str]]]:
    header: list[str] = []
    rows: list[tuple[int, list[str], str]] = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            cells = next(csv.reader([line]))
        except (csv.Error, StopIteration):
            continue
        lowered = [c.strip().lower() for c in cells]
        if "operation" in lowered or "phase" in lowered:
            header = lowered
            continue
        if header:
            rows.append((number, cells, line))
    return header, rows


def _cell(row: dict[str, str], *names: str) -> float | None:
    for name in names:
        value = row.get(name, "").strip()
        if value:
            try:
                return float(value)
            except ValueError:
                return None
    return None


def _parse_csv(lines: list[str]) -> list[_Block]:
    header, rows = _csv_rows(lines)
    if not header:
        raise ParseError("no elbencho CSV header with an 'operation' column", tool=TOOL)
    if not rows:
        raise ParseError("elbencho CSV has a header but no result rows", line=1, tool=TOOL)
    blocks: list[_Block] = []
    for number, cells, raw in rows:
        row = dict(zip(header, cells, strict=False))
        command = row.get("command", "").strip() or None
        version = row.get("version", "").strip() or None
        if command and version and f",{version}," in raw:
            # The command column holds quotes the CSV module half-swallows; keep it verbatim.
            command = raw.rsplit(f",{version},", 1)[1].strip() or command
        label = row.get("label", "").strip()
        key = (command, label)
        if not blocks or blocks[-1].extra.get("key") != key:
            block = _Block(line=number, command=command, version=version)
            block.extra["key"] = key
            if row.get("iso date"):
                block.extra["iso_date"] = row["iso date"].strip()
            block.params.update(_csv_params(row))
            blocks.append(block)
        block = blocks[-1]
        name = row.get("operation", "").strip().upper() or "?"
        phase = _Phase(name, number)
        block.phases.append(phase)
        _csv_phase(phase, row)
    for b in blocks:
        b.extra.pop("key", None)
    return blocks


def _csv_params(row: dict[str, str]) -> dict[str, Any]:
    params: dict[str, Any] = {}
    hosts = parse_int(row.get("hosts")) or 1
    threads = parse_int(row.get("threads"))
    params["nodes"] = hosts
    if threads is not None:
        params["threads"] = threads * hosts
        params["tasks_per_node"] = threads
    file_size = parse_int(row.get("file size"))
    if file_size is not None:
        params["block_size"] = file_size
        params["file_size"] = file_size
    block_size = parse_int(row.get("block size"))
    if block_size is not None:
        params["transfer_size"] = block_size
    direct = row.get("direct io", "").strip()
    if direct in ("0", "1"):
        params["direct"] = direct == "1"
    random = row.get("random", "").strip()
    if random in ("0", "1"):
        params["pattern"] = "rand" if random == "1" else "seq"
    depth = parse_int(row.get("io depth"))
    if depth is not None:
        params["iodepth"] = depth
    for key in ("dirs", "files"):
        value = parse_int(row.get(key))
        if value is not None:
            params[key] = value
    if row.get("label", "").strip():
        params["label"] = row["label"].strip()
    if row.get("path type", "").strip():
        params["path_type"] = row["path type"].strip()
    return params


def _csv_phase(phase: _Phase, row: dict[str, str]) -> None:
    name = phase.name
    direction = _IO_DIRECTION.get(name)
    pairs: list[tuple[str | None, str]] = [
        ("elapsed", "time ms"),
        (_ENTRY_METRIC.get(name), "entries/s"),
        (f"{direction}_iops" if direction else None, "iops"),
        (f"{direction}_bw" if direction else None, "mib/s"),
        ("cpu_util", "cpu%"),
    ]
    if direction == "write":  # rwmix: reads mixed into the write phase
        pairs += [
            ("file_read", "rwmix read entries/s"),
            ("read_iops", "rwmix read iops"),
            ("read_bw", "rwmix read mib/s"),
        ]
    for metric, column in pairs:
        for stat, suffix in (("first", "[first]"), ("value", "[last]")):
            value = _cell(row, f"{column} {suffix}")
            if value is None:
                continue
            if metric is None:
                phase.extra[f"{column} {suffix}"] = value
                continue
            if column == "time ms":
                value /= 1000.0
            elif column.endswith("mib/s"):
                value *= MIB
            phase.put(metric, stat, value)
    for prefix, target in (("io", direction), ("rwmix read io", "read" if direction else None)):
        for stat, suffix in (("min", "[min]"), ("mean", "[avg]"), ("max", "[max]")):
            value = _cell(row, f"{prefix} lat us {suffix}")
            if value is None:
                continue
            if target:
                phase.put(f"{target}_lat", stat, value * 1e-6)
            else:
                phase.extra[f"{prefix} lat us {suffix}"] = value
    for column in ("ent lat us [min]", "ent lat us [avg]", "ent lat us [max]", "mib [last]"):
        value = _cell(row, column)
        if value is not None:
            phase.extra[column] = value


# --- live CSV (--livecsv, --livecsvex) ---------------------------------------------------


def _parse_live_csv(lines: list[str]) -> list[_Block]:
    header, rows = _csv_rows(lines)
    if not header or "runtimems" not in header:
        raise ParseError("no elbencho live CSV header with a 'RuntimeMS' column", tool=TOOL)
    if not rows:
        raise ParseError("elbencho live CSV has a header but no rows", line=1, tool=TOOL)
    block = _Block(line=rows[0][0])
    segments: list[dict[str, Any]] = []
    services: set[str] = set()
    for number, cells, _raw in rows:
        row = dict(zip(header, cells, strict=False))
        phase_name = row.get("phase", "").strip().upper()
        runtime = _cell(row, "runtimems")
        if not phase_name or runtime is None:
            continue
        rank = row.get("rank", "").strip()
        current = segments[-1] if segments else None
        if (
            current is None
            or current["phase"] != phase_name
            or (rank.lower() == "total" and runtime < current["runtime"])
        ):
            current = {"phase": phase_name, "line": number, "total": [], "services": []}
            segments.append(current)
        current["runtime"] = runtime
        entry = {
            "runtime_s": runtime / 1000.0,
            "done_percent": _cell(row, "done%"),
            "done_bytes": _cell(row, "donebytes"),
            "mib_s": _cell(row, "mib/s"),
            "iops": _cell(row, "iops"),
            "entries": _cell(row, "entries"),
            "entries_s": _cell(row, "entries/s"),
            "lat_io_us": _cell(row, "lat io us"),
            "lat_entry_us": _cell(row, "lat ent us"),
            "active": _cell(row, "active"),
            "cpu": _cell(row, "cpu"),
        }
        mix = row.get("mixtype", "").strip()
        if mix:
            entry["mix"] = mix
        entry = {k: v for k, v in entry.items() if v is not None}
        if rank.lower() == "total":
            current["total"].append(entry)
        else:
            entry["rank"] = rank
            service = row.get("service", "").strip()
            if service:
                entry["service"] = service
                services.add(service)
            current["services"].append(entry)
        if row.get("label", "").strip():
            block.params["label"] = row["label"].strip()
    for seg in segments:
        phase = _Phase(seg["phase"], seg["line"])
        phase.extra["live_series"] = seg["total"]
        if seg["services"]:
            phase.extra["live_services"] = seg["services"]
        totals = [t for t in seg["total"] if "read" not in str(t.get("mix", "")).lower()]
        reads = [t for t in seg["total"] if "read" in str(t.get("mix", "")).lower()]
        direction = _IO_DIRECTION.get(phase.name)
        # The live CSV has no final summary: the last Total row of a phase is its result.
        for rows_, dir_ in ((totals, direction), (reads, "read" if direction else None)):
            if not rows_:
                continue
            last = rows_[-1]
            if rows_ is totals:
                phase.put("elapsed", "value", last["runtime_s"])
                if "cpu" in last:
                    phase.put("cpu_util", "value", last["cpu"])
                metric = _ENTRY_METRIC.get(phase.name)
                if metric and last.get("entries_s"):
                    phase.put(metric, "value", last["entries_s"])
            if dir_:
                if "mib_s" in last:
                    phase.put(f"{dir_}_bw", "value", last["mib_s"] * MIB)
                if "iops" in last:
                    phase.put(f"{dir_}_iops", "value", last["iops"])
                if last.get("lat_io_us"):
                    phase.put(f"{dir_}_lat", "mean", last["lat_io_us"] * 1e-6)
        if not phase.values:
            continue
        block.phases.append(phase)
    if services:
        block.params["nodes"] = len(services)
        block.extra["services"] = sorted(services)
    if not block.phases:
        raise ParseError("elbencho live CSV holds no 'Total' row", line=rows[0][0], tool=TOOL)
    return [block]


# --- building results --------------------------------------------------------------------


def _emit(result: ParseResult, block: _Block, extra: dict[str, Any]) -> list[dict[str, Any]]:
    """Metrics of one block into ``result``; returns the phase summaries for extra."""
    counts: dict[str, int] = {}
    for phase in block.phases:
        counts[phase.name] = counts.get(phase.name, 0) + 1
    seen: dict[str, int] = {}
    summaries = []
    for phase in block.phases:
        index = seen.get(phase.name, 0)
        seen[phase.name] = index + 1
        summary: dict[str, Any] = {"phase": phase.name, "line": phase.line}
        summary.update({k: v for k, v in phase.values.items()})
        if phase.extra:
            summary["extra"] = phase.extra
        summaries.append(summary)
        if phase.name in _HOUSEKEEPING:
            continue
        # A phase printed several times in one run comes from elbencho --iterations.
        iteration = index if counts[phase.name] > 1 else None
        for metric, stats in phase.values.items():
            for stat, value in stats.items():
                result.add(metric, value, stat=stat, iteration=iteration, phase=phase.name, **extra)
    return summaries


def _merge_params(blocks: list[_Block]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    per_block = [dict(b.params) for b in blocks]
    common: dict[str, Any] = {}
    keys = set().union(*(p.keys() for p in per_block)) if per_block else set()
    for key in sorted(keys):
        values = [p.get(key) for p in per_block]
        if values[0] is not None and all(v == values[0] for v in values):
            common[key] = values[0]
    return common, per_block


def _finish_block(block: _Block, sweep: dict[str, str], command: str | None) -> None:
    """Fill a block's parameters from its command line and the sweep header."""
    cmd = command or block.command
    if cmd:
        block.command = cmd
        from_cmd = _params_from_command(cmd)
        for key, value in from_cmd.items():
            block.params.setdefault(key, value)
    if sweep:
        if "threads" not in block.params and parse_int(sweep.get("threads")):
            block.params["threads"] = parse_int(sweep["threads"])
        if sweep.get("block_size"):
            size = _size(sweep["block_size"])
            if size is not None:
                block.params.setdefault("transfer_size", size)
        if "file_size" in block.extra:
            block.params.setdefault("file_size", block.extra["file_size"])
            block.params.setdefault("block_size", block.extra["file_size"])


def _blocks(text: str, command: str | None) -> tuple[list[_Block], dict[str, Any], str]:
    lines = split_lines(text)
    first = next((line for line in lines if line.strip()), "")
    lowered = first.lower()
    if "runtimems" in lowered and "phase" in lowered:
        return _parse_live_csv(lines), {}, "livecsv"
    if "operation" in lowered and "," in lowered and ("[last]" in lowered or "label" in lowered):
        blocks = _parse_csv(lines)
        for b in blocks:
            _finish_block(b, {}, command)
        return blocks, {}, "csv"
    blocks, info = _parse_text(lines)
    blocks = [b for b in blocks if b.phases]
    if not blocks:
        if info["header_line"]:
            raise ParseError(
                "elbencho result table header has no phase rows (truncated output?)",
                line=info["header_line"],
                tool=TOOL,
            )
        raise ParseError(
            "no elbencho result found (expected 'OPERATION RESULT TYPE' table rows such as "
            "'WRITE  Elapsed time : …', a --csvfile or a --livecsv file)",
            tool=TOOL,
        )
    for b in blocks:
        _finish_block(b, info["sweep"], command)
    fmt = "sweep" if info["sweep"] else ("resfile" if blocks[0].extra.get("iso_date") else "text")
    return blocks, info, fmt


def _options_command(options: dict[str, Any]) -> str | None:
    command = options.get("command")
    if isinstance(command, (list, tuple)):
        return shlex.join(str(c) for c in command)
    return command


def _parse_many(text: str, **options: Any) -> list[ParseResult]:
    """Body of ``parse_many`` (``guard_parse`` has refused empty output)."""
    blocks, info, fmt = _blocks(text, _options_command(options))
    results = []
    for block in blocks:
        result = ParseResult(tool=TOOL, tool_version=block.version, command=block.command)
        phases = _emit(result, block, {})
        if not result.metrics:
            continue
        result.params = dict(block.params)
        result.extra["format"] = fmt
        result.extra["phases"] = phases
        result.extra.update({k: v for k, v in block.extra.items()})
        if info.get("notes"):
            result.extra["notes"] = info["notes"]
        results.append(result.validate())
    if not results:
        raise ParseError(
            "elbencho output holds only housekeeping phases (DROPCACHE/SYNC)", tool=TOOL
        )
    return results


def _parse(text: str, **options: Any) -> ParseResult:
    """Body of ``parse`` (``guard_parse`` has refused empty output)."""
    blocks, info, fmt = _blocks(text, _options_command(options))
    several = len(blocks) > 1
    first = blocks[0]
    result = ParseResult(tool=TOOL, tool_version=first.version, command=first.command)
    block_info = []
    for index, block in enumerate(blocks):
        phases = _emit(result, block, {"block": index} if several else {})
        entry = {"block": index, "line": block.line, "params": block.params, "phases": phases}
        entry.update(block.extra)
        if block.command:
            entry["command"] = block.command
        block_info.append(entry)
    if several:
        result.params, _ = _merge_params(blocks)
        commands = {b.command for b in blocks}
        if len(commands) > 1:
            result.command = None
        result.extra["blocks"] = block_info
    else:
        result.params = dict(first.params)
        result.extra["phases"] = block_info[0]["phases"]
        result.extra.update(first.extra)
    result.extra["format"] = fmt
    if info.get("sweep"):
        result.extra["sweep_header"] = info["sweep"]
    if info.get("notes"):
        result.extra["notes"] = info["notes"]
    if not result.metrics:
        raise ParseError(
            "elbencho output holds only housekeeping phases (DROPCACHE/SYNC)", tool=TOOL
        )
    return result.validate()


def parse_many(text: str, **options: Any) -> list[ParseResult]:
    """One ParseResult per elbencho invocation (resfile entry, sweep step, CSV run)."""
    return guard_parse(TOOL, partial(_parse_many, **options), text)


def _part_label(result: ParseResult, index: int) -> str:
    """A part's name: the sweep step's data set ("1024x1GiB"), else the run's --label."""
    label = result.extra.get("dataset") or result.params.get("label")
    if not label:
        return f"run {index + 1}"
    label = str(label)
    return label if len(label) <= 100 else label[:99] + "…"


def _parse_parts(text: str, **options: Any) -> list[ParseResult]:
    results = _parse_many(text, **options)
    labels = [_part_label(result, index) for index, result in enumerate(results)]
    return number_parts(number_runs(results), "run", labels)


def parse_parts(text: str, **options: Any) -> list[ParseResult]:
    """One result per independent measurement: each elbencho run of an output (a step of
    an mtelbencho sweep, an entry of an appended --resfile, a CSV result row), with its own
    parameters (file size, threads, block size, …). Output of one run is one result."""
    return guard_parse(TOOL, partial(_parse_parts, **options), text)


def parse(text: str, **options: Any) -> ParseResult:
    """Parse elbencho output. Options: ``command`` (elbencho argv, for the parameters).

    Metrics carry ``extra={"phase": …}``; "LAST DONE" is stat "value" and "FIRST DONE" stat
    "first". Files holding several runs (sweeps, appended resfiles) add ``"block": i``;
    ``parse_many`` returns them as separate results.
    """
    return guard_parse(TOOL, partial(_parse, **options), text)
