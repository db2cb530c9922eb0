"""Plotly figures of a result: lines or grouped bars with honest error bars, heatmaps, and
the layout of exported images; display units and human metric names."""

from __future__ import annotations

import html
import math
from dataclasses import dataclass
from typing import Any

from experiments.comparison import dimensions
from experiments.comparison.comparability import shown
from experiments.comparison.dimensions import sort_key
from experiments.comparison.result import Chart, ComparisonResult, MetricInfo, Point
from experiments.comparison.spec import BOTTLENECKS, ERRORS, ComparisonSpec
from runners import metrics

MAX_REPETITION_POINTS = 5000
MAX_HEATMAPS = 8


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


# Human names of metrics for chart titles and axes (runners.metrics); the API keeps the metric
# names themselves.
METRIC_LABELS = metrics.LABELS


def metric_label(name: str) -> str:
    """ "write_bw" -> "Write throughput"; names outside the vocabulary are spelled out from
    their parts ("rc_rdma_write_bw" -> "RC RDMA write bandwidth")."""
    return metrics.label(name)


def metric_title(name: str, unit: str) -> str:
    """ "Write throughput (GB/s)" """
    return f"{metric_label(name)} ({unit})" if unit else metric_label(name)


def colours(series_names: list[str]) -> dict[str, str]:
    """Series name -> colour, by the names' order (the series' order: 4 KiB before 1 MiB)."""
    return {name: PALETTE[i % len(PALETTE)] for i, name in enumerate(dict.fromkeys(series_names))}


def _series_order(points: list[Point]) -> dict[str, tuple]:
    """Series name -> its place: in the order of the series' values (sizes, RAID levels
    numerically), not of their labels as text ("1 MiB" < "128 KiB" < "4 KiB")."""
    return {p.series: dimensions.label_order(p.series_key, p.series) for p in points}


# A 95% confidence interval of fewer than three values says little (with n = 2 its t factor is
# 12.7: two runs of 3 and 121 GB/s give -687 to 811 GB/s); such points show min-max instead.
MIN_CI_N = 3
MINMAX_NOTE = "n < 3: min–max shown"
MAX_LISTED = 6  # testbeds and filter values named in an exported image


@dataclass
class _Bars:
    error_y: dict | None
    texts: list[str]  # per point, for the hover
    minmax: bool  # some point shows min-max instead of a confidence interval
    clipped: bool  # some lower end was clipped at zero


def _g(value: float) -> str:
    return f"{value:.4g}"


def _error_bars(pts: list[Point], kind: str) -> _Bars:
    """Error bars of one series. Every metric beeweb knows is non-negative (throughput, IOPS,
    latency, times, scores), so a bar's lower end is clipped at zero; the hover says so."""
    plus: list[float | None] = []
    minus: list[float | None] = []
    texts: list[str] = []
    minmax = clipped = False
    for p in pts:
        hi = lo = None
        name = ""
        if kind == "none" or p.n < 2:
            pass
        elif kind == "ci" and p.n >= MIN_CI_N and p.ci_low is not None:
            # The t interval is symmetric about the mean; its lower end is given clipped at
            # zero (stats.confidence_interval): the bar and its hover say when it was.
            hi, lo, name = p.ci_high, min(p.ci_low, 2 * p.mean - p.ci_high), "95% CI"
        elif kind == "ci":
            hi, lo, name = p.max, p.min, f"min–max (n = {p.n} < {MIN_CI_N}: no CI)"
            minmax = True
        elif kind == "sd" and p.stddev is not None:
            hi, lo, name = p.mean + p.stddev, p.mean - p.stddev, "± std. dev."
        elif kind == "minmax":
            hi, lo, name = p.max, p.min, "min–max"
        text = ""
        if lo is not None and lo < 0:
            text = f"{name} {_g(lo)}–{_g(hi)}, drawn from 0 (the metric is never negative)"
            lo = 0.0
            clipped = True
        elif lo is not None:
            text = f"{name} {_g(lo)}–{_g(hi)}"
        plus.append(None if hi is None else round(max(hi - p.mean, 0.0), 6))
        minus.append(None if lo is None else round(max(p.mean - lo, 0.0), 6))
        texts.append(text)
    error = None
    if any(v for v in plus + minus):
        error = {
            "type": "data",
            "symmetric": False,
            "array": plus,
            "arrayminus": minus,
            "visible": True,
        }
    return _Bars(error, texts, minmax, clipped)


def _hover_notes(points: list[Point], texts: list[str]) -> list[str]:
    """The error bar's note and, in peak mode, where the peak was reached."""
    out = []
    for p, text in zip(points, texts, strict=True):
        peak = f"peak of {p.peak_of}: {p.peak_at}" if p.peak_of else ""
        out.append("<br>".join(_esc(t) for t in (text, peak) if t))
    return out


def _number(value: float) -> str:
    """4.0 -> "4" (integer parameters get integer labels), 0.5 -> "0.5"."""
    return str(int(value)) if value.is_integer() else f"{value:g}"


def _integer_step(span: float, ticks: int = 8) -> int:
    """A 1-2-5 step of at least 1 giving about ``ticks`` ticks over ``span``."""
    raw = max(span / ticks, 1.0)
    magnitude = 10 ** math.floor(math.log10(raw))
    for factor in (1, 2, 5, 10):
        if factor * magnitude >= raw:
            return int(factor * magnitude)
    return int(10 * magnitude)


def _numeric_values(x_values: list[str]) -> list[float] | None:
    """The x values as finite numbers, or None when any is not a number (categorical)."""
    try:
        values = [float(x) for x in x_values]
    except ValueError:
        return None
    return values if all(math.isfinite(v) for v in values) else None


def _x_axis(x_values: list[str], title: str, has_x: bool, bars: bool, key: str = "") -> dict:
    """Categories for bars and text values; a log axis (ticks at the values, integer labels)
    for sweeps spanning 16x or more such as 1, 2, 4 … 256 threads; otherwise a linear axis,
    whose ticks are integers when the parameter is (numjobs 1 and 2 never get a 1.5)."""
    axis: dict[str, Any] = {"title": {"text": title}}
    if not has_x:
        return axis
    values = _numeric_values(x_values)
    if bars or values is None:
        axis.update(type="category", categoryorder="array", categoryarray=x_values)
        if key.startswith("param:") and any(shown(key, x) != x for x in x_values):
            axis.update(
                tickmode="array", tickvals=x_values, ticktext=[shown(key, x) for x in x_values]
            )
        return axis
    # Tick labels as people read them: 4 threads, and a size parameter in units (10 GiB).
    ticktext = [shown(key, _number(v)) for v in values]
    if len(values) >= 3 and min(values) > 0 and max(values) / min(values) >= 16:
        axis.update(type="log", tickmode="array", tickvals=values, ticktext=ticktext)
    elif all(v.is_integer() for v in values):
        axis.update(type="linear")
        if len(values) <= 12:
            axis.update(tickmode="array", tickvals=values, ticktext=ticktext)
        else:
            step = _integer_step(max(values) - min(values))
            axis.update(tickmode="linear", tick0=0, dtick=step, tickformat="d")
    else:
        axis.update(type="linear")
    return axis


# Plotly's mode bar sits in the top right corner of a chart, over whatever is there: on a
# narrow chart (a phone, 390 px) a centred title runs under it. The title therefore sits
# below the mode bar's row (pad, from the top of the figure), and the plot below the title
# and the error-bar note above the plot's top edge.
TOP_MARGIN = 84


def _title(text: str) -> dict:
    return {
        "text": _esc(text),
        "font": {"size": 14},
        "yref": "container",
        "y": 1,
        "yanchor": "top",
        "pad": {"t": 30},
    }


def _layout(x_axis: dict, y_title: str, **extra) -> dict:
    layout = {
        "xaxis": x_axis,
        # Every metric is non-negative: the axis starts at zero and never shows negatives.
        "yaxis": {
            "title": {"text": y_title},
            "rangemode": "tozero",
            "autorangeoptions": {"minallowed": 0},
        },
        "barmode": "group",
        "legend": {"orientation": "h", "y": -0.22},
        "margin": {"l": 70, "r": 20, "t": TOP_MARGIN, "b": 70},
        "height": 470,
    }
    layout.update(extra)
    return layout


def _esc(text: str) -> str:
    """Plotly reads a little HTML in titles: names from users are shown as text."""
    return html.escape(text, quote=False)


def _listed(names: list[str]) -> str:
    shown = ", ".join(names[:MAX_LISTED])
    more = len(names) - MAX_LISTED
    return f"{shown} and {more} more" if more > 0 else shown


def filter_summary(spec: ComparisonSpec, testbed_names: dict[str, str]) -> str:
    """The spec's filters in words: "architecture: aarch64 (Arm) or x86_64; tool: dd"."""
    parts = []
    for key, values in spec.filter_groups().items():
        shown = " or ".join(dimensions.display_value(key, v) for v in values)
        parts.append(f"{dimensions.label(key)}: {shown}")
    if spec.tools:
        parts.append("tool: " + " or ".join(spec.tools))
    if spec.testbeds:
        parts.append("testbed: " + " or ".join(testbed_names.get(t, t) for t in spec.testbeds))
    if spec.matrices:
        from experiments.models import Matrix

        names = dict(Matrix.objects.filter(uuid__in=spec.matrices).values_list("uuid", "name"))
        parts.append("matrix: " + " or ".join(str(names.get(_uuid(m), m)) for m in spec.matrices))
    if spec.date_from or spec.date_to:
        since = spec.date_from.isoformat() if spec.date_from else "…"
        until = spec.date_to.isoformat() if spec.date_to else "…"
        parts.append(f"runs from {since} to {until}")
    if spec.bottleneck:
        parts.append(f"bottleneck: {BOTTLENECKS[spec.bottleneck]}")
    return "; ".join(parts) or "none"


def _uuid(text: str):
    import uuid

    try:
        return uuid.UUID(text)
    except ValueError:
        return text


def _export_layout(
    title: str, spec: ComparisonSpec, result: ComparisonResult, testbeds: list[str], filters: str
) -> dict:
    """Layout changes for exported images (PNG/SVG): the title says what is compared, and
    the filters and testbeds are named, so that an image stands on its own."""
    what = title + (f" by {result.x_label}" if spec.x else "")
    if spec.series:
        what += f", series: {result.series_label}"
    lines = [f"Filters: {filters}", f"Testbeds: {_listed(testbeds) or 'none'}"]
    return {
        "title": {
            "text": _esc(what),
            "subtitle": {"text": "<br>".join(_esc(line) for line in lines)},
            "x": 0,
            "xref": "paper",
            "xanchor": "left",
            "font": {"size": 15},
        },
        "margin": {"l": 70, "r": 20, "t": 110, "b": 70},
    }


def _pairs(result: ComparisonResult, spec: ComparisonSpec) -> list[list[tuple[MetricInfo, list]]]:
    """The result's tables, each alone, except that with the access direction as the series
    (``series=param:rw``) a write metric and its read twin (write_bw and read_bw, write_iops
    and read_iops) share one chart: write runs have no read metric and read runs no write
    one, so apart each chart held one direction and the comparison was across two charts."""
    tables = [(m, pts) for m, pts in result.tables() if pts]
    if spec.series != "param:rw" or spec.chart == "heatmap":
        return [[t] for t in tables]
    by_name = {m.name: (m, pts) for m, pts in tables}
    groups, done = [], set()
    for m, pts in tables:
        if m.name in done:
            continue
        twin = (
            m.name.replace("write", "read", 1)
            if "write" in m.name
            else m.name.replace("read", "write", 1)
        )
        if twin != m.name and twin in by_name and by_name[twin][0].unit == m.unit:
            pair = [(m, pts), by_name[twin]]
            pair.sort(key=lambda t: "read" in t[0].name)  # write first
            groups.append(pair)
            done |= {m.name, twin}
        else:
            groups.append([(m, pts)])
            done.add(m.name)
    return groups


def _pair_title(infos: list[MetricInfo]) -> str:
    """ "Write and read throughput (GB/s)" for write_bw with read_bw."""
    labels = [metric_label(m.name) for m in infos]
    if len(labels) == 1:
        return metric_title(infos[0].name, infos[0].unit)
    first, second = labels
    a, _, rest_a = first.partition(" ")
    b, _, rest_b = second.partition(" ")
    text = f"{a} and {b.lower()} {rest_a}" if rest_a == rest_b else f"{first} and {second}"
    return f"{text} ({infos[0].unit})" if infos[0].unit else text


def _gaps(xs: list[float], grid: list[float], log: bool) -> list[bool]:
    """Per segment of one series' line (between its points i and i + 1, in x order): whether
    it spans an unmeasured gap and must not be drawn. A segment is a gap when the chart shows
    x values between its ends (other series measured there, this one not) and it is not one
    step of the series' own regular sweep (at least three points, the step no larger than
    its finest: 32 to 64 of 4, 8 … 64 stays joined across another series' 48; seed 002's 1
    and 256 threads, two points of a sweep whose other points it does not state, do not)."""

    def step(a: float, b: float) -> float:
        return b / a if log else b - a

    steps = [step(a, b) for a, b in zip(xs, xs[1:], strict=False)]
    finest = min(steps, default=0.0)
    out = []
    for (a, b), size in zip(zip(xs, xs[1:], strict=False), steps, strict=True):
        between = any(a < x < b for x in grid)
        regular = len(xs) >= 3 and size <= finest * 1.0001
        out.append(between and not regular)
    return out


def _cut(trace: dict, gaps: list[bool], log: bool) -> None:
    """Leave the gap segments of a line trace undrawn: markers only when every segment is a
    gap, else a point without a value (not connected) inside each gap."""
    if not any(gaps):
        return
    if all(gaps):
        trace["mode"] = "markers"
        return
    keys = ("x", "y", "customdata")
    old = {k: trace[k] for k in keys}
    new: dict[str, list] = {k: [] for k in keys}
    for i in range(len(old["x"])):
        for k in keys:
            new[k].append(old[k][i])
        if i < len(gaps) and gaps[i]:
            a, b = float(old["x"][i]), float(old["x"][i + 1])
            mid = math.sqrt(a * b) if log else (a + b) / 2
            new["x"].append(f"{mid:g}")
            new["y"].append(None)
            new["customdata"].append([None] * len(old["customdata"][i]))
    trace.update(new)
    trace["connectgaps"] = False
    if "error_y" in trace:
        for k in ("array", "arrayminus"):
            values, spread = trace["error_y"][k], []
            for i, v in enumerate(values):
                spread.append(v)
                if i < len(gaps) and gaps[i]:
                    spread.append(None)
            trace["error_y"][k] = spread


def _span(values: list[str]) -> str:
    return " and ".join(values) if len(values) <= 2 else f"{values[0]} to {values[-1]}"


def chart_figures(
    result: ComparisonResult,
    spec: ComparisonSpec,
    reps: dict[int, list[float]],
    testbeds: dict[str, list[str]] | None = None,
    testbed_names: dict[str, str] | None = None,
) -> list[Chart]:
    out: list[Chart] = []
    testbeds = testbeds or {}
    filters = filter_summary(spec, testbed_names or {})
    # Peak over a parameter sweep: one bar per series (the hover says where it peaked).
    peak_sweep = spec.stat == "peak" and spec.x.startswith("param:")
    for group in _pairs(result, spec):
        m, pts = group[0]
        title = _pair_title([info for info, _ in group])
        if spec.chart == "heatmap":
            out += _heatmaps(m, pts, spec, result)
            continue
        has_x = bool(spec.x) and not peak_sweep
        every = [p for _, ps in group for p in ps]
        plotted = [p for p in every if not has_x or p.x != dimensions.UNKNOWN]
        notes = []
        left_off = [p for p in every if has_x and p.x == dimensions.UNKNOWN]
        if left_off:
            names = sorted({p.series for p in left_off})
            notes.append(
                f"Not on the chart: {len(left_off)} of the {len(every)} rows of the table "
                f"{'states' if len(left_off) == 1 else 'state'} no "
                f"{result.x_label or 'x value'} ({'; '.join(names)})."
            )
        if not plotted:
            continue
        x_values = sorted({p.x for p in plotted}, key=sort_key)
        # Text categories (tool, RAID level…) and a single x value are grouped bars: lines
        # between categories, or two floating dots, suggest a trend that is not there.
        bars = (
            spec.chart == "bar"
            or not has_x
            or len(x_values) == 1
            or _numeric_values(x_values) is None
        )
        if bars and spec.chart == "line":
            why = (
                "there is no x axis"
                if not has_x
                else f"{result.x_label} has one value"
                if len(x_values) == 1
                else f"{result.x_label} holds categories, not numbers"
            )
            notes.append(
                f"Drawn as bars, not lines: {why} (a line between them would suggest a trend "
                "that is not there)."
            )
        traces = []
        minmax = clipped = drawn = False
        x_axis = _x_axis(x_values, result.x_label if has_x else "", has_x, bars, spec.x)
        log = x_axis.get("type") == "log"
        grid = [float(x) for x in x_values] if not bars else []
        paired = len(group) > 1
        order = _series_order(plotted)
        keys = sorted({(p.series, p.metric) for p in plotted}, key=lambda k: (order[k[0]], k[1]))
        shared = {s for s, _ in keys if sum(1 for t, _ in keys if t == s) > 1}
        for label, metric in keys:
            sp = sorted(
                (p for p in plotted if p.series == label and p.metric == metric),
                key=lambda p: sort_key(p.x),
            )
            name = f"{label} · {metric_label(metric)}" if label in shared else label
            colour = result.colours.get(label, PALETTE[0])
            errors = _error_bars(sp, spec.error)
            trace: dict[str, Any] = {
                "name": name,
                "legendgroup": name,
                "x": [p.x for p in sp] if has_x else [label] * len(sp),
                "y": [round(p.mean, 6) for p in sp],
                "marker": {"color": colour},
                "customdata": [
                    [p.n, _r(p.median), _r(p.min), _r(p.max), _r(p.cv_pct), text]
                    for p, text in zip(sp, _hover_notes(sp, errors.texts), strict=True)
                ],
                "hovertemplate": "%{y:.3f} (n=%{customdata[0]}, median %{customdata[1]:.3f}, "
                "min %{customdata[2]:.3f}, max %{customdata[3]:.3f}, "
                "CV %{customdata[4]:.1f}%)<br>%{customdata[5]}<extra>%{fullData.name}</extra>",
                "type": "bar" if bars else "scatter",
            }
            if bars and has_x:
                trace["offsetgroup"] = label
            elif not bars:
                trace["mode"] = "lines+markers"
                if paired and "read" in metric:
                    trace["line"] = {"dash": "dot"}
            if errors.error_y:
                trace["error_y"] = errors.error_y
                drawn = True
                minmax |= errors.minmax
                clipped |= errors.clipped
            if not bars and len(sp) > 1:
                xs = [float(p.x) for p in sp]
                gaps = _gaps(xs, grid, log)
                _cut(trace, gaps, log)
                for i, gap in enumerate(gaps):
                    if gap:
                        ends = [shown(spec.x, sp[i].x), shown(spec.x, sp[i + 1].x)]
                        notes.append(
                            f"{name}: {_span(ends)} {result.x_label} not joined by a line "
                            "(not measured in between; other series were)."
                        )
            traces.append(trace)
            if reps:
                run_x, ys = [], []
                for p in sp:
                    for v in reps.get(id(p), []):
                        run_x.append(p.x if has_x else label)
                        ys.append(round(v, 6))
                if run_x:
                    run_trace = {
                        "name": f"{name} (runs)",
                        "legendgroup": name,
                        "showlegend": False,
                        "type": "scatter",
                        "mode": "markers",
                        "x": run_x,
                        "y": ys,
                        "marker": {
                            "color": colour,
                            "size": 6,
                            "opacity": 0.45,
                            "symbol": "circle-open",
                        },
                        "hovertemplate": "%{y:.3f} (one run)<extra>%{fullData.name}</extra>",
                    }
                    if bars and has_x:
                        run_trace["offsetgroup"] = label  # over its own bar (scattermode group)
                    traces.append(run_trace)
        extra: dict[str, Any] = {"title": _title(title)}
        if bars and has_x and reps:
            extra["scattermode"] = "group"
        if not has_x:
            extra["barmode"] = "overlay"  # one bar per category (the series): centred
        marks = []
        if drawn:
            marks.append(f"Error bars: {ERRORS[spec.error]}")
            if minmax:
                marks.append(MINMAX_NOTE)
            if clipped:
                marks.append("clipped at 0")
        if marks:
            extra["annotations"] = [
                {
                    "text": "; ".join(marks),
                    "xref": "paper",
                    "yref": "paper",
                    "x": 1,
                    "y": 1,
                    "xanchor": "right",
                    "yanchor": "bottom",
                    "showarrow": False,
                    "font": {"size": 11, "color": "#555"},
                }
            ]
        layout = _layout(x_axis, _esc(title), **extra)
        figure = {
            "data": traces,
            "layout": layout,
            "export": _export_layout(title, spec, result, testbeds.get(m.name, []), filters),
        }
        out.append(Chart(m.name, title, "bar" if bars else "line", figure, notes))
    return out


def _r(value: float | None) -> float | None:
    return None if value is None else round(value, 6)


def _heatmaps(
    m: MetricInfo, pts: list[Point], spec: ComparisonSpec, result: ComparisonResult
) -> list[Chart]:
    out = []
    order = _series_order(pts)
    labels = sorted(order, key=order.__getitem__)
    if len(labels) > MAX_HEATMAPS:
        result.warnings.append(f"Only the first {MAX_HEATMAPS} series are drawn as heatmaps.")
    for label in labels[:MAX_HEATMAPS]:
        sp = [p for p in pts if p.series == label]
        xs = sorted({p.x for p in sp}, key=sort_key)
        ys = sorted({p.y for p in sp}, key=sort_key)
        cell = {(p.x, p.y): p for p in sp}
        z = [[_r(cell[(x, y)].mean) if (x, y) in cell else None for x in xs] for y in ys]
        text = [[f"{cell[(x, y)].mean:.3g}" if (x, y) in cell else "" for x in xs] for y in ys]
        title = metric_title(m.name, m.unit) + (f": {label}" if spec.series else "")
        figure = {
            "data": [
                {
                    "type": "heatmap",
                    "x": xs,
                    "y": ys,
                    "z": z,
                    "text": text,
                    "texttemplate": "%{text}",
                    "colorscale": "Viridis",
                    "colorbar": {"title": {"text": m.unit}},
                    "hovertemplate": f"{result.x_label} %{{x}}, {result.y_label} %{{y}}: "
                    "%{z:.3f}<extra></extra>",
                    "name": label,
                }
            ],
            "layout": {
                "title": _title(title),
                "xaxis": {"title": {"text": result.x_label}, "type": "category"},
                "yaxis": {"title": {"text": result.y_label}, "type": "category"},
                "margin": {"l": 80, "r": 20, "t": TOP_MARGIN, "b": 60},
                "height": 420,
            },
        }
        out.append(Chart(m.name, title, "heatmap", figure))
    return out
