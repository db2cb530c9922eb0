"""mdtest output parser: 1.9.3 to 4.x SUMMARY blocks, verbose per-iteration rates, params."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from typing import Any

from runners.parsers.base import (
    ParseError,
    ParseResult,
    chunk_runs,
    command_label,
    mean,
    number_parts,
    number_runs,
    pick_run,
    split_lines,
    to_float,
    to_int,
)

TOOL = "mdtest"

_NUM = r"-?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|-?nan|-?inf"
_LAUNCH_RE = re.compile(
    r"^\s*mdtest-(?P<version>\S+) was launched with (?P<tasks>\d+) total task\(s\) on "
    r"(?P<nodes>\d+) node\(s\)"
)
_COMMAND_RE = re.compile(r"^\s*Command line used:\s*(?P<cmd>.*?)\s*$")
_ITEMS_RE = re.compile(
    r"^\s*(?P<tasks>\d+) tasks?, (?P<items>\d+) (?:files/directories|files|directories)\b"
)
# "SUMMARY: (of 2 iterations)" (1.9.x), "SUMMARY rate: (of 3 iterations)" (3.x),
# "SUMMARY rate (in ops/sec): (of 10 iterations)" and "SUMMARY time ...:" (4.x).
_SUMMARY_RE = re.compile(
    r"^\s*SUMMARY(?:\s+(?P<kind>rate|time))?(?:\s*\((?P<unit>[^)]*)\))?\s*:\s*"
    r"\(of (?P<n>\d+) iterations?\)",
    re.IGNORECASE,
)
_ROW_RE = re.compile(
    rf"^\s*(?P<label>[A-Za-z][A-Za-z ()/-]*?)\s*:?\s+(?P<max>{_NUM})\s+(?P<min>{_NUM})\s+"
    rf"(?P<mean>{_NUM})\s+(?P<std>{_NUM})\s*$"
)
_ITERATION_RE = re.compile(r"\*\s*iteration\s+(?P<n>\d+)\s*\*")
_PHASES = {
    "directory creation": "dir_create",
    "directory stat": "dir_stat",
    "directory rename": "dir_rename",
    "directory removal": "dir_remove",
    "file creation": "file_create",
    "file stat": "file_stat",
    "file read": "file_read",
    "file removal": "file_remove",
    "file rename": "file_rename",
    "tree creation": "tree_create",
    "tree removal": "tree_remove",
}
_PHASE_ALT = "|".join(sorted((re.escape(k) for k in _PHASES), key=len, reverse=True))
# Verbose (-v) per-iteration lines: "V-1:   Directory creation:   31.788 sec,   96.639 ops/sec".
_PER_ITER_RE = re.compile(
    rf"(?P<label>{_PHASE_ALT})\s*:\s*(?P<sec>{_NUM})\s+sec,\s*(?P<rate>{_NUM})\s+ops/sec",
    re.IGNORECASE,
)
# Option dump of mdtest -v (1.9.x / IOR 3.2 bundled mdtest): "unique_dir_per_task : True".
_DUMP_RE = re.compile(r"^\s*(?P<key>[a-z_]+)\s*:\s*(?P<val>\S+)\s*$")


@dataclass
class _Run:
    """What one mdtest invocation printed."""

    first_line: int
    version: str | None = None
    launch_line: int | None = None
    command: str | None = None
    params: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)
    summary: list[tuple[str, dict[str, float]]] = field(default_factory=list)
    summary_time: dict[str, dict[str, float]] = field(default_factory=dict)
    summary_line: int | None = None
    zero_rows: list[str] = field(default_factory=list)
    other_rows: list[dict[str, Any]] = field(default_factory=list)
    per_iter: list[tuple[str, int, float, float | None]] = field(default_factory=list)
    dump: dict[str, str] = field(default_factory=dict)
    items_total: tuple[int, int] | None = None

    @property
    def has_results(self) -> bool:
        return bool(self.summary or self.per_iter)


def _command_params(command: str) -> dict[str, Any]:
    """Parameters from mdtest's argv (quoted '-n' '2048' in 3.x+, "-I" "32" in IOR 3.2)."""
    try:
        argv = shlex.split(command)
    except ValueError:
        argv = [a.strip("'\"") for a in command.split()]
    found: dict[str, Any] = {"unique_dir": False}
    valued = {
        "-n": "items",
        "-I": "items_per_dir",
        "-i": "iterations",
        "-z": "depth",
        "-b": "branch",
        "-w": "write_bytes",
        "-e": "read_bytes",
    }
    flags = {
        "-u": "unique_dir",
        "-F": "files_only",
        "-D": "dirs_only",
        "-C": "create_only",
        "-T": "stat_only",
        "-E": "read_only",
        "-r": "remove_only",
    }
    i = 0
    while i < len(argv):
        arg = argv[i]
        glued = re.match(r"^(-[nIizbwe])(\d+)$", arg)  # "-n2048"
        if glued:
            arg, value = glued.group(1), glued.group(2)
            i -= 1
        else:
            value = argv[i + 1] if i + 1 < len(argv) else ""
        if arg in valued:
            number = to_int(value)
            if number is not None:
                found[valued[arg]] = number
            i += 2
            continue
        if arg == "-a" and value:
            found["api"] = value
            i += 2
            continue
        if arg in flags:
            found[flags[arg]] = True
        elif re.match(r"^-[uFDCTEr]{2,}$", arg):
            for letter in arg[1:]:  # combined flags such as "-uF"
                found[flags[f"-{letter}"]] = True
        i += 1
    return found


def _parse_run(lines: list[str], first_line: int) -> _Run:
    run = _Run(first_line=first_line)
    block: str | None = None  # "rate" or "time" while inside a SUMMARY block
    iteration: int | None = None
    seen: dict[str, int] = {}
    for offset, raw in enumerate(lines):
        lineno = first_line + offset
        line = raw.rstrip()
        if not line.strip():
            continue

        launch = _LAUNCH_RE.match(line)
        if launch:
            run.version = launch.group("version")
            run.launch_line = lineno
            run.params["threads"] = int(launch.group("tasks"))
            run.params["nodes"] = int(launch.group("nodes"))
            continue

        command = _COMMAND_RE.match(line)
        if command:
            run.command = command.group("cmd")
            continue

        items = _ITEMS_RE.match(line)
        if items:
            run.items_total = (int(items.group("tasks")), int(items.group("items")))
            continue

        summary = _SUMMARY_RE.match(line)
        if summary:
            kind = (summary.group("kind") or "rate").lower()
            unit = (summary.group("unit") or "").lower()
            is_time = kind == "time" or ("sec" in unit and "ops" not in unit)
            block = "time" if is_time else "rate"
            run.params["iterations"] = int(summary.group("n"))
            if block == "rate":
                run.summary_line = lineno
            continue

        if line.lstrip().startswith("-- finished"):
            run.extra["finished"] = line.strip(" -").removeprefix("finished at ").strip()
            block = None
            continue
        if line.lstrip().startswith("-- started"):
            run.extra["started"] = line.strip(" -").removeprefix("started at ").strip()
            continue

        if block is not None:
            row = _ROW_RE.match(line)
            if row:
                label = " ".join(row.group("label").lower().split())
                values = {
                    stat: to_float(row.group(group))
                    for stat, group in (
                        ("max", "max"),
                        ("min", "min"),
                        ("mean", "mean"),
                        ("stddev", "std"),
                    )
                }
                if any(v is None for v in values.values()):
                    continue
                clean = {k: float(v) for k, v in values.items() if v is not None}
                if all(v == 0 for v in clean.values()):
                    # Phases that did not run (-C create-only, -F files-only) print zeros.
                    run.zero_rows.append(label)
                    continue
                if label not in _PHASES:
                    run.other_rows.append({"label": label, "block": block, **clean})
                elif block == "time":
                    run.summary_time[_PHASES[label]] = clean
                else:
                    run.summary.append((_PHASES[label], clean))
                continue

        marker = _ITERATION_RE.search(line)
        if marker:
            iteration = int(marker.group("n")) - 1
            continue

        per_iter = _PER_ITER_RE.search(line)
        if per_iter and block is None:
            name = _PHASES[" ".join(per_iter.group("label").lower().split())]
            rate = to_float(per_iter.group("rate"))
            seconds = to_float(per_iter.group("sec"))
            index = iteration if iteration is not None else seen.get(name, 0)
            seen[name] = seen.get(name, 0) + 1
            if rate is not None and rate > 0:
                run.per_iter.append((name, index, rate, seconds))
            continue

        dump = _DUMP_RE.match(line)
        if dump:
            run.dump[dump.group("key")] = dump.group("val")
            continue

        if re.match(r"^\s*Path\s*:", line):
            run.extra.setdefault("path", line.split(":", 1)[1].strip())
        elif line.startswith("Nodemap:"):
            run.extra["nodemap"] = line.split(":", 1)[1].strip()
    return run


# Phases only task 0 performs: their per-iteration line is the whole run's rate.
_TASK0_PHASES = {"tree_create", "tree_remove"}


def _rank0_rates(run: _Run, params: dict[str, Any]) -> set[str]:
    """Phases whose verbose per-iteration rates are task 0's own, not the run's. mdtest 4.x
    prints ``items / time`` of task 0 there (mdtest.c updateResult: the task's own items; the
    SUMMARY divides the sum of all tasks' items by the slowest task's time), so with several
    tasks those lines are one task's rate. mdtest 1.9 and the IOR 3.2 bundled mdtest print
    the aggregate (the samples' lines equal their SUMMARY rows)."""
    major = to_int((run.version or "").split(".")[0])
    threads = params.get("threads")
    if major is None or major < 4 or not threads or threads <= 1:
        return set()
    return {name for name, _, _, _ in run.per_iter} - _TASK0_PHASES


def _finish(run: _Run) -> ParseResult:
    result = ParseResult(tool=TOOL, tool_version=run.version, command=run.command)
    params = dict(run.params)
    from_command = _command_params(run.command) if run.command else {}
    threads = params.get("threads")
    if run.items_total is not None:
        params.setdefault("threads", run.items_total[0])
        threads = params["threads"]

    # Items per task: -n is exactly that; otherwise "N tasks, M files" / tasks; then -I.
    if "items" in from_command:
        params["items"] = from_command["items"]
    elif run.items_total is not None and threads:
        tasks, total = run.items_total
        if tasks and total % tasks == 0:
            params["items"] = total // tasks
    elif "items_per_dir" in from_command and from_command.get("depth", 0) == 0:
        params["items"] = from_command["items_per_dir"]

    if "iterations" not in params:
        if "iterations" in from_command:
            params["iterations"] = from_command["iterations"]
        elif to_int(run.dump.get("iterations", "")) is not None:
            params["iterations"] = to_int(run.dump["iterations"])
    if run.command:
        params["unique_dir"] = bool(from_command.get("unique_dir"))
    elif run.dump.get("unique_dir_per_task") in ("True", "False"):
        params["unique_dir"] = run.dump["unique_dir_per_task"] == "True"
    for key in (
        "api",
        "items_per_dir",
        "depth",
        "branch",
        "write_bytes",
        "read_bytes",
        "files_only",
        "dirs_only",
        "create_only",
    ):
        if key in from_command:
            params.setdefault(key, from_command[key])

    rank0 = _rank0_rates(run, params)
    for name, index, rate, seconds in run.per_iter:
        extra: dict[str, Any] = {"seconds": seconds} if seconds is not None else {}
        if name in rank0:
            extra.update(per_process=True, rank=0)
        result.add(name, rate, iteration=index, **extra)
    for name, values in run.summary:
        for stat, value in values.items():
            result.add(name, value, stat=stat)

    # No SUMMARY row for a phase (the output ends before it: a job killed or timed out after
    # its iterations began): the run's value is the one iteration's rate, or the mean of the
    # iterations' rates (SUMMARY's "Mean" is that mean), where the lines are the aggregate.
    summarised = {name for name, _ in run.summary}
    rates: dict[str, list[float]] = {}
    for name, _, rate, _ in run.per_iter:
        if name not in summarised and name not in rank0:
            rates.setdefault(name, []).append(rate)
    for name, found in rates.items():
        if len(found) == 1:
            result.add(name, found[0])
        else:
            result.add(name, mean(found), stat="mean")

    # Tasks per node as IOR counts them (the tasks on task 0's node): mdtest's Nodemap marks
    # them 1; taken when the nodes hold that many each (tasks = nodes x that count).
    nodemap, nodes = run.extra.get("nodemap", ""), params.get("nodes")
    if nodemap and nodes and threads and len(nodemap) == threads and set(nodemap) <= {"0", "1"}:
        if nodemap.count("1") * nodes == threads:
            params.setdefault("tasks_per_node", nodemap.count("1"))

    result.params = params
    result.extra = dict(run.extra)
    if run.summary_time:
        result.extra["summary_time"] = run.summary_time
    if run.zero_rows:
        result.extra["skipped_phases"] = run.zero_rows
    if run.other_rows:
        result.extra["other_rows"] = run.other_rows
    result.extra["complete"] = bool(run.summary)
    return result.validate()


def _no_result_error(run: _Run, last_line: int) -> ParseError:
    if run.summary_line is not None:
        return ParseError(
            f"SUMMARY block at line {run.summary_line} holds no non-zero phase rows",
            line=run.summary_line,
            tool=TOOL,
        )
    if run.launch_line is not None:
        return ParseError(
            f"mdtest banner at line {run.launch_line} but no SUMMARY block or per-iteration "
            f"rates up to line {last_line} (output truncated?)",
            line=run.launch_line,
            tool=TOOL,
        )
    return ParseError("no mdtest SUMMARY block or 'was launched' banner found", tool=TOOL)


def detect(text: str) -> float:
    """Confidence that ``text`` is mdtest output."""
    if not text:
        return 0.0
    head = text[:200_000]
    if re.search(r"^\s*mdtest-\S+ was launched with", head, re.M):
        return 1.0
    if re.search(
        r"^\s*SUMMARY(\s+(rate|time))?(\s*\([^)]*\))?\s*:\s*\(of \d+ iteration", head, re.M | re.I
    ):
        return 0.9
    if _PER_ITER_RE.search(head):
        return 0.5
    return 0.0


def _split_runs(lines: list[str]) -> list[tuple[int, list[str]]]:
    """(first line number, lines) per mdtest invocation; a banner (with its preceding
    '-- started at' line) starts a run."""
    starts = []
    for i, line in enumerate(lines):
        if _LAUNCH_RE.match(line):
            start = i
            j = i - 1
            while j >= 0 and not lines[j].strip():
                j -= 1
            if j >= 0 and lines[j].lstrip().startswith("-- started"):
                start = j
            starts.append(start)
    return chunk_runs(lines, starts)


def _runs(text: str) -> list[_Run]:
    """The mdtest invocations of ``text`` that printed results."""
    if not text or not text.strip():
        raise ParseError("the output is empty", tool=TOOL)
    lines = split_lines(text)
    runs = []
    first_error: ParseError | None = None
    for first_line, chunk in _split_runs(lines):
        run = _parse_run(chunk, first_line)
        if run.has_results:
            runs.append(run)
        elif first_error is None and (run.launch_line or run.summary_line):
            first_error = _no_result_error(run, first_line + len(chunk) - 1)
    if not runs:
        raise first_error or _no_result_error(_Run(first_line=1), len(lines))
    return runs


def parse_many(text: str) -> list[ParseResult]:
    """One ParseResult per mdtest run in ``text``."""
    return number_runs([_finish(run) for run in _runs(text)])


def parse_parts(text: str) -> list[ParseResult]:
    """One result per independent measurement: each mdtest invocation of a log."""
    runs = _runs(text)
    labels = [command_label(run.command, index) for index, run in enumerate(runs)]
    return number_parts(number_runs([_finish(run) for run in runs]), "run", labels)


def parse(text: str, **options: Any) -> ParseResult:
    """The first mdtest run with a SUMMARY block (``run=N`` picks another one)."""
    results = parse_many(text)
    wanted = options.get("run")
    return pick_run(TOOL, results, wanted, to_int(str(wanted)))
