"""What makes runs alike: data sources, working sets, and the configuration that differs
between series."""

from __future__ import annotations

from collections import defaultdict

from experiments import dimensions
from experiments.comparison.context import raw
from experiments.comparison.result import ComparisonResult, Difference, Point
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
    """(metric, series key) of the series holding both published and own runs (in one point
    or across points: own runs at threads 4 beside a study's threads 1 and 256)."""
    kinds: dict[tuple[str, str], set[bool]] = defaultdict(set)
    for p in points:
        if p.published_runs:
            kinds[(p.metric, p.series_key)].add(True)
        if p.own_runs:
            kinds[(p.metric, p.series_key)].add(False)
    return {key for key, seen in kinds.items() if len(seen) == 2}


def source_confounder(p: Point, base: Point, mixed: set[tuple[str, str]]) -> str:
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


def facts(ctx, config: dict) -> dict[tuple[str, str], str]:
    testbed = ctx.testbeds.get(config["run__testbed_id"])
    facts: dict[tuple[str, str], str] = {}
    if testbed is None:
        return facts
    members = ctx.members.get(testbed.pk, [])
    target = ctx.target_by_id.get(config["run__target_id"]) if config["run__target_id"] else None
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
    facts[("hardware", "network adapters")] = many(str(n) for p in storage for n in p.nics.all())
    facts[("hardware", "client profile")] = many(p.name for p in clients)
    facts[("testbed", "testbed")] = testbed.name
    facts[("testbed", "BeeGFS version")] = testbed.beegfs_version or "—"
    facts[("testbed", "fabric")] = testbed.get_fabric_display() or "—"
    facts[("testbed", "storage servers")] = str(sum(1 for m in members if m.storage))
    facts[("testbed", "clients")] = str(len(clients))
    targets = [target] if target is not None else ctx.targets.get(testbed.pk, [])
    facts[("testbed", "storage targets")] = (
        "1 (one target measured)" if target is not None else str(sum(t.count for t in targets))
    )
    facts[("testbed", "RAID level")] = many(t.get_raid_level_display() for t in targets)
    facts[("testbed", "disks per array")] = many(t.disks for t in targets)
    facts[("testbed", "local file system")] = many(t.filesystem for t in targets)
    facts[("testbed", "mount options")] = many(t.mount_options for t in targets)
    tuning = ctx.tunings.get(config["run__tuning_set_id"])
    facts[("tuning", "tuning set")] = tuning.name if tuning else "(none)"
    for key, value in sorted((tuning.effective if tuning else {}).items()):
        facts[("tuning", key)] = str(value)
    return facts


def differences(ctx, spec: ComparisonSpec, result: ComparisonResult) -> list[Difference]:
    if not spec.series or len(result.series) < 2 or not ctx.configs:
        return []
    per_series: dict[str, dict[tuple[str, str], set[str]]] = defaultdict(lambda: defaultdict(set))
    seen: set[tuple] = set()
    for c in ctx.configs:
        key = (
            raw(c["series"]),
            c["run__testbed_id"],
            c["run__tuning_set_id"],
            c["run__target_id"],
        )
        if key in seen:
            continue
        seen.add(key)
        for attr, value in facts(ctx, c).items():
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
