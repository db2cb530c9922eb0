"""Baseline comparisons in words: the difference, Welch's test and one sentence per pair."""

from __future__ import annotations

from collections import defaultdict

from experiments import dimensions, stats
from experiments.comparison.comparability import mixed_series, source_chosen, source_confounder
from experiments.comparison.result import BaselineComparison, ComparisonResult, MetricInfo, Point
from experiments.comparison.spec import ComparisonSpec

# Points whose coefficient of variation is above this are flagged as noisy.
NOISY_CV = 0.05
ALPHA = 0.05
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


def compare_to_baseline(
    result: ComparisonResult,
    spec: ComparisonSpec,
    variances: dict[tuple, tuple[int, float, float]],
    info: dict[str, MetricInfo],
) -> None:
    """Each point against the baseline series' point at the same x (and y): difference in %,
    Welch's t-test on the runs' values, one plain-language sentence."""
    by_key = {(p.metric, p.series_key, p.x_key, p.y_key): p for p in result.points}
    chosen = source_chosen(spec)
    mixed = mixed_series(result.points)
    unclaimed: dict[tuple[str, str, str], list[str]] = defaultdict(list)
    for p in result.points:
        if p.series_key == spec.baseline:
            continue
        base = by_key.get((p.metric, spec.baseline, p.x_key, p.y_key))
        if base is None or not base.mean:
            continue
        confounder = "" if chosen else source_confounder(p, base, mixed)
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
