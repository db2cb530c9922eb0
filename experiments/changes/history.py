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
# Configurations a testbed's chart draws (those with the most runs), and the runs each of
# them draws there (the newest): 8 x 300 points keep the page under 300 KB.
MAX_CONFIGS = 8
TESTBED_POINTS = 300
# The testbed's newest runs whose configurations its chart chooses from: a bounded read of
# the testbed's (testbed, created, id) index at any history, and the configurations a lab
# is running now rather than ones it left years ago.
RECENT_RUNS = 2000


@dataclass
class Line:
    name: str
    config_key: str
    metric: str
    unit: str
    points: list[Point]
    changes: list[ChangePoint] = field(default_factory=list)
    total: int = 0
    # The drawn runs' UUIDs by id (a point's link to its run).
    uuids: dict[int, str] = field(default_factory=dict)


def line(
    config_key: str,
    metric: str,
    name: str = "",
    points: int = MAX_POINTS,
    *,
    total: int | None = None,
    changes: list[ChangePoint] | None = None,
) -> Line:
    """One configuration's ``metric``: its newest ``points`` runs and its change points
    (``total``, ``changes``: already read, for several lines at once)."""
    uuids: dict[int, str] = {}
    points_ = series(config_key, metric, newest=points, uuids=uuids)
    if total is None:
        # The runs with the metric (its summary's count), not only those drawn.
        total = (
            ConfigSummary.objects.filter(config_key=config_key, name=metric)
            .values_list("n", flat=True)
            .first()
        )
    if total is None:
        total = len(points_)
    if changes is None:
        changes = list(
            ChangePoint.objects.filter(config_key=config_key, metric=metric)
            .select_related("run", "previous_run")
            .order_by("at")
        )
    unit = changes[0].unit if changes else "B/s" if metric.endswith("_bw") else ""
    return Line(name or metric, config_key, metric, unit, points_[-points:], changes, total, uuids)


def _headline(name: str) -> int:
    """Which metric a chart shows first among those with as many runs: bandwidths, then
    operation rates, then the rest (a duration or a latency is rarely what a lab watches)."""
    if name.endswith("_bw") or name == "bw":
        return 0
    if name.endswith(("_iops", "_ops")) or name in ("iops", "ops"):
        return 1
    return 2


def metrics_of(config_key: str) -> list[str]:
    """The configuration's primary metrics (its summaries), most runs first, bandwidths
    before operation rates before the rest among those with as many runs."""
    rows = ConfigSummary.objects.filter(config_key=config_key).values_list("name", "n")
    return [name for name, n in sorted(rows, key=lambda r: (-r[1], _headline(r[0]), r[0]))]


def testbed_lines(testbed_id: int, metric: str | None = None) -> list[Line]:
    """The testbed's configurations with the most runs (at most ``MAX_CONFIGS``) among those
    of its newest ``RECENT_RUNS`` runs, each with its first metric (or ``metric``): one line
    each. The candidates come from the testbed's newest runs (a bounded index read), their
    run counts and metrics from the summaries (one row per configuration and metric)."""
    recent = (
        Run.objects.filter(testbed_id=testbed_id)
        .exclude(config_key="")
        .order_by("-created", "-id")
        .values_list("config_key", flat=True)[:RECENT_RUNS]
    )
    keys = set(recent)
    rows = ConfigSummary.objects.filter(config_key__in=keys, pub_n=0)
    if metric:
        rows = rows.filter(name=metric)
    ranked = sorted(
        rows.values_list("config_key", "name", "n"),
        key=lambda r: (-r[2], r[0], _headline(r[1]), r[1]),
    )
    chosen: dict[str, tuple[str, int]] = {}
    for key, name, n in ranked:
        if key not in chosen:
            chosen[key] = (name, n)
        if len(chosen) >= MAX_CONFIGS:
            break
    # The chosen lines' change points and descriptions, read for all of them at once.
    changes: dict[str, list[ChangePoint]] = {}
    for cp in (
        ChangePoint.objects.filter(config_key__in=chosen)
        .select_related("run", "previous_run")
        .order_by("at")
    ):
        if chosen[cp.config_key][0] == cp.metric:
            changes.setdefault(cp.config_key, []).append(cp)
    texts = {cps[0].config_key: cps[0].configuration for cps in changes.values()}
    texts.update(_texts_of([key for key in chosen if key not in texts]))
    out = []
    for key, (name, n) in chosen.items():
        text = texts.get(key) or key
        out.append(
            line(
                key,
                name,
                f"{name}: {text}",
                TESTBED_POINTS,
                total=n,
                changes=changes.get(key, []),
            )
        )
    return out


def _texts_of(config_keys: list[str]) -> dict[str, str]:
    """Each configuration's description from its lowest run (its summaries' ``run``): two
    queries, whatever the number of configurations."""
    from experiments.changes.scan import configuration_text

    if not config_keys:
        return {}
    firsts = dict(
        ConfigSummary.objects.filter(config_key__in=config_keys)
        .order_by()
        .values_list("config_key", "run_id")
    )
    runs = Run.objects.select_related("testbed", "target", "tuning_set").in_bulk(
        set(firsts.values())
    )
    return {key: configuration_text(runs[pk]) for key, pk in firsts.items() if pk in runs}


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


def figure(lines: list[Line]) -> dict[str, Any]:
    """The plotly figure: one line per configuration (its values in time order, to the second
    and six significant digits: what a chart can show; a point's ``customdata`` is its run's
    UUID, which static/history.js opens), each change point a vertical dotted line with the
    shift written at its top."""
    data, shapes, notes = [], [], []
    for ln in lines:
        data.append(
            {
                "type": "scatter",
                "mode": "lines+markers",
                "name": ln.name[:80],
                "x": [p.at.isoformat(timespec="seconds") for p in ln.points],
                "y": [float(f"{p.value:.6g}") for p in ln.points],
                "customdata": [ln.uuids.get(p.run_id, "") for p in ln.points],
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
