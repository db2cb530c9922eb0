"""perftest output parser: ib_write_bw, ib_read_bw and ib_send_bw result tables."""

# Units, from perftest's own code (perftest_resources.c, print_report_bw):
#   format_factor = (report_fmt == MBS) ? 0x100000 : 125000000;
# so "MB/sec" (and the later "MiB/sec" label) is 2^20 B/s, and "Gb/sec" (--report_gbits) is
# 1e9 bits = 125,000,000 B/s. MsgRate[Mpps] is 1e6 op/s.
#
# Choices:
# * One row: BW average -> <test> stat "value"; BW peak -> stat "max" (left out when perftest
#   did not measure it and printed 0.00); MsgRate -> ib_<verb>_msg_rate stat "value".
# * Several rows of the same #bytes (--run_infinitely prints one per interval): each row is
#   ``iteration`` 0.. with stat "value"; the run level has stat "value" = the last row (the
#   state when the run was stopped), "mean" = the mean of the rows, and "min"/"max" over them.
# * Several rows of different #bytes (-a sweep): each row is stat "value" with
#   ``extra={"msg_size": bytes}`` (its BW peak, when measured, stat "max" with the same extra);
#   the run level is stat "max" over the rows' averages.
# * Header fields ("Device : mlx5_0", tab-separated or not) go to ``extra["header"]``; the
#   useful ones also to params (device, transport, connection, link_type, qps, mtu, tx_depth,
#   post_list, transfer_size). WARNING lines go to ``extra["warnings"]``.

from __future__ import annotations

import re
from statistics import fmean
from typing import Any

from runners.parsers.base import ParseError, ParseResult, guard_parse, split_lines

TOOL = "perftest"

_VERBS = {"rdma_write": "write", "rdma_read": "read", "send": "send"}
_TITLE_RE = re.compile(r"^\s*(\S+)\s+(.*?)\b(BW|Latency)\s+Test\s*$")
_TABLE_RE = re.compile(
    r"#bytes\s+#iterations\s+BW peak\[([^\]]+)\]\s+BW average\[([^\]]+)\]"
    r"(?:\s+MsgRate\[([^\]]+)\])?"
)
_LAT_TABLE_RE = re.compile(r"#bytes\s+#iterations\s+t_\w+\[")
_DEC = r"(\d+(?:\.\d+)?)"
_ROW_RE = re.compile(rf"^\s*(\d+)\s+(\d+)\s+{_DEC}\s+{_DEC}(?:\s+{_DEC})?\s*$")
_KV_RE = re.compile(r"(\S[^:\t]*?)\s*:\s*(\S+)")
_BW_FACTORS = {"gb/sec": 125_000_000.0, "mb/sec": float(2**20), "mib/sec": float(2**20)}
_RATE_FACTORS = {"mpps": 1e6}
_PARAM_KEYS = {
    "device": "device",
    "transport_type": "transport",
    "connection_type": "connection",
    "link_type": "link_type",
    "number_of_qps": "qps",
    "mtu": "mtu",
    "tx_depth": "tx_depth",
    "rx_depth": "rx_depth",
    "post_list": "post_list",
    "cq_moderation": "cq_moderation",
    "outstand_reads": "outstand_reads",
}


def detect(text: str) -> float:
    """Confidence that ``text`` is perftest (ib_*_bw) output."""
    if not text:
        return 0.0
    table = bool(_TABLE_RE.search(text))
    title = bool(re.search(r"^\s*(RDMA_Write|RDMA_Read|Send)\b.*\bBW Test\s*$", text, re.M))
    if table and title:
        return 1.0
    if table:
        return 0.9
    if title or _LAT_TABLE_RE.search(text):
        return 0.6
    if re.search(r"\bib_(write|read|send)_bw\b", text):
        return 0.2
    return 0.0


def parse(text: str, **options: Any) -> ParseResult:
    """Parse perftest bandwidth output into a validated ParseResult (ParseError otherwise)."""
    return guard_parse(TOOL, _parse, text, options)


def _header_value(raw: str) -> Any:
    """'OFF' -> False, '4096[B]' -> 4096, '128' -> 128, other text as is."""
    if raw in ("ON", "OFF"):
        return raw == "ON"
    m = re.fullmatch(r"(\d+)(?:\[B\])?", raw)
    return int(m.group(1)) if m else raw


def _parse(text: str, options: dict[str, Any]) -> ParseResult:
    lines = split_lines(text)
    ends_cleanly = text.endswith(("\n", "\r"))
    title: str | None = None
    title_line: int | None = None
    kind: str | None = None
    bidirectional = False
    header: dict[str, Any] = {}
    warnings: list[str] = []
    table_line: int | None = None
    units: tuple[str, str, str | None] | None = None
    rows: list[tuple[int, int, float, float, float | None, int]] = []
    in_header = False
    version: str | None = None

    for idx, raw in enumerate(lines):
        line_no = idx + 1
        stripped = raw.strip()
        if not stripped or set(stripped) <= {"-"}:
            continue
        if "WARNING" in stripped or stripped.startswith("Conflicting CPU frequency"):
            warnings.append(stripped)
            continue
        if m := re.match(r"^(?:Perftest|perftest)\s+v?(\d[\w.\-]*)", stripped):
            version = m.group(1)
            continue
        if table_line is None and (m := _TITLE_RE.match(raw)) and ":" not in raw:
            title, title_line = stripped, line_no
            kind = m.group(3)
            verb = m.group(1).lower()
            bidirectional = "bidirectional" in m.group(2).lower()
            header["verb"] = verb
            in_header = True
            continue
        if _LAT_TABLE_RE.search(raw):
            raise ParseError(
                "perftest latency tables (ib_*_lat) are not supported: there are no metric "
                "names for them",
                line=line_no,
                tool=TOOL,
            )
        if m := _TABLE_RE.search(raw):
            table_line = line_no
            units = (m.group(1), m.group(2), m.group(3))
            in_header = False
            continue
        if table_line is not None and (m := _ROW_RE.match(raw)):
            rate = float(m.group(5)) if m.group(5) is not None else None
            if rate is None and units and units[2] and idx == len(lines) - 1 and not ends_cleanly:
                continue  # an unterminated last row that lost its MsgRate column was cut short
            rows.append(
                (
                    int(m.group(1)),
                    int(m.group(2)),
                    float(m.group(3)),
                    float(m.group(4)),
                    rate,
                    line_no,
                )
            )
            continue
        if in_header and table_line is None:
            low = stripped.lower()
            if re.match(r"(local address|remote address|gid)\s*:", low):
                continue
            for key, value in _KV_RE.findall(raw):
                # "ibv_wr* API" -> "ibv_wr_api", "Data ex. method" -> "data_ex_method"
                header[re.sub(r"[^a-z0-9]+", "_", key.lower()).strip("_")] = _header_value(value)

    if kind == "Latency":
        raise ParseError(
            f"{title!r} (line {title_line}) is a latency test; only ib_*_bw is supported",
            line=title_line,
            tool=TOOL,
        )
    if table_line is None or units is None:
        where = f" after the test header at line {title_line}" if title_line else ""
        raise ParseError(
            f"no result table ('#bytes #iterations BW peak[…] BW average[…]') found{where}",
            line=title_line,
            tool=TOOL,
        )
    if not rows:
        raise ParseError(
            f"the result table header at line {table_line} has no data rows",
            line=table_line,
            tool=TOOL,
        )
    verb_key = str(header.get("verb", "")).lower()
    if verb_key and verb_key not in _VERBS:
        raise ParseError(f"unsupported perftest test {title!r}", line=title_line, tool=TOOL)
    verb = _VERBS.get(verb_key) or options.get("verb")
    if verb is None and options.get("test"):
        verb = str(options["test"]).removeprefix("ib_").removesuffix("_bw")
    if verb not in ("write", "read", "send"):
        raise ParseError(
            "cannot tell which perftest ran (no 'RDMA_Write/RDMA_Read/Send … BW Test' "
            "header); pass test='ib_write_bw'",
            line=table_line,
            tool=TOOL,
        )
    name = f"ib_{verb}_bw"
    rate_name = f"ib_{verb}_msg_rate"

    peak_unit, avg_unit, rate_unit = units
    try:
        peak_f, avg_f = _BW_FACTORS[peak_unit.lower()], _BW_FACTORS[avg_unit.lower()]
    except KeyError as exc:
        raise ParseError(
            f"unknown perftest bandwidth unit {exc}", line=table_line, tool=TOOL
        ) from None
    rate_f = _RATE_FACTORS.get((rate_unit or "").lower()) if rate_unit else None

    result = ParseResult(tool=TOOL, tool_version=version)
    sizes = {r[0] for r in rows}
    if len(rows) == 1:
        size, _, peak, avg, rate, _ = rows[0]
        result.add(name, avg * avg_f)
        if peak > 0:
            result.add(name, peak * peak_f, stat="max")
        if rate is not None and rate_f:
            result.add(rate_name, rate * rate_f)
    elif len(sizes) == 1:
        avgs = [r[3] * avg_f for r in rows]
        rates = [r[4] * rate_f for r in rows if r[4] is not None and rate_f]
        for i, row in enumerate(rows):
            result.add(name, row[3] * avg_f, iteration=i)
            if row[2] > 0:
                result.add(name, row[2] * peak_f, stat="max", iteration=i)
            if row[4] is not None and rate_f:
                result.add(rate_name, row[4] * rate_f, iteration=i)
        for metric, values in ((name, avgs), (rate_name, rates)):
            if not values:
                continue
            result.add(metric, values[-1])
            result.add(metric, fmean(values), stat="mean")
            result.add(metric, min(values), stat="min")
            result.add(metric, max(values), stat="max")
        result.params["run_infinitely"] = True
    else:
        best: dict[str, float] = {}
        for size, _, peak, avg, rate, _ in rows:
            result.add(name, avg * avg_f, msg_size=size)
            best[name] = max(best.get(name, 0.0), avg * avg_f)
            if peak > 0:
                result.add(name, peak * peak_f, stat="max", msg_size=size)
            if rate is not None and rate_f:
                result.add(rate_name, rate * rate_f, msg_size=size)
                best[rate_name] = max(best.get(rate_name, 0.0), rate * rate_f)
        for metric, value in best.items():
            result.add(metric, value, stat="max")

    if len(sizes) == 1:
        result.params["transfer_size"] = rows[0][0]
    for key, param in _PARAM_KEYS.items():
        if key in header:
            result.params[param] = header[key]
    result.params["bidirectional"] = bidirectional
    result.params["test"] = f"ib_{verb}_bw"
    result.extra["header"] = {k: v for k, v in header.items()}
    if title:
        result.extra["title"] = title
    result.extra["rows"] = [
        {
            "bytes": r[0],
            "iterations": r[1],
            "bw_peak": r[2],
            "bw_average": r[3],
            "msg_rate": r[4],
            "line": r[5],
        }
        for r in rows
    ]
    result.extra["units"] = {"bw_peak": peak_unit, "bw_average": avg_unit, "msg_rate": rate_unit}
    if warnings:
        result.extra["warnings"] = warnings
    result.extra["peak_measured"] = not any("BW peak won't be measured" in w for w in warnings)
    return result.validate()
