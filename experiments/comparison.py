"""Comparisons: one computation behind the compare page, reports, share links, CSV/JSON export
and the REST API.

Public interface
----------------
``ComparisonSpec``
    What to compare, parsed and validated from a query string (the URL holds the whole state):

    ==============  ==========================================================================
    ``metric``      metric name(s) of DESIGN.md's vocabulary, repeatable (``write_bw``)
    ``x``           dimension on the x axis (``param:threads``, ``tool``…); empty: no x axis.
                    Absent means ``param:threads``.
    ``y``           second dimension for a heatmap (``param:stripe_count``)
    ``series``      dimension that separates the series (``arch``, ``raid``…); absent: ``arch``
    ``baseline``    raw value of the series the others are compared against (``10``)
    ``f``           filter ``<dimension>:<value>``, repeatable: the same dimension ORed (IN),
                    different dimensions ANDed: ``f=arch:aarch64&f=arch:x86_64&f=raid:0``
    ``tool``, ``testbed`` (uuid), ``matrix`` (uuid): repeatable shortcuts, as before
    ``from``/``to`` run creation date range (YYYY-MM-DD, inclusive)
    ``norm``        ``server`` | ``target`` | ``client`` | ``core`` (per storage server…)
    ``chart``       ``line`` | ``bar`` | ``heatmap``;  ``err``: ``ci`` | ``minmax`` | ``sd`` |
                    ``none``;  ``reps=1`` all repetitions as points;  ``unit=GiB``
    ==============  ==========================================================================

    Dimensions are those of ``experiments.dimensions`` (arch, cpu, hardware, raid, fs, testbed,
    beegfs, fabric, tuning, matrix, tool, source, ``param:<name>``, ``tuning:<scope.key>``,
    ``hw:<field>``). ``ComparisonSpec.from_query(request.GET)`` never raises: problems are
    collected in ``spec.errors``. ``spec.to_query()`` gives the canonical query string back.

``compute(spec, runs=None) -> ComparisonResult``
    ``runs`` is a Run queryset the comparison is limited to (``Run.objects.visible_to(user)``).
    Aggregation runs in the database (``MetricQuerySet.summary`` and friends); the number of
    queries does not depend on the number of runs (it grows with the number of testbeds only
    through a fixed set of bulk queries).

``ComparisonResult``
    ``points`` (``Point``: metric, series, x, y, n, mean, median, min, max, stddev, cv,
    ci_low, ci_high, noisy, efficiency, limit_name, limit_value, flags…; values in display
    units, ``unit`` names them), ``comparisons`` (``BaselineComparison``: diff %, Welch's p,
    a plain-language sentence), ``differences`` (configuration that differs between a series
    and the baseline), ``charts`` (plotly figure dicts), ``colours`` (series -> colour, the
    same in every chart of a result). ``to_json()`` / ``ComparisonResult.from_json()`` round
    trip (the frozen snapshot of a share link; the API's response body). ``csv_rows()`` gives
    the table for CSV export.
"""

from __future__ import annotations

import datetime as dt
import html
import math
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from typing import Any
from urllib.parse import urlencode

from django.db.models import (
    Case,
    CharField,
    F,
    FloatField,
    Q,
    QuerySet,
    Value,
    When,
)
from django.db.models.fields.json import KeyTextTransform
from django.db.models.functions import Cast, NullIf
from django.http import QueryDict
from django.utils import timezone

from experiments import charts, dimensions, stats
from experiments.input_checks import clean_text, text_problem
from experiments.utils import is_uuid

# Points whose coefficient of variation is above this are flagged as noisy.
NOISY_CV = 0.05
ALPHA = 0.05
MAX_METRICS = 6
MAX_REPETITION_POINTS = 5000
MAX_CONFIGS = 5000
MAX_HEATMAPS = 8

NORMALISATIONS = {
    "": "total",
    "server": "per storage server",
    "target": "per storage target",
    "client": "per client node",
    "core": "per core (storage servers)",
}
CHARTS = {"line": "lines", "bar": "grouped bars", "heatmap": "heatmap (x × y)"}
ERRORS = {
    "ci": "95% confidence interval",
    "minmax": "min / max",
    "sd": "± std. dev.",
    "none": "none",
}
FILTER_PREFIXES = ("param", "tuning", "hw")

# Bandwidth metrics and the direction whose theoretical limit applies.
LIMIT_OPS = {
    "write_bw": "write",
    "read_bw": "read",
    "rewrite_bw": "write",
    "reread_bw": "read",
    "randwrite_bw": "write",
    "randread_bw": "read",
}
VERBS = {
    "write_bw": "writes",
    "read_bw": "reads",
    "rewrite_bw": "rewrites",
    "reread_bw": "re-reads",
    "randwrite_bw": "writes randomly",
    "randread_bw": "reads randomly",
    "write_iops": "writes",
    "read_iops": "reads",
    "bw": "transfers",
    "dir_create": "creates directories",
    "dir_stat": "stats directories",
    "dir_rename": "renames directories",
    "dir_remove": "removes directories",
    "file_create": "creates files",
    "file_stat": "stats files",
    "file_read": "reads files",
    "file_remove": "removes files",
    "tree_create": "creates trees",
    "tree_remove": "removes trees",
}


def metric_unit(name: str) -> str | None:
    from runners.parsers.base import METRIC_UNITS

    return METRIC_UNITS.get(name)


# --- The specification --------------------------------------------------------------------


def _parse_filter(text: str) -> tuple[str, str] | None:
    """``arch:aarch64`` -> ("arch", "aarch64"); ``param:threads:4`` -> ("param:threads", "4")."""
    head, sep, rest = text.partition(":")
    if not sep:
        return None
    if head in FILTER_PREFIXES:
        name, sep, value = rest.partition(":")
        if head == "tuning" and not (sep and "." in name):
            return head, rest  # the tuning set's name, not a tuning key (scope.key)
        if not sep:
            return None
        return f"{head}:{name}", value
    return head, rest


def _storable(query: QueryDict, errors: list[str]) -> QueryDict:
    """``query`` without the values that hold a NUL character or a lone surrogate (no column
    holds them; PostgreSQL refuses them in a query), each reported in ``errors``."""
    if all(clean_text(key) and all(map(clean_text, values)) for key, values in query.lists()):
        return query
    kept = QueryDict(mutable=True)
    for key, values in query.lists():
        for value in values:
            problem = text_problem(key) or text_problem(value)
            if problem:
                errors.append(f"{key[:40]!r}: the value {problem}; it was ignored.")
            else:
                kept.appendlist(key, value)
    return kept


def _date(text: str) -> dt.date | None:
    try:
        return dt.date.fromisoformat(text)
    except (TypeError, ValueError):
        return None


@dataclass
class ComparisonSpec:
    metrics: list[str] = field(default_factory=list)
    x: str = "param:threads"
    y: str = ""
    series: str = "arch"
    baseline: str = ""
    filters: list[tuple[str, str]] = field(default_factory=list)
    tools: list[str] = field(default_factory=list)
    testbeds: list[str] = field(default_factory=list)
    matrices: list[str] = field(default_factory=list)
    date_from: dt.date | None = None
    date_to: dt.date | None = None
    norm: str = ""
    chart: str = "line"
    error: str = "ci"
    reps: bool = False
    binary: bool = False
    errors: list[str] = field(default_factory=list)

    @classmethod
    def from_query(cls, query: QueryDict | str | dict | None) -> ComparisonSpec:
        from experiments.models.runs import Tool

        if query is None:
            query = QueryDict()
        elif isinstance(query, str):
            query = QueryDict(query.lstrip("?"))
        elif isinstance(query, dict) and not hasattr(query, "getlist"):
            q = QueryDict(mutable=True)
            for key, value in query.items():
                for v in value if isinstance(value, list | tuple) else [value]:
                    q.appendlist(key, str(v))
            query = q
        spec = cls()
        errors = spec.errors
        query = _storable(query, errors)
        for name in query.getlist("metric"):
            if name and name not in spec.metrics:
                if metric_unit(name) is None:
                    errors.append(f"Unknown metric {name!r}.")
                else:
                    spec.metrics.append(name)
        if len(spec.metrics) > MAX_METRICS:
            errors.append(f"At most {MAX_METRICS} metrics at once.")
            spec.metrics = spec.metrics[:MAX_METRICS]
        for attr in ("x", "y", "series"):
            if attr in query:
                value = query.get(attr, "").strip()
                if value:
                    try:
                        dimensions.expression(value)
                    except ValueError as exc:
                        errors.append(f"{attr}: {exc}")
                        value = ""
                setattr(spec, attr, value)
        spec.baseline = query.get("baseline", "").strip()[:200]
        for text in query.getlist("f"):
            parsed = _parse_filter(text)
            if parsed is None:
                errors.append(f"Filter {text!r} is not <attribute>:<value>.")
                continue
            try:
                dimensions.expression(parsed[0])
            except ValueError as exc:
                errors.append(f"Filter {text!r}: {exc}")
                continue
            if parsed not in spec.filters:
                spec.filters.append(parsed)
        spec.tools = list(dict.fromkeys(t for t in query.getlist("tool") if t in Tool.values))
        spec.testbeds = list(dict.fromkeys(t for t in query.getlist("testbed") if is_uuid(t)))
        spec.matrices = list(dict.fromkeys(m for m in query.getlist("matrix") if is_uuid(m)))
        for attr, key in (("date_from", "from"), ("date_to", "to")):
            text = query.get(key, "").strip()
            if text:
                value = _date(text)
                if value is None:
                    errors.append(f"{key}: {text!r} is not a date (YYYY-MM-DD).")
                setattr(spec, attr, value)
        norm = query.get("norm", "")
        spec.norm = norm if norm in NORMALISATIONS else ""
        chart = query.get("chart", "line")
        spec.chart = chart if chart in CHARTS else "line"
        err = query.get("err", "ci")
        spec.error = err if err in ERRORS else "ci"
        spec.reps = query.get("reps") in ("1", "true", "on")
        spec.binary = query.get("unit") == "GiB"
        if spec.chart == "heatmap" and not (spec.x and spec.y):
            errors.append("A heatmap needs both an x axis and a y axis (two parameters).")
        return spec

    def query_pairs(self) -> list[tuple[str, str]]:
        pairs = [("metric", m) for m in self.metrics]
        pairs += [("x", self.x), ("series", self.series)]
        if self.y:
            pairs.append(("y", self.y))
        if self.baseline:
            pairs.append(("baseline", self.baseline))
        pairs += [("f", f"{k}:{v}") for k, v in self.filters]
        pairs += [("tool", t) for t in self.tools]
        pairs += [("testbed", t) for t in self.testbeds]
        pairs += [("matrix", m) for m in self.matrices]
        if self.date_from:
            pairs.append(("from", self.date_from.isoformat()))
        if self.date_to:
            pairs.append(("to", self.date_to.isoformat()))
        if self.norm:
            pairs.append(("norm", self.norm))
        return pairs + [
            (k, v) for k, v in self.chart_settings().items() if v not in ("", None, False)
        ]

    def chart_settings(self) -> dict[str, Any]:
        return {
            "chart": self.chart,
            "err": self.error,
            "reps": "1" if self.reps else "",
            "unit": "GiB" if self.binary else "",
        }

    def to_query(self) -> str:
        return urlencode(self.query_pairs())

    def filter_groups(self) -> dict[str, list[str]]:
        groups: dict[str, list[str]] = defaultdict(list)
        for key, value in self.filters:
            groups[key].append(value)
        return dict(groups)

    def group_expressions(self, lookup: dimensions.TestbedLookup | None = None) -> dict[str, Any]:
        empty = Value("", output_field=CharField())
        return {
            "series": dimensions.expression(self.series, lookup) if self.series else empty,
            "x": dimensions.expression(self.x, lookup) if self.x else empty,
            "y": dimensions.expression(self.y, lookup) if self.y else empty,
        }

    def describe(self) -> str:
        """One line for titles: "write_bw by param:threads, series by arch"."""
        parts = [", ".join(self.metrics) or "no metric"]
        if self.x:
            parts.append(f"by {dimensions.label(self.x)}")
        if self.series:
            parts.append(f"series: {dimensions.label(self.series)}")
        if self.norm:
            parts.append(NORMALISATIONS[self.norm])
        return ", ".join(parts)


# --- The result ---------------------------------------------------------------------------


@dataclass
class Point:
    metric: str
    series: str
    series_key: str
    x: str
    x_key: str
    y: str
    y_key: str
    n: int
    mean: float
    median: float | None
    min: float
    max: float
    stddev: float | None
    cv: float | None
    ci_low: float | None
    ci_high: float | None
    noisy: bool
    unit: str
    efficiency: float | None = None  # % of the theoretical limit
    limit_name: str = ""
    limit_value: float | None = None  # display units, before normalisation
    limit_detail: str = ""
    limit_scope: str = ""  # what the limit is of: testbed, one target, one drive
    testbed: str = ""
    flags: list[str] = field(default_factory=list)
    diff_pct: float | None = None  # against the baseline series at the same x (and y)
    p_value: float | None = None
    approximate: bool = False  # some value is one a study gives as "about" (extra.approx)
    published_runs: int = 0  # how many of its runs come from published studies
    own_runs: int = 0  # how many are the users' own (executed or imported)
    source: str = ""  # the data source of all its runs (a study or "own runs"); "": several

    @property
    def mixed_sources(self) -> bool:
        return not self.source

    @property
    def cv_pct(self) -> float | None:
        return None if self.cv is None else self.cv * 100


@dataclass
class BaselineComparison:
    metric: str
    series: str
    baseline: str
    x: str
    y: str
    diff_pct: float | None
    p_value: float | None
    significant: bool | None
    n: int
    n_baseline: int
    sentence: str


@dataclass
class Difference:
    series: str
    baseline: str
    rows: list[list[str]]  # [group, attribute, value in series, value in baseline]

    @property
    def areas(self) -> str:
        """ "hardware 7, testbed 9, tuning 20" """
        counts: dict[str, int] = {}
        for row in self.rows:
            counts[row[0]] = counts.get(row[0], 0) + 1
        return ", ".join(f"{area} {n}" for area, n in counts.items())


@dataclass
class Chart:
    metric: str
    title: str
    kind: str
    figure: dict


@dataclass
class MetricInfo:
    name: str
    base_unit: str
    unit: str
    divisor: float
    higher_is_better: bool
    title: str = ""  # human name: "Write throughput"


@dataclass
class ComparisonResult:
    query: str
    metrics: list[MetricInfo] = field(default_factory=list)
    points: list[Point] = field(default_factory=list)
    comparisons: list[BaselineComparison] = field(default_factory=list)
    differences: list[Difference] = field(default_factory=list)
    charts: list[Chart] = field(default_factory=list)
    colours: dict[str, str] = field(default_factory=dict)
    series: list[list[str]] = field(default_factory=list)  # [[raw key, label], …]
    baseline_label: str = ""
    n_runs: int = 0
    warnings: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    generated_at: str = ""
    x_label: str = ""
    y_label: str = ""
    series_label: str = ""
    norm_label: str = ""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ComparisonResult:
        data = dict(data)
        data["metrics"] = [MetricInfo(**m) for m in data.get("metrics", [])]
        data["points"] = [Point(**p) for p in data.get("points", [])]
        data["comparisons"] = [BaselineComparison(**c) for c in data.get("comparisons", [])]
        data["differences"] = [Difference(**d) for d in data.get("differences", [])]
        data["charts"] = [Chart(**c) for c in data.get("charts", [])]
        known = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in data.items() if k in known})

    def tables(self) -> list[tuple[MetricInfo, list[Point]]]:
        return [(m, [p for p in self.points if p.metric == m.name]) for m in self.metrics]

    @property
    def generated(self) -> dt.datetime | None:
        try:
            return dt.datetime.fromisoformat(self.generated_at)
        except (TypeError, ValueError):
            return None

    CSV_HEADER = [
        "metric",
        "series",
        "x",
        "y",
        "n",
        "mean",
        "median",
        "min",
        "max",
        "stddev",
        "cv_percent",
        "ci95_low",
        "ci95_high",
        "noisy",
        "unit",
        "efficiency_percent",
        "limit",
        "limit_value",
        "testbed",
        "diff_vs_baseline_percent",
        "p_value",
        "flags",
    ]

    def csv_rows(self) -> list[list[Any]]:
        rows: list[list[Any]] = [list(self.CSV_HEADER)]
        for p in self.points:
            rows.append(
                [
                    p.metric,
                    p.series,
                    p.x,
                    p.y,
                    p.n,
                    p.mean,
                    p.median,
                    p.min,
                    p.max,
                    p.stddev,
                    p.cv_pct,
                    p.ci_low,
                    p.ci_high,
                    "yes" if p.noisy else "",
                    p.unit,
                    p.efficiency,
                    p.limit_name,
                    p.limit_value,
                    p.testbed,
                    p.diff_pct,
                    p.p_value,
                    "; ".join(p.flags),
                ]
            )
        return rows


# --- Computation --------------------------------------------------------------------------


def _normaliser(norm: str, lookup: dimensions.TestbedLookup):
    """Per-run divisor as an SQL expression (None: no normalisation). The testbeds' counts
    (storage servers, clients, storage targets, cores) are per-testbed constants."""
    one = Value(1.0, output_field=FloatField())
    on_target = Q(run__target__isnull=False)
    if norm == "server":
        return Case(When(on_target, then=one), default=lookup.count("servers"))
    if norm == "target":
        return Case(When(on_target, then=one), default=lookup.count("targets"))
    if norm == "client":
        used = Cast(KeyTextTransform("nodes", "run__params"), FloatField())
        return Case(
            When(Q(run__params__nodes__regex=r"^[0-9]+(\.0+)?$"), then=used),
            default=lookup.count("clients"),
        )
    if norm == "core":
        target_cores = F("run__target__node__profile__sockets") * F(
            "run__target__node__profile__cores_per_socket"
        )
        return Case(
            When(on_target, then=Cast(target_cores, FloatField())),
            default=lookup.count("server_cores"),
        )
    return None


def filtered_metrics(
    spec: ComparisonSpec,
    runs: QuerySet | None = None,
    lookup: dimensions.TestbedLookup | None = None,
) -> QuerySet:
    """Headline metric rows of the spec's metrics over the runs its filters select."""
    from experiments.models import Metric

    qs = Metric.objects.primary_values().filter(name__in=spec.metrics)
    if runs is not None:
        if runs.query.is_empty():
            return qs.none()
        if runs.query.where:
            qs = qs.filter(run__in=runs)
    if spec.tools:
        qs = qs.filter(run__tool__in=spec.tools)
    if spec.testbeds:
        qs = qs.filter(run__testbed__uuid__in=spec.testbeds)
    if spec.matrices:
        qs = qs.filter(run__matrix__uuid__in=spec.matrices)
    if spec.date_from:
        qs = qs.filter(run__created__date__gte=spec.date_from)
    if spec.date_to:
        qs = qs.filter(run__created__date__lte=spec.date_to)
    for i, (key, values) in enumerate(spec.filter_groups().items()):
        name = f"_f{i}"
        qs = qs.annotate(**{name: Cast(dimensions.expression(key, lookup), CharField())})
        qs = qs.filter(**{f"{name}__in": values})
    return qs


def _raw(value: Any) -> str:
    """A grouped value as the string the URL carries (baseline, filters): what the database's
    CAST(… AS text) gives, so that filtering by it finds the same rows."""
    return "" if value is None else str(value)


def _stddev(row: dict) -> float | None:
    if row["n"] < 2:
        return None
    if row.get("stddev") is not None:
        return row["stddev"]
    if row.get("sum_sq") is None or row.get("mean") is None:
        return None
    return math.sqrt(stats.sample_variance(row["n"], row["mean"], row["sum_sq"]))


def compute(spec: ComparisonSpec, runs: QuerySet | None = None) -> ComparisonResult:
    """Aggregate the spec's metrics over ``runs`` (all runs when None) in the database and
    derive statistics, efficiency, baseline tests, configuration differences and charts."""
    result = ComparisonResult(
        query=spec.to_query(), errors=list(spec.errors), generated_at=timezone.now().isoformat()
    )
    result.x_label = dimensions.label(spec.x) if spec.x else ""
    result.y_label = dimensions.label(spec.y) if spec.y else ""
    result.series_label = dimensions.label(spec.series) if spec.series else ""
    result.norm_label = NORMALISATIONS[spec.norm] if spec.norm else ""
    if not spec.metrics:
        if not result.errors:
            result.errors.append("Choose a metric.")
        return result
    if spec.chart == "heatmap" and not (spec.x and spec.y):
        return result
    for name in spec.metrics:
        base = metric_unit(name) or ""
        label, divisor = charts.display_unit(base, spec.binary)
        if spec.norm:
            label = f"{label} {NORMALISATIONS[spec.norm]}"
        result.metrics.append(
            MetricInfo(name, base, label, divisor, base != "s", charts.metric_label(name))
        )
    info = {m.name: m for m in result.metrics}

    # The storage side's attributes and counts per testbed, read once (see TestbedLookup).
    lookup = dimensions.TestbedLookup()
    groups = spec.group_expressions(lookup)
    divisor = _normaliser(spec.norm, lookup)
    value = F("value") if divisor is None else F("value") / NullIf(divisor, 0.0)
    qs = filtered_metrics(spec, runs, lookup)
    rows = qs.summary(groups, value)
    context = _Context.load(rows, groups, qs)
    points: list[Point] = []
    variances: dict[tuple, tuple[int, float, float]] = {}
    for row in rows:
        if not row["n"]:
            continue
        m = info[row["name"]]
        sd = _stddev(row)
        median = row["median"]
        d = m.divisor
        ci = stats.confidence_interval(row["n"], row["mean"], sd)
        cv = stats.cv(row["mean"], sd)
        point = Point(
            metric=m.name,
            series=dimensions.display_value(spec.series, row["series"]) if spec.series else "all",
            series_key=_raw(row["series"]),
            x=dimensions.display_value(spec.x, row["x"]) if spec.x else "",
            x_key=_raw(row["x"]),
            y=dimensions.display_value(spec.y, row["y"]) if spec.y else "",
            y_key=_raw(row["y"]),
            n=row["n"],
            mean=row["mean"] / d,
            median=None if median is None else median / d,
            min=row["min"] / d,
            max=row["max"] / d,
            stddev=None if sd is None else sd / d,
            cv=cv,
            ci_low=None if ci is None else ci[0] / d,
            ci_high=None if ci is None else ci[1] / d,
            noisy=cv is not None and cv > NOISY_CV,
            unit=m.unit,
        )
        if point.noisy:
            point.flags.append(f"noisy: CV {cv * 100:.1f}% > {NOISY_CV * 100:.0f}%")
        _sources(point, row)
        context.annotate(point, row, m)
        points.append(point)
        variances[(m.name, point.series_key, point.x_key, point.y_key)] = (
            row["n"],
            row["mean"],
            sd * sd if sd is not None else math.nan,
        )
    points.sort(key=lambda p: (p.metric, p.series, charts._sort_key(p.x), charts._sort_key(p.y)))
    # Order the table by the metrics' order in the spec.
    order = {name: i for i, name in enumerate(spec.metrics)}
    points.sort(key=lambda p: order[p.metric])
    result.points = points
    result.n_runs = max(
        (sum(r["runs"] for r in rows if r["name"] == m) for m in spec.metrics), default=0
    )

    labels = {}
    for p in points:
        labels.setdefault(p.series_key, p.series)
    result.series = sorted(([k, v] for k, v in labels.items()), key=lambda kv: kv[1])
    result.colours = charts.colours(list(labels.values()))
    if not source_chosen(spec):
        for metric, key in sorted(_mixed_series(points)):
            result.warnings.append(
                f"{labels[key]} ({metric}) mixes published studies and own runs: split "
                "(series=source) or filter (f=source:…) by data source to keep them apart."
            )
    if spec.baseline and spec.series:
        if spec.baseline in labels:
            result.baseline_label = labels[spec.baseline]
            _compare_to_baseline(result, spec, variances, info)
        else:
            result.warnings.append(f"The baseline {spec.baseline!r} is not among the series shown.")
    result.differences = context.differences(spec, result)
    result.charts = _charts(
        result,
        spec,
        qs,
        groups,
        value,
        testbeds={m: context.testbed_names(m, result.points) for m in spec.metrics},
        testbed_names={str(tb.uuid): tb.name for tb in context.testbeds.values()},
    )
    result.warnings += context.warnings
    return result


def _sources(point: Point, row: dict) -> None:
    """The point's data source, whether its values are approximate, and a flag when it pools
    runs of several sources (published studies and own runs, or two studies)."""
    point.approximate = bool(row.get("approx_n"))
    point.published_runs = int(row.get("pub_n") or 0)
    point.own_runs = int(row.get("runs") or 0) - point.published_runs
    lo, hi = row.get("src_lo"), row.get("src_hi")
    point.source = lo if lo == hi and lo is not None else ""
    if point.mixed_sources:
        point.flags.append(f"pools {_mix(point)}")


def _mix(point: Point) -> str:
    """ "published studies and own runs (1 published, 3 own)" or "runs of several studies"."""
    if point.published_runs and point.own_runs:
        return (
            f"published studies and own runs ({point.published_runs} published, "
            f"{point.own_runs} own)"
        )
    return "runs of several published studies"


def source_chosen(spec: ComparisonSpec) -> bool:
    """Whether the user split (x, y, series) or filtered by data source: only then may a
    sentence compare points of different sources, or points that pool several."""
    return "source" in (spec.x, spec.y, spec.series) or any(
        key == "source" for key, _ in spec.filters
    )


def _mixed_series(points: list[Point]) -> set[tuple[str, str]]:
    """(metric, series key) of the series holding both published and own runs (in one point
    or across points: own runs at threads 4 beside a study's threads 1 and 256)."""
    kinds: dict[tuple[str, str], set[bool]] = defaultdict(set)
    for p in points:
        if p.published_runs:
            kinds[(p.metric, p.series_key)].add(True)
        if p.own_runs:
            kinds[(p.metric, p.series_key)].add(False)
    return {key for key, seen in kinds.items() if len(seen) == 2}


def _source_confounder(p: Point, base: Point, mixed: set[tuple[str, str]]) -> str:
    """Why a point and its baseline point may not be compared for their data sources ("" if
    they may): a series mixing published and own runs, own runs against a study, or a point
    pooling several studies. Two studies side by side (Arm in one, x86 in another) are what
    the published presets compare; the other differences between them are named elsewhere."""
    for x in (p, base):
        if (x.metric, x.series_key) in mixed:
            return f"{x.series} mixes published studies and own runs"
    if bool(p.own_runs) != bool(base.own_runs):
        own, study = (p, base) if p.own_runs else (base, p)
        return (
            f"own runs ({own.series}) vs a published study ({study.series}: "
            f"{dimensions.short_source(study.source) or 'several'})"
        )
    for x in (p, base):
        if x.mixed_sources:
            return f"{x.series} pools {_mix(x)}"
    return ""


def _compare_to_baseline(
    result: ComparisonResult,
    spec: ComparisonSpec,
    variances: dict[tuple, tuple[int, float, float]],
    info: dict[str, MetricInfo],
) -> None:
    """Each point against the baseline series' point at the same x (and y): difference in %,
    Welch's t-test on the runs' values, one plain-language sentence."""
    by_key = {(p.metric, p.series_key, p.x_key, p.y_key): p for p in result.points}
    chosen = source_chosen(spec)
    mixed = _mixed_series(result.points)
    unclaimed: dict[tuple[str, str, str], list[str]] = defaultdict(list)
    for p in result.points:
        if p.series_key == spec.baseline:
            continue
        base = by_key.get((p.metric, spec.baseline, p.x_key, p.y_key))
        if base is None or not base.mean:
            continue
        confounder = "" if chosen else _source_confounder(p, base, mixed)
        if confounder:
            # Own runs never join a published series silently: no difference is claimed.
            at = "".join(_place(k, v) for k, v in ((spec.x, p.x), (spec.y, p.y)))
            unclaimed[(p.metric, f"{p.series} vs {base.series}", confounder)].append(
                at.strip().strip("()") or "overall"
            )
            continue
        own = variances.get((p.metric, p.series_key, p.x_key, p.y_key))
        ref = variances.get((base.metric, base.series_key, base.x_key, base.y_key))
        diff = (p.mean - base.mean) / abs(base.mean) * 100
        test = stats.welch(*own, *ref) if own and ref else None
        p.diff_pct = diff
        p.p_value = None if test is None else test.p
        significant = None if test is None else test.p < ALPHA
        result.comparisons.append(
            BaselineComparison(
                metric=p.metric,
                series=p.series,
                baseline=base.series,
                x=p.x,
                y=p.y,
                diff_pct=diff,
                p_value=p.p_value,
                significant=significant,
                n=p.n,
                n_baseline=base.n,
                sentence=_sentence(info[p.metric], p, base, diff, test, spec),
            )
        )
    for (metric, pair, confounder), places in unclaimed.items():
        result.warnings.append(
            f"No difference claimed for {pair} in {metric} ({'; '.join(places)}): "
            f"{confounder}. Split (series=source) or filter (f=source:…) by data source to "
            "compare them."
        )


def _pct(value: float) -> str:
    value = abs(value)
    return f"{value:.0f}%" if value >= 10 else f"{value:.1f}%"


def _place(key: str, value: str) -> str:
    """ " at threads 16", " (threads unknown)", " with dd" for a sentence."""
    if not key or not value:
        return ""
    name = dimensions.label(key) if ":" in key else ""
    if value == dimensions.UNKNOWN:
        return f" ({name or dimensions.label(key).lower()} unknown)"
    return f" at {name} {value}" if name else f" with {value}"


# Series values that do not say what they are get their dimension's name in a sentence
# ("numjobs 2 writes 83% faster than numjobs 1"); "RAID0", "aarch64 (Arm)", "dd" stand alone.
_NAMED = {"beegfs": "BeeGFS", "testbed": "testbed", "tuning": "tuning set", "matrix": "matrix"}


def named(key: str, value: str) -> str:
    """A series value as a sentence names it: "numjobs 2", "BeeGFS 7.4.5", "RAID0"."""
    if key == "source":
        return dimensions.short_source(value)
    if key.startswith(("param:", "tuning:", "hw:")):
        return f"{dimensions.label(key)} {value}"
    if key in _NAMED:
        return f"{_NAMED[key]} {value}"
    return value


def _sentence(m: MetricInfo, p: Point, base: Point, diff: float, test, spec) -> str:
    where = [_place(spec.x, p.x), _place(spec.y, p.y)]
    at = "".join(w for w in where if w)
    n = f"n = {p.n} each" if p.n == base.n else f"n = {p.n} vs {base.n}"
    a, b = named(spec.series, p.series), named(spec.series, base.series)
    # A value a study gives as "about 5.1 GB/s" makes the difference approximate too.
    about = "about " if p.approximate or base.approximate else ""
    if about:
        which = " and ".join(f"{x.series}'s" for x in (p, base) if x.approximate)
        n += f"; {which} value{'s are' if ' and ' in which else ' is'} approximate"
    if abs(diff) < 0.05:
        core = f"{a} and {b} are {about}equal in {m.name}{at}"
    elif m.higher_is_better:
        verb = VERBS.get(m.name)
        word = "faster" if diff > 0 else "slower"
        if verb:
            core = f"{a} {verb} {about}{_pct(diff)} {word} than {b}{at}"
        else:
            core = f"{a} is {about}{_pct(diff)} {word} than {b} in {m.name}{at}"
    else:
        word = "lower" if diff < 0 else "higher"
        core = f"{a} has {about}{_pct(diff)} {word} {m.name} than {b}{at}"
    if test is None:
        reason = "single values" if min(p.n, base.n) < 2 else "no spread"
        return f"{core} ({reason}, no significance test; {n})"
    if test.p < ALPHA:
        return f"{core} ({stats.format_p(test.p)}, {n})"
    return f"{core}, but the difference is not significant ({stats.format_p(test.p)}, {n})"


# --- Testbed facts: limits, working set, configuration differences ------------------------


def working_set(tool: str, params: dict) -> float | None:
    """Bytes a run reads or writes in total, from its parameters (None when unknown)."""
    from runners.parsers.base import parse_size

    def size(name: str) -> float | None:
        value = params.get(name)
        if value in (None, "", True, False):
            return None
        try:
            return float(value) if isinstance(value, int | float) else float(parse_size(value))
        except Exception:  # noqa: BLE001 - anything unparseable is simply unknown
            return None

    def count(name: str, default: float = 1.0) -> float:
        value = params.get(name)
        try:
            return float(value) if value not in (None, "", True, False) else default
        except (TypeError, ValueError):
            return default

    if size("aggregate_size"):
        return size("aggregate_size")
    if tool == "fio" and size("size"):
        return size("size") * count("numjobs") * count("nodes")
    if tool == "ior" and size("block_size"):
        tasks = count("threads", count("nodes") * count("tasks_per_node"))
        return size("block_size") * count("segments") * tasks
    if tool == "elbencho" and size("size"):
        return size("size") * count("files") * count("threads") * count("nodes")
    if tool == "dd":
        if size("bs") and params.get("count"):
            return size("bs") * count("count")
        return size("file_size")
    if size("file_size"):
        return size("file_size") * count("threads")
    return None


def _direct(params: dict) -> bool:
    value = params.get("direct")
    return value in (True, 1, "1", "true", "True", "yes")


@dataclass
class _Context:
    """Testbeds, targets and tuning sets of the runs in a result, loaded in bulk."""

    testbeds: dict[int, Any]
    members: dict[int, list]
    targets: dict[int, list]
    target_by_id: dict[int, Any]
    limits: dict[tuple[str, int], Any]
    by_group: dict[tuple, list[dict]]
    configs: list[dict]
    tunings: dict[int, Any]
    warnings: list[str]
    measured: dict[int, Any] = field(default_factory=dict)  # limits.measured_links

    @classmethod
    def load(cls, rows: list[dict], groups: dict[str, Any], qs: QuerySet) -> _Context:
        ctx = cls({}, defaultdict(list), defaultdict(list), {}, {}, defaultdict(list), [], {}, [])
        if rows:
            ctx._load(rows, groups, qs)
        return ctx

    def _load(self, rows: list[dict], groups: dict[str, Any], qs: QuerySet) -> None:
        """A fixed number of queries, whatever the number of runs or testbeds."""
        from experiments.models import Target, Testbed, TestbedNode, TuningSet

        testbed_ids = {r["tb_lo"] for r in rows} | {r["tb_hi"] for r in rows}
        # Configurations per group: (testbed, tuning set, target) and, for the working-set
        # check, the distinct parameter sets (cells of a matrix, not its repetitions).
        self.configs = list(
            qs.annotate(**groups)
            .values(
                "name",
                "series",
                "x",
                "y",
                "run__testbed_id",
                "run__tuning_set_id",
                "run__target_id",
                "run__tool",
                "run__params",
            )
            .order_by()
            .distinct()[: MAX_CONFIGS + 1]
        )
        if len(self.configs) > MAX_CONFIGS:
            self.warnings.append(
                "Too many distinct configurations: working-set and "
                "configuration checks are skipped."
            )
            self.configs = []
        testbed_ids |= {c["run__testbed_id"] for c in self.configs}
        self.testbeds = Testbed.objects.in_bulk(testbed_ids)
        from experiments.limits import measured_links

        self.measured = measured_links(self.testbeds.values())
        for member in (
            TestbedNode.objects.filter(testbed_id__in=testbed_ids)
            .select_related("node__profile")
            .prefetch_related("node__profile__nics", "node__profile__drives")
        ):
            self.members[member.testbed_id].append(member)
        for target in (
            Target.objects.filter(testbed_id__in=testbed_ids, kind="storage")
            .select_related("drive", "node__profile")
            .prefetch_related("node__profile__drives", "node__profile__nics")
        ):
            self.targets[target.testbed_id].append(target)
            self.target_by_id[target.pk] = target
        target_ids = {r["tg_lo"] for r in rows if r["tg_lo"]} | {
            c["run__target_id"] for c in self.configs if c["run__target_id"]
        }
        missing = target_ids - set(self.target_by_id)
        if missing:
            for target in (
                Target.objects.filter(pk__in=missing)
                .select_related("drive", "node__profile")
                .prefetch_related("node__profile__drives", "node__profile__nics")
            ):
                self.target_by_id[target.pk] = target
        tuning_ids = {c["run__tuning_set_id"] for c in self.configs if c["run__tuning_set_id"]}
        self.tunings = TuningSet.objects.in_bulk(tuning_ids) if tuning_ids else {}
        for c in self.configs:
            self.by_group[(c["name"], _raw(c["series"]), _raw(c["x"]), _raw(c["y"]))].append(c)

    def testbed_names(self, metric: str, points: list[Point]) -> list[str]:
        """Names of the testbeds whose runs a metric's points hold (for exported images)."""
        ids = {c["run__testbed_id"] for c in self.configs if c["name"] == metric}
        names = {self.testbeds[i].name for i in ids if i in self.testbeds}
        if not self.configs:  # too many configurations: the points' own testbeds
            names = {p.testbed for p in points if p.metric == metric and p.testbed}
            names.discard("(several)")
        return sorted(names)

    # Limits and efficiency.
    def _limits(self, scope):
        """The limits of a run scope (experiments.limits.run_scope), computed once."""
        from experiments.limits import compute_scope_limits

        key = ("scope", scope)
        if key not in self.limits:
            testbed = self.testbeds.get(scope.testbed_id)
            target = self.target_by_id.get(scope.target_id) if scope.target_id else None
            if testbed is None or (scope.kind == "target" and target is None):
                self.limits[key] = None
            else:
                pk = testbed.pk
                members, targets = self.members[pk], self.targets[pk]
                self.limits[key] = compute_scope_limits(
                    scope, testbed, members, targets, target, self.measured.get(pk)
                )
        return self.limits[key]

    def _scope(self, point: Point, row: dict):
        """The one scope of the runs behind a point, from their targets and parameters (none
        when they differ); without configurations, from the target/testbed id ranges."""
        from experiments.limits import Scope, run_scope

        configs = self.by_group.get((point.metric, point.series_key, point.x_key, point.y_key))
        if configs:
            scopes = {
                run_scope(
                    c["run__tool"], c["run__params"], c["run__target_id"], c["run__testbed_id"]
                )
                for c in configs
            }
            return scopes.pop() if len(scopes) == 1 else None
        if row["tg_n"] == row["runs"] and row["tg_lo"] == row["tg_hi"] and row["tg_lo"]:
            return Scope("target", row["tb_lo"], row["tg_lo"], network=False)
        if row["tb_lo"] == row["tb_hi"] and not row["tg_n"]:
            return Scope("testbed", row["tb_lo"])
        return None

    def annotate(self, point: Point, row: dict, m: MetricInfo) -> None:
        single_testbed = row["tb_lo"] == row["tb_hi"]
        if single_testbed and row["tb_lo"] in self.testbeds:
            point.testbed = self.testbeds[row["tb_lo"]].name
        elif not single_testbed:
            point.testbed = "(several)"
        op = LIMIT_OPS.get(m.name)
        if op is None:
            self._working_set(point, row, m)
            return
        from experiments.limits import above_limit

        scope = self._scope(point, row)
        limits = self._limits(scope) if scope is not None else None
        bottleneck = limits.bottleneck(op) if limits else None
        if bottleneck is not None:
            limit = getattr(bottleneck, op)
            point.limit_name = bottleneck.name
            point.limit_detail = bottleneck.detail
            point.limit_scope = limits.scope
            point.limit_value = limit / m.divisor
            point.efficiency = row["raw_mean"] / limit * 100
            of = f"{bottleneck.name}, {limits.scope}"
            if above_limit(row["raw_mean"], limit):
                why = "likely a cache effect"
                if limits.scope != "testbed":
                    why = (
                        "more than its scope allows (a cache effect, a wider scope than "
                        "stated or an understated limit)"
                    )
                point.flags.append(
                    f"above the theoretical limit ({point.efficiency:.0f}% of {of}): {why}"
                )
            elif above_limit(row["raw_max"], limit):
                point.flags.append(
                    f"some repetitions above the {bottleneck.name} limit ({limits.scope}): "
                    "likely a cache effect"
                )
        self._working_set(point, row, m)

    def _working_set(self, point: Point, row: dict, m: MetricInfo) -> None:
        if m.base_unit not in ("B/s", "op/s"):
            return
        smallest: tuple[float, float] | None = None
        for c in self.by_group.get((point.metric, point.series_key, point.x_key, point.y_key), []):
            params = c["run__params"] or {}
            if not isinstance(params, dict) or _direct(params):
                continue
            ws = working_set(c["run__tool"], params)
            memory = self._client_memory(c["run__testbed_id"], params)
            if ws and memory and ws < memory and (smallest is None or ws < smallest[0]):
                smallest = (ws, memory)
        if smallest:
            point.flags.append(
                f"working set {smallest[0] / 2**30:,.1f} GiB is smaller than the clients' "
                f"memory ({smallest[1] / 2**30:,.0f} GiB): results may come from the page cache"
            )

    def _client_memory(self, testbed_id: int, params: dict) -> float | None:
        clients = [m for m in self.members.get(testbed_id, []) if m.client]
        memories = [m.node.profile.memory_gib for m in clients if m.node.profile.memory_gib]
        if not memories:
            return None
        per_client = sum(memories) / len(memories)
        try:
            used = int(params.get("nodes") or len(clients))
        except (TypeError, ValueError):
            used = len(clients)
        return per_client * min(max(used, 1), len(clients)) * 2**30

    # Configuration differences between series.
    def _facts(self, config: dict) -> dict[tuple[str, str], str]:
        testbed = self.testbeds.get(config["run__testbed_id"])
        facts: dict[tuple[str, str], str] = {}
        if testbed is None:
            return facts
        members = self.members.get(testbed.pk, [])
        target = (
            self.target_by_id.get(config["run__target_id"]) if config["run__target_id"] else None
        )
        storage = [m.node.profile for m in members if m.storage]
        if target is not None and target.node_id:
            storage = [target.node.profile]
        clients = [m.node.profile for m in members if m.client]

        def many(values) -> str:
            values = sorted({str(v) for v in values if v not in (None, "")})
            return ", ".join(values) if values else "—"

        facts[("hardware", "storage server profile")] = many(p.name for p in storage)
        facts[("hardware", "architecture")] = many(p.architecture for p in storage)
        facts[("hardware", "CPU")] = many(p.cpu_model for p in storage)
        facts[("hardware", "cores per server")] = many(p.total_cores for p in storage)
        facts[("hardware", "memory per server (GiB)")] = many(
            f"{p.memory_gib:g}" if p.memory_gib else None for p in storage
        )
        facts[("hardware", "data drives")] = many(
            str(d) for p in storage for d in p.drives.all() if d.purpose == "data"
        )
        facts[("hardware", "network adapters")] = many(
            str(n) for p in storage for n in p.nics.all()
        )
        facts[("hardware", "client profile")] = many(p.name for p in clients)
        facts[("testbed", "testbed")] = testbed.name
        facts[("testbed", "BeeGFS version")] = testbed.beegfs_version or "—"
        facts[("testbed", "fabric")] = testbed.get_fabric_display() or "—"
        facts[("testbed", "storage servers")] = str(sum(1 for m in members if m.storage))
        facts[("testbed", "clients")] = str(len(clients))
        targets = [target] if target is not None else self.targets.get(testbed.pk, [])
        facts[("testbed", "storage targets")] = (
            "1 (one target measured)" if target is not None else str(sum(t.count for t in targets))
        )
        facts[("testbed", "RAID level")] = many(t.get_raid_level_display() for t in targets)
        facts[("testbed", "disks per array")] = many(t.disks for t in targets)
        facts[("testbed", "local file system")] = many(t.filesystem for t in targets)
        facts[("testbed", "mount options")] = many(t.mount_options for t in targets)
        tuning = self.tunings.get(config["run__tuning_set_id"])
        facts[("tuning", "tuning set")] = tuning.name if tuning else "(none)"
        for key, value in sorted((tuning.effective if tuning else {}).items()):
            facts[("tuning", key)] = str(value)
        return facts

    def differences(self, spec: ComparisonSpec, result: ComparisonResult) -> list[Difference]:
        if not spec.series or len(result.series) < 2 or not self.configs:
            return []
        per_series: dict[str, dict[tuple[str, str], set[str]]] = defaultdict(
            lambda: defaultdict(set)
        )
        seen: set[tuple] = set()
        for c in self.configs:
            key = (
                _raw(c["series"]),
                c["run__testbed_id"],
                c["run__tuning_set_id"],
                c["run__target_id"],
            )
            if key in seen:
                continue
            seen.add(key)
            for attr, value in self._facts(c).items():
                per_series[key[0]][attr].add(value)
        labels = dict((k, v) for k, v in result.series)
        base = spec.baseline if spec.baseline in labels else result.series[0][0]
        out = []
        for key, label in result.series:
            if key == base:
                continue
            a, b = per_series.get(key, {}), per_series.get(base, {})
            rows = []
            # dict.fromkeys keeps the order _facts() lists attributes in (a set would not,
            # and the rows would come out in a different order in every process).
            for attr in sorted(dict.fromkeys([*a, *b]), key=_attr_order):
                va, vb = (
                    " | ".join(sorted(a.get(attr, {"—"}))),
                    " | ".join(sorted(b.get(attr, {"—"}))),
                )
                if va != vb:
                    rows.append([attr[0], attr[1], va, vb])
            out.append(Difference(series=label, baseline=labels[base], rows=rows))
        return out


_GROUP_ORDER = {"hardware": 0, "testbed": 1, "tuning": 2}


def _attr_order(attr: tuple[str, str]) -> tuple:
    fixed = attr[0] != "tuning" or attr[1] == "tuning set"
    return (_GROUP_ORDER.get(attr[0], 9), 0 if fixed else 1, "" if fixed else attr[1])


# --- Charts -------------------------------------------------------------------------------

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
            hi, lo, name = p.ci_high, p.ci_low, "95% CI"
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


def _x_axis(x_values: list[str], title: str, has_x: bool, bars: bool) -> dict:
    """Categories for bars and text values; a log axis (ticks at the values, integer labels)
    for sweeps spanning 16x or more such as 1, 2, 4 … 256 threads; otherwise a linear axis,
    whose ticks are integers when the parameter is (numjobs 1 and 2 never get a 1.5)."""
    axis: dict[str, Any] = {"title": {"text": title}}
    if not has_x:
        return axis
    values = _numeric_values(x_values)
    if bars or values is None:
        axis.update(type="category", categoryorder="array", categoryarray=x_values)
        return axis
    if len(values) >= 3 and min(values) > 0 and max(values) / min(values) >= 16:
        axis.update(
            type="log", tickmode="array", tickvals=values, ticktext=[_number(v) for v in values]
        )
    elif all(v.is_integer() for v in values):
        axis.update(type="linear")
        if len(values) <= 12:
            axis.update(tickmode="array", tickvals=values, ticktext=[_number(v) for v in values])
        else:
            step = _integer_step(max(values) - min(values))
            axis.update(tickmode="linear", tick0=0, dtick=step, tickformat="d")
    else:
        axis.update(type="linear")
    return axis


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
        "margin": {"l": 70, "r": 20, "t": 50, "b": 70},
        "height": 440,
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


def _charts(
    result: ComparisonResult,
    spec: ComparisonSpec,
    qs,
    groups,
    value,
    testbeds: dict[str, list[str]] | None = None,
    testbed_names: dict[str, str] | None = None,
) -> list[Chart]:
    out: list[Chart] = []
    testbeds = testbeds or {}
    filters = filter_summary(spec, testbed_names or {})
    reps: dict[tuple, list[float]] = defaultdict(list)
    if spec.reps and spec.chart != "heatmap" and result.points:
        values = list(qs.repetitions(groups, value)[: MAX_REPETITION_POINTS + 1])
        if len(values) > MAX_REPETITION_POINTS:
            result.warnings.append(
                f"More than {MAX_REPETITION_POINTS} repetitions: not all are drawn as points."
            )
            values = values[:MAX_REPETITION_POINTS]
        for row in values:
            reps[(row["name"], _raw(row["series"]), _raw(row["x"]))].append(row["_v"])
    for m, pts in result.tables():
        if not pts:
            continue
        title = charts.metric_title(m.name, m.unit)
        if spec.chart == "heatmap":
            out += _heatmaps(m, pts, spec, result)
            continue
        has_x = bool(spec.x)
        plotted = [p for p in pts if not has_x or p.x != dimensions.UNKNOWN]
        if not plotted:
            continue
        x_values = sorted({p.x for p in plotted}, key=charts._sort_key)
        # Text categories (tool, RAID level…) and a single x value are grouped bars: lines
        # between categories, or two floating dots, suggest a trend that is not there.
        bars = (
            spec.chart == "bar"
            or not has_x
            or len(x_values) == 1
            or _numeric_values(x_values) is None
        )
        traces = []
        minmax = clipped = drawn = False
        for label in sorted({p.series for p in plotted}):
            sp = sorted(
                (p for p in plotted if p.series == label), key=lambda p: charts._sort_key(p.x)
            )
            colour = result.colours.get(label, charts.PALETTE[0])
            errors = _error_bars(sp, spec.error)
            trace: dict[str, Any] = {
                "name": label,
                "legendgroup": label,
                "x": [p.x for p in sp] if has_x else [label] * len(sp),
                "y": [round(p.mean, 6) for p in sp],
                "marker": {"color": colour},
                "customdata": [
                    [p.n, _r(p.median), _r(p.min), _r(p.max), _r(p.cv_pct), text]
                    for p, text in zip(sp, errors.texts, strict=True)
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
            if errors.error_y:
                trace["error_y"] = errors.error_y
                drawn = True
                minmax |= errors.minmax
                clipped |= errors.clipped
            traces.append(trace)
            if reps:
                xs, ys = [], []
                for p in sp:
                    for v in reps.get((m.name, p.series_key, p.x_key), []):
                        xs.append(p.x if has_x else label)
                        ys.append(round(v / m.divisor, 6))
                if xs:
                    run_trace = {
                        "name": f"{label} (runs)",
                        "legendgroup": label,
                        "showlegend": False,
                        "type": "scatter",
                        "mode": "markers",
                        "x": xs,
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
        x_axis = _x_axis(x_values, result.x_label if has_x else "", has_x, bars)
        extra: dict[str, Any] = {"title": {"text": _esc(title), "font": {"size": 14}}}
        if bars and has_x and reps:
            extra["scattermode"] = "group"
        if not has_x:
            extra["barmode"] = "overlay"  # one bar per category (the series): centred
        notes = []
        if drawn:
            notes.append(f"Error bars: {ERRORS[spec.error]}")
            if minmax:
                notes.append(MINMAX_NOTE)
            if clipped:
                notes.append("clipped at 0")
        if notes:
            extra["annotations"] = [
                {
                    "text": "; ".join(notes),
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
        out.append(Chart(m.name, title, "bar" if bars else "line", figure))
    return out


def _r(value: float | None) -> float | None:
    return None if value is None else round(value, 6)


def _heatmaps(
    m: MetricInfo, pts: list[Point], spec: ComparisonSpec, result: ComparisonResult
) -> list[Chart]:
    out = []
    labels = sorted({p.series for p in pts})
    if len(labels) > MAX_HEATMAPS:
        result.warnings.append(f"Only the first {MAX_HEATMAPS} series are drawn as heatmaps.")
    for label in labels[:MAX_HEATMAPS]:
        sp = [p for p in pts if p.series == label]
        xs = sorted({p.x for p in sp}, key=charts._sort_key)
        ys = sorted({p.y for p in sp}, key=charts._sort_key)
        cell = {(p.x, p.y): p for p in sp}
        z = [[_r(cell[(x, y)].mean) if (x, y) in cell else None for x in xs] for y in ys]
        text = [[f"{cell[(x, y)].mean:.3g}" if (x, y) in cell else "" for x in xs] for y in ys]
        title = charts.metric_title(m.name, m.unit) + (f": {label}" if spec.series else "")
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
                "title": {"text": _esc(title), "font": {"size": 14}},
                "xaxis": {"title": {"text": result.x_label}, "type": "category"},
                "yaxis": {"title": {"text": result.y_label}, "type": "category"},
                "margin": {"l": 80, "r": 20, "t": 40, "b": 60},
                "height": 420,
            },
        }
        out.append(Chart(m.name, title, "heatmap", figure))
    return out


# --- Choices for the builder --------------------------------------------------------------


def dimension_choices(extra_params: list[str] | None = None) -> list[tuple[str, str]]:
    """(key, label) of the dimensions a user can pick for x, y, series and filters."""
    choices = [(key, d.label) for key, d in dimensions.FIXED.items()]
    choices += [(f"hw:{f}", dimensions.label(f"hw:{f}")) for f in dimensions.HARDWARE_FIELDS]
    params = list(dict.fromkeys(extra_params or []))
    choices += [(f"param:{p}", f"parameter: {p.replace('_', ' ')}") for p in params]
    return choices


def distinct_values(
    key: str, runs: QuerySet | None = None, limit: int = 200
) -> list[tuple[str, str]]:
    """(raw value, label) of one dimension over the runs' headline metrics (one query)."""
    from experiments.models import Metric

    qs = Metric.objects.primary_values()
    if runs is not None and runs.query.is_empty():
        return []
    if runs is not None and runs.query.where:
        qs = qs.filter(run__in=runs)
    values = (
        qs.annotate(_v=Cast(dimensions.expression(key, dimensions.TestbedLookup()), CharField()))
        .values_list("_v", flat=True)
        .order_by("_v")
        .distinct()[:limit]
    )
    out = [(v, dimensions.display_value(key, v)) for v in values if v not in (None, "")]
    return sorted(out, key=lambda kv: charts._sort_key(kv[0]))
