"""The history pages' data: a configuration's metric over time with its change points, and a
testbed's configurations (experiments.views.changes draws them; the figure is a plain plotly
dict built without a database in ``figure``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from django.db import connection

from experiments.changes.scan import Point, series
from experiments.models import ChangePoint, ConfigSummary, Metric, Run

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
    unit = _unit(changes, metric)
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
    each, its newest ``TESTBED_POINTS`` runs drawn. Five queries whatever the testbed's
    history: the configurations chosen (``_chosen``), their change points, their
    descriptions (two) and every line's points (``_points``)."""
    chosen = _chosen(testbed_id, metric)
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
    drawn = _points([(key, name) for key, (name, _) in chosen.items()], TESTBED_POINTS)
    out = []
    for (key, (name, n)), (points, uuids) in zip(chosen.items(), drawn, strict=True):
        text = texts.get(key) or key
        unit = _unit(changes.get(key, []), name)
        out.append(Line(f"{name}: {text}", key, name, unit, points, changes.get(key, []), n, uuids))
    return out


def _unit(changes: list[ChangePoint], metric: str) -> str:
    return changes[0].unit if changes else "B/s" if metric.endswith("_bw") else ""


def _chosen(testbed_id: int, metric: str | None) -> dict[str, tuple[str, int]]:
    """The lines of a testbed's chart: {configuration: (its metric, its run count)}, most
    runs first (ties by key), at most ``MAX_CONFIGS``; each configuration's metric the one
    with the most runs (ties: bandwidths, then rates, then by name), or ``metric``.

    One query: the configurations of the testbed's newest ``RECENT_RUNS`` runs (an
    index-only read of its (testbed, created, id) index, which holds the key), the
    ``MAX_CONFIGS`` whose summaries (own runs only) count the most runs (each candidate's
    summaries read by its key), and those configurations' summaries of that count; the
    ties of a configuration's metrics are broken here. Reading every candidate's summary
    rows into Python (some 4,000 of ~600 configurations at a million runs) and a heap page
    a recent run took longer than the rest of the page."""
    run, summary = Run._meta.db_table, ConfigSummary._meta.db_table
    named, params = "", [testbed_id, RECENT_RUNS]
    if metric:
        named, params = "AND {}.name = %s", [*params, metric]
    sql = f"""
        WITH recent AS (
            SELECT DISTINCT config_key FROM (
                SELECT config_key FROM {run}
                 WHERE testbed_id = %s AND config_key <> ''
                 ORDER BY testbed_id, created DESC, id DESC LIMIT %s) newest),
        ranked AS (
            SELECT config_key, top FROM (
                SELECT config_key,
                       (SELECT max(n) FROM {summary} c
                         WHERE c.config_key = recent.config_key AND c.pub_n = 0 {named.format("c")})
                       AS top
                  FROM recent) counted
             WHERE top IS NOT NULL ORDER BY top DESC, config_key LIMIT %s)
        SELECT s.config_key, s.name, s.n FROM {summary} s
          JOIN ranked ON ranked.config_key = s.config_key AND ranked.top = s.n
         WHERE s.pub_n = 0 {named.format("s")}
    """
    params = [*params, MAX_CONFIGS, *([metric] if metric else [])]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    chosen: dict[str, tuple[str, int]] = {}
    for key, name, n in sorted(rows, key=lambda r: (-r[2], r[0], _headline(r[1]), r[1])):
        chosen.setdefault(key, (name, n))
    return chosen


def _points(lines: list[tuple[str, str]], newest: int) -> list[tuple[list[Point], dict]]:
    """Each (configuration, metric)'s points among its newest ``newest`` runs, as
    ``scan.series`` makes them, and the drawn runs' UUIDs by id. On PostgreSQL one query for
    every line: each configuration's newest runs from the index (config_key, start, id),
    each run's values of the metric from the metric rows' run index; elsewhere two queries
    a line (``series``)."""
    if connection.vendor != "postgresql":
        out = []
        for key, metric in lines:
            uuids: dict[int, str] = {}
            out.append((series(key, metric, newest=newest, uuids=uuids), uuids))
        return out
    drawn: list[tuple[list[Point], dict]] = [([], {}) for _ in lines]
    if not lines:
        return drawn
    run, metric_table = Run._meta.db_table, Metric._meta.db_table
    sql = f"""
        SELECT k.i, r.id, extract(epoch FROM r.at)::float8, r.uuid::text, m.value
          FROM unnest(%s::text[], %s::text[]) WITH ORDINALITY AS k(key, metric, i)
         CROSS JOIN LATERAL (
               SELECT id, coalesce(started_at, created) AS at, uuid FROM {run}
                WHERE config_key = k.key
                ORDER BY coalesce(started_at, created) DESC, id DESC LIMIT %s) r
         CROSS JOIN LATERAL (
               SELECT avg(value) AS value FROM {metric_table}
                WHERE run_id = r.id AND name = k.metric AND "primary") m
         WHERE m.value IS NOT NULL
         ORDER BY k.i, r.at, r.id
    """
    with connection.cursor() as cursor:
        cursor.execute(sql, [[k for k, _ in lines], [m for _, m in lines], newest])
        for i, run_id, epoch, uuid, value in cursor.fetchall():
            points, uuids = drawn[i - 1]
            # A second count, not a timestamp's text: 2,400 of them parsed cost ~5 ms. A
            # double holds it to a quarter of a microsecond (until the 23rd century), and
            # fromtimestamp rounds to the nearest one: the stored instant.
            points.append(Point(run_id, value, datetime.fromtimestamp(epoch, UTC)))
            uuids[run_id] = uuid
    return drawn


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
