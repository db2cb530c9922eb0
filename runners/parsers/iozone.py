"""IOzone output parser: auto-mode tables, throughput (-t), cluster (-+m) and Excel reports."""

# Choices (see ../shared/DESIGN.md for units: IOzone "kB"/"KB"/"kBytes/sec" are 1024 bytes):
#
# * Auto mode (-a): every table cell becomes one metric (``stat="value"``) with
#   ``extra={"file_size": bytes, "record_size": bytes}``. The run-level metric of each test (no
#   extra) is the maximum over its cells, stored as ``stat="max"``: a sweep has no single
#   "value", and the best cell is the figure people quote. The Excel report ("Writer report"
#   ...) repeats the table; it only fills cells the table lacks (or stands in for a lost table).
# * Throughput mode (-t): "Children see throughput" is ``stat="value"``, "Parent sees" is
#   ``stat="parent"``, "Min/Max/Avg throughput per process" are ``stat="min"/"max"/"mean"``
#   with ``extra={"per_process": True}``, and -C "Child[n] xfer count" lines are
#   ``stat="value"`` with ``extra={"per_process": True, "child": n, "xfer_bytes": bytes}``.
#   When one output holds several process counts (-l/-u), each metric carries
#   ``extra={"threads": n}`` and the run level is the maximum over them (``stat="max"``).
# * "Min xfer" goes to ``result.extra["min_xfer_bytes"][test]``; "CPU utilization" (-+u) is a
#   ``cpu_util`` metric with ``extra={"op": test}``.
# * -O (ops/sec) output is turned into B/s by multiplying with the record size, since each
#   IOzone operation moves one record.
# * Params: threads, file_size, record_size (bytes), ops (IOzone test names in output order),
#   direct, network_distribution (-+m; the client count itself is not printed, so "nodes" is
#   only set when the caller passes ``nodes=``). ``command`` and ``tool_version`` are the
#   ParseResult fields.

from __future__ import annotations

import re
import shlex
from typing import Any

from runners.parsers.base import KIB, ParseError, ParseResult, bw_to_bytes, guard_parse, split_lines

TOOL = "iozone"

# Auto-mode table columns as (word above, word below) -> metric name.
_AUTO_COLUMNS: dict[tuple[str, str], str] = {
    ("", "write"): "write_bw",
    ("", "rewrite"): "rewrite_bw",
    ("", "read"): "read_bw",
    ("", "reread"): "reread_bw",
    ("random", "read"): "randread_bw",
    ("random", "write"): "randwrite_bw",
    ("bkwd", "read"): "bkwdread_bw",
    ("record", "rewrite"): "recwrite_bw",
    ("stride", "read"): "strideread_bw",
    ("", "fwrite"): "fwrite_bw",
    ("", "frewrite"): "frewrite_bw",
    ("", "fread"): "fread_bw",
    ("", "freread"): "freread_bw",
    ("", "pwrite"): "pwrite_bw",
    ("", "pread"): "pread_bw",
}

# -i test number -> the metric names it produces, in the order IOzone prints its columns.
_TEST_NUMBERS: dict[str, tuple[str, ...]] = {
    "0": ("write_bw", "rewrite_bw"),
    "1": ("read_bw", "reread_bw"),
    "2": ("randread_bw", "randwrite_bw"),
    "3": ("bkwdread_bw",),
    "4": ("recwrite_bw",),
    "5": ("strideread_bw",),
    "6": ("fwrite_bw", "frewrite_bw"),
    "7": ("fread_bw", "freread_bw"),
    "9": ("pwrite_bw",),
    "10": ("pread_bw",),
}

# Throughput-mode test words ("Children see throughput for 4 <words>") -> metric name.
_THROUGHPUT_TESTS: dict[str, str] = {
    "initial writers": "write_bw",
    "rewriters": "rewrite_bw",
    "readers": "read_bw",
    "re-readers": "reread_bw",
    "reverse readers": "bkwdread_bw",
    "stride readers": "strideread_bw",
    "random readers": "randread_bw",
    "random writers": "randwrite_bw",
    "pwrite writers": "pwrite_bw",
    "pread readers": "pread_bw",
    "fwriters": "fwrite_bw",
    "re-fwriters": "frewrite_bw",
    "freaders": "fread_bw",
    "re-freaders": "freread_bw",
}

# Excel report titles, auto mode ('"Writer report"') and throughput mode ('"  Initial write "').
_EXCEL_AUTO: dict[str, str] = {
    "writer": "write_bw",
    "re-writer": "rewrite_bw",
    "reader": "read_bw",
    "re-reader": "reread_bw",
    "random read": "randread_bw",
    "random write": "randwrite_bw",
    "backward read": "bkwdread_bw",
    "record rewrite": "recwrite_bw",
    "stride read": "strideread_bw",
    "fwrite": "fwrite_bw",
    "re-fwrite": "frewrite_bw",
    "fread": "fread_bw",
    "re-fread": "freread_bw",
    "pwrite": "pwrite_bw",
    "pread": "pread_bw",
}
_EXCEL_THROUGHPUT: dict[str, str] = {
    "initial write": "write_bw",
    "rewrite": "rewrite_bw",
    "read": "read_bw",
    "re-read": "reread_bw",
    "reverse read": "bkwdread_bw",
    "stride read": "strideread_bw",
    "random read": "randread_bw",
    "random write": "randwrite_bw",
    "pwrite": "pwrite_bw",
    "pread": "pread_bw",
    "fwrite": "fwrite_bw",
    "fread": "fread_bw",
}

_BANNER_RE = re.compile(r"Iozone: Performance Test of File I/O", re.IGNORECASE)
_VERSION_RE = re.compile(r"Version \$Revision:\s*([\w.]+)\s*\$")
_COMMAND_RE = re.compile(r"^\s*Command line used:\s*(.+?)\s*$")
_RECORD_RE = re.compile(r"^\s*Record Size (\d+) ?(kB|KB|Kb|kb)\b")
_FILESIZE_RE = re.compile(r"^\s*File size set to (\d+) ?(kB|KB|Kb|kb)\b")
_PROCS_RE = re.compile(r"^\s*Throughput test with (\d+) process")
_EACH_RE = re.compile(
    r"^\s*Each (?:process|thread) writes a (\d+) ?[kK]Byte file in (\d+) ?[kK]Byte records"
)
_OUTPUT_RE = re.compile(r"^\s*Output is in (\S+)")
_MACHINE_RE = re.compile(r"^\s*Machine = (.+?)\s*$")
_BEGAN_RE = re.compile(r"^\s*Run began: (.+?)\s*$")
_NUM = r"(\d+(?:\.\d+)?)"
_CHILDREN_RE = re.compile(
    rf"^\s*Children see throughput for\s+(\d+)\s+(.+?)\s*=\s*{_NUM}\s*(\S+/sec)\s*$"
)
_PARENT_RE = re.compile(
    rf"^\s*Parent sees throughput for\s+(\d+)\s+(.+?)\s*=\s*{_NUM}\s*(\S+/sec)\s*$"
)
_PER_PROCESS_RE = re.compile(rf"^\s*(Min|Max|Avg) throughput per process\s*=\s*{_NUM}\s*(\S+/sec)")
_MIN_XFER_RE = re.compile(rf"^\s*Min xfer\s*=\s*{_NUM}\s*(\S+)\s*$")
_CHILD_RE = re.compile(
    rf"^\s*Child\[(\d+)\] xfer count\s*=\s*{_NUM}\s*(\S+?),\s*Throughput\s*=\s*{_NUM}\s*(\S+/sec)"
)
_CPU_RE = re.compile(
    rf"^\s*CPU [Uu]tili[sz]ation: Wall time\s+{_NUM}\s+CPU time\s+{_NUM}\s+"
    rf"CPU utili[sz]ation\s+{_NUM}\s*%"
)
_AUTO_HEADER_RE = re.compile(r"^\s*(kB|KB|Kb|kb)\s+reclen\b")
_AUTO_ROW_RE = re.compile(r"^\s*(\d+)\s+(\d+)((?:\s+\d+(?:\.\d+)?)+)\s*$")
_EXCEL_TITLE_RE = re.compile(r'^\s*"([A-Za-z -]+?) report"\s*$')
_EXCEL_COLS_RE = re.compile(r'^\s*(?:"\d+"\s*)+$')
_EXCEL_ROW_RE = re.compile(r'^\s*"(\d+)"((?:\s+\d+(?:\.\d+)?)+)\s*$')
_EXCEL_TP_TITLE_RE = re.compile(r'^\s*"Throughput report\b')
_EXCEL_TP_ROW_RE = re.compile(r'^\s*"\s*([A-Za-z -]+?)\s*"((?:\s+\d+(?:\.\d+)?)+)\s*$')
_WRAPPER_KV_RE = re.compile(r"^([A-Za-z][A-Za-z ]{0,30}):\s+(.+?)\s*$")


def detect(text: str) -> float:
    """Confidence that ``text`` is IOzone output."""
    if not text:
        return 0.0
    if _BANNER_RE.search(text):
        return 1.0
    if re.search(r"Children see throughput for\s+\d+", text):
        return 0.9
    if re.search(r"^\s*(kB|KB)\s+reclen\s+write", text, re.MULTILINE):
        return 0.85
    if re.search(r'^\s*"(Writer|Re-writer|Reader) report"', text, re.MULTILINE):
        return 0.7
    if re.search(r"\biozone\b", text, re.IGNORECASE):
        return 0.2
    return 0.0


def parse(text: str, **options: Any) -> ParseResult:
    """Parse IOzone text output into a validated ParseResult (ParseError otherwise)."""
    return guard_parse(TOOL, _parse, text, options)


def _iozone_size(text: str) -> int:
    """IOzone -s/-r argument: bare numbers are kB, k/m/g suffixes binary."""
    m = re.fullmatch(r"(\d+)([kKmMgG]?)[bB]?", text.strip())
    if not m:
        raise ParseError(f"not an IOzone size: {text!r}", tool=TOOL)
    power = {"": 1, "k": 1, "m": 2, "g": 3}[m.group(2).lower()]
    return int(m.group(1)) * KIB**power


def _command_options(command: str) -> dict[str, Any]:
    """What the command line says about threads, sizes, tests and O_DIRECT."""
    try:
        argv = shlex.split(command)
    except ValueError:
        argv = command.split()
    found: dict[str, Any] = {"tests": []}
    i = 0
    while i < len(argv):
        arg = argv[i]
        nxt = argv[i + 1] if i + 1 < len(argv) else None
        for flag, key in (("-s", "file_size"), ("-r", "record_size")):
            if arg == flag and nxt is not None:
                try:
                    found[key] = _iozone_size(nxt)
                except ParseError:
                    pass
            elif arg.startswith(flag) and len(arg) > 2 and arg[2:3].isdigit():
                try:
                    found[key] = _iozone_size(arg[2:])
                except ParseError:
                    pass
        if arg == "-t" and nxt is not None and nxt.isdigit():
            found["threads"] = int(nxt)
        elif arg.startswith("-t") and arg[2:].isdigit():
            found["threads"] = int(arg[2:])
        if arg == "-i" and nxt is not None and nxt.isdigit():
            found["tests"].append(nxt)
        elif arg.startswith("-i") and arg[2:].isdigit():
            found["tests"].append(arg[2:])
        if arg == "-I":
            found["direct"] = True
        if arg == "-+m":
            found["network_distribution"] = True
        i += 1
    return found


def _to_bps(value: float, unit: str, record_size: int | None, line_no: int) -> float:
    """IOzone throughput in its printed unit -> B/s."""
    if unit.lower().startswith("ops"):
        if not record_size:
            raise ParseError("ops/sec output without a known record size", line=line_no, tool=TOOL)
        return value * record_size
    return bw_to_bytes(value, unit, iozone=True)


def _header_columns(top: str, bottom: str) -> list[str | None]:
    """Metric names of the auto-table columns after "kB reclen" (None = unknown column).

    The words of the upper header line end in the same character column as the words below
    them, which tells "random read" from "read".
    """
    tops = {m.end(): m.group().lower() for m in re.finditer(r"\S+", top)}
    words = list(re.finditer(r"\S+", bottom))[2:]
    columns: list[str | None] = []
    for m in words:
        above = tops.get(m.end(), "")
        columns.append(_AUTO_COLUMNS.get((above, m.group().lower())))
    return columns


def _parse(text: str, options: dict[str, Any]) -> ParseResult:
    lines = split_lines(text)
    ends_cleanly = text.endswith(("\n", "\r"))
    last_index = len(lines) - 1
    while last_index > 0 and not lines[last_index].strip():
        last_index -= 1

    result = ParseResult(tool=TOOL)
    params: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    warnings: list[str] = []
    unit = "kB/sec"
    banner_line: int | None = None
    auto_mode = False
    direct = False
    wrapper: dict[str, Any] = {}

    # Throughput mode: (metric, threads) -> values, kept in order of appearance.
    current: tuple[str, int] | None = None
    tp_order: list[tuple[str, int]] = []
    tp: dict[tuple[str, int], dict[str, Any]] = {}
    cpu: list[tuple[str, float]] = []
    min_xfer: dict[str, float] = {}
    unmapped: dict[str, float] = {}

    # Auto mode: (metric, file kB, record kB) -> value in printed units.
    cells: dict[tuple[str, int, int], float] = {}
    cell_order: list[str] = []
    header_line: int | None = None
    columns: list[str | None] = []
    excel_cells: dict[tuple[str, int, int], float] = {}
    excel_title: str | None = None
    excel_cols: list[int] = []
    excel_tp: dict[str, float] = {}
    in_excel_tp = False

    first_banner = next((i for i, raw in enumerate(lines) if _BANNER_RE.search(raw)), None)
    for idx, raw in enumerate(lines):
        line_no = idx + 1
        line = raw.rstrip()
        stripped = line.strip()
        if not stripped:
            continue
        if banner_line is None and _BANNER_RE.search(line):
            banner_line = line_no
            continue
        if first_banner is not None and idx < first_banner:
            # Lines a wrapper script printed before IOzone started.
            kv = _WRAPPER_KV_RE.match(stripped)
            if kv:
                key = re.sub(r"\W+", "_", kv.group(1).strip().lower())
                wrapper[key] = kv.group(2)
            elif not set(stripped) <= set("=-"):
                wrapper.setdefault("lines", []).append(stripped)
            continue
        if m := _VERSION_RE.search(line):
            result.tool_version = m.group(1)
            continue
        if m := _COMMAND_RE.match(line):
            result.command = m.group(1)
            continue
        if "O_DIRECT feature enabled" in line:
            direct = True
            continue
        if stripped == "Auto Mode":
            auto_mode = True
            continue
        if "Network distribution mode enabled" in line:
            params["network_distribution"] = True
            continue
        if m := _RECORD_RE.match(line):
            params["record_size"] = int(m.group(1)) * KIB
            continue
        if m := _FILESIZE_RE.match(line):
            params["file_size"] = int(m.group(1)) * KIB
            continue
        if m := _PROCS_RE.match(line):
            params["threads"] = int(m.group(1))
            continue
        if m := _EACH_RE.match(line):
            params.setdefault("file_size", int(m.group(1)) * KIB)
            params.setdefault("record_size", int(m.group(2)) * KIB)
            continue
        if m := _OUTPUT_RE.match(line):
            unit = m.group(1)
            continue
        if m := _MACHINE_RE.match(line):
            extra["machine"] = m.group(1)
            continue
        if m := _BEGAN_RE.match(line):
            extra["run_began"] = m.group(1)
            continue

        # --- throughput mode -------------------------------------------------------------
        if m := _CHILDREN_RE.match(line):
            threads, words = int(m.group(1)), " ".join(m.group(2).lower().split())
            name = _THROUGHPUT_TESTS.get(words)
            if name is None:
                # "mixed workload" and friends have no metric name; keep the number.
                unmapped[words] = float(m.group(3))
                current = None
                continue
            current = (name, threads)
            if current not in tp:
                tp_order.append(current)
            tp[current] = {
                "value": _to_bps(float(m.group(3)), m.group(4), params.get("record_size"), line_no),
                "line": line_no,
                "children": [],
            }
            continue
        if m := _PARENT_RE.match(line):
            words = " ".join(m.group(2).lower().split())
            name = _THROUGHPUT_TESTS.get(words)
            key = (name, int(m.group(1))) if name else None
            if key in tp:
                tp[key]["parent"] = _to_bps(
                    float(m.group(3)), m.group(4), params.get("record_size"), line_no
                )
            continue
        if m := _PER_PROCESS_RE.match(line):
            if current is not None:
                stat = {"Min": "min", "Max": "max", "Avg": "mean"}[m.group(1)]
                tp[current][stat] = _to_bps(
                    float(m.group(2)), m.group(3), params.get("record_size"), line_no
                )
            continue
        if m := _MIN_XFER_RE.match(line):
            if current is not None:
                xfer_unit = m.group(2).lower()
                factor = KIB if xfer_unit.startswith("k") else (params.get("record_size") or 0)
                if factor:
                    min_xfer[current[0].removesuffix("_bw")] = float(m.group(1)) * factor
            continue
        if m := _CHILD_RE.match(line):
            if current is not None:
                xfer_unit = m.group(3).lower()
                factor = KIB if xfer_unit.startswith("k") else (params.get("record_size") or 0)
                child = {
                    "child": int(m.group(1)),
                    "value": _to_bps(
                        float(m.group(4)), m.group(5), params.get("record_size"), line_no
                    ),
                }
                if factor:
                    child["xfer_bytes"] = float(m.group(2)) * factor
                tp[current]["children"].append(child)
            continue
        if m := _CPU_RE.match(line):
            if current is not None:
                cpu.append((current[0].removesuffix("_bw"), float(m.group(3))))
            continue

        # --- auto mode table -------------------------------------------------------------
        if _AUTO_HEADER_RE.match(line):
            top = lines[idx - 1] if idx > 0 else ""
            columns = _header_columns(top, line)
            header_line = line_no
            auto_mode = True
            continue
        if header_line is not None and (m := _AUTO_ROW_RE.match(line)):
            values = [float(v) for v in m.group(3).split()]
            if idx == last_index and not ends_cleanly and len(values) < len(columns):
                warnings.append(f"line {line_no}: dropped a table row cut short by truncation")
                continue
            row_columns = _row_columns(columns, len(values), result.command)
            if row_columns is None:
                warnings.append(
                    f"line {line_no}: {len(values)} values for {len(columns)} columns; "
                    "mapped in column order"
                )
                row_columns = columns[: len(values)]
            file_kb, rec_kb = int(m.group(1)), int(m.group(2))
            for name, value in zip(row_columns, values, strict=False):
                if name is None:
                    continue
                if name not in cell_order:
                    cell_order.append(name)
                cells[(name, file_kb, rec_kb)] = value
            continue

        # --- Excel report ----------------------------------------------------------------
        if _EXCEL_TP_TITLE_RE.match(line):
            in_excel_tp = True
            excel_title = None
            continue
        if m := _EXCEL_TITLE_RE.match(line):
            excel_title = _EXCEL_AUTO.get(m.group(1).strip().lower())
            excel_cols = []
            in_excel_tp = False
            continue
        if excel_title is not None and _EXCEL_COLS_RE.match(line):
            excel_cols = [int(v) for v in re.findall(r'"(\d+)"', line)]
            continue
        if excel_title is not None and excel_cols and (m := _EXCEL_ROW_RE.match(line)):
            values = [float(v) for v in m.group(2).split()]
            for rec_kb, value in zip(excel_cols, values, strict=False):
                excel_cells[(excel_title, int(m.group(1)), rec_kb)] = value
            continue
        if in_excel_tp and (m := _EXCEL_TP_ROW_RE.match(line)):
            name = _EXCEL_THROUGHPUT.get(" ".join(m.group(1).lower().split()))
            values = m.group(2).split()
            if name and len(values) == 1:
                excel_tp[name] = float(values[0])
            continue

    if result.command:
        cmd = _command_options(result.command)
        for key in ("file_size", "record_size", "threads", "network_distribution"):
            if key in cmd:
                params.setdefault(key, cmd[key])
        direct = direct or bool(cmd.get("direct"))
    if options.get("nodes") is not None:
        params["nodes"] = int(options["nodes"])

    ops: list[str] = []
    ops_mode = unit.lower().startswith(("ops", "operations"))

    # Auto-mode cells: the table wins; the Excel report fills gaps (or replaces a lost table).
    mismatched = sum(1 for k, v in excel_cells.items() if k in cells and cells[k] != v)
    if mismatched:
        warnings.append(f"{mismatched} Excel report cells differ from the table; table kept")
    if excel_cells:
        extra["excel_report"] = True
    for key, value in excel_cells.items():
        if key not in cells:
            cells[key] = value
            if key[0] not in cell_order:
                cell_order.append(key[0])
    if cells:
        auto_mode = True
        best: dict[str, float] = {}
        for name in cell_order:
            for (cell_name, file_kb, rec_kb), value in cells.items():
                if cell_name != name:
                    continue
                record = rec_kb * KIB
                bps = value * record if ops_mode else value * KIB
                result.add(name, bps, file_size=file_kb * KIB, record_size=record)
                best[name] = max(best.get(name, bps), bps)
        for name in cell_order:
            result.add(name, best[name], stat="max")
        ops = [name.removesuffix("_bw") for name in cell_order]
        params.setdefault("threads", 1)
    else:
        thread_counts = {threads for _, threads in tp_order}
        several = len(thread_counts) > 1
        best_tp: dict[str, float] = {}
        for key in tp_order:
            name, threads = key
            entry = tp[key]
            tag: dict[str, Any] = {"threads": threads} if several else {}
            result.add(name, entry["value"], **tag)
            if "parent" in entry:
                result.add(name, entry["parent"], stat="parent", **tag)
            for stat in ("min", "max", "mean"):
                if stat in entry:
                    result.add(name, entry[stat], stat=stat, per_process=True, **tag)
            for child in entry["children"]:
                child_extra = {k: v for k, v in child.items() if k != "value"}
                result.add(name, child["value"], per_process=True, **child_extra, **tag)
            best_tp[name] = max(best_tp.get(name, entry["value"]), entry["value"])
            if name.removesuffix("_bw") not in ops:
                ops.append(name.removesuffix("_bw"))
        if several:
            for name, value in best_tp.items():
                result.add(name, value, stat="max")
        # Excel throughput summary stands in for tests whose text lines were lost.
        for name, value in excel_tp.items():
            if name in best_tp:
                continue
            bps = _to_bps(value, unit if ops_mode else "kB/sec", params.get("record_size"), 0)
            result.add(name, bps)
            ops.append(name.removesuffix("_bw"))
        for op, value in cpu:
            result.add("cpu_util", value, op=op)
        if tp_order or excel_tp:
            thread_list = sorted(thread_counts)
            if thread_list:
                params.setdefault("threads", thread_list[-1] if several else thread_list[0])

    if not result.metrics:
        raise ParseError(
            _no_result_reason(banner_line, header_line, len(lines)),
            tool=TOOL,
            line=header_line or banner_line,
        )

    if ops:
        params["ops"] = ops
    params["direct"] = direct
    result.params = params
    extra["mode"] = "auto" if auto_mode else "throughput"
    extra["output_unit"] = unit
    if min_xfer:
        extra["min_xfer_bytes"] = min_xfer
    if unmapped:
        extra["unmapped_throughput"] = unmapped
    if wrapper:
        extra["wrapper"] = wrapper
    if warnings:
        extra["warnings"] = warnings
    extra["complete"] = "iozone test complete" in text
    result.extra = extra
    return result.validate()


def _row_columns(
    columns: list[str | None], count: int, command: str | None
) -> list[str | None] | None:
    """Column names for a row of ``count`` values, or None when it cannot be told."""
    if count == len(columns):
        return columns
    if command:
        # IOzone prints only the selected tests, left-packed; the -i list says which.
        tests = _command_options(command)["tests"]
        if tests:
            wanted = {name for t in tests for name in _TEST_NUMBERS.get(t, ())}
            wanted.update(_TEST_NUMBERS["0"])  # -i 0 always runs: it creates the file
            selected = [c for c in columns if c in wanted]
            if len(selected) == count:
                return selected
    return None


def _no_result_reason(banner_line: int | None, header_line: int | None, n_lines: int) -> str:
    if header_line is not None:
        return f"the auto-mode table header at line {header_line} has no data rows"
    if banner_line is not None:
        return (
            f"the IOzone header at line {banner_line} is followed by no results (no auto-mode "
            f"table, 'Children see throughput' line or Excel report in {n_lines} lines)"
        )
    return "no IOzone results found (no auto-mode table or 'Children see throughput' line)"
