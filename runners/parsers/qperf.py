"""qperf output parser: one metric per test block (tcp_bw, rc_lat, udp_bw send/recv, ...)."""

# qperf prints, per test, a "name:" line followed by indented "key = value unit" lines. Units
# come from qperf.c: bandwidth bytes/KB/MB/GB/TB per sec (decimal, DESIGN.md) or, with
# --use_bits_per_sec, bits/Kb/Mb/Gb/Tb per sec; time ns/us/ms/sec; sizes bytes/KB/MB (decimal)
# or "64 KiB (65,536)"; numbers may carry thousands separators.
#
# Choices:
# * The metric name is the test name; "bw" and "latency" lines are its value. udp_bw (and other
#   tests printing send_bw/recv_bw) give <test>_send_bw / <test>_recv_bw when those names
#   exist, and the test itself takes recv_bw: what arrived is what the link carried.
# * A test that appears once gives stat "value". A test repeated in one output (-oo msg_size
#   sweeps, loops) gives one metric per block with ``iteration`` 0.. and, when printed,
#   ``extra={"msg_size": bytes}``; the run level is then the best block: stat "max" for
#   bandwidth, stat "min" for latency.
# * Every other printed quantity (msg_rate, send_cost, loc_cpus_used, ...) is kept, converted,
#   in ``result.extra["tests"][i]["fields"]``; conf lines (loc_node, loc_qperf, ...) in
#   ``result.extra["conf"]``; tool_version comes from loc_qperf when shown.

from __future__ import annotations

import re
import textwrap
from typing import Any

from runners.parsers.base import METRIC_UNITS, ParseError, ParseResult, guard_parse, split_lines

TOOL = "qperf"

_TEST_RE = re.compile(r"^([a-z][a-z0-9_]*):\s*$")
_FIELD_RE = re.compile(r"^\s+([A-Za-z][\w]*)\s+=\s+(.*?)\s*$")
_VALUE_RE = re.compile(r"^(-?[\d,]*\.?\d+)\s*(.*?)(?:\s+\(([\d,]+)\))?$")

_BW_UNITS = {
    "bytes/sec": 1.0,
    "KB/sec": 1e3,
    "MB/sec": 1e6,
    "GB/sec": 1e9,
    "TB/sec": 1e12,
}
_BIT_UNITS = {
    "bits/sec": 1 / 8,
    "Kb/sec": 1e3 / 8,
    "Mb/sec": 1e6 / 8,
    "Gb/sec": 1e9 / 8,
    "Tb/sec": 1e12 / 8,
}
# Divisors rather than factors: 12.2 / 1e6 is exactly the float 1.22e-05, 12.2 * 1e-6 is not.
_TIME_UNITS = {"ns": 1e9, "us": 1e6, "ms": 1e3, "sec": 1.0}
_SIZE_UNITS = {
    "bytes": 1,
    "KB": 1000,
    "MB": 1000**2,
    "GB": 1000**3,
    "TB": 1000**4,
    "KiB": 1024,
    "MiB": 1024**2,
    "GiB": 1024**3,
    "TiB": 1024**4,
}
_RATE_UNITS = {"/sec": 1.0, "K/sec": 1e3, "M/sec": 1e6, "G/sec": 1e9, "T/sec": 1e12}
_COUNT_UNITS = {"": 1.0, "thousand": 1e3, "million": 1e6, "billion": 1e9, "trillion": 1e12}


def detect(text: str) -> float:
    """Confidence that ``text`` is qperf output."""
    if not text:
        return 0.0
    lines = split_lines(text)
    hits = 0
    for i, line in enumerate(lines[:-1]):
        if _TEST_RE.match(line.strip()) and _FIELD_RE.match(lines[i + 1]):
            name = line.strip()[:-1]
            field = _FIELD_RE.match(lines[i + 1])
            if field and (name in METRIC_UNITS or name.endswith(("_bw", "_lat"))):
                hits += 1
    if hits:
        return min(1.0, 0.8 + 0.1 * hits)
    if re.search(r"\bqperf\b", text):
        return 0.2
    return 0.0


def parse(text: str, **options: Any) -> ParseResult:
    """Parse qperf text output into a validated ParseResult (ParseError otherwise)."""
    return guard_parse(TOOL, _parse, text)


def _number(text: str) -> float:
    return float(text.replace(",", ""))


def _convert(key: str, raw: str) -> tuple[float | str, str | None]:
    """A printed field value -> (number in base units, base unit) or (raw text, None)."""
    m = _VALUE_RE.match(raw)
    if not m:
        return raw, None
    number, unit, exact = m.groups()
    value = _number(number)
    # Case matters: "Mb/sec" is bits (--use_bits_per_sec), "MB/sec" bytes.
    if unit in _BIT_UNITS:
        return value * _BIT_UNITS[unit], "B/s"
    if unit in _BW_UNITS:
        return value * _BW_UNITS[unit], "B/s"
    if unit in _TIME_UNITS:
        return value / _TIME_UNITS[unit], "s"
    if unit in _SIZE_UNITS:
        # qperf adds the exact byte count in parentheses for 1024 multiples.
        return (_number(exact) if exact else value * _SIZE_UNITS[unit]), "B"
    if unit in _RATE_UNITS:
        return value * _RATE_UNITS[unit], "op/s"
    if unit in _COUNT_UNITS:
        return value * _COUNT_UNITS[unit], ""
    if unit == "% cpus":
        return value, "%"
    if unit.endswith("/GB") and unit.split("/")[0] in _TIME_UNITS:
        return value / _TIME_UNITS[unit.split("/")[0]], "s/GB"
    return raw, None


def _parse(text: str) -> ParseResult:
    # Pasted output is often indented as a whole (code blocks); test names start a line.
    lines = split_lines(textwrap.dedent(text.expandtabs()))
    blocks: list[dict[str, Any]] = []
    conf: dict[str, Any] = {}
    block: dict[str, Any] | None = None
    for idx, raw in enumerate(lines):
        line_no = idx + 1
        if not raw.strip():
            continue
        if m := _TEST_RE.match(raw.strip()):
            if raw[:1].isspace():
                continue
            block = {"test": m.group(1), "line": line_no, "fields": {}, "raw": {}}
            blocks.append(block)
            continue
        if block is not None and (m := _FIELD_RE.match(raw)):
            key, value_text = m.group(1), m.group(2)
            value, unit = _convert(key, value_text)
            if key.startswith(("loc_", "rem_")) and unit is None:
                conf[key] = value_text
                continue
            block["raw"][key] = value_text
            block["fields"][key] = value
            if unit:
                block.setdefault("units", {})[key] = unit
            continue

    if not blocks:
        raise ParseError(
            "no qperf test block ('<test>:' followed by 'bw = …' or 'latency = …') found", tool=TOOL
        )

    result = ParseResult(tool=TOOL)
    if "loc_qperf" in conf:
        result.tool_version = str(conf["loc_qperf"])

    # name -> list of (block index, value, extra)
    found: dict[str, list[tuple[float, dict[str, Any]]]] = {}
    order: list[str] = []
    skipped: list[str] = []
    for block in blocks:
        test, fields, units = block["test"], block["fields"], block.get("units", {})
        tag: dict[str, Any] = {}
        if units.get("msg_size") == "B":
            tag["msg_size"] = int(fields["msg_size"])
        emitted = False
        candidates: list[tuple[str, str]] = []
        if units.get("bw") == "B/s":
            candidates.append((test, "bw"))
        if units.get("latency") == "s":
            candidates.append((test, "latency"))
        for direction in ("send", "recv"):
            key = f"{direction}_bw"
            if units.get(key) == "B/s":
                candidates.append((f"{test.removesuffix('_bw')}_{direction}_bw", key))
                if direction == "recv" and units.get("bw") != "B/s":
                    candidates.append((test, key))
        for name, key in candidates:
            if name not in METRIC_UNITS:
                continue
            expected = "s" if METRIC_UNITS[name] == "s" else "B/s"
            if units.get(key) != expected:
                continue
            if name not in found:
                order.append(name)
            found.setdefault(name, []).append((float(fields[key]), tag))
            emitted = True
        if not emitted:
            skipped.append(f"line {block['line']}: {test}")

    for name in order:
        entries = found[name]
        if len(entries) == 1:
            value, tag = entries[0]
            result.add(name, value, **tag)
            continue
        for i, (value, tag) in enumerate(entries):
            result.add(name, value, iteration=i, **tag)
        values = [v for v, _ in entries]
        if METRIC_UNITS[name] == "s":
            result.add(name, min(values), stat="min")
        else:
            result.add(name, max(values), stat="max")

    if not result.metrics:
        first = blocks[0]
        raise ParseError(
            f"test {first['test']!r} at line {first['line']} has no readable bw/latency line",
            line=first["line"],
            tool=TOOL,
        )

    sizes = {tag.get("msg_size") for entries in found.values() for _, tag in entries}
    sizes.discard(None)
    if len(sizes) == 1:
        result.params["transfer_size"] = sizes.pop()
    result.params["tests"] = [b["test"] for b in blocks]
    result.extra["tests"] = [
        {"test": b["test"], "line": b["line"], "fields": b["fields"]} for b in blocks
    ]
    if conf:
        result.extra["conf"] = conf
    if skipped:
        result.extra["skipped"] = skipped
    return result.validate()
