"""BeeGFS StorageBench parser: `beegfs-ctl --storagebench --status [--verbose]` results."""

# Choices:
# * The metric is write_bw or read_bw after the "Write/Read benchmark results:" heading.
# * "Aggregate throughput" is the run's value (stat "value"); "Min/Max/Avg throughput" are
#   stat "min"/"max"/"mean" (per-target statistics, run level, no extra). Which target was the
#   slowest and fastest goes to ``extra["storagebench"]["<op>_min_target"/"<op>_max_target"]``.
# * --verbose "List of all targets" rows are stat "value" with
#   ``extra={"target": id, "node": name, "node_id": n}``.
# * Throughput is printed in KiB/s (binary). Params: "targets" = number of targets listed (or
#   the "Finished:" count), "nodes" = distinct storage servers seen.
# * A status that shows the benchmark still running, or no result heading, is a ParseError.

from __future__ import annotations

import re
from typing import Any

from runners.parsers.base import ParseError, ParseResult, bw_to_bytes, guard_parse, split_lines

TOOL = "storagebench"

_STATUS_RE = re.compile(r"^\s*Server benchmark status:\s*$")
# "Didn't run": BeeGFS 7.4.7's word for a server that knows no benchmark (it restarted).
_STATE_RE = re.compile(
    r"^\s*(Finished|Running|Stopping|Stopped|Error|Uninitialized|Idle|Didn't run)\s*:\s*"
    r"(\d+)\s*$",
    re.IGNORECASE,
)
_RESULTS_RE = re.compile(r"^\s*(Write|Read) benchmark results:\s*$", re.IGNORECASE)
_NUM = r"(\d+(?:\.\d+)?)\s*([KMGT]i?B/s)"
_NODE = r"nodeID:\s*(.+?)\s*\[ID:\s*(\d+)\]"
_STAT_RE = re.compile(
    rf"^\s*(Min|Max|Avg|Aggregate) throughput:\s*{_NUM}(?:\s+{_NODE}(?:,\s*targetID:\s*(\d+))?)?"
    r"\s*$"
)
_LIST_RE = re.compile(r"^\s*List of all targets:\s*$")
_TARGET_RE = re.compile(rf"^\s*(\d+)\s+{_NUM}(?:\s+{_NODE})?\s*$")


def detect(text: str) -> float:
    """Confidence that ``text`` is StorageBench status output."""
    if not text:
        return 0.0
    score = 0.0
    if re.search(r"^\s*Server benchmark status:", text, re.M):
        score += 0.5
    if re.search(r"^\s*(Write|Read) benchmark results:", text, re.M):
        score += 0.4
    if re.search(r"^\s*Aggregate throughput:\s*\d", text, re.M):
        score += 0.2
    if score == 0.0 and re.search(r"--storagebench", text):
        score = 0.2
    return min(score, 1.0)


def parse(text: str, **options: Any) -> ParseResult:
    """Parse StorageBench status output into a validated ParseResult (ParseError otherwise)."""
    return guard_parse(TOOL, _parse, text)


def _parse(text: str) -> ParseResult:
    lines = split_lines(text)
    status_line: int | None = None
    states: dict[str, int] = {}
    sections: list[dict[str, Any]] = []
    section: dict[str, Any] | None = None
    in_list = False

    for idx, raw in enumerate(lines):
        line_no = idx + 1
        if not raw.strip():
            continue
        if _STATUS_RE.match(raw):
            status_line = line_no
            continue
        if m := _STATE_RE.match(raw):
            states[m.group(1).lower()] = int(m.group(2))
            continue
        if m := _RESULTS_RE.match(raw):
            section = {"op": m.group(1).lower(), "line": line_no, "stats": {}, "targets": []}
            sections.append(section)
            in_list = False
            continue
        if section is None:
            continue
        if _LIST_RE.match(raw):
            in_list = True
            continue
        if m := _STAT_RE.match(raw):
            stat = {"Min": "min", "Max": "max", "Avg": "mean", "Aggregate": "value"}[m.group(1)]
            entry: dict[str, Any] = {"value": bw_to_bytes(float(m.group(2)), m.group(3))}
            if m.group(4):
                entry["node"], entry["node_id"] = m.group(4), int(m.group(5))
            if m.group(6):
                entry["target"] = int(m.group(6))
            section["stats"][stat] = entry
            continue
        if in_list and (m := _TARGET_RE.match(raw)):
            target: dict[str, Any] = {
                "target": int(m.group(1)),
                "value": bw_to_bytes(float(m.group(2)), m.group(3)),
            }
            if m.group(4):
                target["node"], target["node_id"] = m.group(4), int(m.group(5))
            section["targets"].append(target)
            continue

    sections = [s for s in sections if s["stats"] or s["targets"]]
    if not sections:
        if states and not states.get("finished"):
            busy = ", ".join(f"{k}: {v}" for k, v in states.items())
            raise ParseError(
                f"the benchmark has not finished ({busy}); no results to read",
                line=status_line,
                tool=TOOL,
            )
        where = f" after the status at line {status_line}" if status_line else ""
        raise ParseError(
            f"no 'Write/Read benchmark results:' section with throughput lines found{where}",
            line=status_line,
            tool=TOOL,
        )

    result = ParseResult(tool=TOOL)
    info: dict[str, Any] = {"states": states}
    nodes: set[int] = set()
    n_targets = 0
    for sec in sections:
        name = f"{sec['op']}_bw"
        for stat in ("value", "min", "max", "mean"):
            if stat in sec["stats"]:
                result.add(name, sec["stats"][stat]["value"], stat=stat)
        for stat in ("min", "max"):
            entry = sec["stats"].get(stat)
            if entry and "target" in entry:
                info[f"{sec['op']}_{stat}_target"] = {
                    k: v for k, v in entry.items() if k != "value"
                }
        for target in sec["targets"]:
            extra = {k: v for k, v in target.items() if k != "value"}
            result.add(name, target["value"], **extra)
            if "node_id" in target:
                nodes.add(target["node_id"])
        n_targets = max(n_targets, len(sec["targets"]))
    result.params["ops"] = [sec["op"] for sec in sections]
    if n_targets or states.get("finished"):
        result.params["targets"] = n_targets or states["finished"]
    if nodes:
        result.params["nodes"] = len(nodes)
    result.extra["storagebench"] = info
    return result.validate()
