"""Parser for the transfer summary of dd (GNU coreutils old and new formats, BusyBox, BSD)."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from functools import partial
from typing import Any

from runners.parsers.base import (
    ParseError,
    ParseResult,
    bw_to_bytes,
    guard_parse,
    number_parts,
    number_runs,
    parse_size,
    split_lines,
)

TOOL = "dd"

_NUM = r"\d+(?:[.,]\d+)?(?:[eE][-+]?\d+)?"

# GNU: "1073741824 bytes (1.1 GB, 1.0 GiB) copied, 1.59144 s, 675 MB/s" (coreutils >= 8.24)
#      "1073741824 bytes (1.1 GB) copied, 12.4397 s, 86.3 MB/s"        (older coreutils)
#      "512 bytes copied, 0.000123 s, 4.2 MB/s"                          (below 1 kB)
# BusyBox: "1048576 bytes (1.0MB) copied, 0.012345 seconds, 81.0MB/s"
_GNU_RE = re.compile(
    rf"^(?P<bytes>\d+) bytes?(?: \((?P<human>[^)]*)\))? copied, (?P<secs>{_NUM}) ?"
    rf"(?:s|secs?|seconds?)?, (?P<rate>{_NUM}|Infinity|inf) ?(?P<unit>[kKMGTPE]?i?B/s)"
)
# BSD/macOS: "1073741824 bytes transferred in 1.234567 secs (869777124 bytes/sec)"
_BSD_RE = re.compile(
    rf"^(?P<bytes>\d+) bytes transferred in (?P<secs>{_NUM}) secs? "
    rf"\((?P<rate>{_NUM}) (?P<unit>bytes/sec)\)"
)
_RECORDS_RE = re.compile(r"^(?P<full>\d+)\+(?P<partial>\d+) records (?P<kind>in|out)\s*$")
_VERSION_RE = re.compile(r"\bdd \(GNU coreutils\) (\S+)")
_COMMAND_RE = re.compile(r"(?:^|[\s#$>;|&])((?:\S*/)?dd(?:\s+\w+=\S+)+)")

_WRITE_SOURCES = {"/dev/zero", "/dev/urandom", "/dev/random"}
_READ_SINKS = {"/dev/null"}


@dataclass
class _Summary:
    line: int
    bytes: int
    seconds: float
    rate: float | None  # B/s as dd printed it (rounded to 2-3 digits)
    printed: str
    human: str | None


def detect(text: str) -> float:
    """Confidence that ``text`` is dd output."""
    if not text:
        return 0.0
    head = text[:100_000]
    records = re.search(r"^\d+\+\d+ records (in|out)\s*$", head, re.M)
    summary = re.search(r"^\d+ bytes?(?: \([^)]*\))? copied, ", head, re.M) or re.search(
        r"^\d+ bytes transferred in ", head, re.M
    )
    if records and summary:
        return 0.95
    if summary:
        return 0.75
    if records:
        return 0.5
    return 0.0


def _float(text: str) -> float:
    # Some locales print a decimal comma ("1,59144 s").
    return float(text.replace(",", "."))


def _summaries(lines: list[str]) -> list[_Summary]:
    found = []
    for number, line in enumerate(lines, 1):
        stripped = line.strip()
        m = _GNU_RE.match(stripped) or _BSD_RE.match(stripped)
        if not m:
            continue
        try:
            secs = _float(m.group("secs"))
            rate_text = m.group("rate")
            rate = None
            if rate_text not in ("Infinity", "inf"):
                rate = bw_to_bytes(_float(rate_text), m.group("unit"))
        except (ValueError, ParseError):
            continue
        human = m.groupdict().get("human")
        found.append(_Summary(number, int(m.group("bytes")), secs, rate, stripped, human))
    return found


def _dd_size(text: str) -> int | None:
    """dd operand size: 'M' = 1048576, 'MB' = 1000000, 'b' = 512 blocks, 'w' = 2, 'c' = 1."""
    m = re.fullmatch(r"(\d+)([bwc])", text.strip())
    if m:
        return int(m.group(1)) * {"b": 512, "w": 2, "c": 1}[m.group(2)]
    try:
        return parse_size(text, default_binary=False)
    except ParseError:
        return None


def _operands(command: str) -> dict[str, str]:
    try:
        tokens = shlex.split(command)
    except ValueError:
        tokens = command.split()
    ops = {}
    for token in tokens:
        key, sep, value = token.partition("=")
        if sep and key.isalpha():
            ops[key] = value
    return ops


def _find_command(lines: list[str]) -> str | None:
    for line in lines:
        m = _COMMAND_RE.search(line.strip())
        if m and re.search(r"\b(if|of|bs|count)=", m.group(1)):
            return m.group(1).strip()
    return None


def _direction(op: str | None, operands: dict[str, str]) -> str | None:
    if op is not None:
        return op
    source, sink = operands.get("if"), operands.get("of")
    if source in _WRITE_SOURCES and sink not in _READ_SINKS:
        return "write"
    if sink in _READ_SINKS and source not in _WRITE_SOURCES:
        return "read"
    return None


def _runs(lines: list[str]) -> list[tuple[_Summary, dict[str, str], list[_Summary]]]:
    """Each dd invocation: its final summary, its records lines and its progress lines.

    status=progress rewrites one line with carriage returns before the records lines; the
    summary printed right after "records out" is the result of the run.
    """
    summaries = _summaries(lines)
    records: dict[int, tuple[str, str]] = {}
    for number, line in enumerate(lines, 1):
        m = _RECORDS_RE.match(line.strip())
        if m:
            records[number] = (m.group("kind"), f"{m.group('full')}+{m.group('partial')}")
    outs = [n for n, (kind, _) in records.items() if kind == "out"]
    runs = []
    if outs:
        used = 0
        for out_line in outs:
            final = next((s for s in summaries if s.line > out_line), None)
            if final is None:
                continue
            if runs and runs[-1][0] is final:
                continue
            progress = [s for s in summaries[used:] if s.line < out_line]
            recs = {
                kind: value
                for n, (kind, value) in records.items()
                if n <= out_line and (not runs or n > runs[-1][0].line)
            }
            runs.append((final, recs, progress))
            used = summaries.index(final) + 1
    elif summaries:
        # No records lines (status=none was not used, or they were cut off when pasting):
        # the last summary-shaped line is the final one, the earlier ones were progress.
        runs.append((summaries[-1], {}, summaries[:-1]))
    return runs


def _result(
    summary: _Summary,
    records: dict[str, str],
    progress: list[_Summary],
    op: str | None,
    command: str | None,
    version: str | None,
) -> ParseResult:
    operands = _operands(command) if command else {}
    direction = _direction(op, operands)
    name = f"{direction}_bw" if direction else "bw"
    result = ParseResult(tool=TOOL, tool_version=version, command=command)
    if summary.seconds > 0:
        # dd prints the rate with two or three significant digits ("1.9 GB/s" for 1.947 GB/s);
        # bytes / seconds is the same quantity at full precision.
        result.add(name, summary.bytes / summary.seconds)
    elif summary.rate is not None:
        result.add(name, summary.rate)
    result.add("elapsed", summary.seconds)
    result.params["threads"] = 1
    result.params["block_size"] = summary.bytes
    result.params["aggregate_size"] = summary.bytes
    result.params["file_size"] = summary.bytes
    bs = operands.get("bs") or (operands.get("obs") if direction != "read" else operands.get("ibs"))
    transfer = _dd_size(bs) if bs else None
    if transfer is None and "out" in records:
        full, partial = (int(x) for x in records["out"].split("+"))
        # Without the command line, bs is bytes per record when no record was partial.
        if full and not partial and summary.bytes % full == 0:
            transfer = summary.bytes // full
    if transfer is not None:
        result.params["transfer_size"] = transfer
    flags = ",".join(operands.get(k, "") for k in ("iflag", "oflag")).split(",")
    if operands:
        result.params["direct"] = "direct" in flags
    if direction:
        result.params["rw"] = direction
    result.extra["summary_line"] = summary.line
    result.extra["printed_rate"] = summary.rate
    if summary.human:
        result.extra["human_size"] = summary.human
    if "in" in records:
        result.extra["records_in"] = records["in"]
    if "out" in records:
        result.extra["records_out"] = records["out"]
    if operands.get("count"):
        result.extra["count"] = operands["count"]
    if progress:
        result.extra["progress"] = [
            {"bytes": p.bytes, "seconds": p.seconds, "rate": p.rate} for p in progress
        ]
    return result


def _parse_many(text: str, **options: Any) -> list[ParseResult]:
    """Body of ``parse_many`` (``guard_parse`` has refused empty output)."""
    op = options.get("op")
    if op is not None and op not in ("read", "write"):
        raise ParseError(f"op must be 'read' or 'write', not {op!r}", tool=TOOL)
    command = options.get("command")
    if isinstance(command, (list, tuple)):
        command = shlex.join(str(c) for c in command)
    lines = split_lines(text)
    command = command or _find_command(lines)
    version_match = _VERSION_RE.search(text)
    version = f"coreutils-{version_match.group(1)}" if version_match else None
    runs = _runs(lines)
    if not runs:
        records = [n for n, line in enumerate(lines, 1) if _RECORDS_RE.match(line.strip())]
        if records:
            raise ParseError(
                "dd printed records in/out but no 'bytes … copied' summary after them "
                "(truncated output, or status=noxfer?)",
                line=records[-1],
                tool=TOOL,
            )
        raise ParseError("no dd 'bytes … copied' summary line found", tool=TOOL)
    results = []
    for summary, records, progress in runs:
        result = _result(summary, records, progress, op, command, version)
        errors = [line.strip() for line in lines if line.strip().startswith("dd: ")]
        if errors:
            result.extra["warnings"] = errors
        results.append(result.validate())
    return results


def parse(text: str, **options: Any) -> ParseResult:
    """Parse dd output. Options: ``op`` ("read"/"write") and ``command`` (dd's argv).

    The metric is ``bw`` unless the direction is known from ``op`` or from the command line
    (``if=/dev/zero`` writes, ``of=/dev/null`` reads). With several dd runs in one text the
    last one is returned; ``parse_many`` returns them all.
    """
    results = parse_many(text, **options)
    result = results[-1]
    if len(results) > 1:
        result.extra["other_runs"] = len(results) - 1
    return result


def parse_many(text: str, **options: Any) -> list[ParseResult]:
    """One ParseResult per dd invocation found in ``text``."""
    return guard_parse(TOOL, partial(_parse_many, **options), text)


def _parse_parts(text: str, **options: Any) -> list[ParseResult]:
    results = _parse_many(text, **options)
    labels = [f"run {index + 1}" for index in range(len(results))]
    return number_parts(number_runs(results), "run", labels)


def parse_parts(text: str, **options: Any) -> list[ParseResult]:
    """One result per independent measurement: each dd invocation of an output (its final
    summary, with its own size, time and records; status=progress lines belong to their
    run). Output of one invocation is one result."""
    return guard_parse(TOOL, partial(_parse_parts, **options), text)
