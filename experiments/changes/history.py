"""The history pages' data: a configuration's metric over time with its change points, and a
testbed's configurations (experiments.views.changes draws them; the figure is a plain plotly
dict built without a database in ``figure``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from experiments.changes.scan import Point, series
from experiments.models import ChangePoint, ConfigSummary, Run

# Runs one history chart draws at most (the newest): the page stays fast at any history.
MAX_POINTS = 2000
# Configurations a testbed's chart draws (those with the most runs).
MAX_CONFIGS = 8


@dataclass
class Line:
    name: str
    config_key: str
    metric: str
    unit: str
    points: list[Point]
    changes: list[ChangePoint] = field(default_factory=list)
    total: int = 0


def line(config_key: str, metric: str, name: str = "") -> Line:
    """One configuration's ``metric``: its newest ``MAX_POINTS`` runs and its change points."""
    points = series(config_key, metric)
    total = len(points)
    changes = list(
        ChangePoint.objects.filter(config_key=config_key, metric=metric)
        .select_related("run", "previous_run")
        .order_by("at")
    )
    unit = changes[0].unit if changes else "B/s" if metric.endswith("_bw") else ""
    return Line(name or metric, config_key, metric, unit, points[-MAX_POINTS:], changes, total)


def metrics_of(config_key: str) -> list[str]:
    """The configuration's primary metrics (its summaries), most runs first."""
    return list(
        ConfigSummary.objects.filter(config_key=config_key)
        .order_by("-n", "name")
        .values_list("name", flat=True)
    )


def testbed_lines(testbed_id: int, metric: str | None = None) -> list[Line]:
    """The testbed's configurations with the most runs (at most ``MAX_CONFIGS``), each with its
    first metric (or ``metric``): one line each. Read through the summaries (one row per
    configuration and metric, their ``run`` of the testbed), not the runs."""
    rows = ConfigSummary.objects.filter(run__testbed_id=testbed_id, pub_n=0)
    if metric:
        rows = rows.filter(name=metric)
    chosen: dict[str, str] = {}
    for key, name in rows.order_by("-n", "config_key", "name").values_list("config_key", "name"):
        if key not in chosen:
            chosen[key] = name
        if len(chosen) >= MAX_CONFIGS:
            break
    texts = dict(
        ChangePoint.objects.filter(config_key__in=chosen)
        .order_by()
        .values_list("config_key", "configuration")
    )
    out = []
    for key, name in chosen.items():
        text = texts.get(key) or _text_of(key)
        out.append(line(key, name, f"{name}: {text}"))
    return out


def _text_of(config_key: str) -> str:
    from experiments.changes.scan import configuration_text

    # The configuration's lowest run, from its summary: ordering the runs of a key by id
    # walked the primary key past a million runs (776 ms) when the key's runs were the newest.
    first = (
        ConfigSummary.objects.filter(config_key=config_key).values_list("run_id", flat=True).first()
    )
    run = (
        Run.objects.select_related("testbed", "target", "tuning_set").filter(pk=first).first()
        if first
        else None
    )
    return configuration_text(run) if run else config_key


def figure(lines: list[Line], urls: dict[int, str] | None = None) -> dict[str, Any]:
    """The plotly figure: one line per configuration (its values in time order; a point's
    ``customdata`` is its run's page), each change point a vertical dotted line with the
    shift written at its top."""
    urls = urls or {}
    data, shapes, notes = [], [], []
    for ln in lines:
        data.append(
            {
                "type": "scatter",
                "mode": "lines+markers",
                "name": ln.name[:80],
                "x": [p.at.isoformat() for p in ln.points],
                "y": [p.value for p in ln.points],
                "customdata": [urls.get(p.run_id, "") for p in ln.points],
                "hovertemplate": "%{x}<br>%{y:.4s}" + (ln.unit or "") + "<extra></extra>",
                "marker": {"size": 5},
            }
        )
        for cp in ln.changes:
            at = cp.at.isoformat()
            shapes.append(
                {
                    "type": "line",
                    "xref": "x",
                    "yref": "paper",
                    "x0": at,
                    "x1": at,
                    "y0": 0,
                    "y1": 1,
                    "line": {"dash": "dot", "width": 2, "color": _STATE_COLOURS[cp.state]},
                }
            )
            notes.append(
                {
                    "x": at,
                    "y": 1,
                    "xref": "x",
                    "yref": "paper",
                    "yanchor": "bottom",
                    "showarrow": False,
                    "text": f"{cp.shift_text} ({cp.state})",
                    "font": {"size": 11},
                }
            )
    unit = lines[0].unit if lines else ""
    return {
        "data": data,
        "layout": {
            "height": 420,
            "margin": {"t": 40, "r": 20, "b": 50, "l": 70},
            "xaxis": {"type": "date", "title": {"text": "run started"}},
            "yaxis": {"title": {"text": unit}, "rangemode": "tozero", "tickformat": ".3s"},
            "shapes": shapes,
            "annotations": notes,
            "legend": {"orientation": "h", "y": -0.2},
            "showlegend": len(lines) > 1,
        },
    }


_STATE_COLOURS = {
    ChangePoint.State.NEW: "#c0392b",
    ChangePoint.State.ACKNOWLEDGED: "#d68910",
    ChangePoint.State.EXPECTED: "#1e8449",
    ChangePoint.State.MUTED: "#7f8c8d",
}


def value_text(value: float | None, unit: str) -> str:
    """2.01e9 B/s -> "2.01 GB/s" (decimal prefixes, three significant digits)."""
    if value is None:
        return "—"
    for factor, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= factor:
            return f"{value / factor:.3g} {prefix}{unit}"
    return f"{value:.3g} {unit}".strip()
