"""Parallel-coordinates views of a sweep (issue 16 item 3): every swept dimension an axis, the
metric the last axis and the lines' colour, so one chart shows which combination of
parameters gives the best result.

Two sources: a matrix's runs (one line per run, its parameters that vary → its primary
metric) and a comparison's points (one line per point, the attributes that vary among the
points → the point's value). Both end in ``figure``: a plotly ``parcoords`` trace. Text
values become evenly spaced codes with their text as tick labels; numbers stay numbers.

The chart needs plotly's CSP-safe (strict) bundle, which static/parcoords.js loads only when a
page holds such a chart (static/vendor/README.md).
"""

from __future__ import annotations

import math
from typing import Any

from experiments.comparison import dimensions
from experiments.comparison.charts import display_unit, metric_label, metric_title
from experiments.comparison.comparability import attribute_name
from experiments.comparison.result import ComparisonResult
from experiments.models import Metric

MAX_LINES = 5000
MAX_AXES = 10


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)) and math.isfinite(value):
        return float(value)
    return None


def _axis(label: str, values: list[Any]) -> dict:
    """One axis: numeric if every value is a number, otherwise coded text in sort order."""
    numbers = [_number(v) for v in values]
    if all(n is not None for n in numbers):
        return {"label": label, "values": numbers}
    texts = ["—" if v is None else str(v) for v in values]
    order = sorted(set(texts), key=dimensions.sort_key)
    code = {t: i for i, t in enumerate(order)}
    return {
        "label": label,
        "values": [code[t] for t in texts],
        "tickvals": list(range(len(order))),
        "ticktext": order,
        "range": [0, max(len(order) - 1, 1)],
    }


def figure(rows: list[dict], axes: list[tuple[str, str]], metric: str, title: str) -> dict | None:
    """A parcoords figure of ``rows`` (key -> value) over ``axes`` ([(key, label)]) and the
    numeric ``metric`` key (the last axis, and the colour); None when there is nothing to
    draw (fewer than two lines, or no axis that varies)."""
    rows = [r for r in rows if _number(r.get(metric)) is not None][:MAX_LINES]
    varying = [(k, label) for k, label in axes if len({repr(r.get(k)) for r in rows}) > 1][
        :MAX_AXES
    ]
    if len(rows) < 2 or not varying:
        return None
    values = [r[metric] for r in rows]
    dims = [_axis(label, [r.get(k) for r in rows]) for k, label in varying]
    dims.append({"label": title, "values": values})
    return {
        "data": [
            {
                "type": "parcoords",
                "line": {
                    "color": values,
                    "colorscale": "Viridis",
                    "showscale": True,
                    "colorbar": {"title": {"text": title, "side": "right"}},
                },
                "dimensions": dims,
            }
        ],
        "layout": {
            "height": 420,
            "margin": {"l": 70, "r": 40, "t": 60, "b": 30},
            "font": {"size": 12},
        },
    }


def matrix_figure(
    matrix, metric: str, binary: bool = False, run_ids: list[int] | None = None
) -> dict | None:
    """A matrix's runs (``run_ids``: only these, the page's sample of a large matrix): its
    swept parameters (and testbed, tuning set when several) → the primary value of
    ``metric`` of each run, in display units."""
    axes = [a["param"] for a in matrix.axes if ":" not in a.get("param", ":")]
    metrics = Metric.objects.filter(name=metric, primary=True)
    metrics = (
        metrics.filter(run__matrix=matrix)
        if run_ids is None
        else metrics.filter(run_id__in=run_ids)
    )
    values = (
        metrics.order_by("run_id").values_list(
            "value", "unit", "run__params", "run__testbed__name", "run__tuning_set__name"
        )
    )[:MAX_LINES]
    rows = []
    units = set()
    for value, unit, params, testbed, tuning in values:
        units.add(unit)
        row = {f"param:{a}": (params or {}).get(a) for a in axes}
        row.update(testbed=testbed, tuning=tuning or "none", value=value)
        rows.append(row)
    if len(units) != 1:
        return None  # nothing measured yet, or one metric name in two units: no one axis
    shown, divisor = display_unit(units.pop(), binary)
    for row in rows:
        row["value"] /= divisor
    pairs = [(f"param:{a}", a) for a in axes] + [("testbed", "testbed"), ("tuning", "tuning set")]
    return figure(rows, pairs, "value", metric_title(metric, shown))


def _parsed(value: Any) -> Any:
    """A point's attribute as text gives it ("4", "1m", "x86 | arm"): numbers become numbers
    (a numeric axis), anything else stays text."""
    if isinstance(value, str) and " | " not in value:
        try:
            number = float(value)
        except ValueError:
            return value
        return number if math.isfinite(number) else value
    return value


def comparison_figure(result: ComparisonResult) -> dict | None:
    """A comparison's points of its first metric: the attributes that tell its points apart
    (x, series, every parameter that differs) → the point's value (mean, median or peak,
    as the page shows it), in the page's display unit."""
    if not result.metrics:
        return None
    info = result.metrics[0]
    points = [p for p in result.points if p.metric == info.name]
    keys: list[str] = []
    for p in points:
        keys += [k for k in p.attributes if k not in keys]
    rows = []
    for p in points:
        # A parameter series' label is its value in units ("1 MiB"): the axis takes the
        # value itself (a numeric axis, the same column as the parameter's own).
        series = (
            p.series_key if result.series_dim.startswith("param:") and not p.variant else p.series
        )
        row: dict[str, Any] = {"_x": _parsed(p.x), "_series": _parsed(series)}
        row.update((k, _parsed(p.attributes.get(k))) for k in keys)
        row["_value"] = p.mean
        rows.append(row)
    axes = []
    if result.x_label:
        axes.append(("_x", result.x_label))
    if result.series_label:
        axes.append(("_series", result.series_label))
    axes += [(k, attribute_name(k)) for k in keys]
    # x and series duplicate their attribute (param:bs): keep the first of equal columns.
    unique: list[tuple[str, str]] = []
    seen = set()
    for k, label in axes:
        column = tuple(repr(r.get(k)) for r in rows)
        if column not in seen:
            seen.add(column)
            unique.append((k, label))
    title = metric_title(info.name, info.unit) if info.unit else metric_label(info.name)
    return figure(rows, unique, "_value", title)
