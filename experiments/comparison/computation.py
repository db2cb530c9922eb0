"""``compute(spec, runs)``: the metrics aggregated in the database, then statistics, limits,
comparability, baseline statements and charts."""

from __future__ import annotations

import json
import math
from collections import Counter, defaultdict
from dataclasses import dataclass
from operator import itemgetter
from typing import Any

from django.db import connections
from django.db.models import (
    Case,
    CharField,
    F,
    FloatField,
    Q,
    QuerySet,
    TextField,
    Value,
    When,
)
from django.db.models.fields.json import KeyTextTransform
from django.db.models.functions import Cast, NullIf
from django.utils import timezone

from experiments.comparison import charts, comparability, dimensions
from experiments.comparison.charts import MAX_REPETITION_POINTS, chart_figures
from experiments.comparison.comparability import differences, mixed_series, source_chosen, sources
from experiments.comparison.context import MAX_CONFIGS, Context, raw
from experiments.comparison.dimensions import sort_key
from experiments.comparison.limits import annotate
from experiments.comparison.result import ComparisonResult, MetricInfo, Point
from experiments.comparison.spec import NORMALISATIONS, ComparisonSpec, metric_unit
from experiments.comparison.statements import compare_to_baseline
from experiments.models import CellState, Matrix
from experiments.results.summaries import COLUMNS as SUMMARY_COLUMNS
from experiments.results.summaries import key_of_source
from experiments.shared import bottleneck, stats
from runners import metrics
from runners import params as param_kinds

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
    return _filtered(qs, spec, lookup)


def _filtered(qs: QuerySet, spec: ComparisonSpec, lookup) -> QuerySet:
    """``qs`` (metric rows, or configuration summaries: both reach the run as ``run``)
    narrowed by the spec's filters."""
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
    if spec.bottleneck:
        qs = qs.filter(run__bottleneck=spec.bottleneck)
    for i, (key, values) in enumerate(spec.filter_groups().items()):
        if key.startswith("param:"):
            values = _param_texts(key[6:], values)
        name = f"_f{i}"
        qs = qs.annotate(**{name: Cast(dimensions.expression(key, lookup), CharField())})
        qs = qs.filter(**{f"{name}__in": values})
    return qs


def _param_texts(name: str, values: list[str]) -> list[str]:
    """A parameter filter's values and the text of their normal forms (``runners.params``:
    ``1m`` is 1048576, as runs store it; a boolean's text is "true" on PostgreSQL and "1"
    on SQLite)."""
    out = list(values)
    for value in values:
        try:
            normal = param_kinds.parse(name, value)
        except ValueError:
            continue
        if isinstance(normal, bool):
            out += ["true", "1"] if normal else ["false", "0"]
        else:
            out.append(str(normal))
    return list(dict.fromkeys(out))


# The configuration of a run (DESIGN.md, "Alike runs"): the summary groups by these besides
# the spec's axes, so that each row holds alike runs only; points pool rows in Python.
CONFIGURATION = {
    "cf_tool": F("run__tool"),
    "cf_tb": F("run__testbed_id"),
    "cf_tg": F("run__target_id"),
    "cf_tn": F("run__tuning_set_id"),
    "cf_params": F("run__params"),
}


def _params(value: Any) -> dict:
    """A run's parameters as the database cursor returns them (a dict from PostgreSQL's
    jsonb, JSON text from SQLite)."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return {}
    return value if isinstance(value, dict) else {}


def summarisable(spec: ComparisonSpec, runs: QuerySet | None = None) -> bool:
    """Whether the configuration summaries (experiments.results.summaries) answer the spec: every
    run is selected (or ``runs`` has no condition), and what it groups and filters by is an
    attribute of the configuration. A matrix, dates or a bottleneck verdict are attributes
    of single runs: those comparisons read the metric rows."""
    if runs is not None and (runs.query.is_empty() or runs.query.where):
        return False
    if spec.matrices or spec.date_from or spec.date_to or spec.bottleneck:
        return False
    return "matrix" not in {spec.series, spec.x, spec.y, *spec.filter_groups()}


# What a configuration summary holds of its figures, in this order; with the places (series,
# x, y), the configuration (cf_*) and the divisor (_d), a summary row (``_SUMMARY_FIELDS``).
# The summaries are read in two steps: first what places and pools them (``_WHERE``: the
# metric, its configuration key, places, configuration and divisor), then, only for a
# comparison that is drawn, the figures (``_fill``). A selection of too many points (every
# run of a lab, thousands of configurations) is told so without reading the figures.
_STORED = tuple(c for c in SUMMARY_COLUMNS if c != "run_id")
_PLACES = ("series", "x", "y")
_IDENTITY = ("cf_tool", "cf_tb", "cf_tg", "cf_tn", "cf_params", "cf_src")
_SUMMARY_FIELDS = (*_STORED, *_PLACES, *_IDENTITY, "_d")
_WHERE = ("name", "config_key", *_PLACES, *_IDENTITY, "_d")
_FIGURES = tuple(c for c in _STORED if c not in ("name", "config_key"))


def _summary_rows(
    spec: ComparisonSpec, lookup: dimensions.TestbedLookup, groups: dict, divisor
) -> list[tuple]:
    """The configuration summaries the spec selects, as tuples of ``_WHERE`` (their figures
    are read by ``_fill``): one per configuration (each holds alike runs only) and metric,
    with the parameters as the database's JSON text (decoded once per distinct text, not
    once per row). Rows without a divisor hold no value (the metric rows' NULLs) and are
    left out."""
    from experiments.models import ConfigSummary

    qs = _filtered(ConfigSummary.objects.filter(name__in=spec.metrics), spec, lookup)
    d = Value(1.0) if divisor is None else NullIf(divisor, 0.0)
    annotations = {
        **{k: v for k, v in groups.items() if k != "cf_params"},
        "cf_params": Cast("run__params", TextField()),
        "_d": Cast(d, FloatField()),  # a float from the cursor, whatever the database
    }
    # Read with a plain cursor (every column is as the cursor gives it, so Django's per-row
    # converters have nothing to do).
    query = qs.annotate(**annotations).values_list(*_WHERE).order_by().query
    sql, params = query.get_compiler(qs.db).as_sql()
    with connections[qs.db].cursor() as cursor:
        cursor.execute(sql, params)
        return [r for r in cursor.fetchall() if r[-1] is not None]


_AT = {name: i for i, name in enumerate(_WHERE)}
_FILL_CHUNK = 2000


def _fill(entries: list[_Row], metrics: list[str], db: str) -> list[_Row]:
    """The entries (summary rows of ``_WHERE``) with their figures: each ``data`` becomes its
    tuple of ``_SUMMARY_FIELDS``. Read by (metric, configuration key), which a summary keeps
    when its figures are merged or replaced; an entry whose summary went meanwhile (its last
    run deleted between the two reads) is left out."""
    from experiments.models import ConfigSummary

    keys = sorted({entry.data[1] for entry in entries})
    figures: dict[tuple, tuple] = {}
    fields = ("name", "config_key", *_FIGURES)
    for i in range(0, len(keys), _FILL_CHUNK):
        found = ConfigSummary.objects.using(db).filter(
            name__in=metrics, config_key__in=keys[i : i + _FILL_CHUNK]
        )
        for t in found.values_list(*fields).order_by():
            figures[t[:2]] = t[2:]
    kept = []
    for entry in entries:
        t = entry.data
        stored = figures.get(t[:2])
        if stored is None:
            continue
        entry.data = (t[0], t[1], *stored, *t[2:])
        kept.append(entry)
    return kept


def _summary_row(t: tuple) -> dict:
    """One summary tuple as the row ``MetricQuerySet.summary`` gives for its configuration.
    A normalisation's divisor is a constant of the configuration, so it scales the stored
    figures; a pending median (NULL) stays None: compute() reads it from the values."""
    r = dict(zip(_SUMMARY_FIELDS, t, strict=True))
    d = r.pop("_d")
    n, tg = r["n"], r["cf_tg"]
    raw_mean = r["total"] / n
    lo, hi = sorted((r["min"] / d, r["max"] / d))
    r.update(
        mean=raw_mean / d,
        min=lo,
        max=hi,
        median=None if r["median"] is None else r["median"] / d,
        stddev=math.sqrt(max(r["m2"], 0.0) / (n - 1)) / abs(d) if n > 1 else None,
        sum_sq=None,
        raw_mean=raw_mean,
        raw_max=r["max"],
        tb_lo=r["cf_tb"],
        tb_hi=r["cf_tb"],
        tg_lo=tg,
        tg_hi=tg,
        tg_n=n if tg is not None else 0,
        runs=n,
        src_lo=r["cf_src"],
        src_hi=r["cf_src"],
        steady_mean=r["steady_sum"] / r["steady_n"] if r["steady_n"] else None,
        whole_mean=r["whole_sum"] / r["whole_n"] if r["whole_n"] else None,
    )
    return r


class _Params:
    """One distinct parameters text of a comparison: decoded, as attributes, and as the
    sorted JSON the configurations are ordered and identified by (computed once)."""

    __slots__ = ("params", "attrs", "dumped", "sig")

    def __init__(self, value: Any) -> None:
        self.params = _params(value)
        self.attrs = comparability.param_attributes(self.params)
        self.dumped = json.dumps(self.params, sort_keys=True)
        self.sig: int | None = None


class _Row:
    """One configuration's row (summary tuple or metric rows' dict) before it is expanded:
    its metric, places and configuration, with the cached parts of its attributes."""

    __slots__ = (
        *("name", "series", "x", "y", "sk", "xk", "yk", "tool", "tb", "tg", "tn", "src"),
        *("p", "setup", "data"),
    )

    def key(self) -> tuple:
        """The configuration's identity (``_config_key`` of its config)."""
        return (
            self.name,
            self.sk,
            self.xk,
            self.yk,
            self.tool,
            self.tb,
            self.tg,
            self.tn,
            self.p.dumped,
            self.src,
        )

    def order(self) -> tuple:
        """The order rows are pooled and labelled in (whatever answered the query)."""
        return (
            self.name,
            self.sk,
            self.xk,
            self.yk,
            self.tool,
            self.tb,
            self.tg or 0,
            self.tn or 0,
            self.src,
            self.p.dumped,
        )


def _rows(data: list, summarised: bool) -> list[_Row]:
    """``_Row`` of each summary tuple or metric rows' dict, parameters decoded once per
    distinct text."""
    texts: dict[Any, _Params] = {}
    out = []
    if summarised:
        identity = itemgetter(*(_AT[k] for k in ("name", *_PLACES, *_IDENTITY)))
        for t in data:
            row = _Row()
            (row.name, row.series, row.x, row.y, row.tool, row.tb, row.tg, row.tn, text,
             row.src) = identity(t)  # fmt: skip
            p = texts.get(text)
            if p is None:
                p = texts[text] = _Params(text)
            row.p = p
            row.data = t
            out.append(row)
    else:
        for r in data:
            row = _Row()
            row.name, row.series, row.x, row.y = r["name"], r["series"], r["x"], r["y"]
            row.tool, row.tb, row.tg, row.tn = r["cf_tool"], r["cf_tb"], r["cf_tg"], r["cf_tn"]
            row.src = r["cf_src"]
            text = r["cf_params"]
            cached = text if isinstance(text, str) else json.dumps(text, sort_keys=True)
            p = texts.get(cached)
            if p is None:
                p = texts[cached] = _Params(text)
            row.p = p
            row.data = r
            out.append(row)
    for row in out:
        row.sk, row.xk, row.yk = raw(row.series), raw(row.x), raw(row.y)
    return out


def _expand(row: _Row) -> dict:
    """The row's figures as a dict (``MetricQuerySet.summary``'s keys), with its parameters
    decoded."""
    r = _summary_row(row.data) if isinstance(row.data, tuple) else row.data
    r["cf_params"] = row.p.params
    return r


def _config(row: dict) -> dict:
    return {
        "name": row["name"],
        "series": row["series"],
        "x": row["x"],
        "y": row["y"],
        "run__tool": row["cf_tool"],
        "run__testbed_id": row["cf_tb"],
        "run__target_id": row["cf_tg"],
        "run__tuning_set_id": row["cf_tn"],
        "run__params": _params(row["cf_params"]),
        "source": row["cf_src"],
    }


def _config_key(config: dict) -> tuple:
    """One configuration's identity (also of the rows of the repetitions query)."""
    return (
        config["name"],
        raw(config["series"]),
        raw(config["x"]),
        raw(config["y"]),
        config["run__tool"],
        config["run__testbed_id"],
        config["run__target_id"],
        config["run__tuning_set_id"],
        json.dumps(config["run__params"], sort_keys=True),
        config["source"],
    )


def _sum_sq(row: dict) -> float:
    """Sum of squared values of a row, from PostgreSQL's sample deviation or SQLite's sum."""
    if row.get("sum_sq") is not None:
        return row["sum_sq"]
    n, mean, sd = row["n"], row["mean"], row.get("stddev") or 0.0
    return (n - 1) * sd * sd + n * mean * mean


def _merge(rows: list[dict]) -> dict:
    """The summary of several configurations' rows as one row (exact but for the median,
    which needs the values: ``median`` is None then)."""
    if len(rows) == 1:
        return rows[0]
    n = sum(r["n"] for r in rows)  # every row holds runs: compute() keeps only those
    merged = dict(rows[0])
    weighted = lambda key: sum(r[key] * r["n"] for r in rows) / n  # noqa: E731
    merged.update(
        n=n,
        mean=weighted("mean"),
        min=min(r["min"] for r in rows),
        max=max(r["max"] for r in rows),
        raw_mean=weighted("raw_mean"),
        raw_max=max(r["raw_max"] for r in rows),
        tb_lo=min(r["tb_lo"] for r in rows),
        tb_hi=max(r["tb_hi"] for r in rows),
        tg_lo=min((r["tg_lo"] for r in rows if r["tg_lo"] is not None), default=None),
        tg_hi=max((r["tg_hi"] for r in rows if r["tg_hi"] is not None), default=None),
        tg_n=sum(r["tg_n"] for r in rows),
        runs=sum(r["runs"] for r in rows),
        src_lo=min(r["src_lo"] for r in rows),
        src_hi=max(r["src_hi"] for r in rows),
        pub_n=sum(r["pub_n"] or 0 for r in rows),
        approx_n=sum(r["approx_n"] or 0 for r in rows),
        sum_sq=sum(_sum_sq(r) for r in rows),
        stddev=None,
        median=None,
        collapsed_n=sum(r["collapsed_n"] or 0 for r in rows),
        steady_n=sum(r["steady_n"] or 0 for r in rows),
        **{f"bn_{k}": sum(r[f"bn_{k}"] or 0 for r in rows) for k in bottleneck.KINDS},
    )
    for key in ("steady_mean", "whole_mean"):
        known = [r for r in rows if r["steady_n"] and r[key] is not None]
        weight = sum(r["steady_n"] for r in known)
        merged[key] = sum(r[key] * r["steady_n"] for r in known) / weight if weight else None
    return merged


def _verdicts(point: Point, row: dict, m: MetricInfo, normalised: bool) -> None:
    """The point's runs' stored verdicts, collapse flag and steady-state vs whole-run
    throughput (experiments.shared.bottleneck.summary) from its summary row."""
    point.bottleneck = {k: int(row[f"bn_{k}"]) for k in bottleneck.KINDS if row[f"bn_{k}"]}
    point.collapsed = int(row["collapsed_n"] or 0)
    if m.name.endswith("_bw") and not normalised and row["steady_n"]:
        point.steady_n = int(row["steady_n"])
        point.steady = row["steady_mean"] / m.divisor
        point.whole = row["whole_mean"] / m.divisor
    if point.collapsed:
        numbers = ""
        if point.steady is not None:
            numbers = f" (steady state {point.steady:.3g} vs whole run {point.whole:.3g} {m.unit})"
        point.flags.append(
            f"collapsed: {point.collapsed} of {point.n} runs' throughput fell below "
            f"{bottleneck.COLLAPSE_RATIO:.0%} of its early rate (last third vs first third of "
            f"the tool's time series){numbers}"
        )


def _stddev(row: dict) -> float | None:
    if row["n"] < 2:
        return None
    if row.get("stddev") is not None:
        return row["stddev"]
    if row.get("sum_sq") is None or row.get("mean") is None:
        return None
    return math.sqrt(stats.sample_variance(row["n"], row["mean"], row["sum_sq"]))


def _median(values: list[float]) -> float | None:
    values = sorted(values)
    if not values:
        return None
    mid = len(values) // 2
    return values[mid] if len(values) % 2 else (values[mid - 1] + values[mid]) / 2


@dataclass
class _Pool:
    """The configurations one point pools, and their summary rows."""

    configs: list[dict]
    rows: list[dict]
    attributes: dict[str, str]
    entries: list[_Row]


def _merge_attributes(into: dict[str, str], attrs: dict[str, str]) -> None:
    """A pool's attributes with one more configuration's: values that differ are listed
    ("a | b"), a configuration without the attribute adds "not stated"."""
    for k in set(into) | set(attrs):
        if into.get(k) != attrs.get(k):
            values = set(into.get(k, comparability.NOT_STATED).split(" | "))
            values.add(attrs.get(k, comparability.NOT_STATED))
            into[k] = " | ".join(sorted(values))


def _group(rows: list[_Row], ctx: Context, spec: ComparisonSpec) -> list[list[_Row]]:
    """Rows (one per configuration) grouped into points: alike but for what is exempt
    (``comparability.signature`` of their attributes). A comparison holds a few setups and
    parameter sets, each in many configurations: the attributes of each and their part of
    the signature are computed once (setup and parameter attributes never share a name, so
    the two parts are equal exactly when the whole signature is)."""
    exempt = comparability.exempt_within(spec)
    setups: dict[tuple, tuple[dict, int]] = {}
    setup_sigs: dict[tuple, int] = {}
    param_sigs: dict[tuple, int] = {}
    groups: dict[tuple, list[_Row]] = {}
    for row in rows:
        where = (row.tool, row.tb, row.tg, row.tn, row.src)
        setup = setups.get(where)
        if setup is None:
            attrs = comparability.setup_attributes(ctx, *where)
            sig = comparability.signature(attrs, exempt)
            setup = setups[where] = (attrs, setup_sigs.setdefault(sig, len(setup_sigs)))
        row.setup = setup[0]
        p = row.p
        if p.sig is None:
            sig = comparability.signature(p.attrs, exempt)
            p.sig = param_sigs.setdefault(sig, len(param_sigs))
        key = (row.name, row.sk, row.xk, row.yk, setup[1], p.sig)
        group = groups.get(key)
        if group is None:
            groups[key] = [row]
        else:
            group.append(row)
    return list(groups.values())


def _pools(groups: list[list[_Row]], ctx: Context) -> list[_Pool]:
    """The points' pools: their rows expanded, configurations and attributes (with whether
    each working set fits in the clients' memory)."""
    memory: dict[tuple, dict] = {}
    pools = []
    for group in groups:
        pool = None
        for entry in group:
            row = _expand(entry)
            config = _config(row)
            where = (entry.tool, entry.tb, id(entry.p))
            fits = memory.get(where)
            if fits is None:
                fits = memory[where] = comparability.memory_attribute(
                    ctx, entry.tool, entry.tb, entry.p.params
                )
            attrs = {**entry.setup, **entry.p.attrs, **fits}
            config["attributes"] = attrs
            if pool is None:
                pool = _Pool([config], [row], dict(attrs), [entry])
                continue
            pool.configs.append(config)
            pool.rows.append(row)
            pool.entries.append(entry)
            _merge_attributes(pool.attributes, attrs)
        pools.append(pool)
    return pools


# A comparison of more points than this is not readable (nor quick to draw): the selection
# holds that many different configurations at its places. The page says which attributes
# vary, so that the user filters or ignores them.
MAX_POINTS = 400


def _too_many(groups: list[list[_Row]], exempt: set[str]) -> str:
    """The message for a selection of too many configurations, naming what varies most
    between the would-be points: their attributes (from the setups and parameter sets their
    configurations share), but whether working sets fit in memory and what already is on an
    axis, the series or a filter, or ignored (``exempt``: it does not split points)."""
    values: dict[str, set] = defaultdict(set)
    present: Counter = Counter()  # attribute -> points that state it
    shared: dict[int, list] = {}  # id(attributes) -> [attributes, points of them alone]
    for group in groups:
        if len(group) == 1:
            for attrs in (group[0].setup, group[0].p.attrs):
                use = shared.get(id(attrs))
                if use is None:
                    shared[id(attrs)] = [attrs, 1]
                else:
                    use[1] += 1
            continue
        merged = {**group[0].setup, **group[0].p.attrs}
        for entry in group[1:]:
            _merge_attributes(merged, {**entry.setup, **entry.p.attrs})
        for key, value in merged.items():
            values[key].add(value)
            present[key] += 1
    for attrs, points in shared.values():
        for key, value in attrs.items():
            values[key].add(value)
            present[key] += points
    for key in values:
        if present[key] < len(groups):
            values[key].add(None)
    varying = sorted(
        ((len(v), k) for k, v in values.items() if len(v) > 1 and k not in exempt),
        key=lambda t: (-t[0], t[1]),
    )
    named = ", ".join(f"{comparability.attribute_name(k)} ({n} values)" for n, k in varying[:8])
    return (
        f"The runs selected are {len(groups):,} different configurations at the places of "
        f"this comparison (at most {MAX_POINTS} are shown): runs are pooled only when alike. "
        f"What varies: {named or 'nothing named'}. Filter on these (f=param:…) or put one on "
        "an axis or the series, or let compared runs differ in them (ignore=…)."
    )


def compute(
    spec: ComparisonSpec, runs: QuerySet | None = None, *, summaries: bool = True
) -> ComparisonResult:
    """Aggregate the spec's metrics over ``runs`` (all runs when None) in the database and
    derive statistics, efficiency, comparability, baseline statements and charts.

    The configuration summaries answer it when they can (``summarisable``: a million runs
    are a few thousand configurations); otherwise, or with ``summaries=False``, the metric
    rows do, with the same result."""
    result = ComparisonResult(
        query=spec.to_query(), errors=list(spec.errors), generated_at=timezone.now().isoformat()
    )
    result.x_label = dimensions.label(spec.x) if spec.x else ""
    result.y_label = dimensions.label(spec.y) if spec.y else ""
    result.x_dim, result.y_dim, result.series_dim = spec.x, spec.y, spec.series
    result.series_label = dimensions.label(spec.series) if spec.series else ""
    result.norm_label = NORMALISATIONS[spec.norm] if spec.norm else ""
    result.statistic = spec.stat
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
            MetricInfo(
                name,
                base,
                label,
                divisor,
                metrics.higher_is_better(name),
                charts.metric_label(name),
            )
        )
    info = {m.name: m for m in result.metrics}

    # The storage side's attributes and counts per testbed, read once (see TestbedLookup).
    lookup = dimensions.TestbedLookup()
    groups = spec.group_expressions(lookup)
    divisor = _normaliser(spec.norm, lookup)
    value = F("value") if divisor is None else F("value") / NullIf(divisor, 0.0)
    qs = filtered_metrics(spec, runs, lookup)
    configuration = {**CONFIGURATION, "cf_src": dimensions.source_expression()}
    summarised = summaries and summarisable(spec, runs)
    if summarised:
        data = _summary_rows(spec, lookup, {**groups, **configuration}, divisor)
    else:
        data = [r for r in qs.summary({**groups, **configuration}, value) if r["n"]]
    entries = _rows(data, summarised)
    if len(entries) > MAX_CONFIGS:
        result.errors.append(
            f"The runs selected hold {len(entries):,} configurations (more than "
            f"{MAX_CONFIGS:,}): narrow the comparison with filters (tool, testbed, matrix, "
            "parameters)."
        )
        return result
    context = Context.load(
        {e.tb for e in entries}, {e.tg for e in entries if e.tg}, {e.tn for e in entries if e.tn}
    )
    grouped = _group(entries, context, spec)
    if len(grouped) > MAX_POINTS:
        result.errors.append(_too_many(grouped, comparability.exempt_within(spec)))
        return result
    if summarised:
        kept = {id(e) for e in _fill([e for group in grouped for e in group], spec.metrics, qs.db)}
        grouped = [g for g in ([e for e in group if id(e) in kept] for group in grouped) if g]
    # In one order whatever answered (the database's grouping order is arbitrary): points
    # alike in their places are labelled in this order. Sorting each point's rows and the
    # points by their first row is grouping the sorted rows, paid only by a comparison
    # that is drawn (not by one of too many points).
    for group in grouped:
        group.sort(key=_Row.order)
    grouped.sort(key=lambda group: group[0].order())
    pools = _pools(grouped, context)
    rows = [row for pool in pools for row in pool.rows]
    context.configs = [c for pool in pools for c in pool.configs]
    # Repetition values: every run as a point, exact medians of points pooling several
    # configurations and of configurations whose summary's median is pending (one bounded
    # query, only when needed).
    reps, medians = _repetitions(
        spec, qs, {**groups, **configuration}, value, pools, result, summarised
    )
    points: list[Point] = []
    behind: dict[int, tuple[_Pool, dict]] = {}  # id(point) -> its pool and merged row
    for pool in pools:
        row = _merge(pool.rows)
        m = info[row["name"]]
        sd = _stddev(row)
        median = row["median"]
        key = id(pool)
        if median is None:
            median = medians[key] if key in medians else _median(reps.get(key, []))
        d = m.divisor
        # Every metric of the vocabulary (throughput, op/s, latency, times, sizes, scores)
        # is non-negative, and so are its normalisations (divided by counts): the interval's
        # lower end is clipped at zero (DESIGN.md).
        ci = stats.confidence_interval(row["n"], row["mean"], sd, floor=0.0)
        cv = stats.cv(row["mean"], sd)
        point = Point(
            metric=m.name,
            series=dimensions.display_value(spec.series, row["series"]) if spec.series else "all",
            series_key=raw(row["series"]),
            x=dimensions.axis_value(spec.x, row["x"]) if spec.x else "",
            x_key=raw(row["x"]),
            y=dimensions.axis_value(spec.y, row["y"]) if spec.y else "",
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
            attributes=pool.attributes,
        )
        point.series_name = point.series
        keys = {
            key_of_source(
                c["run__tool"],
                c["run__testbed_id"],
                c["run__target_id"],
                c["run__tuning_set_id"],
                c["run__params"],
                c["source"],
            )
            for c in pool.configs
        }
        if len(keys) == 1:
            point.config_key = keys.pop()
        if point.noisy:
            point.flags.append(f"noisy: CV {cv * 100:.1f}% > {NOISY_CV * 100:.0f}%")
        _verdicts(point, row, m, bool(spec.norm))
        sources(point, row)
        points.append(point)
        behind[id(point)] = (pool, row)
    if spec.stat == "peak":
        points = comparability.peaks(
            points, spec, {m.name: m.higher_is_better for m in info.values()}
        )
    lines = spec.chart == "line" and spec.x.startswith("param:") and spec.stat == "mean"
    comparability.label_variants(points, comparability.exempt_within(spec), lines)
    drawn: dict[int, list[float]] = {}  # id(point) -> its runs' values, display units
    for point in points:
        pool, row = behind[id(point)]
        for config in pool.configs:
            config["label"] = point.series
        annotate(context, point, row, info[point.metric], pool.configs)
        if spec.reps:
            divisor = info[point.metric].divisor
            drawn[id(point)] = [v / divisor for v in reps.get(id(pool), [])]
    _why_n(qs, {**groups, **configuration}, behind, points)
    points.sort(
        key=lambda p: (
            p.metric,
            dimensions.label_order(p.series_key, p.series),
            sort_key(p.x),
            sort_key(p.y),
        )
    )
    # Order the table by the metrics' order in the spec.
    order = {name: i for i, name in enumerate(spec.metrics)}
    points.sort(key=lambda p: order[p.metric])
    result.points = points
    result.runs_by_metric = {
        m: int(sum(r["runs"] for r in rows if r["name"] == m)) for m in spec.metrics
    }
    result.n_runs = max(result.runs_by_metric.values(), default=0)

    labels = {}
    for p in points:
        labels.setdefault(p.series, p.series_key)
    # In the order of the series' values: sizes 4 KiB < 128 KiB < 1 MiB, not as text.
    result.series = sorted(
        ([key, label] for label, key in labels.items()),
        key=lambda kv: dimensions.label_order(*kv),
    )
    result.colours = charts.colours([label for _, label in result.series])
    if not source_chosen(spec):
        for metric, name in sorted(mixed_series(points)):
            result.warnings.append(
                f"{name} ({metric}) mixes published studies and own runs: split "
                "(series=source) or filter (f=source:…) by data source to keep them apart."
            )
    if spec.baseline and spec.series:
        if spec.baseline in {p.series_key for p in points}:
            result.baseline_label = next(
                p.series_name or p.series for p in points if p.series_key == spec.baseline
            )
            compare_to_baseline(result, spec, info)
        else:
            result.warnings.append(f"The baseline {spec.baseline!r} is not among the series shown.")
    result.differences = differences(context, spec, result)
    result.charts = chart_figures(
        result,
        spec,
        drawn,
        testbeds={m: context.testbed_names(m, result.points) for m in spec.metrics},
        testbed_names={str(tb.uuid): tb.name for tb in context.testbeds.values()},
    )
    result.warnings += context.warnings
    return result


def _why_n(qs, groups: dict, behind: dict[int, tuple[_Pool, dict]], points: list[Point]) -> None:
    """Points built from cells of adaptive matrices say why their n is what it is (the
    cells' states, experiments.matrices.adaptive) and are flagged when a cell never settled or is
    short of runs. One query when an adaptive matrix exists, two more when the selection
    holds runs of one."""
    if not Matrix.objects.filter(max_repetitions__isnull=False, target_cv__isnull=False).exists():
        return
    rows = (
        qs.filter(run__matrix__max_repetitions__isnull=False, run__matrix__target_cv__isnull=False)
        .annotate(**groups)
        .values("name", *groups, "run__matrix_id", "run__cell_key")
        .order_by()
        .distinct()
    )
    cells_of: dict[tuple, set[tuple[int, str]]] = defaultdict(set)
    for row in rows:
        cells_of[_config_key(_config(row))].add((row["run__matrix_id"], row["run__cell_key"]))
    if not cells_of:
        return
    wanted = set().union(*cells_of.values())
    states = {
        (s.matrix_id, s.cell_key): s
        for s in CellState.objects.filter(
            matrix_id__in={m for m, _ in wanted}, cell_key__in={k for _, k in wanted}
        )
    }
    for point in points:
        pool, _ = behind[id(point)]
        cells = set().union(*(cells_of.get(_config_key(c), set()) for c in pool.configs))
        found = [states[c] for c in sorted(cells) if c in states]
        if not found:
            continue
        if len(found) == 1:
            point.why_n = f"adaptive: {found[0].reason}"
        else:
            counts = Counter(s.get_state_display() for s in found)
            told = ", ".join(f"{n} {state}" for state, n in sorted(counts.items()))
            point.why_n = f"adaptive, {len(found)} cells: {told}"
        for state in found:
            if state.state in (CellState.State.UNSETTLED, CellState.State.SHORT):
                flag = state.reason
                if flag not in point.flags:
                    point.flags.append(flag)


def _repetitions(
    spec: ComparisonSpec,
    qs,
    groups: dict,
    value,
    pools: list[_Pool],
    result: ComparisonResult,
    summarised: bool,
) -> tuple[dict[int, list[float]], dict[int, float | None]]:
    """Each pool's run values (keyed by id(pool)), read when every run is drawn or a point
    pools several configurations (its median needs the values), at most
    MAX_REPETITION_POINTS of them; and the exact medians of points of one configuration
    whose summary's median is pending (NULL: experiments.results.summaries), from their values
    (the same query, or one reading only theirs when the others are not read)."""
    pending = [p for p in pools if len(p.rows) == 1 and p.rows[0]["median"] is None]
    wanted = (spec.reps and spec.chart != "heatmap") or any(len(p.rows) > 1 for p in pools)
    if not wanted and not pending:
        return {}, {}
    if summarised:
        # The values of the configurations shown, read by their keys: their number is
        # known beforehand.
        total = sum(row["n"] for pool in pools for row in pool.rows)
        if wanted and total > MAX_REPETITION_POINTS:
            result.warnings.append(_TOO_MANY_VALUES)
            wanted = False
        read = pools if wanted else pending
        if not read:
            return {}, {}
        owner = {(row["name"], row["config_key"]): id(pool) for pool in read for row in pool.rows}
        values = (
            qs.filter(run__config_key__in=sorted({k for _, k in owner}))
            .annotate(_v=value)
            .filter(_v__isnull=False)
            .values_list("name", "run__config_key", "_v")
            .order_by()
        )
        out: dict[int, list[float]] = defaultdict(list)
        for name, key, v in values:
            pool = owner.get((name, key))
            if pool is not None:
                out[pool].append(v)
        medians = {id(p): _median(out.get(id(p), [])) for p in pending}
        return (out if wanted else {}), medians
    # From the metric rows: a pending median cannot occur (PERCENTILE_CONT, or the middle
    # values numbered in the same query).
    if not wanted:
        return {}, {}
    owner = {entry.key(): id(pool) for pool in pools for entry in pool.entries}
    rows = list(qs.repetitions(groups, value)[: MAX_REPETITION_POINTS + 1])
    if len(rows) > MAX_REPETITION_POINTS:
        result.warnings.append(_TOO_MANY_VALUES)
        return {}, {}
    dumped: dict[Any, str] = {}
    out = defaultdict(list)
    for row in rows:
        text = row["cf_params"]
        cached = text if isinstance(text, str) else json.dumps(text, sort_keys=True)
        d = dumped.get(cached)
        if d is None:
            d = dumped[cached] = json.dumps(_params(text), sort_keys=True)
        key = (
            row["name"],
            raw(row["series"]),
            raw(row["x"]),
            raw(row["y"]),
            row["cf_tool"],
            row["cf_tb"],
            row["cf_tg"],
            row["cf_tn"],
            d,
            row["cf_src"],
        )
        pool = owner.get(key)
        if pool is not None:
            out[pool].append(row["_v"])
    return out, {}


_TOO_MANY_VALUES = (
    f"More than {MAX_REPETITION_POINTS} runs: not all are drawn as points, and medians of "
    "points that pool several configurations are not shown."
)
