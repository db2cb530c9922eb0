"""IOPS and completion-latency percentiles against a swept queue depth or job count, as
fio-plot draws them: one chart per set of alike runs, IOPS as bars on the left axis, p50 /
p99 / p99.9 of fio's completion latency (clat percentiles, runners.parsers.fio) as lines on
a logarithmic right axis. This is the chart that shows where more outstanding I/O stops
buying IOPS and only adds latency (the knee of the queue-depth curve).

A chart joins only runs that are alike except the swept parameter (DESIGN.md, "Alike
runs"): same tool, testbed, target, tuning set and every other parameter. A matrix that also
sweeps, say, the block size gets one chart per block size, and the page says what tells the
charts apart. Repetitions of a point are pooled: IOPS is their mean, each percentile the
mean of the runs' percentiles (a percentile of pooled samples would need fio's histograms,
which only ``json+`` output carries).
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from experiments.comparison.attributes import param_text
from experiments.comparison.charts import PALETTE
from experiments.comparison.comparability import NOT_CONFIGURATION, shown
from experiments.models import Metric, Run
from experiments.models.runs import OWN_RUNS
from experiments.results.store import DETAIL_KEYS

# Parameters whose sweep this chart is for: the queue depth per job and the number of jobs.
SWEEP_PARAMS = ("iodepth", "numjobs")
STATS = ("p50", "p99", "p99.9")
DIRECTIONS = ("read", "write")
MAX_CHARTS = 8
# The line of each percentile: solid to dotted as the tail gets rarer.
DASH = {"p50": "solid", "p99": "dash", "p99.9": "dot"}
# Parameters that tell runs apart but are bookkeeping of the run itself (the parser's count of
# processes follows numjobs and would split every numjobs sweep into one chart per point).
DERIVED = frozenset({"threads"})


@dataclass
class Point:
    """One value of the swept parameter: its runs' IOPS and percentiles (seconds)."""

    x: float
    iops: list[float] = field(default_factory=list)
    pct: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    runs: int = 0

    @staticmethod
    def _mean(values: list[float]) -> float | None:
        return sum(values) / len(values) if values else None

    def iops_mean(self) -> float | None:
        return self._mean(self.iops)

    def pct_mean(self, stat: str) -> float | None:
        return self._mean(self.pct.get(stat, []))


@dataclass
class Chart:
    """Alike runs of one direction over the swept parameter."""

    swept: str
    direction: str
    setup: dict[str, str]  # what these runs share that other charts do not: attribute -> value
    points: dict[float, Point] = field(default_factory=dict)
    full: dict[str, str] = field(default_factory=dict)  # everything these runs share

    def label(self) -> str:
        parts = [f"{k} {v}" for k, v in self.setup.items()]
        return ", ".join(parts)

    def missing(self) -> list[str]:
        """Points whose runs have IOPS but no percentiles (per-job reports without
        group_reporting, where fio's percentiles cannot be pooled), as text."""
        return [
            f"{self.swept}={_number(p.x)}"
            for p in sorted(self.points.values(), key=lambda p: p.x)
            if p.iops and not any(p.pct.get(s) for s in STATS)
        ]


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


def swept_param(matrix) -> str | None:
    """The matrix's swept queue depth or job count, if it is a fio matrix with such an axis
    (the first of them when it sweeps both: the other splits the charts)."""
    if matrix.tool != "fio":
        return None
    axes = [a.get("param") for a in matrix.axes or []]
    return next((p for p in SWEEP_PARAMS if p in axes), None)


def _run_metrics(run_ids: list[int]) -> dict[int, dict[tuple[str, str], float]]:
    """Run -> {(metric, stat): value} of the run's own IOPS and latency percentiles: not a
    job's, a target's or an iteration's (as ``results.mark_primary`` picks a headline value),
    the first group's where a job file has several."""
    names = [f"{d}_{k}" for d in DIRECTIONS for k in ("iops", "lat")]
    rows = (
        Metric.objects.filter(run_id__in=run_ids, name__in=names, iteration__isnull=True)
        .filter(stat__in=("value", *STATS))
        .order_by("run_id", "id")
        .values_list("run_id", "name", "stat", "value", "extra")
    )
    out: dict[int, dict[tuple[str, str], float]] = defaultdict(dict)
    for run_id, name, stat, value, extra in rows:
        if DETAIL_KEYS & set(extra or {}):
            continue
        if name.endswith("_iops") != (stat == "value"):
            continue
        out[run_id].setdefault((name, stat), value)
    return out


def _setup(run: Run, swept: str) -> dict[str, str]:
    """What must be equal for two runs to share a chart: everything but the swept parameter."""
    attrs = {
        "testbed": run.testbed.name if run.testbed_id else "",
        "target": run.target.name if run.target_id else "whole testbed",
        "tuning set": run.tuning_set.name if run.tuning_set_id else "(none)",
        # a published study's runs never join own runs (models.runs.source_expression)
        "data source": (run.source or "published") if run.published else OWN_RUNS,
    }
    for key, value in sorted((run.params or {}).items()):
        if key != swept and key not in NOT_CONFIGURATION and key not in DERIVED:
            attrs[key] = shown(f"param:{key}", param_text(value))
    return attrs


def charts_for(runs: list[Run], swept: str) -> list[Chart]:
    """Charts of ``runs`` over ``swept``: one per direction and set of alike runs, each
    keeping in ``setup`` only the attributes that differ between the charts."""
    metrics = _run_metrics([r.pk for r in runs])
    groups: dict[tuple, Chart] = {}
    for run in runs:
        x = (run.params or {}).get(swept)
        if isinstance(x, bool) or not isinstance(x, int | float):
            continue
        values = metrics.get(run.pk, {})
        setup = _setup(run, swept)
        for direction in DIRECTIONS:
            iops = values.get((f"{direction}_iops", "value"))
            if iops is None or iops <= 0:
                continue  # the run did not do I/O in this direction
            key = (direction, tuple(sorted(setup.items())))
            chart = groups.get(key)
            if chart is None:
                chart = groups[key] = Chart(swept, direction, {}, full=setup)
            point = chart.points.setdefault(float(x), Point(float(x)))
            point.runs += 1
            point.iops.append(iops)
            for stat in STATS:
                lat = values.get((f"{direction}_lat", stat))
                if lat is not None:
                    point.pct[stat].append(lat)
    return name_differences(list(groups.values()))


def name_differences(charts: list[Chart]) -> list[Chart]:
    """Keep in each chart's ``setup`` only what tells ``charts`` apart (what they share is
    the page's, already shown), in a stable order."""
    keys = set().union(*(c.full.keys() for c in charts)) if charts else set()
    varying = [k for k in sorted(keys) if len({c.full.get(k) for c in charts}) > 1]
    for chart in charts:
        chart.setup = {k: chart.full.get(k, "not stated") for k in varying}
    return sorted(charts, key=lambda c: (DIRECTIONS.index(c.direction), sorted(c.setup.items())))


def log_ticks(values: list[float]) -> dict[str, Any]:
    """Ticks of a logarithmic axis over ``values`` (all positive): 1, 2 and 5 of each decade
    the values span, or only the powers of ten when they span more than three decades, each
    labelled with its whole value ("0.2", "5", "10")."""
    if not values:
        return {}
    low, high = math.floor(math.log10(min(values))), math.ceil(math.log10(max(values)))
    steps = (1,) if high - low > 3 else (1, 2, 5)
    ticks = [
        round(step * 10**e, 12)
        for e in range(low, high + 1)
        for step in steps
        if min(values) / 2.5 <= step * 10**e <= max(values) * 2.5
    ]
    return {"tickmode": "array", "tickvals": ticks, "ticktext": [f"{t:g}" for t in ticks]}


def figure(chart: Chart) -> dict[str, Any]:
    """The plotly figure of one chart: IOPS bars (left axis), p50 / p99 / p99.9 lines in ms
    (right axis, logarithmic: the tail is often 10-100x the median). The x axis is the swept
    value as a category, in numeric order, so 1, 4, 16, 64 are evenly spaced as fio-plot
    shows them."""
    points = sorted(chart.points.values(), key=lambda p: p.x)
    xs = [_number(p.x) for p in points]
    data: list[dict[str, Any]] = [
        {
            "type": "bar",
            "name": f"{chart.direction} IOPS",
            "x": xs,
            "y": [None if p.iops_mean() is None else round(p.iops_mean()) for p in points],
            "customdata": [p.runs for p in points],
            "marker": {"color": PALETTE[0], "opacity": 0.55},
            "hovertemplate": "%{y:,} IOPS (mean of %{customdata} runs)<extra></extra>",
        }
    ]
    for i, stat in enumerate(STATS):
        ys = [p.pct_mean(stat) for p in points]
        if all(y is None for y in ys):
            continue
        data.append(
            {
                "type": "scatter",
                "mode": "lines+markers",
                "name": f"{stat} latency",
                "x": xs,
                "y": [None if y is None else round(y * 1e3, 4) for y in ys],
                "yaxis": "y2",
                "line": {"color": PALETTE[1 + i], "dash": DASH[stat], "width": 2},
                "connectgaps": False,
                "hovertemplate": f"{stat}: %{{y}} ms<extra></extra>",
            }
        )
    title = f"{chart.direction.capitalize()}: IOPS and completion latency against {chart.swept}"
    if chart.setup:
        title += f"<br><sub>{chart.label()}</sub>"
    return {
        "data": data,
        "layout": {
            "height": 360,
            "margin": {"l": 70, "r": 70, "t": 60 if chart.setup else 40, "b": 50},
            "title": {"text": title, "font": {"size": 14}},
            "hovermode": "x unified",
            "legend": {"orientation": "h", "y": -0.2},
            "xaxis": {"title": {"text": chart.swept}, "type": "category"},
            "yaxis": {"title": {"text": "IOPS"}, "rangemode": "tozero"},
            "yaxis2": {
                "title": {"text": "completion latency (ms)"},
                "overlaying": "y",
                "side": "right",
                "type": "log",
                # 1, 2, 5 per decade, each written in full: plotly's "D2" labels its minor
                # ticks with their digit alone, which read "5 2 1 5 2 0.1 5".
                **log_ticks([y for t in data[1:] for y in t["y"] if y]),
                "showgrid": False,
            },
        },
    }


def table(chart: Chart) -> list[dict[str, Any]]:
    """The chart's points as data (JSON exports): the swept value, the runs pooled, their
    mean IOPS and mean percentiles in seconds (None where no run reported one)."""
    return [
        {
            chart.swept: p.x,
            "runs": p.runs,
            "iops": p.iops_mean(),
            **{f"{stat}_s": p.pct_mean(stat) for stat in STATS},
        }
        for p in sorted(chart.points.values(), key=lambda p: p.x)
    ]


def export(context: dict[str, Any]) -> dict[str, Any]:
    """The latency charts of a page's context (``comparison_context``, or a share link's
    frozen copy of it) as a JSON export holds them: data, no plotly figures."""
    if not context:
        return {}
    return {
        "swept": context["swept"],
        "of": context["of"],
        "varying": context["varying"],
        "hidden": context["hidden"],
        "charts": [
            {
                "direction": f.get("direction", ""),
                "label": f["label"],
                "missing": f["missing"],
                "points": f.get("points", []),
            }
            for f in context["figures"]
        ],
    }


def _context(runs: list[Run], swept: str, of: str) -> dict[str, Any]:
    """Template context of experiments/_latency_sweep.html: the figures (charts of at least
    two points), what tells the charts apart, how many were left out; empty if none."""
    charts = name_differences([c for c in charts_for(runs, swept) if len(c.points) >= 2])
    if not charts:
        return {}
    shown_charts = charts[:MAX_CHARTS]
    return {
        "swept": swept,
        "of": of,
        "figures": [
            {
                "figure": figure(c),
                "missing": c.missing(),
                "label": c.label(),
                "direction": c.direction,
                "points": table(c),
                "data_id": f"latency-sweep-data-{i}",
            }
            for i, c in enumerate(shown_charts, 1)
        ],
        "varying": sorted({k for c in charts for k in c.setup}),
        "hidden": len(charts) - len(shown_charts),
    }


def _with_setup(runs):
    """The runs with what ``charts_for`` reads of them (``_setup``), and nothing else."""
    return runs.select_related("testbed", "target", "tuning_set").only(
        "params",
        "published",
        "source",
        "testbed__name",
        "target__name",
        "tuning_set__name",
    )


def matrix_context(
    matrix, run_ids: list[int] | None = None, of: str = "the finished runs"
) -> dict[str, Any]:
    """The matrix page's latency charts for a fio sweep of iodepth or numjobs: its finished
    runs (``run_ids``: those of them, the page's sample of a large matrix, which ``of``
    names); empty for any other matrix."""
    swept = swept_param(matrix)
    if swept is None:
        return {}
    runs = Run.objects.filter(matrix=matrix, status=Run.Status.SUCCEEDED)
    if run_ids is not None:
        runs = runs.filter(pk__in=run_ids)
    return _context(list(_with_setup(runs)), swept, of)


# A comparison over more runs than this shows no latency chart (it reads every run's row).
MAX_COMPARISON_RUNS = 5000


def comparison_context(spec, runs) -> dict[str, Any]:
    """The comparison page's latency charts when its x axis is iodepth or numjobs: the fio
    runs behind its points (the same filters: experiments.comparison.filtered_metrics),
    grouped into alike runs by this module's own rule, whatever the comparison pools (its
    series, ignored attributes). Empty otherwise, or over MAX_COMPARISON_RUNS runs."""
    from experiments.comparison.computation import filtered_metrics

    swept = spec.x.removeprefix("param:") if spec.x.startswith("param:") else ""
    if swept not in SWEEP_PARAMS or not spec.metrics or spec.errors:
        return {}
    ids = list(
        filtered_metrics(spec, runs)
        .filter(run__tool="fio")
        .values_list("run_id", flat=True)
        .distinct()[: MAX_COMPARISON_RUNS + 1]
    )
    if not ids or len(ids) > MAX_COMPARISON_RUNS:
        return {}
    selected = _with_setup(Run.objects.filter(pk__in=ids))
    return _context(list(selected), swept, "the fio runs of this comparison")
