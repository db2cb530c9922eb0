"""``compute(spec, runs)``: the metrics aggregated in the database, then statistics, limits,
comparability, baseline statements and charts."""

from __future__ import annotations

import math

from django.db.models import Case, CharField, F, FloatField, Q, QuerySet, Value, When
from django.db.models.fields.json import KeyTextTransform
from django.db.models.functions import Cast, NullIf
from django.utils import timezone

from experiments import dimensions, stats
from experiments.comparison import charts
from experiments.comparison.charts import chart_figures
from experiments.comparison.comparability import differences, mixed_series, source_chosen, sources
from experiments.comparison.context import Context, raw
from experiments.comparison.limits import annotate
from experiments.comparison.result import ComparisonResult, MetricInfo, Point
from experiments.comparison.spec import NORMALISATIONS, ComparisonSpec, metric_unit
from experiments.comparison.statements import compare_to_baseline

# Points whose coefficient of variation is above this are flagged as noisy.
NOISY_CV = 0.05


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
    context = Context.load(rows, groups, qs)
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
            series_key=raw(row["series"]),
            x=dimensions.display_value(spec.x, row["x"]) if spec.x else "",
            x_key=raw(row["x"]),
            y=dimensions.display_value(spec.y, row["y"]) if spec.y else "",
            y_key=raw(row["y"]),
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
        sources(point, row)
        annotate(context, point, row, m)
        points.append(point)
        variances[(m.name, point.series_key, point.x_key, point.y_key)] = (
            row["n"],
            row["mean"],
            sd * sd if sd is not None else math.nan,
        )
    points.sort(key=lambda p: (p.metric, p.series, charts.sort_key(p.x), charts.sort_key(p.y)))
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
        for metric, key in sorted(mixed_series(points)):
            result.warnings.append(
                f"{labels[key]} ({metric}) mixes published studies and own runs: split "
                "(series=source) or filter (f=source:…) by data source to keep them apart."
            )
    if spec.baseline and spec.series:
        if spec.baseline in labels:
            result.baseline_label = labels[spec.baseline]
            compare_to_baseline(result, spec, variances, info)
        else:
            result.warnings.append(f"The baseline {spec.baseline!r} is not among the series shown.")
    result.differences = differences(context, spec, result)
    result.charts = chart_figures(
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
