"""What a comparison gives: points, baseline comparisons, configuration differences, charts;
``ComparisonResult`` round-trips through JSON (a share link's frozen snapshot, the API's body)."""

from __future__ import annotations

import datetime as dt
from dataclasses import asdict, dataclass, field
from typing import Any


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
    limit_basis: str = ""  # what sets it, briefly ("1 link per server x 12.0 GB/s")
    testbed: str = ""
    flags: list[str] = field(default_factory=list)
    diff_pct: float | None = None  # against the baseline series at the same x (and y)
    p_value: float | None = None
    approximate: bool = False  # some value is one a study gives as "about" (extra.approx)
    published_runs: int = 0  # how many of its runs come from published studies
    own_runs: int = 0  # how many are the users' own (executed or imported)
    source: str = ""  # the data source of all its runs (a study or "own runs"); "": several
    # What its runs are (comparability.attributes): tool, testbed, target, tuning set, data
    # source, every parameter ("param:bs"), working set against memory; values pooled
    # across exempt attributes are joined with " | ".
    attributes: dict[str, str] = field(default_factory=dict)
    series_name: str = ""  # the series' value without the variant ("aarch64 (Arm)")
    variant: str = ""  # what tells it apart from other points of its series ("fio")
    peak_at: str = ""  # peak mode: where the series' best point was reached
    peak_of: int = 0  # peak mode: over how many points of the sweep
    sweep: list[str] = field(default_factory=list)  # peak mode: the attributes swept
    # Runs of adaptive matrices' cells (experiments.matrices.adaptive): why n is what it is.
    why_n: str = ""
    # The one configuration (Run.config_key) whose runs the point pools, "" when several or
    # unknown: its history page (experiments.views.changes) is "history of this point".
    config_key: str = ""
    # Its runs' stored bottleneck verdicts (Run.bottleneck), kind -> runs; runs without
    # telemetry are not counted. ``collapsed``: runs whose tool's throughput collapsed;
    # ``steady``/``whole``: mean steady-state and whole-run throughput of its runs with the
    # tool's series (display units, throughput metrics without normalisation only).
    bottleneck: dict[str, int] = field(default_factory=dict)
    collapsed: int = 0
    steady: float | None = None
    whole: float | None = None
    steady_n: int = 0

    @property
    def bottleneck_text(self) -> str:
        """ "disk 3/3" when every run agrees, else "disk 2, cpu 1" (with "of 4" when some
        runs have no verdict)."""
        counts = sorted(self.bottleneck.items(), key=lambda kv: (-kv[1], kv[0]))
        if not counts:
            return ""
        if len(counts) == 1:
            return f"{counts[0][0]} {counts[0][1]}/{self.n}"
        text = ", ".join(f"{kind} {n}" for kind, n in counts)
        known = sum(self.bottleneck.values())
        return text if known >= self.n else f"{text} (of {self.n})"

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
    # [attribute, value in the series, value in the baseline] of what else differs; a
    # difference is claimed only without confounders (diff_pct is None otherwise).
    confounders: list[list[str]] = field(default_factory=list)
    ignored: list[list[str]] = field(default_factory=list)  # differences the user ignores
    claimed: bool = True
    statistic: str = "mean"  # "mean" (same x) or "peak" (peak vs peak)


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
    # What the reader of the chart must know that it cannot show: rows of the table left off
    # it (no x value), points not joined by a line, bars drawn where lines were asked for.
    notes: list[str] = field(default_factory=list)


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
    n_runs: int = 0  # the most runs behind any one metric (a run may measure several)
    # Runs behind each metric shown, in the spec's order: how many runs the page shows when
    # it shows several metrics (two runs, one measured writes and one reads, are 1 and 1).
    runs_by_metric: dict[str, int] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    generated_at: str = ""
    x_label: str = ""
    y_label: str = ""
    # The dimensions on the axes ("param:file_size"): pages show a size parameter's values in
    # units (10 GiB), not as the byte counts the points hold.
    x_dim: str = ""
    y_dim: str = ""
    series_dim: str = ""  # "param:bs": the series' labels are its values in units
    series_label: str = ""
    norm_label: str = ""
    statistic: str = "mean"

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

    @property
    def runs_text(self) -> str:
        """How many runs the result stands on: "3 runs"; with several metrics, per metric
        ("runs: 1 for write_bw, 1 for read_bw"), since one run may measure several of them
        and another only one."""
        counts = [(m, n) for m, n in self.runs_by_metric.items() if n]
        if len(counts) <= 1:
            return f"{self.n_runs} run{'' if self.n_runs == 1 else 's'}"
        each = ", ".join(f"{n} for {m}" for m, n in counts)
        return f"runs: {each} (a run that measured several of them counts for each)"

    @property
    def series_names(self) -> list[list[str]]:
        """[raw key, name] of each series without its variants (the baseline's choices)."""
        names: dict[str, str] = {}
        for p in self.points:
            names.setdefault(p.series_key, p.series_name or p.series)
        from experiments.comparison.dimensions import label_order

        return sorted(([k, v] for k, v in names.items()), key=lambda kv: label_order(*kv))

    @property
    def has_verdicts(self) -> bool:
        """Some point has runs with a bottleneck verdict: the table shows the column."""
        return any(p.bottleneck for p in self.points)

    @property
    def has_steady(self) -> bool:
        return any(p.steady is not None for p in self.points)

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
        "variant",
        "peak_at",
        "bottleneck",
        "collapsed_runs",
        "steady",
        "whole",
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
                    p.variant,
                    p.peak_at,
                    p.bottleneck_text,
                    p.collapsed,
                    p.steady,
                    p.whole,
                ]
            )
        return rows
