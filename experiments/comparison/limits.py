"""Each point's theoretical limit (of its scope: the testbed, one target, one drive), its
efficiency and the flags of values above it."""

from __future__ import annotations

from experiments.comparison.comparability import direct, working_set
from experiments.comparison.result import MetricInfo, Point
from runners import metrics

# Bandwidth metrics and the direction whose theoretical limit applies (runners.metrics).
LIMIT_OPS = metrics.LIMIT_OPS


def scope_limits(ctx, scope):
    """The limits of a run scope (experiments.inventory.limits.run_scope), computed once."""
    from experiments.inventory.limits import compute_scope_limits

    key = ("scope", scope)
    if key not in ctx.limits:
        testbed = ctx.testbeds.get(scope.testbed_id)
        target = ctx.target_by_id.get(scope.target_id) if scope.target_id else None
        if testbed is None or (scope.kind == "target" and target is None):
            ctx.limits[key] = None
        else:
            pk = testbed.pk
            members, targets = ctx.members[pk], ctx.targets[pk]
            ctx.limits[key] = compute_scope_limits(
                scope, testbed, members, targets, target, ctx.measured.get(pk), ctx.bench.get(pk)
            )
    return ctx.limits[key]


def point_scope(configs: list[dict]):
    """The one scope of the runs behind a point, from their targets and parameters (none
    when they differ)."""
    from experiments.inventory.limits import run_scope

    scopes = {
        run_scope(c["run__tool"], c["run__params"], c["run__target_id"], c["run__testbed_id"])
        for c in configs
    }
    return scopes.pop() if len(scopes) == 1 else None


def annotate(ctx, point: Point, row: dict, m: MetricInfo, configs: list[dict]) -> None:
    """The point's testbed, theoretical limit (of the scope of its runs), efficiency, flags
    for values above the limit and for working sets that fit in the clients' memory."""
    single_testbed = row["tb_lo"] == row["tb_hi"]
    if single_testbed and row["tb_lo"] in ctx.testbeds:
        point.testbed = ctx.testbeds[row["tb_lo"]].name
    elif not single_testbed:
        point.testbed = "(several)"
    independent_storage_flag(ctx, point, configs)
    op = LIMIT_OPS.get(m.name)
    if op is None:
        working_set_flag(ctx, point, m, configs)
        return
    from experiments.inventory.limits import above_limit

    scope = point_scope(configs)
    limits = scope_limits(ctx, scope) if scope is not None else None
    bottleneck = limits.bottleneck(op) if limits else None
    if bottleneck is not None:
        limit = getattr(bottleneck, op)
        point.limit_name = bottleneck.name
        point.limit_detail = bottleneck.detail
        point.limit_scope = limits.scope
        point.limit_basis = bottleneck.basis
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
    working_set_flag(ctx, point, m, configs)


def independent_storage_flag(ctx, point: Point, configs: list[dict]) -> None:
    """Runs on a testbed with independent storage held only their own nodes, not its storage
    and metadata servers (experiments.execution.holding): say so."""
    names = sorted(
        {
            tb.name
            for c in configs
            if (tb := ctx.testbeds.get(c["run__testbed_id"])) is not None and tb.independent_storage
        }
    )
    if names:
        point.flags.append(
            f"testbed {', '.join(names)} declares independent storage: its runs held only "
            "their own nodes, and other runs may have used its storage servers meanwhile"
        )


def working_set_flag(ctx, point: Point, m: MetricInfo, configs: list[dict]) -> None:
    if m.base_unit not in ("B/s", "op/s"):
        return
    smallest: tuple[float, float] | None = None
    for c in configs:
        params = c["run__params"] or {}
        if not isinstance(params, dict) or direct(params):
            continue
        ws = working_set(c["run__tool"], params)
        memory = ctx.client_memory(c["run__testbed_id"], params)
        if ws and memory and ws < memory and (smallest is None or ws < smallest[0]):
            smallest = (ws, memory)
    if smallest:
        point.flags.append(
            f"working set {smallest[0] / 2**30:,.1f} GiB is smaller than the clients' "
            f"memory ({smallest[1] / 2**30:,.0f} GiB): results may come from the page cache"
        )
