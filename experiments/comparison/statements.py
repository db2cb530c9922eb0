"""Baseline comparisons in words: the difference, Welch's test and one sentence per pair."""

from __future__ import annotations

import math
from collections import defaultdict

from experiments.comparison import dimensions
from experiments.comparison.comparability import (
    CONCURRENCY,
    attribute_name,
    confounders,
    describe,
    exempt_between,
    shown,
    sweep_axis,
)
from experiments.comparison.result import BaselineComparison, ComparisonResult, MetricInfo, Point
from experiments.comparison.spec import NORMALISATIONS, ComparisonSpec
from experiments.shared import stats
from runners import metrics

ALPHA = 0.05


# The verbs of the sentences ("x86 writes 12% faster than Arm"), from runners.metrics.
VERBS = metrics.VERBS


def _place_key(point: Point, spec: ComparisonSpec) -> tuple[str, str]:
    """Where two points must both be to be compared: the same x and y, except for a peak
    over a parameter sweep (peak vs peak, wherever each series reached it)."""
    peak = spec.stat == "peak"
    x = "" if peak and sweep_axis(spec.x) else point.x_key
    y = "" if peak and sweep_axis(spec.y) else point.y_key
    return x, y


def _unplaced(point: Point, spec: ComparisonSpec) -> bool:
    """Whether a point's place is unknown (its runs do not state the x or y parameter) where
    a comparison needs one."""
    peak = spec.stat == "peak"
    return any(
        key and not (peak and sweep_axis(key)) and value == dimensions.UNKNOWN
        for key, value in ((spec.x, point.x), (spec.y, point.y))
    )


def compare_to_baseline(
    result: ComparisonResult, spec: ComparisonSpec, info: dict[str, MetricInfo]
) -> None:
    """Each point against the baseline series' point at the same x (and y), or peak against
    peak: when the two are alike but for what the series compares (and what the user
    ignores), the difference in %, Welch's t-test on the runs' values and one sentence;
    otherwise the confounders, named, and no difference."""
    exempt = exempt_between(spec)
    ignored = set(spec.ignore)
    # Two published studies may differ when the series dimension implies different testbeds.
    studies_ok = "testbed" in exempt and "testbed" not in spec.ignore
    baseline: dict[tuple, list[Point]] = defaultdict(list)
    # A sentence names a variant ("aarch64 (Arm) · fio") only where its series has several
    # at the same place; elsewhere the series value says enough.
    crowded: dict[tuple, int] = defaultdict(int)
    for q in result.points:
        crowded[(q.metric, q.series_key, *_place_key(q, spec))] += 1
    for b in result.points:
        if b.series_key == spec.baseline:
            baseline[(b.metric, *_place_key(b, spec))].append(b)
    for p in result.points:
        if p.series_key == spec.baseline:
            continue
        candidates = baseline.get((p.metric, *_place_key(p, spec)))
        if not candidates or _unplaced(p, spec):
            continue  # runs that do not state x are not "at the same x" as others

        def allowed(b: Point, p: Point = p) -> set[str]:
            if spec.stat != "peak":
                return exempt
            return exempt | CONCURRENCY | set(p.sweep) | set(b.sweep)

        scored = sorted(
            (
                (confounders(p.attributes, b.attributes, allowed(b), studies_ok), i, b)
                for i, b in enumerate(candidates)
            ),
            key=lambda t: (len(t[0]), t[1]),
        )
        found, _, base = scored[0]
        names = {
            x.series: x.series
            if crowded[(x.metric, x.series_key, *_place_key(x, spec))] > 1
            else (x.series_name or x.series)
            for x in (p, base)
        }
        if not base.mean:
            continue
        if found:
            result.comparisons.append(_unclaimed(info[p.metric], p, base, found, spec, names))
            continue
        skipped = confounders(p.attributes, base.attributes, allowed(base) - ignored, studies_ok)
        skipped = [c for c in skipped if c[0] in ignored]
        diff = (p.mean - base.mean) / abs(base.mean) * 100
        test = stats.welch(*_variance(p), *_variance(base))
        p.diff_pct = diff
        p.p_value = None if test is None else test.p
        result.comparisons.append(
            BaselineComparison(
                metric=p.metric,
                series=p.series,
                baseline=base.series,
                x=p.x,
                y=p.y,
                diff_pct=diff,
                p_value=p.p_value,
                significant=None if test is None else test.p < ALPHA,
                n=p.n,
                n_baseline=base.n,
                sentence=_sentence(info[p.metric], p, base, diff, test, spec, skipped, names),
                ignored=[[attribute_name(k), va, vb] for k, va, vb in skipped],
                statistic=spec.stat,
            )
        )
    _apart(result, spec, info)


def _values(points: list[Point], spec: ComparisonSpec) -> list[str]:
    placed = {p.x for p in points if p.x != dimensions.UNKNOWN}
    return [_place_value(spec.x, x) for x in sorted(placed, key=dimensions.sort_key)]


def _place_value(key: str, value: str) -> str:
    return dimensions.display_value(key, value) if key else value


def _listed(values: list[str]) -> str:
    return ", ".join(values) if len(values) <= 6 else f"{values[0]} to {values[-1]}"


def _apart(result: ComparisonResult, spec: ComparisonSpec, info: dict[str, MetricInfo]) -> None:
    """A sentence for each series compared with nothing: measured at no x where the baseline
    was (seed 002's 1 and 256 threads against seed 001's 4 to 64), or at no stated x at all.
    Without it the page said nothing, as if there were nothing to say."""
    if not spec.x or spec.y or (spec.stat == "peak" and sweep_axis(spec.x)):
        return
    said = {(c.metric, c.series) for c in result.comparisons}
    by_series: dict[tuple[str, str], list[Point]] = defaultdict(list)
    for p in result.points:
        by_series[(p.metric, p.series_key)].append(p)
    what = result.x_label or dimensions.label(spec.x)
    for (metric, key), pts in by_series.items():
        base = by_series.get((metric, spec.baseline))
        if key == spec.baseline or not base or any((metric, p.series) in said for p in pts):
            continue
        a = named(spec.series, pts[0].series_name or pts[0].series)
        b = named(spec.series, base[0].series_name or base[0].series)
        mine, theirs = _values(pts, spec), _values(base, spec)
        title = info[metric].title or metric
        if not mine:
            why = f"{a}'s runs state no {what}, so none is at the same {what} as {b}'s"
        else:
            why = (
                f"they were measured at no common {what} ({a} at {_listed(mine)}; {b} at "
                f"{_listed(theirs) or 'none stated'})"
            )
        result.comparisons.append(
            BaselineComparison(
                metric=metric,
                series=pts[0].series,
                baseline=base[0].series,
                x="",
                y="",
                diff_pct=None,
                p_value=None,
                significant=None,
                n=sum(p.n for p in pts),
                n_baseline=sum(p.n for p in base),
                sentence=(
                    f"Nothing compared between {a} and {b} in {title}: {why}. Each series' "
                    "best over its sweep is compared with “peak over the sweep” (stat=peak)."
                ),
                claimed=False,
                statistic=spec.stat,
            )
        )


def _variance(p: Point) -> tuple[int, float, float]:
    return p.n, p.mean, (p.stddev * p.stddev if p.stddev is not None else math.nan)


def _unclaimed(
    m: MetricInfo, p: Point, base: Point, found: list[tuple[str, str, str]], spec, names
) -> BaselineComparison:
    a, b = named(spec.series, names[p.series]), named(spec.series, names[base.series])
    at = _where(p, spec)
    how = " (peak vs peak)" if spec.stat == "peak" else ""
    sentence = (
        f"No difference claimed between {a} and {b}{at}{how} in {m.title or m.name}: they "
        f"also differ in {describe(found)}. Ignore an attribute (ignore=…) or filter to "
        "compare like with like."
    )
    return BaselineComparison(
        metric=p.metric,
        series=p.series,
        baseline=base.series,
        x=p.x,
        y=p.y,
        diff_pct=None,
        p_value=None,
        significant=None,
        n=p.n,
        n_baseline=base.n,
        sentence=sentence,
        confounders=[[attribute_name(k), va, vb] for k, va, vb in found],
        claimed=False,
        statistic=spec.stat,
    )


def _where(p: Point, spec: ComparisonSpec) -> str:
    peak = spec.stat == "peak"
    where = [
        "" if peak and sweep_axis(spec.x) else _place(spec.x, p.x),
        "" if peak and sweep_axis(spec.y) else _place(spec.y, p.y),
    ]
    return "".join(w for w in where if w)


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
    value = shown(key, value)  # a parameter's raw axis value in units: "at bs 1 MiB"
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


# Two points "at the same share" of their limits: efficiencies within this many points.
SAME_SHARE_POINTS = 10.0
# ... and both at least this share (%) of their limit: only a limit a result comes near explains it.
NEAR_LIMIT = 60.0
# Limits that differ by less than this (relative) do not explain a difference.
LIMITS_DIFFER = 0.1


def _figure(x: float) -> str:
    return f"{x:.3g}" if abs(x) < 1 else f"{x:.1f}" if abs(x) < 100 else f"{x:,.0f}"


def limits_clause(m: MetricInfo, p: Point, base: Point, spec: ComparisonSpec) -> str:
    """ "; both at about 90% of their network (storage servers) limit (94% vs 89%), which
    differ: …: the limits, not the architecture, explain the difference" when both points sit
    at about the same share of limits that differ (issue 25: "aarch64 writes 44% slower"
    said nothing of Arm's 1 link per server against x86's 2). Empty otherwise."""
    if p.efficiency is None or base.efficiency is None or not (p.efficiency and base.efficiency):
        return ""
    if abs(p.efficiency - base.efficiency) > SAME_SHARE_POINTS or not (p.mean and base.mean):
        return ""
    if min(p.efficiency, base.efficiency) < NEAR_LIMIT:
        return ""  # far below both limits: they bind neither, whatever their ratio
    # The limit in the points' own units and normalisation: value / share.
    lim_p, lim_b = p.mean * 100 / p.efficiency, base.mean * 100 / base.efficiency
    ratio = lim_p / lim_b
    if abs(ratio - 1) < LIMITS_DIFFER or (ratio > 1) != (p.mean > base.mean):
        return ""
    share = 5 * round((p.efficiency + base.efficiency) / 2 / 5)
    which = (
        f"their {p.limit_name} limit"
        if p.limit_name == base.limit_name
        else f"their limits ({p.limit_name} vs {base.limit_name})"
    )
    unit = f" {m.unit}" if m.unit else ""  # normalised already: "GB/s per storage server"
    differ = f"{_figure(lim_p)} vs {_figure(lim_b)}{unit}"
    if p.limit_basis and base.limit_basis and p.limit_basis != base.limit_basis:
        differ += f" ({p.limit_basis} vs {base.limit_basis})"
    what = dimensions.label(spec.series).split(" (")[0].lower() if spec.series else "series"
    return (
        f"; both at about {share}% of {which} ({p.efficiency:.0f}% vs {base.efficiency:.0f}%), "
        f"which differ: {differ}: the limits, not the {what}, explain the difference"
    )


def _sentence(
    m: MetricInfo, p: Point, base: Point, diff: float, test, spec, ignored=(), names=None
) -> str:
    names = names or {}
    at = _where(p, spec)
    if spec.norm:
        at = f" {NORMALISATIONS[spec.norm]}{at}"
    n = f"n = {p.n} each" if p.n == base.n else f"n = {p.n} vs {base.n}"
    a = named(spec.series, names.get(p.series, p.series))
    b = named(spec.series, names.get(base.series, base.series))
    # A value a study gives as "about 5.1 GB/s" makes the difference approximate too.
    about = "about " if p.approximate or base.approximate else ""
    if about:
        which = " and ".join(
            f"{names.get(x.series, x.series)}'s" for x in (p, base) if x.approximate
        )
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
    if spec.stat == "peak":
        core += (
            f", peak vs peak ({a}: {p.peak_at or 'one point'}; {b}: {base.peak_at or 'one point'})"
        )
    core += limits_clause(m, p, base, spec)
    if ignored:
        n += f"; ignoring {describe(list(ignored))}"
    if test is None:
        reason = "single values" if min(p.n, base.n) < 2 else "no spread"
        return f"{core} ({reason}, no significance test; {n})"
    if test.p < ALPHA:
        return f"{core} ({stats.format_p(test.p)}, {n})"
    return f"{core}, but the difference is not significant ({stats.format_p(test.p)}, {n})"
