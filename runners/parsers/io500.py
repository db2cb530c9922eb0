"""io500 parser: stdout summaries ([RESULT]/[SCORE] lines) and the result.txt INI layout."""

from __future__ import annotations

import re
from typing import Any

from runners.parsers.base import (
    GIB,
    METRIC_UNITS,
    ParseError,
    ParseResult,
    split_lines,
    to_float,
    to_int,
)

TOOL = "io500"

_NUM = r"-?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|-?nan|-?inf"
_VERSION_RE = re.compile(r"^\s*IO500 version (?P<version>\S+)(?:\s+\((?P<mode>[^)]*)\))?")
# C app (sc20+):  "[RESULT]       ior-easy-write        6.173493 GiB/s : time 329.228 seconds"
#                 "[      ]            timestamp        0.000000 kIOPS : time 0.001 seconds"
# bash (<=isc20): "[RESULT] BW   phase 1   ior_easy_write   8.581 GB/s : time  58.27 seconds"
_RESULT_RE = re.compile(
    r"^\s*\[(?P<tag>RESULT[^\]]*|\s*)\]\s+(?:(?:BW|IOPS)\s+phase\s+\d+\s+)?"
    rf"(?P<phase>[A-Za-z][\w-]*)\s+(?P<value>{_NUM})\s+(?P<unit>GiB/s|GB/s|kIOPS|kiops)\s*"
    rf":\s*time\s+(?P<time>{_NUM})\s*seconds?\s*(?P<flag>\[INVALID\])?",
    re.IGNORECASE,
)
_SCORE_RE = re.compile(
    rf"^\s*\[(?P<tag>SCORE[^\]]*)\]\s+Bandwidth\s+(?P<bw>{_NUM})\s+(?P<bw_unit>GiB/s|GB/s)\s*:"
    rf"\s*IOPS\s+(?P<md>{_NUM})\s+kiops\s*:\s*TOTAL\s+(?P<total>{_NUM})\s*(?P<flag>\[INVALID\])?",
    re.IGNORECASE,
)
# result.txt (written next to stdout by the C app): "[phase]" sections with "key = value".
_SECTION_RE = re.compile(r"^\s*\[(?P<name>[A-Za-z][\w-]*)\]\s*$")
_PAIR_RE = re.compile(r"^\s*(?P<key>[\w-]+)\s*=\s*(?P<val>.*?)\s*$")
# io500 names its phases with dashes and mixed case; base.py's vocabulary uses these names.
_ALIASES = {"ior_rnd1mb_read": "ior_rnd1m_read", "ior_rnd4k_easy_read": "ior_rnd4k_read"}


def _metric_name(phase: str) -> str:
    name = phase.strip().lower().replace("-", "_")
    return _ALIASES.get(name, name)


def _bw(value: float, unit: str) -> float:
    # io500 reports bandwidth in GiB/s. The pre-2020 bash script labelled the same
    # number "GB/s" (it divided IOR's MiB/s by 1024), so both labels mean GiB/s here.
    return value * GIB


def _add_phase(
    result: ParseResult, phase: str, value: float, unit: str, time: float | None, invalid: bool
) -> None:
    name = _metric_name(phase)
    base = _bw(value, unit) if unit.lower() in ("gib/s", "gb/s") else value * 1000.0
    extra: dict[str, Any] = {}
    if time is not None:
        extra["time"] = time
    if invalid:
        extra["invalid"] = True
    if name in METRIC_UNITS and name not in ("io500_score", "io500_bw_score", "io500_md_score"):
        result.add(name, base, **extra)
    else:
        # Extended-mode phases (mdworkbench, random writes) have no vocabulary name yet.
        result.extra.setdefault("other_phases", []).append(
            {"phase": phase, "value": value, "unit": unit, **extra}
        )


def _add_scores(
    result: ParseResult, bw: float, bw_unit: str, md: float, total: float, invalid: bool
) -> None:
    extra = {"invalid": True} if invalid else {}
    result.add("io500_bw_score", _bw(bw, bw_unit), **extra)
    result.add("io500_md_score", md * 1000.0, **extra)
    result.add("io500_score", total, **extra)


def _parse_stdout(lines: list[str], result: ParseResult) -> bool:
    """[RESULT]/[SCORE] lines; True when any was found."""
    found = False
    for raw in lines:
        line = raw.rstrip()
        version = _VERSION_RE.match(line)
        if version:
            result.tool_version = version.group("version")
            if version.group("mode"):
                result.extra["mode"] = version.group("mode")
            continue
        row = _RESULT_RE.match(line)
        if row:
            value, time = to_float(row.group("value")), to_float(row.group("time"))
            tag = row.group("tag").strip().lower()
            invalid = bool(row.group("flag")) or "invalid" in tag
            if not tag:
                # "[      ]" marks phases outside the score (the timestamp dummy phase).
                result.extra.setdefault("unscored_phases", []).append(
                    {"phase": row.group("phase"), "value": value, "time": time}
                )
            elif value is not None:
                _add_phase(result, row.group("phase"), value, row.group("unit"), time, invalid)
                found = True
            if invalid:
                result.extra["invalid"] = True
            continue
        score = _SCORE_RE.match(line)
        if score:
            bw, md, total = (to_float(score.group(k)) for k in ("bw", "md", "total"))
            tag = score.group("tag").strip().upper()
            invalid = bool(score.group("flag")) or "INVALID" in tag
            if invalid:
                result.extra["invalid"] = True
            if bw is None or md is None or total is None:
                continue
            if tag == "SCOREX":
                # Extended mode prints a second score line over all phases; keep it apart.
                result.extra["extended_score"] = {
                    "bw_gib_s": bw,
                    "md_kiops": md,
                    "total": total,
                    "invalid": invalid,
                }
            else:
                _add_scores(result, bw, score.group("bw_unit"), md, total, invalid)
            found = True
            continue
        if "One or more test phases invalid" in line or line.lstrip().startswith("ERROR INVALID"):
            result.extra["invalid"] = True
            result.extra.setdefault("invalid_reasons", []).append(line.strip())
    return found


def _parse_result_txt(lines: list[str], result: ParseResult) -> bool:
    """result.txt: "[run] procs = 64", "[ior-easy-write] score = 6.17 / t_delta = 329.2",
    "[SCORE] MD = ... BW = ... SCORE = 6.5 [INVALID]"."""
    section: str | None = None
    pairs: dict[str, dict[str, str]] = {}
    order: list[str] = []
    for raw in lines:
        header = _SECTION_RE.match(raw)
        if header:
            section = header.group("name")
            if section not in pairs:
                pairs[section] = {}
                order.append(section)
            continue
        pair = _PAIR_RE.match(raw)
        if pair and section is not None:
            pairs[section][pair.group("key")] = pair.group("val")
        elif raw.lstrip().startswith("; ERROR INVALID"):
            result.extra["invalid"] = True
    found = False
    run = pairs.get("run", {})
    version = run.get("version")
    if version:
        result.tool_version = version
    procs = to_int(run.get("procs", ""))
    if procs is not None:
        result.params["threads"] = procs
    for name in order:
        values = pairs[name]
        if name in ("run", "SCORE", "SCOREX") or "score" not in values:
            continue
        score_text = values["score"]
        value = to_float(score_text.split()[0]) if score_text.split() else None
        if value is None:
            continue
        unit = "GiB/s" if name.lower().startswith("ior") else "kIOPS"
        invalid = "INVALID" in score_text.upper()
        _add_phase(result, name, value, unit, to_float(values.get("t_delta", "")), invalid)
        found = True
    scores = pairs.get("SCORE", {})
    if scores:
        bw = to_float(scores.get("BW", "").split()[0] if scores.get("BW", "").split() else "")
        md = to_float(scores.get("MD", "").split()[0] if scores.get("MD", "").split() else "")
        total_text = scores.get("SCORE", "")
        total = to_float(total_text.split()[0]) if total_text.split() else None
        invalid = "INVALID" in total_text.upper()
        if bw is not None and md is not None and total is not None:
            _add_scores(result, bw, "GiB/s", md, total, invalid)
            found = True
        if invalid:
            result.extra["invalid"] = True
    if found:
        result.extra["format"] = "result.txt"
    return found


def detect(text: str) -> float:
    """Confidence that ``text`` is io500 output."""
    if not text:
        return 0.0
    head = text[:200_000]
    if re.search(r"^\s*IO500 version \S+", head, re.M):
        return 1.0
    if re.search(
        r"^\s*\[RESULT[^\]]*\]\s+(?:(?:BW|IOPS)\s+phase\s+\d+\s+)?"
        r"(ior|mdtest|find)[-_\w]*\s+[\d.]+\s+(GiB/s|GB/s|kIOPS|kiops)",
        head,
        re.M | re.I,
    ):
        return 0.95
    if re.search(r"^\s*\[SCORE[^\]]*\]\s+Bandwidth\s+[\d.]+", head, re.M):
        return 0.95
    if re.search(r"^\s*\[(ior-easy-write|mdtest-easy-write)\]\s*$", head, re.M) and re.search(
        r"^\s*score\s*=", head, re.M
    ):
        return 0.7
    return 0.0


def parse(text: str, **options: Any) -> ParseResult:
    """Phase results and scores of one io500 run."""
    if not text or not text.strip():
        raise ParseError("the output is empty", tool=TOOL)
    lines = split_lines(text)
    result = ParseResult(tool=TOOL)
    if not _parse_stdout(lines, result) and not _parse_result_txt(lines, result):
        version_line = next((n for n, line in enumerate(lines, 1) if _VERSION_RE.match(line)), None)
        if version_line is not None:
            raise ParseError(
                f"'IO500 version' at line {version_line} but no [RESULT] or [SCORE] line "
                "follows (run aborted or output truncated?)",
                line=version_line,
                tool=TOOL,
            )
        raise ParseError("no io500 [RESULT] or [SCORE] line found", tool=TOOL)
    phases = [m for m in result.metrics if not m.name.startswith("io500_")]
    result.extra["complete"] = any(m.name == "io500_score" for m in result.metrics)
    result.extra["phases"] = len(phases)
    return result.validate()
