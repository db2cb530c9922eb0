"""Comparison rows -> display units, a table and a plotly figure (pure functions, no database)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

# Series colours stay the same for a given series name across the charts of one page.
PALETTE = [
    "#1f77b4",
    "#d62728",
    "#2ca02c",
    "#ff7f0e",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#7f7f7f",
    "#bcbd22",
    "#17becf",
]


def display_unit(base_unit: str, binary: bool = False) -> tuple[str, float]:
    """(label, divisor) to show a base unit: GB/s by default, GiB/s on request (DESIGN.md)."""
    if base_unit == "B/s":
        return ("GiB/s", 2**30) if binary else ("GB/s", 1e9)
    if base_unit == "s":
        return "ms", 1e-3
    if base_unit == "B":
        return ("GiB", 2**30) if binary else ("GB", 1e9)
    return base_unit, 1.0


# Human names of metrics for chart titles and axes; the API keeps the metric names themselves.
METRIC_LABELS = {
    "write_bw": "Write throughput",
    "read_bw": "Read throughput",
    "rewrite_bw": "Rewrite throughput",
    "reread_bw": "Re-read throughput",
    "randwrite_bw": "Random write throughput",
    "randread_bw": "Random read throughput",
    "bkwdread_bw": "Backward read throughput",
    "recwrite_bw": "Record rewrite throughput",
    "strideread_bw": "Stride read throughput",
    "fwrite_bw": "fwrite() throughput",
    "frewrite_bw": "fwrite() rewrite throughput",
    "fread_bw": "fread() throughput",
    "freread_bw": "fread() re-read throughput",
    "pwrite_bw": "pwrite() throughput",
    "pread_bw": "pread() throughput",
    "bw": "Throughput, direction not stated",
    "write_iops": "Write IOPS",
    "read_iops": "Read IOPS",
    "trim_iops": "Trim IOPS",
    "write_lat": "Write latency",
    "read_lat": "Read latency",
    "write_open_lat": "Write open latency",
    "read_open_lat": "Read open latency",
    "write_close_lat": "Write close latency",
    "read_close_lat": "Read close latency",
    "write_time": "Write time",
    "read_time": "Read time",
    "dir_create": "Directory creates",
    "dir_stat": "Directory stats",
    "dir_rename": "Directory renames",
    "dir_remove": "Directory removals",
    "file_create": "File creates",
    "file_stat": "File stats",
    "file_read": "File reads",
    "file_remove": "File removals",
    "file_rename": "File renames",
    "tree_create": "Tree creates",
    "tree_remove": "Tree removals",
    "io500_score": "IO500 score",
    "io500_bw_score": "IO500 bandwidth score",
    "io500_md_score": "IO500 metadata score",
}
_SUFFIXES = {"bw": "bandwidth", "lat": "latency", "iops": "IOPS", "msg_rate": "message rate"}
_WORDS = {
    "tcp": "TCP",
    "udp": "UDP",
    "sdp": "SDP",
    "rc": "RC",
    "uc": "UC",
    "ud": "UD",
    "rdma": "RDMA",
    "ib": "InfiniBand",
    "ior": "IOR",
    "rnd4k": "random 4k",
    "rnd1m": "random 1m",
}


def metric_label(name: str) -> str:
    """ "write_bw" -> "Write throughput"; names without an entry are spelled out from their
    parts ("rc_rdma_write_bw" -> "RC RDMA write bandwidth")."""
    if name in METRIC_LABELS:
        return METRIC_LABELS[name]
    words = name.split("_")
    tail = ""
    for suffix, text in _SUFFIXES.items():
        if name.endswith("_" + suffix):
            words = name[: -len(suffix) - 1].split("_")
            tail = text
            break
    text = " ".join([_WORDS.get(w, w) for w in words if w] + ([tail] if tail else []))
    return text[:1].upper() + text[1:] if text else name


def metric_title(name: str, unit: str) -> str:
    """ "Write throughput (GB/s)" """
    return f"{metric_label(name)} ({unit})" if unit else metric_label(name)


def _sort_key(value: Any) -> tuple:
    """Numbers in numeric order first ("4" < "16"), then text."""
    try:
        return (0, float(value), "")
    except (TypeError, ValueError):
        return (1, 0.0, str(value))


@dataclass
class Point:
    series: str
    x: str
    n: int
    mean: float
    min: float
    max: float
    stddev: float | None


def sample_stddev(row: dict) -> float | None:
    """The database's sample standard deviation, or one from the sum of squares where the
    database has none (SQLite); None for fewer than two values."""
    n = row["n"]
    if n < 2:
        return None
    if row.get("stddev") is not None:
        return row["stddev"]
    if row.get("sum_sq") is None:
        return None
    variance = (row["sum_sq"] - n * row["mean"] ** 2) / (n - 1)
    return math.sqrt(max(variance, 0.0))


def to_points(rows, divisor: float, series_label, x_label) -> list[Point]:
    rows = [{**row, "stddev": sample_stddev(row)} for row in rows]
    points = [
        Point(
            series=series_label(row["series"]),
            x=x_label(row["x"]),
            n=row["n"],
            mean=row["mean"] / divisor,
            min=row["min"] / divisor,
            max=row["max"] / divisor,
            stddev=None if row["stddev"] is None else row["stddev"] / divisor,
        )
        for row in rows
    ]
    points.sort(key=lambda p: (p.series, _sort_key(p.x)))
    return points


def colours(series_names: list[str]) -> dict[str, str]:
    return {name: PALETTE[i % len(PALETTE)] for i, name in enumerate(sorted(set(series_names)))}


def figure(
    points: list[Point], *, x_title: str, y_title: str, has_x: bool, log_x: bool = False
) -> dict:
    """A plotly figure as a plain dict: lines with min/max error bars over an x axis, or
    grouped bars when there is no x axis."""
    palette = colours([p.series for p in points])
    traces = []
    for name in sorted(palette, key=lambda s: s):
        pts = [p for p in points if p.series == name]
        trace: dict[str, Any] = {
            "name": name or "all",
            "x": [p.x for p in pts] if has_x else [name or "all"],
            "y": [round(p.mean, 6) for p in pts],
            "marker": {"color": palette[name]},
            "error_y": {
                "type": "data",
                "symmetric": False,
                "array": [round(p.max - p.mean, 6) for p in pts],
                "arrayminus": [round(p.mean - p.min, 6) for p in pts],
                "visible": any(p.n > 1 for p in pts),
            },
            "customdata": [[p.n, round(p.min, 6), round(p.max, 6)] for p in pts],
            "hovertemplate": "%{y:.3f} (n=%{customdata[0]}, min %{customdata[1]:.3f}, "
            "max %{customdata[2]:.3f})<extra>%{fullData.name}</extra>",
        }
        if has_x:
            trace.update(type="scatter", mode="lines+markers")
        else:
            trace.update(type="bar")
        traces.append(trace)
    x_values = sorted({p.x for p in points}, key=_sort_key)
    numeric_x = has_x and all(_sort_key(x)[0] == 0 for x in x_values)
    xaxis: dict[str, Any] = {"title": {"text": x_title}}
    if has_x and not numeric_x:
        xaxis.update(type="category", categoryorder="array", categoryarray=x_values)
    elif numeric_x and log_x and all(float(x) > 0 for x in x_values):
        xaxis.update(type="log", tickvals=[float(x) for x in x_values], ticktext=list(x_values))
    return {
        "data": traces,
        "layout": {
            "xaxis": xaxis,
            "yaxis": {"title": {"text": y_title}, "rangemode": "tozero"},
            "barmode": "group",
            "legend": {"orientation": "h", "y": -0.2},
            "margin": {"l": 60, "r": 20, "t": 20, "b": 60},
            "height": 460,
        },
    }


def is_power_of_two_axis(points: list[Point]) -> bool:
    """Thread and size sweeps (1, 2, 4, … 1024) read best on a log axis: numeric, positive,
    at least three values spanning 16x or more."""
    values = set()
    for p in points:
        try:
            values.add(float(p.x))
        except ValueError:
            return False
    return (
        len(values) >= 3
        and min(values) > 0
        and max(values) / min(values) >= 16
        and not math.isinf(max(values))
    )
