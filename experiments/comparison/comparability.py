"""What makes runs alike: data sources, working sets, and the configuration that differs
between series."""

from __future__ import annotations

import json
from collections import defaultdict
from typing import TYPE_CHECKING, Any

from experiments.comparison import dimensions
from experiments.comparison.attributes import (  # noqa: F401 (used by callers)
    SETUP,
    SETUP_LABELS,
    TARGET_LEVEL,
    TESTBED_LEVEL,
    WHOLE_TESTBED,
    attribute_name,
    facts,
    param_text,
    setup_attributes,
    valid_attribute,
)
from experiments.comparison.result import ComparisonResult, Difference, Point
from runners.params import SAME_PARAMETER, human

if TYPE_CHECKING:
    from experiments.comparison.spec import ComparisonSpec


def sources(point: Point, row: dict) -> None:
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


def mixed_series(points: list[Point]) -> set[tuple[str, str]]:
    """(metric, series label) of the series (variants included: what a line or a bar group
    shows) holding both published and own runs, in one point or across points: own runs at
    threads 4 on the line of a study's threads 1 and 256."""
    kinds: dict[tuple[str, str], set[bool]] = defaultdict(set)
    for p in points:
        if p.published_runs:
            kinds[(p.metric, p.series)].add(True)
        if p.own_runs:
            kinds[(p.metric, p.series)].add(False)
    return {key for key, seen in kinds.items() if len(seen) == 2}


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


def direct(params: dict) -> bool:
    value = params.get("direct")
    return value in (True, 1, "1", "true", "True", "yes")


def differences(ctx, spec: ComparisonSpec, result: ComparisonResult) -> list[Difference]:
    """Hardware, testbed, run and tuning facts that differ between each series (variant) and
    the baseline series (its closest variant)."""
    if not spec.series or len(result.series) < 2 or not ctx.configs:
        return []
    per_series: dict[str, dict[tuple[str, str], set[str]]] = defaultdict(lambda: defaultdict(set))
    seen: set[tuple] = set()
    for c in ctx.configs:
        label = c.get("label")
        if label is None:
            continue  # not shown (peak mode keeps each series' best configuration)
        key = (label, c["run__testbed_id"], c["run__tuning_set_id"], c["run__target_id"])
        key += (json.dumps(c["run__params"], sort_keys=True), c["run__tool"])
        if key in seen:
            continue
        seen.add(key)
        for attr, value in facts(ctx, c).items():
            per_series[label][attr].add(value)
    bases = [label for key, label in result.series if key == spec.baseline] or [result.series[0][1]]
    out = []
    for _key, label in result.series:
        if label in bases:
            continue
        options = [_rows(per_series.get(label, {}), per_series.get(b, {})) for b in bases]
        rows, base = min(zip(options, bases, strict=True), key=lambda t: len(t[0]))
        out.append(Difference(series=label, baseline=base, rows=rows))
    return out


def difference_rows(a: dict, b: dict) -> list[list[str]]:
    """[group, attribute, value in a, value in b] of the attributes whose values differ
    between ``a`` and ``b`` (each: (group, attribute) -> set of value texts; a missing
    attribute is "—"), in the configuration differences table's order (also the change
    points' explanations, experiments.changes.explain)."""
    return _rows(a, b)


def _rows(a: dict, b: dict) -> list[list[str]]:
    rows = []
    # dict.fromkeys keeps the order facts() lists attributes in (a set would not, and the
    # rows would come out in a different order in every process).
    for attr in sorted(dict.fromkeys([*a, *b]), key=_attr_order):
        va, vb = " | ".join(sorted(a.get(attr, {"—"}))), " | ".join(sorted(b.get(attr, {"—"})))
        if va != vb:
            rows.append([attr[0], attr[1], va, vb])
    return rows


_GROUP_ORDER = {"hardware": 0, "testbed": 1, "node": 2, "run": 3, "tuning": 4}


def _attr_order(attr: tuple[str, str]) -> tuple:
    fixed = attr[0] != "tuning" or attr[1] == "tuning set"
    return (_GROUP_ORDER.get(attr[0], 9), 0 if fixed else 1, "" if fixed else attr[1])


# --- Alike runs and confounders (DESIGN.md) ------------------------------------------------
#
# Runs are alike when they share tool, every parameter, testbed, target, tuning set and data
# source. A point pools only alike runs apart from the dimensions on its axes, series and
# filters and the attributes the user ignores (``ignore=`` in the URL); two compared points
# may differ only in what the series dimension implies (an Arm and an x86 testbed are two
# testbeds). Anything else is a confounder: named, and no difference is claimed across it.

# Parameters that describe the bookkeeping of a run, not what it measured: IOzone's list of
# the tests one invocation ran (its write phase is the same whether a read test follows), and
# a matrix's ``target`` axis value, the name of the run's target (the "target" attribute
# already: as a parameter it would count the same difference twice).
NOT_CONFIGURATION = frozenset({"ops", "target"})
NOT_STATED = "not stated"


def attributes(ctx, config: dict) -> dict[str, str]:
    """What a configuration is, attribute by attribute (a parameter it does not state is
    absent: "not stated" differs from any value): its setup (``setup_attributes``), its
    parameters (``param_attributes``) and whether its working set fits in the clients'
    memory (``memory_attribute``), in this order."""
    params = config["run__params"] if isinstance(config["run__params"], dict) else {}
    tool, testbed_id = config["run__tool"], config["run__testbed_id"]
    return {
        **setup_attributes(
            ctx,
            tool,
            testbed_id,
            config["run__target_id"],
            config["run__tuning_set_id"],
            config.get("source") or "",
        ),
        **param_attributes(params),
        **memory_attribute(ctx, tool, testbed_id, params),
    }


def param_attributes(params: dict) -> dict[str, str]:
    """A configuration's parameters as attributes (``param:<name>``), in their order."""
    return {
        f"param:{key}": param_text(value)
        for key, value in params.items()
        if key not in NOT_CONFIGURATION
    }


def memory_attribute(ctx, tool: str, testbed_id: int, params: dict) -> dict[str, str]:
    """``{"memory": "fits in" | "exceeds"}`` when the working set and the clients' memory
    are known and the I/O is buffered, else empty."""
    if params and not direct(params):
        ws = working_set(tool, params)
        memory = ctx.client_memory(testbed_id, params)
        if ws and memory:
            return {"memory": "fits in" if ws < memory else "exceeds"}
    return {}


def _dimension_attributes(key: str) -> set[str]:
    """The attributes a dimension on an axis, the series or a filter stands for."""
    if not key:
        return set()
    if key == "tool" or key == "source":
        return {key}
    if key == "testbed":
        return {"testbed", "target"}
    if key == "tuning" or key.startswith("tuning:"):
        return {"tuning"}
    if key.startswith("param:"):
        same = SAME_PARAMETER.get(key[len("param:") :])
        return {key, f"param:{same}"} if same else {key}
    return set()


def exempt_within(spec: ComparisonSpec) -> set[str]:
    """Attributes a point may pool different values of: its axes, series, filters (more than
    one value) and what the user ignores."""
    keys = {spec.x, spec.y, spec.series}
    keys |= {k for k, values in spec.filter_groups().items() if len(values) > 1}
    if len(spec.tools) > 1:
        keys.add("tool")
    if len(spec.testbeds) > 1:
        keys.add("testbed")
    out = set(spec.ignore)
    out |= {
        f"param:{SAME_PARAMETER[key[len('param:') :]]}"
        for key in spec.ignore
        if key.startswith("param:") and key[len("param:") :] in SAME_PARAMETER
    }
    for key in keys:
        out |= _dimension_attributes(key)
    return out


def exempt_between(spec: ComparisonSpec) -> set[str]:
    """Attributes two compared series may differ in: the within-point ones and those the
    series dimension implies (two architectures are two testbeds, and their targets)."""
    out = exempt_within(spec)
    series = spec.series
    if series in TESTBED_LEVEL or series.startswith("hw:"):
        # Each system as configured for its study: its hardware, testbed, targets and tuning
        # set (the configuration differences table lists what the tuning sets set apart).
        out |= {"hardware", "testbed", "target", "tuning"}
    elif series in TARGET_LEVEL:
        # Two RAID levels (file systems) are two targets, often two testbed records of the
        # same machines: the hardware must match.
        out |= {"testbed", "target"}
    return out


def signature(attrs: dict[str, str], exempt: set[str]) -> tuple:
    """What must be equal for two configurations to share a point."""
    return tuple(sorted((k, v) for k, v in attrs.items() if k not in exempt and k != "memory"))


def _shown(key: str, value: str | None) -> str:
    return NOT_STATED if value is None else value


def confounders(
    a: dict[str, str], b: dict[str, str], exempt: set[str], studies_differ_ok: bool
) -> list[tuple[str, str, str]]:
    """(attribute, value in a, value in b) of every attribute the two differ in that is not
    exempt. Two published studies may differ when the series dimension implies different
    testbeds (``studies_differ_ok``); own runs against a study never, unless exempt."""
    out = []
    for key in sorted(set(a) | set(b), key=_attribute_order):
        if key in exempt:
            continue
        va, vb = a.get(key), b.get(key)
        if va == vb:
            continue
        if key == "memory" and (va is None or vb is None):
            continue  # unknown on one side: the parameters and testbeds are compared
        if key == "source" and studies_differ_ok:
            pooled = f"{va} | {vb}".split(" | ")
            if dimensions.OWN_RUNS not in pooled:
                continue  # two studies, as two testbeds: what the series compares
        out.append((key, _shown(key, va), _shown(key, vb)))
    return out


def _attribute_order(key: str) -> tuple:
    if key in SETUP:
        return (0, SETUP.index(key), key)
    return (1, 0, key) if key != "memory" else (2, 0, key)


def shown(key: str, value: str | None) -> str:
    """An attribute's value for people: a parameter's as ``runners.params.human`` shows it
    (sizes in units: 10737418240 -> "10 GiB", booleans yes/no), "not stated" for a
    parameter a run does not state."""
    if value is None:
        return NOT_STATED
    if value == NOT_STATED:
        return value
    if key.startswith("param:") and value != "":
        return human(key[6:], value)
    return value


def describe(differing: list[tuple[str, str, str]], limit: int = 6) -> str:
    """ "tool fio vs dd; direct yes vs not stated" """
    parts = [
        f"{attribute_name(k)} {shown(k, va)} vs {shown(k, vb)}" for k, va, vb in differing[:limit]
    ]
    more = len(differing) - limit
    if more > 0:
        parts.append(f"and {more} more")
    return "; ".join(parts)


# Parameters that make a different experiment, not a point further along a sweep.
ALONG_A_LINE = frozenset(
    {
        "param:storage_targets",
        "param:targets",
        "param:drives",
        "param:direct",
        "param:pattern",
        "param:rw",
        "param:api",
        "param:file_per_process",
    }
)


def label_variants(points: list[Point], exempt: set[str] = frozenset(), lines: bool = False):
    """Points of one series that share x (and y) but not their configuration are different
    variants, and so, on a line chart, are points along a series whose setup changes (tool,
    target, number of targets, direct I/O…). Each series is labelled by the fewest
    attributes that tell its variants apart ("aarch64 (Arm) · fio", "aarch64 (Arm) ·
    iozone"), on every point of the series."""
    by_series: dict[tuple[str, str], list[Point]] = defaultdict(list)
    for p in points:
        by_series[(p.metric, p.series_key)].append(p)
    for pts in by_series.values():
        keys = sorted(set().union(*(p.attributes for p in pts)), key=_attribute_order)
        keys = [k for k in keys if k != "memory"]
        line_keys = [k for k in keys if (k in SETUP or k in ALONG_A_LINE) and k not in exempt]
        chosen = _telling_keys(pts, keys, line_keys if lines else None)
        if not chosen:
            continue
        for p in pts:
            p.variant = ", ".join(_variant_text(k, p.attributes.get(k)) for k in chosen)
            p.series_name = p.series_name or p.series
            p.series = f"{p.series_name} · {p.variant}"


def _telling_keys(pts: list[Point], keys: list[str], line_keys: list[str] | None) -> list[str]:
    """The keys, in order, that tell apart the pairs of points that must be in different
    variants: points at the same x (and y) and, on a line chart (``line_keys`` given),
    points that differ in a setup attribute a line must not join across; each key is kept
    when a pair not yet told apart differs in it.

    Not pair by pair (a series of n points has n²/2 pairs): the points not yet told apart
    (alike in every key chosen so far) are classes, refined by each key chosen. A key tells
    a pair of a class apart when two of its points differ in it at the same place, or, on a
    line chart, when the class's points differ in it and in their setup (two points that
    differ in the key but not in their setup must then be at different places)."""
    values = [tuple(p.attributes.get(k) for k in keys) for p in pts]
    place = [(p.x_key, p.y_key) for p in pts]
    setup = [tuple(p.attributes.get(k) for k in line_keys or ()) for p in pts]
    classes = [list(range(len(pts)))] if len(pts) > 1 else []
    chosen: list[str] = []
    for j, key in enumerate(keys):
        if not classes:
            break
        refined, split = [], False
        for members in classes:
            by: dict = defaultdict(list)
            for i in members:
                by[values[i][j]].append(i)
            if len(by) < 2:
                refined.append(members)
                continue
            refined.extend(c for c in by.values() if len(c) > 1)
            if split:
                continue
            if line_keys is not None and len({setup[i] for i in members}) > 1:
                split = True
                continue
            at: dict[tuple, Any] = {}
            for i in members:
                value = at.setdefault(place[i], values[i][j])
                if value != values[i][j]:
                    split = True
                    break
        if split:
            chosen.append(key)
            classes = refined
    return chosen


def _variant_text(key: str, value: str | None) -> str:
    if key in ("tool", "hardware", "source"):
        return value or NOT_STATED
    if key == "target":
        return value or WHOLE_TESTBED
    return f"{attribute_name(key)} {shown(key, value)}"


# Parameters over which a series' peak is taken when the x axis is not one of them: how many
# clients, processes and outstanding requests a run used.
CONCURRENCY = frozenset(
    {"param:threads", "param:nodes", "param:tasks_per_node", "param:numjobs", "param:iodepth"}
)


def sweep_axis(key: str) -> bool:
    """Whether an axis is a sweep a peak is taken over (a run parameter), not a category."""
    return key.startswith("param:")


def peaks(points: list[Point], spec: ComparisonSpec, higher_is_better: dict[str, bool]):
    """Each series' best point over its sweep (the parameters that vary between points of
    the same tool, testbed, target, tuning set and data source, and a parameter x axis),
    with where it was reached. Returns the peak points."""
    exempt = exempt_within(spec)
    groups: dict[tuple, list[Point]] = defaultdict(list)
    for p in points:
        # A peak is taken over how many clients, processes and requests a setup used, not
        # across tools, targets or access modes (those are different experiments).
        setup = tuple(
            p.attributes.get(k) for k in sorted(set(SETUP) | ALONG_A_LINE) if k not in exempt
        )
        x = "" if sweep_axis(spec.x) else p.x_key
        y = "" if sweep_axis(spec.y) else p.y_key
        groups[(p.metric, p.series_key, x, y, setup)].append(p)
    out = []
    for (metric, *_), group in groups.items():
        better = max if higher_is_better.get(metric, True) else min
        best = better(group, key=lambda p: p.mean)
        swept = {
            k
            for k in set().union(*(p.attributes for p in group))
            if k.startswith("param:") and len({p.attributes.get(k) for p in group}) > 1
        }
        for axis in (spec.x, spec.y):
            if sweep_axis(axis):
                swept.add(axis)
        best.sweep = sorted(swept | (CONCURRENCY & set(best.attributes)))
        where = [
            f"{attribute_name(k)} {shown(k, best.attributes.get(k))}"
            for k in best.sweep
            if k not in (spec.x, spec.y)
        ]
        if sweep_axis(spec.x) and best.x:
            where.insert(0, f"{dimensions.label(spec.x)} {shown(spec.x, best.x)}")
        best.peak_at = ", ".join(where)
        best.peak_of = len(group)
        out.append(best)
    return out
