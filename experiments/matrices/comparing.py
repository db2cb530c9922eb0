"""The comparison a matrix's page links to: its x axis and series from the matrix's axes,
and the metrics its runs produced (or will produce)."""

from __future__ import annotations

from urllib.parse import urlencode

from experiments.comparison.spec import MAX_METRICS
from experiments.matrices.axes import MatrixError, axis_values
from experiments.models import Matrix, Metric
from runners import registry


def compare_query(matrix: Matrix, run_ids: list[int] | None = None) -> str:
    """The comparison of this matrix's runs: x is its first numeric axis, the series its next
    axis (or the testbed or tuning set when several are swept); ``run_ids``: the runs whose
    metrics say which metrics it opens on (``compare_metrics``)."""
    axes = [a["param"] for a in matrix.axes if ":" not in a["param"]]
    numeric = [
        a["param"]
        for a in matrix.axes
        if ":" not in a["param"]
        and ("range" in a or all(isinstance(v, int | float) for v in a.get("values", [])))
    ]
    x = numeric[0] if numeric else (axes[0] if axes else None)
    others = [a for a in axes if a != x]
    if others:
        series = f"param:{others[0]}"
    elif matrix.testbeds.count() > 1:
        series = "testbed"
    elif matrix.tuning_sets.count() > 1:
        series = "tuning"
    else:
        series = "tool"
    query = [
        ("matrix", str(matrix.uuid)),
        *(("metric", m) for m in compare_metrics(matrix, run_ids)),
        ("series", series),
        ("x", f"param:{x}" if x else "tool"),
    ]
    return urlencode(query)


def compare_metrics(matrix: Matrix, run_ids: list[int] | None = None) -> list[str]:
    """The headline metrics the matrix's runs produced, in the tool's order, of the unit of
    the first: a fio matrix sweeping rw over write and read measured write_bw in some runs and
    read_bw in others, and its comparison shows both (not write_bw alone), but not the IOPS
    and latencies each run also reports. Before any run has a result: the tool's default
    metric, or its read metric when the matrix only reads."""
    metrics = Metric.objects.filter(primary=True)
    # A large matrix's page passes its sample (experiments.matrices.sampling): the first
    # repetitions of every cell, and the runs of one cell measure the same metrics.
    metrics = (
        metrics.filter(run__matrix=matrix)
        if run_ids is None
        else metrics.filter(run_id__in=run_ids)
    )
    produced = dict(metrics.values_list("name", "unit").distinct().order_by())
    spec = registry.BY_NAME.get(matrix.tool)
    ordered = [m for m in (spec.metrics if spec else ()) if m in produced]
    ordered += sorted(m for m in produced if m not in ordered)
    if ordered:
        unit = produced[ordered[0]]
        return [m for m in ordered if produced[m] == unit][:MAX_METRICS]
    # What the definition will measure: the directions its fixed parameters and axes name
    # (a read-only matrix opens on its read metric, a write/read sweep on both).
    directions = {str(v) for k, v in matrix.fixed_params.items() if k in DIRECTION_PARAMS}
    for axis in matrix.axes:
        if axis.get("param") in DIRECTION_PARAMS:
            try:
                directions.update(str(v) for v in axis_values(axis))
            except MatrixError:
                continue
    metrics = [
        name
        for name, words in (("write_bw", WRITE_DIRECTIONS), ("read_bw", READ_DIRECTIONS))
        if directions & words
    ]
    return metrics or [registry.default_metric(matrix.tool)]


DIRECTION_PARAMS = ("rw", "direction")
WRITE_DIRECTIONS = {"write", "randwrite", "rw", "readwrite", "randrw", "trimwrite"}
READ_DIRECTIONS = {"read", "randread", "rw", "readwrite", "randrw"}
