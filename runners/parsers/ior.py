"""IOR output parser: text 3.0-4.x (incl. -vv), summaryFormat=CSV/JSON and multi-run logs."""

from __future__ import annotations

import json
import math
import re
import shlex
from dataclasses import dataclass, field
from typing import Any

from runners.parsers.base import (
    KIB,
    MIB,
    ParseError,
    ParseResult,
    bw_to_bytes,
    chunk_runs,
    command_label,
    mean,
    number_parts,
    number_runs,
    parse_size,
    pick_run,
    split_lines,
    to_float,
    to_int,
)

TOOL = "ior"

_BANNER_RE = re.compile(
    r"^\s*IOR-(?P<version>\d+(?:\.\d+)*[^\s:]*):\s+MPI Coordinated Test of Parallel I/O"
)
_MAX_RE = re.compile(r"^\s*Max (?P<op>Write|Read):\s+(?P<mib>[\d.]+)\s+MiB/sec")
_KV_RE = re.compile(r"^(?P<key>[A-Za-z][\w /#().-]*?)\s*:(?:\s+(?P<val>.*?))?\s*$")
# IOR 3.0 prints its "Summary:" block as tab-indented "key = value" lines.
_TAB_KV_RE = re.compile(r"^\t(?P<key>[A-Za-z][^=]*?)\s*=\s*(?P<val>.*?)\s*$")
_TEST_STARTED_RE = re.compile(r"^\s*Test (?P<id>\d+) started:")
_TASK_HOST_RE = re.compile(r"^\s*task \d+ on (?P<host>\S+)\s*$")
_WARNING_RE = re.compile(r"^\s*(?:ior )?(?:WARNING|ERROR)\b.*", re.IGNORECASE)
_OPS = ("write", "read")

# Results-table column (normalised) -> field name used below.
_RESULT_COLUMNS = {
    "access": "access",
    "bw(mib/s)": "bw",
    "iops": "iops",
    "latency(s)": "lat",
    "latency": "lat",
    "block(kib)": "block_kib",
    "xfer(kib)": "xfer_kib",
    "open(s)": "open",
    "wr/rd(s)": "wrrd",
    "close(s)": "close",
    "total(s)": "total",
    "iter": "iter",
    "numtasks": "tasks",  # IOR 4.x summaryFormat=CSV
}
# "Summary of all tests" column (normalised) -> field name; "stddev" is resolved by position.
_SUMMARY_COLUMNS = {
    "operation": "op",
    "max(mib)": "bw_max",
    "min(mib)": "bw_min",
    "mean(mib)": "bw_mean",
    "max(ops)": "ops_max",
    "min(ops)": "ops_min",
    "mean(ops)": "ops_mean",
    "mean(s)": "mean_time",
    "test#": "test",
    "#tasks": "tasks",
    "tpn": "tpn",
    "reps": "reps",
    "fpp": "fpp",
    "segcnt": "segcnt",
    "blksiz": "blksiz",
    "xsize": "xsize",
    "aggsize": "agg_bytes",
    "aggs(mib)": "agg_mib",
    "api": "api",
}
_STATS = (("max", "max"), ("min", "min"), ("mean", "mean"), ("std", "stddev"))


# --- small conversions that never raise ------------------------------------------------


def _scaled(value: float | None, factor: int) -> int | None:
    """``value * factor`` rounded to whole bytes; None when absent or out of range."""
    if value is None or not math.isfinite(value * factor):
        return None
    return int(round(value * factor))


def _size(text: str) -> int | None:
    """'1 MiB', '65536 bytes', '3.12 GiB' -> bytes; None when unreadable."""
    text = text.strip()
    match = re.match(r"^([\d.]+)\s*bytes?$", text, re.IGNORECASE)
    if match:
        return to_int(match.group(1))
    try:
        return parse_size(text)
    except (ParseError, ValueError, OverflowError):
        return None


def _normalise_header(line: str) -> str:
    # IOR 2.x printed "Max (MiB)" and "Std Dev"; glue them so that columns split on spaces.
    line = re.sub(r"\s+\(", "(", line)
    return re.sub(r"Std Dev", "StdDev", line)


# --- one run -----------------------------------------------------------------------------


@dataclass
class _Run:
    """What one IOR invocation printed, gathered before it becomes a ParseResult."""

    first_line: int
    version: str | None = None
    banner_line: int | None = None
    command: str | None = None
    params: dict[str, Any] = field(default_factory=dict)
    exact: dict[str, Any] = field(default_factory=dict)  # from the summary table: exact bytes
    extra: dict[str, Any] = field(default_factory=dict)
    rows: list[tuple[int, str, int | None, dict[str, float | None]]] = field(default_factory=list)
    summary: list[tuple[int, str, dict[str, Any]]] = field(default_factory=list)
    max_lines: dict[str, float] = field(default_factory=dict)
    removes: list[dict[str, Any]] = field(default_factory=list)
    tests: set[int] = field(default_factory=set)
    current_test: int = 0
    hosts: set[str] = field(default_factory=set)
    warnings: list[str] = field(default_factory=list)
    results_header_line: int | None = None
    summary_header_line: int | None = None
    finished: bool = False
    csv: bool = False

    @property
    def complete(self) -> bool:
        # summaryFormat=CSV prints only the per-iteration rows, so those make a whole run; so
        # do rows for every repetition (IOR run through its library, as io500 does, prints no
        # summary and no "Finished" line).
        return bool(
            self.summary
            or self.max_lines
            or (self.finished or self.csv or self.every_iteration)
            and self.rows
        )

    @property
    def every_iteration(self) -> bool:
        """Rows of every repetition the Options block announced, for each operation."""
        reps = self.params.get("iterations")
        if not reps or not self.rows:
            return False
        seen: dict[tuple[int, str], set[int | None]] = {}
        for test, op, iteration, _ in self.rows:
            seen.setdefault((test, op), set()).add(iteration)
        return all(len(iterations) >= reps for iterations in seen.values())

    @property
    def has_results(self) -> bool:
        return bool(self.rows or self.summary or self.max_lines)


def _apply_option(run: _Run, key: str, val: str) -> None:
    """Map one 'key : value' (or 3.0 'key = value') line to params/extra."""
    key = " ".join(key.lower().split())
    val = val.strip()
    params = run.params
    if key in ("command line used", "command line"):
        if val and run.command is None:
            run.command = val
    elif key == "api":
        if val:
            params["api"] = val.split()[0]
    elif key == "apiversion":
        if val:
            run.extra["api_version"] = val
    elif key == "test filename":
        run.extra["test_file"] = val
    elif key == "access":
        params["file_per_process"] = val.startswith("file-per-process")
        if "collective" in val:
            params["collective"] = True
    elif key == "type":
        params["collective"] = val == "collective"
    elif key == "segments":
        if to_int(val) is not None:
            params["segments"] = to_int(val)
    elif key == "pattern":  # 3.0: "strided (16 segments)" / "segmented (1 segment)"
        match = re.search(r"\((\d+) segments?\)", val)
        if match:
            params["segments"] = int(match.group(1))
    elif key == "ordering in a file":
        params["pattern"] = "rand" if "random" in val else "seq"
    elif key == "nodes":
        if to_int(val) is not None:
            params["nodes"] = to_int(val)
    elif key in ("tasks", "participating tasks"):
        if to_int(val) is not None:
            params["threads"] = to_int(val)
    elif key == "clients per node":
        if to_int(val) is not None:
            params["tasks_per_node"] = to_int(val)
    elif key == "clients":  # 3.0: "96 (12 per node)"
        match = re.match(r"(\d+)\s*\((\d+) per node\)", val)
        if match:
            params["threads"] = int(match.group(1))
            params["tasks_per_node"] = int(match.group(2))
    elif key == "repetitions":
        if to_int(val) is not None:
            params["iterations"] = to_int(val)
    elif key == "xfersize":
        if _size(val) is not None:
            params["transfer_size"] = _size(val)
    elif key == "blocksize":
        if _size(val) is not None:
            params["block_size"] = _size(val)
    elif key == "aggregate filesize":
        if _size(val) is not None:
            params["aggregate_size"] = _size(val)
    elif key in ("testid", "test id"):
        test = to_int(val)
        if test is not None:
            run.current_test = test
            run.tests.add(test)
    elif key == "began":
        run.extra["began"] = val
    elif key == "finished":
        run.extra["finished"] = val
        run.finished = True
    elif key == "machine":
        run.extra["machine"] = val
    elif key == "path":
        run.extra.setdefault("path", val)
    elif key in ("stonewallingtime", "using stonewalling"):
        run.extra["stonewalling"] = val


def _columns(tokens: list[str], mapping: dict[str, str]) -> list[str | None]:
    """Header tokens -> field names; the two 'StdDev' columns follow their Mean column."""
    names: list[str | None] = []
    previous = None
    for token in tokens:
        canon = token.strip().lower().replace(" ", "")
        if canon == "stddev":
            names.append("ops_std" if previous == "ops_mean" else "bw_std")
        else:
            names.append(mapping.get(canon))
        previous = names[-1]
    return names


def _parse_text_run(lines: list[str], first_line: int) -> _Run:
    """Read one IOR run (text or CSV rows); line numbers are 1-based in the whole file."""
    run = _Run(first_line=first_line)
    table: tuple[str, list[str | None], str | None] | None = None
    occurrences: dict[tuple[int, str], int] = {}
    for offset, raw in enumerate(lines):
        lineno = first_line + offset
        line = raw.rstrip()
        stripped = line.strip()
        if not stripped:
            continue

        banner = _BANNER_RE.match(line)
        if banner:
            run.version = banner.group("version")
            run.banner_line = lineno
            continue

        maxline = _MAX_RE.match(line)
        if maxline:
            value = to_float(maxline.group("mib"))
            if value is not None:
                run.max_lines[maxline.group("op").lower()] = bw_to_bytes(value, "MiB/s")
            continue

        # Table headers: whitespace-aligned text, or comma-separated with summaryFormat=CSV.
        delim = "," if stripped.lower().startswith(("access,", "operation,")) else None
        header = _normalise_header(stripped) if delim is None else stripped
        tokens = [t.strip() for t in header.split(delim)]
        first = tokens[0].lower()
        lowered = [t.lower() for t in tokens]
        if first == "access" and "bw(mib/s)" in lowered:
            table = ("results", _columns(tokens, _RESULT_COLUMNS), delim)
            run.results_header_line = lineno
            run.csv = delim == ","
            continue
        if first == "operation" and "max(mib)" in lowered:
            table = ("summary", _columns(tokens, _SUMMARY_COLUMNS), delim)
            run.summary_header_line = lineno
            continue

        cells = [t.strip() for t in stripped.split(table[2])] if table is not None else []
        if table is not None and cells[0].lower() in ("write", "read", "remove"):
            kind, names, _ = table
            if len(cells) != len(names):
                # A row cut short (truncated log) or a format we do not know: keep going.
                continue
            row = {name: cell for name, cell in zip(names, cells, strict=True) if name}
            op = cells[0].lower()
            if kind == "results":
                values = {k: to_float(v) for k, v in row.items() if k != "access"}
                iteration = to_int(row.get("iter"))
                if iteration is None:
                    # CSV/JSON without an iter column: count the rows of this access type.
                    key = (run.current_test, op)
                    iteration = occurrences.get(key, 0)
                    occurrences[key] = iteration + 1
                if op == "remove":
                    if values.get("total") is not None:
                        run.removes.append({"iteration": iteration, "seconds": values["total"]})
                elif values.get("bw") is not None:
                    run.rows.append((run.current_test, op, iteration, values))
                    run.tests.add(run.current_test)
            elif kind == "summary" and op in _OPS:
                test = to_int(row.get("test"))
                run.summary.append((run.current_test if test is None else test, op, row))
            continue

        test_started = _TEST_STARTED_RE.match(line)
        if test_started:
            run.current_test = int(test_started.group("id"))
            run.tests.add(run.current_test)
            continue

        host = _TASK_HOST_RE.match(line)
        if host:
            run.hosts.add(host.group("host"))
            continue

        if _WARNING_RE.match(line):
            run.warnings.append(stripped)
            continue

        tab_kv = _TAB_KV_RE.match(raw)
        if tab_kv:
            _apply_option(run, tab_kv.group("key"), tab_kv.group("val"))
            continue

        kv = _KV_RE.match(stripped)
        if kv:
            _apply_option(run, kv.group("key"), kv.group("val") or "")
    return run


def _command_params(command: str) -> dict[str, Any]:
    """Parameters only the command line tells: O_DIRECT, -F, -i."""
    try:
        argv = shlex.split(command)
    except ValueError:
        argv = command.split()
    argv = [a.strip("'\"") for a in argv]
    found: dict[str, Any] = {}
    direct = False
    for i, arg in enumerate(argv):
        if arg in ("-B", "--posix.odirect") or re.search(r"useO_DIRECT\s*=\s*1", arg):
            direct = True
        elif arg == "-F":
            found["file_per_process"] = True
        elif arg == "-i" and i + 1 < len(argv) and to_int(argv[i + 1]) is not None:
            found["iterations"] = to_int(argv[i + 1])
    found["direct"] = direct
    return found


def _tests(run: _Run) -> list[int]:
    """The tests of an invocation (an ``-f`` script's RUN blocks) that printed results."""
    return sorted({t for t, _, _, _ in run.rows} | {t for t, _, _ in run.summary})


def _finish(run: _Run, test: int | None = None) -> ParseResult:
    """Turn a gathered run into a validated ParseResult; of one of its tests only, when
    ``test`` is given."""
    result = ParseResult(tool=TOOL, tool_version=run.version, command=run.command)
    params = dict(run.params)
    several_tests = test is None and len(run.tests | {t for t, _, _ in run.summary}) > 1

    def tag(test: int) -> dict[str, Any]:
        return {"test": test} if several_tests else {}

    rows = run.rows if test is None else [r for r in run.rows if r[0] == test]
    summary = run.summary if test is None else [r for r in run.summary if r[0] == test]
    for test_id, op, iteration, v in rows:
        extra = tag(test_id)
        result.add(f"{op}_bw", bw_to_bytes(v["bw"], "MiB/s"), iteration=iteration, **extra)
        if v.get("iops") is not None:
            result.add(f"{op}_iops", v["iops"], iteration=iteration, **extra)
        if v.get("lat") is not None:
            result.add(f"{op}_lat", v["lat"], iteration=iteration, **extra)
        if v.get("open") is not None:
            result.add(f"{op}_open_lat", v["open"], iteration=iteration, **extra)
        if v.get("close") is not None:
            result.add(f"{op}_close_lat", v["close"], iteration=iteration, **extra)
        if v.get("total") is not None:
            result.add(f"{op}_time", v["total"], iteration=iteration, **extra)
        if to_int(v.get("tasks")) is not None:
            params.setdefault("threads", to_int(v.get("tasks")))
        if _scaled(v.get("block_kib"), KIB) is not None:
            params.setdefault("block_size", _scaled(v.get("block_kib"), KIB))
        if _scaled(v.get("xfer_kib"), KIB) is not None:
            params.setdefault("transfer_size", _scaled(v.get("xfer_kib"), KIB))

    summarised: set[tuple[int, str]] = set()
    for test_id, op, row in summary:
        extra = tag(test_id)
        for prefix, metric, to_base in (
            ("bw", f"{op}_bw", lambda x: bw_to_bytes(x, "MiB/s")),
            ("ops", f"{op}_iops", lambda x: x),
        ):
            for short, stat in _STATS:
                value = to_float(row.get(f"{prefix}_{short}"))
                if value is not None:
                    result.add(metric, to_base(value), stat=stat, **extra)
                    if prefix == "bw":
                        summarised.add((test_id, op))
        mean_time = to_float(row.get("mean_time"))
        if mean_time is not None:
            result.add(f"{op}_time", mean_time, stat="mean", **extra)
        # The summary table holds exact sizes where the Options block rounds ("3.12 GiB").
        for column, name in (
            ("tasks", "threads"),
            ("tpn", "tasks_per_node"),
            ("reps", "iterations"),
            ("segcnt", "segments"),
            ("blksiz", "block_size"),
            ("xsize", "transfer_size"),
            ("agg_bytes", "aggregate_size"),
        ):
            value = to_int(row.get(column))
            if value is not None:
                params[name] = value
        agg_bytes = _scaled(to_float(row.get("agg_mib")), MIB)
        if agg_bytes is not None:
            params["aggregate_size"] = agg_bytes
        fpp = to_int(row.get("fpp"))
        if fpp is not None:
            params["file_per_process"] = bool(fpp)
        if row.get("api"):
            params.setdefault("api", row["api"])

    # Without a summary table, "Max Write/Read" is the tool's own maximum over iterations
    # (printed per test: the last test's, so not a value of one test of several).
    for op, value in (run.max_lines if test is None else {}).items():
        if not any(done == op for _, done in summarised):
            result.add(f"{op}_bw", value, stat="max")

    _rows_run_level(result, rows, summarised, set(run.max_lines), tag)

    if run.command:
        for name, value in _command_params(run.command).items():
            params.setdefault(name, value)
    if "nodes" not in params:
        # Older IOR prints no node count: tasks / tasks-per-node (rounded up, IOR places
        # the remainder on the last node), or the hosts listed by -vv.
        threads, tpn = params.get("threads"), params.get("tasks_per_node")
        if threads and tpn:
            params["nodes"] = -(-threads // tpn)
        elif run.hosts:
            params["nodes"] = len(run.hosts)

    result.params = params
    result.extra = dict(run.extra)
    if run.removes:
        result.extra["remove_time"] = run.removes
    if run.warnings:
        result.extra["warnings"] = run.warnings
    if run.hosts:
        result.extra["hosts"] = sorted(run.hosts)
    result.extra["complete"] = run.complete
    return result.validate()


# Per-iteration row field -> metric suffix, for the run-level values taken from the rows.
_ROW_METRICS = (
    ("bw", "bw"),
    ("iops", "iops"),
    ("lat", "lat"),
    ("open", "open_lat"),
    ("close", "close_lat"),
    ("total", "time"),
)


def _rows_run_level(
    result: ParseResult,
    rows: list[tuple[int, str, int | None, dict[str, float | None]]],
    summarised: set[tuple[int, str]],
    max_ops: set[str],
    tag: Any,
) -> None:
    """Run-level values of the operations whose rows have no summary row and no "Max" line:
    IOR run through its library (``ior_run``, as the io500 application runs it) prints
    neither, nor does ``-O summaryFormat=CSV``. One iteration's row is the run's value; of
    several, the mean of the rows (IOR's own summary "Mean" is that mean)."""
    groups: dict[tuple[int, str], list[dict[str, float | None]]] = {}
    for test_id, op, _, values in rows:
        if (test_id, op) in summarised or op in max_ops:
            continue
        groups.setdefault((test_id, op), []).append(values)
    for (test_id, op), group in groups.items():
        for field_name, suffix in _ROW_METRICS:
            found = [float(v[field_name] or 0) for v in group if v.get(field_name) is not None]
            if not found or len(found) != len(group):
                continue
            if field_name == "bw":
                found = [bw_to_bytes(x, "MiB/s") for x in found]
            if len(found) == 1:
                result.add(f"{op}_{suffix}", found[0], **tag(test_id))
            else:
                result.add(f"{op}_{suffix}", mean(found), stat="mean", **tag(test_id))


def _no_result_error(run: _Run, last_line: int) -> ParseError:
    if run.results_header_line is not None:
        return ParseError(
            f"results table header at line {run.results_header_line} is followed by no result "
            "rows (output truncated?)",
            line=run.results_header_line,
            tool=TOOL,
        )
    if run.summary_header_line is not None:
        return ParseError(
            f"'Summary of all tests' header at line {run.summary_header_line} has no write/read "
            "rows",
            line=run.summary_header_line,
            tool=TOOL,
        )
    if run.banner_line is not None:
        return ParseError(
            f"IOR banner at line {run.banner_line} but no results table, 'Max Write/Read' line "
            f"or summary up to line {last_line} (output truncated?)",
            line=run.banner_line,
            tool=TOOL,
        )
    return ParseError("no IOR results table, summary or banner found", tool=TOOL)


# --- JSON (-O summaryFormat=JSON) ----------------------------------------------------------


def _load_json(text: str) -> dict[str, Any]:
    start = text.find("{")
    body = text[start:]
    try:
        doc, _ = json.JSONDecoder().raw_decode(body)
    except json.JSONDecodeError as first_error:
        # Some IOR releases left a trailing comma before '}' / ']'; accept that, nothing more.
        lenient = re.sub(r",(\s*[}\]])", r"\1", body)
        try:
            doc, _ = json.JSONDecoder().raw_decode(lenient)
        except json.JSONDecodeError:
            line = text[:start].count("\n") + first_error.lineno
            raise ParseError(f"invalid IOR JSON: {first_error.msg}", line=line, tool=TOOL) from None
    except RecursionError:
        raise ParseError("IOR JSON nested too deeply", tool=TOOL) from None
    if not isinstance(doc, dict):
        raise ParseError("IOR JSON is not an object", line=1, tool=TOOL)
    return doc


def _json_run(text: str) -> _Run:
    """The run IOR's JSON output holds. The layout: Version, Command line, tests[{Options,
    Parameters, Results, max}], summary[{operation, bwMaxMIB, ..., OPsMax, ...}]
    (ior-output.c)."""
    doc = _load_json(text)
    run = _Run(first_line=1)
    version = doc.get("Version")
    run.version = str(version) if version is not None else None
    for key in ("Command line", "Began", "Machine", "Finished"):
        if isinstance(doc.get(key), str):
            _apply_option(run, key, doc[key])

    tests = doc.get("tests") if isinstance(doc.get("tests"), list) else []
    for test in tests:
        if not isinstance(test, dict):
            continue
        test_id = to_int(test.get("TestID"))
        run.current_test = test_id if test_id is not None else len(run.tests)
        run.tests.add(run.current_test)
        if isinstance(test.get("Finished"), str):
            _apply_option(run, "Finished", test["Finished"])
        options = test.get("Options")
        if isinstance(options, dict):
            for key, val in options.items():
                _apply_option(run, str(key), str(val))
        parameters = test.get("Parameters")
        if isinstance(parameters, dict):
            for key, name in (
                ("nodes", "nodes"),
                ("tasksPerNode", "tasks_per_node"),
                ("repetitions", "iterations"),
                ("transferSize", "transfer_size"),
                ("blockSize", "block_size"),
                ("segmentCount", "segments"),
            ):
                if to_int(parameters.get(key)) is not None:
                    run.params.setdefault(name, to_int(parameters[key]))
            for key, name in (
                ("filePerProc", "file_per_process"),
                ("useO_DIRECT", "direct"),
                ("collective", "collective"),
            ):
                if to_int(parameters.get(key)) is not None:
                    run.params.setdefault(name, bool(to_int(parameters[key])))
            if to_int(parameters.get("randomOffset")) is not None:
                run.params.setdefault(
                    "pattern", "rand" if to_int(parameters["randomOffset"]) else "seq"
                )
            if isinstance(parameters.get("api"), str) and parameters["api"]:
                run.params.setdefault("api", parameters["api"])
        results = test.get("Results") if isinstance(test.get("Results"), list) else []
        counts: dict[str, int] = {}
        for position, entry in enumerate(results):
            # One inner list per repetition; older builds printed a flat list of rows.
            group = entry if isinstance(entry, list) else [entry]
            for item in group:
                if not isinstance(item, dict):
                    continue
                op = str(item.get("access", "")).lower()
                iteration = to_int(item.get("iter"))
                if iteration is None:
                    iteration = position if isinstance(entry, list) else counts.get(op, 0)
                counts[op] = counts.get(op, 0) + 1
                if op == "remove":
                    seconds = to_float(item.get("totalTime"))
                    if seconds is not None:
                        run.removes.append({"iteration": iteration, "seconds": seconds})
                    continue
                if op not in _OPS or to_float(item.get("bwMiB")) is None:
                    continue
                values = {
                    "bw": to_float(item.get("bwMiB")),
                    "iops": to_float(item.get("iops")),
                    "lat": to_float(item.get("latency")),
                    "open": to_float(item.get("openTime")),
                    "close": to_float(item.get("closeTime")),
                    "total": to_float(item.get("totalTime")),
                    "block_kib": to_float(item.get("blockKiB")),
                    "xfer_kib": to_float(item.get("xferKiB")),
                }
                run.rows.append((run.current_test, op, iteration, values))
        maxima = test.get("max")
        if isinstance(maxima, dict):
            for op in _OPS:
                value = to_float(maxima.get(f"{op}MiB"))
                if value is not None:
                    run.max_lines[op] = bw_to_bytes(value, "MiB/s")

    summary = doc.get("summary") if isinstance(doc.get("summary"), list) else []
    for item in summary:
        if not isinstance(item, dict):
            continue
        op = str(item.get("operation", "")).lower()
        if op not in _OPS:
            continue
        row = {
            "bw_max": item.get("bwMaxMIB"),
            "bw_min": item.get("bwMinMIB"),
            "bw_mean": item.get("bwMeanMIB"),
            "bw_std": item.get("bwStdMIB"),
            "ops_max": item.get("OPsMax"),
            "ops_min": item.get("OPsMin"),
            "ops_mean": item.get("OPsMean"),
            "ops_std": item.get("OPsSD"),
            "mean_time": item.get("MeanTime"),
            "tasks": item.get("numTasks"),
            "tpn": item.get("tasksPerNode"),
            "reps": item.get("repetitions"),
            "fpp": item.get("filePerProc"),
            "segcnt": item.get("segmentCount"),
            "blksiz": item.get("blockSize"),
            "xsize": item.get("transferSize"),
            "agg_mib": item.get("xsizeMiB"),
            "api": item.get("API") if isinstance(item.get("API"), str) else None,
        }
        test = to_int(item.get("TestID"))
        run.summary.append((run.current_test if test is None else test, op, row))

    if not run.has_results:
        raise ParseError(
            "IOR JSON holds no Results rows, 'max' section or summary", line=1, tool=TOOL
        )
    run.extra["format"] = "json"
    return run


# --- public interface -------------------------------------------------------------------


def _is_json(text: str) -> bool:
    return text.lstrip().startswith("{")


def detect(text: str) -> float:
    """Confidence that ``text`` is IOR output."""
    if not text:
        return 0.0
    head = text[:200_000]
    if re.search(r"^\s*IOR-\d[^\s:]*:\s+MPI Coordinated Test of Parallel I/O", head, re.M):
        return 1.0
    if re.search(r"^access,bw\(MiB/s\)", head, re.M | re.I):
        return 0.95
    if _is_json(head) and ('"bwMaxMIB"' in head or '"bwMiB"' in head):
        return 0.9
    if "Summary of all tests:" in head and "Max(MiB)" in head:
        return 0.9
    if re.search(r"^\s*Max (Write|Read):\s+[\d.]+ MiB/sec", head, re.M):
        return 0.8
    if re.search(r"^access\s+bw\(MiB/s\)", head, re.M):
        return 0.8
    return 0.0


def _split_runs(lines: list[str]) -> list[tuple[int, list[str]]]:
    """(first line number, lines) per IOR invocation; each banner starts a run."""
    starts = [i for i, line in enumerate(lines) if _BANNER_RE.match(line)]
    return chunk_runs(lines, starts)


def _runs(text: str) -> list[_Run]:
    """The IOR invocations of ``text`` that printed results."""
    if not text or not text.strip():
        raise ParseError("the output is empty", tool=TOOL)
    if _is_json(text):
        return [_json_run(text)]
    lines = split_lines(text)
    runs = []
    first_error: ParseError | None = None
    for first_line, chunk in _split_runs(lines):
        run = _parse_text_run(chunk, first_line)
        if run.has_results:
            runs.append(run)
        elif first_error is None and (
            run.banner_line is not None or run.results_header_line or run.summary_header_line
        ):
            first_error = _no_result_error(run, first_line + len(chunk) - 1)
    if not runs:
        raise first_error or _no_result_error(_Run(first_line=1), len(lines))
    return runs


def parse_many(text: str) -> list[ParseResult]:
    """One ParseResult per IOR run found in ``text`` (logs may wrap several invocations)."""
    return number_runs([_finish(run) for run in _runs(text)])


def parse_parts(text: str) -> list[ParseResult]:
    """One result per independent measurement: each IOR invocation of a log, and each
    test (an ``-f`` script's RUN block) of an invocation that ran several."""
    runs = _runs(text)
    results: list[ParseResult] = []
    labels: list[str] = []
    for index, run in enumerate(runs):
        tests = _tests(run)
        if len(tests) > 1:
            for test in tests:
                results.append(_finish(run, test))
                labels.append(
                    f"{command_label(run.command, index)} test {test}"
                    if len(runs) > 1
                    else f"test {test}"
                )
        else:
            results.append(_finish(run))
            labels.append(command_label(run.command, index))
    if len(runs) == 1 and len(results) == 1:
        return number_runs(results)
    return number_parts(number_runs(results), "run" if len(runs) > 1 else "test", labels)


def parse(text: str, **options: Any) -> ParseResult:
    """The first complete IOR run in ``text`` (``run=N`` picks another one)."""
    results = parse_many(text)
    wanted = options.get("run")
    return pick_run(TOOL, results, wanted, to_int(wanted))
