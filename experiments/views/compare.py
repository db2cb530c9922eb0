"""The comparison page: one metric, an x axis and a series split, as a chart and a table."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from experiments import charts, dimensions
from experiments.models import Matrix, Metric, Run, Testbed
from experiments.models.runs import Tool
from experiments.utils import is_uuid
from runners.parsers.base import METRIC_UNITS

PRESETS = [
    ("Arm vs x86 vs POWER: write throughput by threads",
     "metric=write_bw&x=param:threads&series=arch"),
    ("Arm vs x86 vs POWER: read throughput by threads",
     "metric=read_bw&x=param:threads&series=arch"),
    ("Arm vs x86 vs POWER: peak write by tool", "metric=write_bw&x=tool&series=arch"),
    ("RAID0 vs RAID10: dd write per device", "metric=write_bw&x=tool&series=raid&tool=dd"),
    ("RAID0 vs RAID10: StorageBench per device", "metric=bw&x=tool&series=raid&tool=storagebench"),
    ("Metadata: file creates by processes", "metric=file_create&x=param:threads&series=arch"),
]

PARAM_AXES = ["threads", "nodes", "tasks_per_node", "transfer_size", "block_size",
              "record_size", "file_size", "iodepth", "file_per_process", "direct", "rw"]


def compare(request: HttpRequest) -> HttpResponse:
    available = sorted(set(Metric.objects.filter(primary=True).values_list("name", flat=True)
                           .distinct()))
    metric = request.GET.get("metric") or ("write_bw" if "write_bw" in available
                                           else (available[0] if available else ""))
    x = request.GET.get("x", "param:threads")
    series = request.GET.get("series", "arch")
    tools = [t for t in request.GET.getlist("tool") if t in Tool.values]
    testbeds = request.GET.getlist("testbed")
    matrices = [m for m in request.GET.getlist("matrix") if is_uuid(m)]
    binary = request.GET.get("unit") == "GiB"
    error = ""

    runs = Run.objects.visible_to(request.user)
    if tools:
        runs = runs.filter(tool__in=tools)
    if testbeds:
        runs = runs.filter(testbed__uuid__in=[t for t in testbeds if is_uuid(t)])
    if matrices:
        runs = runs.filter(matrix__uuid__in=matrices)

    points: list[charts.Point] = []
    plotted: list[charts.Point] = []
    fig = None
    unit_label = ""
    if metric not in METRIC_UNITS:
        error = f"Unknown metric {metric!r}." if metric else "No results yet."
    else:
        try:
            rows = list(Metric.objects.for_comparison(metric, x or None, series or None, runs))
        except ValueError as exc:
            error, rows = str(exc), []
        unit_label, divisor = charts.display_unit(METRIC_UNITS[metric], binary)
        points = charts.to_points(
            rows, divisor,
            series_label=lambda v: dimensions.display_value(series, v) if series else "all",
            x_label=lambda v: dimensions.display_value(x, v) if x else "",
        )
        # A line over an x axis cannot place runs that lack that parameter (a study that
        # states a peak but not its thread count): they stay in the table only.
        plotted = [p for p in points if not x or p.x != dimensions.UNKNOWN]
        if plotted:
            fig = charts.figure(
                plotted, x_title=dimensions.label(x) if x else "", has_x=bool(x),
                y_title=f"{metric} ({unit_label})",
                log_x=charts.is_power_of_two_axis(plotted),
            )
    dims = [(key, d.label) for key, d in dimensions.FIXED.items()]
    # The axes of the chosen matrices, and whatever the URL asks for, are offered too.
    params = list(PARAM_AXES)
    for axes in Matrix.objects.filter(uuid__in=matrices).values_list("axes", flat=True):
        params += [a["param"] for a in axes if isinstance(a, dict) and "param" in a]
    params += [d[len("param:"):] for d in (x, series) if d.startswith("param:")]
    params = list(dict.fromkeys(p for p in params if ":" not in p))
    dims += [(f"param:{p}", f"parameter: {p.replace('_', ' ')}") for p in params]
    context = {
        "metrics": available, "metric": metric, "x": x, "series": series, "dims": dims,
        "tools": Tool.choices, "selected_tools": tools, "testbeds": Testbed.objects.only(
            "uuid", "name"), "selected_testbeds": testbeds, "binary": binary,
        "matrices": Matrix.objects.only("uuid", "name"), "selected_matrices": matrices,
        "points": points, "figure": fig,
        "unit_label": unit_label, "error": error, "presets": PRESETS,
        "n_runs": sum(p.n for p in points),
        "n_unplotted": sum(p.n for p in points) - sum(p.n for p in plotted) if fig else 0,
    }
    template = "experiments/_compare_result.html" if request.htmx else "experiments/compare.html"
    return render(request, template, context)

