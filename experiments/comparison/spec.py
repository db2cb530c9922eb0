"""What to compare: ``ComparisonSpec``, parsed and validated from a query string (the URL
holds the whole state), and the choices the builder offers."""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

from django.db.models import CharField, QuerySet, Value
from django.db.models.functions import Cast
from django.http import QueryDict

from experiments.comparison import dimensions
from experiments.comparison.attributes import valid_attribute
from experiments.comparison.dimensions import sort_key
from experiments.shared.input_checks import clean_text, text_problem
from experiments.shared.utils import is_uuid
from runners import metrics

MAX_METRICS = 6
MAX_IGNORED = 40

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
# What a point shows: the mean over repetitions, or each series' best point over its sweep.
STATS = {"mean": "mean over repetitions", "peak": "peak over the sweep"}
FILTER_PREFIXES = ("param", "tuning", "hw")
# The run's stored bottleneck verdict (Run.bottleneck, experiments.shared.bottleneck.summary) a
# comparison can be restricted to ("runs where the disks were the bottleneck").
BOTTLENECKS = {
    "disk": "a disk",
    "cpu": "the CPU",
    "network": "the network",
    "beegfs": "a BeeGFS server's workers",
    "none": "none (latency-bound)",
    "unknown": "unknown (telemetry without samples)",
}


def metric_unit(name: str) -> str | None:
    return metrics.unit(name)


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
    bottleneck: str = ""  # only runs whose stored verdict is this (BOTTLENECKS)
    stat: str = "mean"  # STATS: mean over repetitions, or each series' peak over its sweep
    ignore: list[str] = field(default_factory=list)  # attributes allowed to differ
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
        kind = query.get("bottleneck", "").strip()
        if kind and kind not in BOTTLENECKS:
            errors.append(f"bottleneck: {kind[:40]!r} is not one of {', '.join(BOTTLENECKS)}.")
            kind = ""
        spec.bottleneck = kind
        norm = query.get("norm", "")
        spec.norm = norm if norm in NORMALISATIONS else ""
        stat = query.get("stat", "mean")
        if stat not in STATS:
            errors.append(f"stat: {stat[:40]!r} is not one of {', '.join(STATS)}.")
            stat = "mean"
        spec.stat = stat

        for name in query.getlist("ignore"):
            name = name.strip()
            if not name or name in spec.ignore:
                continue
            if not valid_attribute(name):
                errors.append(
                    f"ignore: {name[:60]!r} is not an attribute (tool, testbed, target, tuning, "
                    "source, memory or param:<name>)."
                )
            elif len(spec.ignore) >= MAX_IGNORED:
                errors.append(f"At most {MAX_IGNORED} ignored attributes.")
                break
            else:
                spec.ignore.append(name)
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
        if self.bottleneck:
            pairs.append(("bottleneck", self.bottleneck))
        if self.norm:
            pairs.append(("norm", self.norm))
        if self.stat != "mean":
            pairs.append(("stat", self.stat))
        pairs += [("ignore", name) for name in self.ignore]
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
        if self.stat == "peak":
            parts.append("peak over the sweep")
        if self.bottleneck:
            parts.append(f"bottleneck: {self.bottleneck}")
        return ", ".join(parts)


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
    return sorted(out, key=lambda kv: sort_key(kv[0]))
