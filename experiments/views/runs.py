"""Runs: list with filters, and one run's page with its metrics and raw output."""

from __future__ import annotations

import csv
import io
import json
from collections import defaultdict
from uuid import UUID

from django.db.models import Count
from django.http import HttpRequest, HttpResponse, QueryDict, StreamingHttpResponse
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.utils import timezone
from django.utils.http import urlencode

from experiments.comparison import run_story, runs_table
from experiments.comparison.charts import display_unit
from experiments.comparison.presets import DASHBOARD_PRESETS
from experiments.inventory import localhost
from experiments.models import HardwareProfile, Matrix, Run, Testbed, TuningSet
from experiments.models.runs import Tool
from experiments.shared import keyset
from experiments.shared.utils import is_uuid
from experiments.templatetags.beeweb import num, pairs, param
from experiments.views.compare import (
    PARAM_AXES,
    _matrix_choices,
    available_metrics,
    metric_choices,
)
from runners import params as param_kinds
from runners import progress as tool_progress


def dashboard(request: HttpRequest) -> HttpResponse:
    """Counts, the published studies and recent runs; a user with no runs or matrices of
    their own first sees the three things people come for: compare the published studies,
    run a first matrix on this machine, import output they already have."""
    user = request.user
    first_run = not (
        Run.objects.filter(owner=user).exists() or Matrix.objects.filter(owner=user).exists()
    )
    context = {
        "first_run": first_run,
        "first_preset": DASHBOARD_PRESETS[0],
        "published_loaded": Run.objects.filter(published=True).exists(),
        "local_testbed": localhost.local_testbed(user) if first_run else None,
        "presets": DASHBOARD_PRESETS,
        "counts": {
            "hardware": HardwareProfile.objects.count(),
            "testbeds": Testbed.objects.count(),
            "tuning": TuningSet.objects.count(),
            # Exact up to keyset.EXACT_BELOW runs, PostgreSQL's estimate beyond (the card
            # says "about"): counting a million runs would cost more than the whole page.
            "runs": keyset.total(Run.objects.all(), RUN_LIST_KEY),
        },
        "recent": Run.objects.select_related("testbed", "tuning_set").order_by(
            *RUN_LIST_KEY.order_by()
        )[:10],
        # The published runs alone, through their partial index (exp_run_published_source).
        "studies": (
            Run.objects.filter(published=True)
            .values("source")
            .annotate(n=Count("id"))
            .order_by("source")
        ),
    }
    return render(request, "experiments/dashboard.html", context)


# The run list's order: newest first, ties (the runs of one bulk request share ``created``)
# by id. Paged by a keyset cursor, never by OFFSET or a count (experiments.shared.keyset).
RUN_LIST_KEY = keyset.Key.of(("-created", "-id"))
RUN_LIST_PAGE = 50
TOOL_NAMES = dict(Tool.choices)
STATUS_NAMES = dict(Run.Status.choices)


def _list_row(run: Run, href: str) -> dict:
    """What the run list shows of a run, as text: built here rather than in the template,
    whose per-variable lookups, choice displays and date filters cost more than the page's
    queries at 50 rows (~2,000 variables a page)."""
    tool = TOOL_NAMES.get(run.tool, run.tool)
    return {
        "href": href.replace(str(UUID(int=0)), str(run.uuid)),
        "name": run.label or f"{tool} on {run.testbed.name}",
        "tool": tool,
        "testbed": run.testbed.name,
        "tuning_set": run.tuning_set.name if run.tuning_set_id else "—",
        "status": STATUS_NAMES.get(run.status, run.status),
        "params": " ".join(f"{k}={param(v, k)}" for k, v in pairs(run.params)),
        "created": timezone.localtime(run.created).strftime("%Y-%m-%d %H:%M"),
    }


def run_list(request: HttpRequest) -> HttpResponse:
    # The list shows neither the raw output nor the execution details: leave them in the
    # database (a run's raw output may be megabytes).
    runs = (
        Run.objects.visible_to(request.user)
        .select_related("testbed", "tuning_set")
        .only(
            "uuid",
            "label",
            "tool",
            "status",
            "params",
            "created",
            "testbed__name",
            "testbed__uuid",
            "tuning_set__name",
            "tuning_set__uuid",
        )
    )
    tool = request.GET.get("tool", "")
    testbed = request.GET.get("testbed", "")
    testbeds = list(Testbed.objects.only("uuid", "name"))
    if tool:
        runs = runs.filter(tool=tool)
    if testbed:
        # By id, from the testbeds the filter form lists anyway: the page's query then
        # reads the (testbed, created) index alone, with no join to find the testbed.
        chosen = [t.pk for t in testbeds if str(t.uuid) == testbed.lower()]
        runs = runs.filter(testbed_id=chosen[0]) if chosen else runs.none()
    cursor = request.GET.get("cursor", "")
    context = {
        "tools": Tool.choices,
        "tool": tool,
        "testbed": testbed,
        "testbeds": testbeds,
    }
    try:
        page = keyset.page(runs, RUN_LIST_KEY, RUN_LIST_PAGE, cursor)
    except keyset.BadCursor as exc:
        context["error"] = f"cursor: {exc} (follow the newer and older links)"
        return render(request, "experiments/run_list.html", context, status=400)
    filters = {k: v for k, v in (("tool", tool), ("testbed", testbed)) if v}
    href = reverse("experiments:run", args=[UUID(int=0)])  # one reverse() for every row
    context.update(
        runs=[_list_row(run, href) for run in page.rows],
        total=keyset.total(runs, RUN_LIST_KEY),
        newer_href=f"?{urlencode({**filters, 'cursor': page.previous})}" if page.previous else "",
        older_href=f"?{urlencode({**filters, 'cursor': page.next})}" if page.next else "",
        newest_href=f"?{urlencode(filters)}" if cursor else "",
    )
    return render(request, "experiments/run_list.html", context)


def run_detail(request: HttpRequest, uuid: UUID) -> HttpResponse:
    run = get_object_or_404(
        Run.objects.visible_to(request.user).select_related(
            "testbed", "tuning_set", "target", "matrix", "node"
        ),
        uuid=uuid,
    )
    metrics = []
    for metric in run.metrics.all():
        unit, divisor = display_unit(metric.unit)
        metrics.append((metric, metric.value / divisor, unit))
    active = run.status in (Run.Status.QUEUED, Run.Status.RUNNING)
    elapsed = None
    if run.started_at:
        elapsed = ((run.finished_at or timezone.now()) - run.started_at).total_seconds()
    return render(
        request,
        "experiments/run_detail.html",
        {
            "run": run,
            "metrics": metrics,
            "active": active,
            "elapsed": elapsed,
            "tail": "\n".join(run.raw_output.splitlines()[-200:]) if active else "",
            "live": (
                tool_progress.progress(run.tool, run.raw_output[-tool_progress.TAIL_CHARS :])
                if run.status == Run.Status.RUNNING
                else None
            ),
            "can_edit": run.can_edit(request.user),
            "config": json.dumps(run.effective_config, indent=2) if run.effective_config else "",
            # Telemetry, bottleneck verdict, latency percentiles (experiments.comparison.run_story).
            **run_story.context(run),
        },
    )


def _with_added_columns(query) -> QueryDict:
    """The table's query with the column picker's choices (``add=param:NAME``,
    ``add=metric:NAME``, ``add=tool``) appended to ``cols``, once each, in the order given."""
    query = query.copy()
    added = [key for key in query.getlist("add") if key]
    query.pop("add", None)
    if added:
        cols = [c for c in query.get("cols", "").split(",") if c.strip()]
        cols += [key for key in added if key not in cols]
        query["cols"] = ",".join(cols)
    return query


def _column_choices(spec) -> dict[str, list[tuple[str, str]]]:
    """What the column picker offers that the table does not show: parameters (the common
    sweep axes and those of the runs shown), metrics (those stored, in words) and run fields."""
    shown = {c.key for c in spec.columns}
    params = list(
        dict.fromkeys([*PARAM_AXES, *(c.name for c in spec.columns if c.kind == "param")])
    )
    return {
        "param": [(f"param:{p}", p) for p in sorted(params) if f"param:{p}" not in shown],
        "metric": [
            (f"metric:{name}", label)
            for name, label in metric_choices(available_metrics())
            if f"metric:{name}" not in shown
        ],
        "field": [(k, v[0]) for k, v in runs_table.FIELDS.items() if k not in shown],
    }


def _table_context(request: HttpRequest) -> tuple[dict, int]:
    """The runs table's context (its spec, one page of rows, the next cursor) and the HTTP
    status: a query string the table cannot show answers 400 with the reason on the page."""
    query = _with_added_columns(request.GET)
    chosen_matrix = [m for m in [query.get("matrix", "").lower()] if is_uuid(m)]
    context: dict = {
        "tools": Tool.choices,
        "statuses": Run.Status.choices,
        "testbeds": Testbed.objects.only("uuid", "name"),
        # The matrix filtered by and the newest others, as the comparison builder lists
        # them, with its search box for the rest: ten thousand options were 750 KB of every
        # page at 1,000,000 runs.
        "matrices": _matrix_choices(chosen_matrix),
        "matrix_selected": chosen_matrix,
        "matrices_total": Matrix.objects.count(),
        # Missing keys read as "" in the form (a defaultdict: templates index it with []).
        "query": defaultdict(str, query.dict()),
    }
    try:
        spec, runs = runs_table.TableSpec.parse(query, request.user)
        rows, after = runs_table.fetch_page(spec, runs)
    except runs_table.TableError as exc:
        context["error"] = str(exc)
        # The filters as given stay in the form, to be corrected.
        context["column_filters"] = [
            (
                runs_table.Column(key, "param" if key[0] == "p" else "metric", key[2:], key),
                key,
            )
            for key in query
            if key.startswith(("p.", "m."))
        ]
        return context, 400
    base = reverse("experiments:run_table")
    export = reverse("experiments:run_table_export", args=["csv"])[: -len("csv")]
    cols_text = ",".join(c.key for c in spec.columns)
    headers = []
    for col in spec.columns:
        arrow = ""
        if col.key == spec.sort.key:
            arrow = " ↓" if spec.descending else " ↑"
        others = ",".join(c.key for c in spec.columns if c.key != col.key)
        headers.append(
            {
                "col": col,
                "href": f"{base}?{urlencode(spec.sort_query(col))}",
                "arrow": arrow,
                # The column picker's other half: this column taken out of the view.
                "remove_href": (
                    f"{base}?{urlencode(spec.query(cols=others))}"
                    if others and col.key != spec.sort.key
                    else ""
                ),
            }
        )
    context.update(
        spec=spec,
        headers=headers,
        # Whether the list goes on is known from the page (one row more than shown); how
        # long it is only estimated, when it goes on and the filters are on columns the
        # planner keeps statistics of (a parameter or metric filter is a guess to it: at
        # 100,000 runs it took p.threads=16, 14,286 runs, for 998).
        estimate=(
            keyset.estimate(runs)
            if (after or spec.after) and not (spec.params_eq or spec.metric_ranges)
            else None
        ),
        rows=[
            {"run": row["run"], "cells": [_shown(c, row["cells"][c.key]) for c in spec.columns]}
            for row in rows
        ],
        more_href=f"{base}?{urlencode(spec.query(after=after, cols=cols_text))}" if after else "",
        first_href=f"{base}?{urlencode(spec.query())}" if spec.after else "",
        # Exports name the columns shown, even default ones (new runs could change those).
        csv_href=f"{export}csv?{urlencode(spec.query(cols=cols_text))}",
        json_href=f"{export}json?{urlencode(spec.query(cols=cols_text))}",
        cols_text=cols_text,
        column_filters=_column_filters(spec),
        column_choices=_column_choices(spec),
        # Where the browser's address goes after the picker added a column: the view's own
        # address (cols), not the picker's one-off ``add``.
        clean_href=f"{base}?{urlencode(spec.query(cols=cols_text))}",
    )
    return context, 200


def _column_filters(spec) -> list[tuple]:
    """(column, query key) of each parameter/metric filter field of the form: one per such
    column, and one per filter on something not shown, so that applying the form keeps it."""
    fields = [
        (c, f"{'p' if c.kind == 'param' else 'm'}.{c.name}")
        for c in spec.columns
        if c.kind in ("param", "metric")
    ]
    shown = {key for _, key in fields}
    for key in spec.filters:
        if key.startswith(("p.", "m.")) and key not in shown:
            kind = "param" if key.startswith("p.") else "metric"
            fields.append((runs_table.make_column(f"{kind}:{key[2:]}", spec.binary), key))
    return fields


def _shown(col, value) -> tuple[str, bool]:
    """(text, right-aligned) of one cell: metrics in the column's display unit."""
    if value is None:
        return "—", col.kind == "metric"
    if col.kind == "metric":
        return num(col.display(value)), True
    if col.kind == "param":  # in units: "1 MiB", "yes" (runners.params.human)
        return param(value, col.name), False
    if hasattr(value, "strftime"):
        return timezone.localtime(value).strftime("%Y-%m-%d %H:%M"), False
    if isinstance(value, (dict, list)):
        return json.dumps(value), False
    return str(value), False


def run_table(request: HttpRequest) -> HttpResponse:
    """Runs as a table with parameter and result columns (experiments.comparison.runs_table): the
    whole
    page, or for htmx (sorting, filtering, "more") the table part alone."""
    context, status = _table_context(request)
    if request.htmx and not request.htmx.boosted:
        # 200 even with an error: htmx swaps only successful answers, and the table part
        # carries the message.
        response = render(request, "experiments/_run_table.html", context)
        if "add" in request.GET and context.get("clean_href"):
            response["HX-Push-Url"] = context["clean_href"]
        return response
    return render(request, "experiments/run_table.html", context, status=status)


def run_table_export(request: HttpRequest, fmt: str) -> HttpResponse:
    """Every filtered run (not one page) with the table's columns, in its order, streamed.
    Metric columns come twice in CSV (base unit, display unit) unless the two are one; JSON
    states both units per column and gives each value in base units and in the display
    unit."""
    if fmt not in ("csv", "json"):
        return HttpResponse("Export as runs.csv or runs.json.", status=404)
    try:
        spec, runs = runs_table.TableSpec.parse(request.GET, request.user)
    except runs_table.TableError as exc:
        return HttpResponse(str(exc), status=400, content_type="text/plain; charset=utf-8")
    if fmt == "csv":
        response = StreamingHttpResponse(_csv(spec, runs), content_type="text/csv")
    else:
        response = StreamingHttpResponse(_json(spec, runs), content_type="application/json")
    response["Content-Disposition"] = f'attachment; filename="runs.{fmt}"'
    return response


def _cell_text(value) -> str:
    if value is None:
        return ""
    if hasattr(value, "isoformat"):
        return value.isoformat()
    if isinstance(value, (dict, list, bool)):
        return json.dumps(value)
    return str(value)


def _csv(spec, runs):
    buffer = io.StringIO()
    writer = csv.writer(buffer)

    def flush() -> str:
        text = buffer.getvalue()
        buffer.seek(0)
        buffer.truncate()
        return text

    def twice(col) -> bool:
        """A metric whose display unit is not its base unit comes in both (op/s: once)."""
        return col.kind == "metric" and (col.unit, col.divisor) != (col.base_unit, 1.0)

    header = ["run", "label"]
    for col in spec.columns:
        if twice(col):
            header += [f"{col.key} [{col.base_unit}]", f"{col.key} [{col.unit}]"]
        elif col.kind == "metric":
            header.append(f"{col.key} [{col.base_unit}]")
        elif col.base_unit:  # a size or duration parameter: its normal form, then for people
            header += [f"{col.key} [{col.base_unit}]", col.key]
        else:
            header.append(col.key)
    writer.writerow(header)
    yield flush()
    for i, row in enumerate(runs_table.iterate(spec, runs), 1):
        line = [str(row["run"].uuid), row["run"].label]
        for col in spec.columns:
            value = row["cells"][col.key]
            if twice(col):
                shown = col.display(value)
                line += [_cell_text(value), "" if shown is None else f"{shown:.6g}"]
            elif col.kind == "metric":
                line.append(_cell_text(value))
            elif col.base_unit:
                line += [_cell_text(value), "" if value is None else param(value, col.name)]
            else:
                line.append(_cell_text(value))
        writer.writerow(line)
        if i % 200 == 0:
            yield flush()
    yield flush()


def _json(spec, runs):
    columns = [
        {
            "key": c.key,
            "label": c.label,
            **({"base_unit": c.base_unit, "unit": c.unit} if c.kind == "metric" else {}),
            **(
                {"kind": param_kinds.kind(c.name), "base_unit": c.base_unit}
                if c.kind == "param" and c.base_unit
                else {}
            ),
        }
        for c in spec.columns
    ]
    sort = ("-" if spec.descending else "") + spec.sort.key
    yield '{"columns": ' + json.dumps(columns) + ', "sort": ' + json.dumps(sort) + ', "runs": ['
    for i, row in enumerate(runs_table.iterate(spec, runs)):
        values = {}
        for col in spec.columns:
            value = row["cells"][col.key]
            if col.kind == "metric":
                values[col.key] = {"value": value, "display": col.display(value)}
            elif col.base_unit:  # a size or duration parameter: normal form and for people
                shown = None if value is None else param(value, col.name)
                values[col.key] = {"value": value, "display": shown}
            else:
                values[col.key] = value.isoformat() if hasattr(value, "isoformat") else value
        run = row["run"]
        item = {"uuid": str(run.uuid), "label": run.label, "values": values}
        yield ("," if i else "") + json.dumps(item)
    yield "]}"
