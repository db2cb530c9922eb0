"""The comparison builder: filters, metrics, axes, series and baseline in the URL; statistics,
efficiency, baseline tests, configuration differences and charts from experiments.comparison.
"""

from __future__ import annotations

import csv
import re
from typing import Any
from urllib.parse import urlencode

from django.db import connection
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBadRequest, JsonResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils.html import format_html
from django.views.decorators.http import require_safe

from experiments import comparison
from experiments.comparison import (
    ComparisonResult,
    ComparisonSpec,
    dimensions,
    latency_sweep,
    parcoords,
)
from experiments.comparison.presets import PRESETS
from experiments.models import ConfigSummary, Matrix, Run, Testbed
from experiments.models.runs import Tool
from experiments.shared.utils import is_uuid
from experiments.templatetags.beeweb import uuid_options
from runners import metrics

PARAM_AXES = [
    "threads",
    "nodes",
    "tasks_per_node",
    "numjobs",
    "iodepth",
    "bs",
    "size",
    "transfer_size",
    "block_size",
    "record_size",
    "file_size",
    "rw",
    "direct",
    "file_per_process",
    "chunk_size",
    "stripe_count",
]


def _spec(request: HttpRequest) -> ComparisonSpec:
    """The spec of the request; ``fk``/``fv`` (the builder's "add filter" controls) become
    ``f`` filters. Without any metric the first of write_bw or what exists is chosen."""
    query = request.GET.copy()
    key = query.get("fk", "")
    for value in query.getlist("fv"):
        query.appendlist("f", f"{key}:{value}")
    spec = ComparisonSpec.from_query(query)
    if not spec.metrics and not query.getlist("metric"):
        available = available_metrics()
        if available:
            spec.metrics = ["write_bw" if "write_bw" in available else available[0]]
    return spec


def available_metrics() -> list[str]:
    """The names of the headline metrics stored: those of the configuration summaries
    (every run with a headline metric is in one, experiments.results.summaries), a few thousand rows
    where the metric rows are millions."""
    # One index probe a name (a skip scan of the (name, config_key) index), not a read of
    # every summary row: at 1,000,000 runs 41,000 rows, ~20 ms a page.
    table = ConfigSummary._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            f"WITH RECURSIVE names(name) AS ("
            f" SELECT min(name) FROM {table}"
            f" UNION ALL"
            f" SELECT (SELECT min(s.name) FROM {table} s WHERE s.name > names.name)"
            f" FROM names WHERE names.name IS NOT NULL)"
            f" SELECT name FROM names WHERE name IS NOT NULL"
        )
        return sorted(row[0] for row in cursor.fetchall())


def metric_choices(names: list[str]) -> list[tuple[str, str]]:
    """(name, "Write throughput (write_bw)") per metric, in the order of their words: a
    picker names what it offers as people say it, with the id the URL and API use."""
    return sorted(((n, f"{metrics.label(n)} ({n})") for n in names), key=lambda c: c[1].lower())


def _without(spec: ComparisonSpec, key: str, value: str) -> str:
    pairs = [(k, v) for k, v in spec.query_pairs() if not (k == key and v == value)]
    return urlencode(pairs)


# The builder's matrix select lists the newest this many matrices (and those chosen); a
# search box finds the others (``matrix_options``): a lab's history of matrices must not
# weigh on every comparison page (999 options were 75 KB of a 291 KB page at 1,000,000 runs).
MATRIX_CHOICES = 100


def _matrix_choices(chosen: list[str], query: str = "") -> list[tuple]:
    """(uuid, name) of the ``chosen`` matrices, then of the newest MATRIX_CHOICES others
    (whose name contains ``query``, when given)."""
    picked = (
        list(Matrix.objects.filter(uuid__in=chosen).values_list("uuid", "name")) if chosen else []
    )
    others = Matrix.objects.exclude(uuid__in=[uuid for uuid, _ in picked])
    if query:
        others = others.filter(name__icontains=query)
    newest = others.order_by("-created", "-id").values_list("uuid", "name")[:MATRIX_CHOICES]
    return picked + list(newest)


@require_safe
def matrix_options(request: HttpRequest) -> HttpResponse:
    """The matrix select's <option>s for the builder's search box (``q``): the chosen
    matrices (``matrix``, kept selected), then the newest MATRIX_CHOICES whose name holds
    ``q``."""
    chosen = list(dict.fromkeys(m for m in request.GET.getlist("matrix") if is_uuid(m)))
    query = request.GET.get("q", "").strip()[:160]
    choices = _matrix_choices(chosen, query)
    html = uuid_options(choices, chosen)
    if request.GET.get("blank"):  # a single select's "any" (the runs table's filter)
        html = format_html('<option value="">{}</option>', request.GET["blank"][:20]) + html
    if query and len(choices) == len(chosen):
        html += format_html("<option disabled>(no other matrix holds “{}”)</option>", query)
    return HttpResponse(html)


def builder_context(request: HttpRequest, spec: ComparisonSpec, result: ComparisonResult) -> dict:
    params = list(PARAM_AXES)
    if spec.matrices:
        for axes in Matrix.objects.filter(uuid__in=spec.matrices).values_list("axes", flat=True):
            params += [a["param"] for a in axes if isinstance(a, dict) and "param" in a]
    for key in (spec.x, spec.y, spec.series, *(k for k, _ in spec.filters)):
        if key.startswith("param:"):
            params.append(key[len("param:") :])
    dims = comparison.dimension_choices([p for p in params if ":" not in p])
    filter_key = request.GET.get("fk", "")
    filter_values = []
    if filter_key:
        try:
            taken = {v for k, v in spec.filters if k == filter_key}
            filter_values = [
                (v, label)
                for v, label in comparison.distinct_values(
                    filter_key, Run.objects.visible_to(request.user)
                )
                if v not in taken
            ]
        except ValueError:
            filter_key = ""
    chips = [
        {
            "key": k,
            "label": dimensions.label(k),
            "value": dimensions.display_value(k, v),
            "remove": _without(spec, "f", f"{k}:{v}"),
        }
        for k, v in spec.filters
    ]
    testbed_names = (
        dict(Testbed.objects.filter(uuid__in=spec.testbeds).values_list("uuid", "name"))
        if spec.testbeds
        else {}
    )
    query = spec.to_query()
    return {
        "spec": spec,
        "result": result,
        "query": query,
        "metrics": metric_choices(available_metrics()),
        "dims": dims,
        "chips": chips,
        "filter_key": filter_key,
        "filter_values": filter_values,
        "tools": Tool.choices,
        # (uuid, name) pairs, rendered by {% uuid_options %}: testbeds in the models' order,
        # the chosen matrices then the newest (a search box finds the others)
        "testbeds": Testbed.objects.values_list("uuid", "name"),
        "matrices": _matrix_choices([str(m) for m in spec.matrices]),
        "matrices_total": Matrix.objects.count(),
        "testbed_names": testbed_names,
        "norms": comparison.NORMALISATIONS.items(),
        "bottlenecks": comparison.BOTTLENECKS.items(),
        "chart_kinds": comparison.CHARTS.items(),
        # The kind the charts are drawn as: bars where lines were asked for but cannot be
        # drawn (categories, one x value), so that the form says what the page shows.
        "chart_drawn": (
            "bar"
            if spec.chart == "line"
            and result.charts
            and all(c.kind == "bar" for c in result.charts)
            else spec.chart
        ),
        "error_kinds": comparison.ERRORS.items(),
        "stats": comparison.STATS.items(),
        "ignore_choices": ignore_choices(params, spec),
        "presets": PRESETS,
        "export_csv": f"{reverse('experiments:compare_export', args=['csv'])}?{query}",
        "export_json": f"{reverse('experiments:compare_export', args=['json'])}?{query}",
        "print_url": f"{reverse('experiments:compare_print')}?{query}",
        "charts_json": charts_payload(result),
    }


def ignore_choices(params: list[str], spec: ComparisonSpec) -> list[tuple[str, str]]:
    """(attribute, label) a user may let compared runs differ in: the setup attributes and
    the parameters the builder knows (and whatever the URL already ignores)."""
    from experiments.comparison.comparability import SETUP_LABELS, attribute_name

    keys = list(SETUP_LABELS) + [f"param:{p}" for p in dict.fromkeys(params) if ":" not in p]
    keys += [k for k in spec.ignore if k not in keys]
    return [(k, attribute_name(k)) for k in keys]


def charts_payload(result: ComparisonResult) -> list[dict]:
    """What the page's script draws: one entry per chart, with a file name for downloads."""
    return [
        {
            "id": f"chart-{i}",
            "title": c.title,
            "figure": c.figure,
            "filename": f"beeweb-{c.metric}-{i}",
            "notes": c.notes,
        }
        for i, c in enumerate(result.charts, 1)
    ]


@require_safe
def compare(request: HttpRequest) -> HttpResponse:
    spec = _spec(request)
    result = comparison.compute(spec, Run.objects.visible_to(request.user))
    context = builder_context(request, spec, result)
    context["parcoords"] = parcoords.comparison_figure(result)
    context["latency_sweep"] = latency_sweep.comparison_context(
        spec, Run.objects.visible_to(request.user)
    )
    partial = request.htmx and not request.htmx.history_restore_request
    if partial:
        # 200 even with errors: htmx swaps the body in, and with it the messages.
        response = render(request, "experiments/_compare_body.html", context)
        # The canonical URL (filters added through the builder's controls become f=…).
        response["HX-Push-Url"] = f"{request.path}?{context['query']}"
        return response
    # The page with the parts of the query it could not use named, as a 400.
    return render(request, "experiments/compare.html", context, status=400 if spec.errors else 200)


@require_safe
def compare_print(request: HttpRequest) -> HttpResponse:
    spec = _spec(request)
    runs = Run.objects.visible_to(request.user)
    result = comparison.compute(spec, runs)
    return render(
        request,
        "experiments/comparison_print.html",
        {
            "title": spec.describe(),
            "result": result,
            "latency_sweep": latency_sweep.comparison_context(spec, runs),
            "spec": spec,
            "charts_json": charts_payload(result),
            "source": "live data",
        },
        status=400 if spec.errors else 200,
    )


# A spreadsheet reads a cell starting with one of these as a formula (OWASP "CSV injection").
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")


def csv_cell(value: Any) -> Any:
    """A CSV cell that a spreadsheet shows as text, never runs: text starting with ``=``,
    ``+``, ``-``, ``@``, tab or CR gets a leading single quote. Numbers stay numbers, also
    negative ones and numbers that arrive as text (a frozen snapshot's ``-1``)."""
    if value is None:
        return ""
    if isinstance(value, str) and value.startswith(_FORMULA_START):
        if not _NUMBER.fullmatch(value):
            return "'" + value
    return value


def export_response(
    result: ComparisonResult,
    fmt: str,
    filename: str,
    extra: dict | None = None,
    sweep: dict | None = None,
) -> HttpResponse:
    """The comparison as CSV (its table) or JSON (the whole result, and the latency charts'
    data under ``latency_sweep`` when the page shows them: ``sweep`` is their context)."""
    if fmt not in ("csv", "json"):
        raise Http404("Export as csv or json.")
    if fmt == "csv":
        response = HttpResponse(content_type="text/csv; charset=utf-8")
        response["Content-Disposition"] = f'attachment; filename="{filename}.csv"'
        writer = csv.writer(response)
        for row in result.csv_rows():
            writer.writerow([csv_cell(v) for v in row])
        return response
    body = {**(extra or {}), "result": result.to_json()}
    if sweep:
        body["latency_sweep"] = latency_sweep.export(sweep)
    response = JsonResponse(body, json_dumps_params={"indent": 1})
    response["Content-Disposition"] = f'attachment; filename="{filename}.json"'
    return response


@require_safe
def compare_export(request: HttpRequest, fmt: str) -> HttpResponse:
    spec = _spec(request)
    if spec.errors:
        return HttpResponseBadRequest(
            "\n".join(spec.errors), content_type="text/plain; charset=utf-8"
        )
    runs = Run.objects.visible_to(request.user)
    result = comparison.compute(spec, runs)
    sweep = latency_sweep.comparison_context(spec, runs) if fmt == "json" else {}
    return export_response(
        result, fmt, "beeweb-comparison", {"query": spec.to_query()}, sweep=sweep
    )
