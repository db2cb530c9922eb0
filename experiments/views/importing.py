"""Import existing output in the browser: upload or paste, preview the parse, then save."""

from __future__ import annotations

import json

from django.contrib import messages
from django.db import transaction
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from experiments.comparison.charts import display_unit
from experiments.forms import ImportForm
from experiments.results.importing import import_runs, item_problem, preview_parts, read_telemetry
from experiments.results.store import metric_rows
from runners import registry
from runners.parsers import ParseError, describe_parts, summarise_parts


def _shown(metrics) -> list[tuple]:
    """(metric, value in its display unit, unit) of each metric."""
    shown = []
    for m in metrics:
        unit, divisor = display_unit(m.unit)
        shown.append((m, m.value / divisor, unit))
    return shown


def _preview_items(items, tool, op) -> list[dict]:
    """What saving each item stores: its result, or for an output of several independent
    measurements one part per run to be stored (label, parameters, headline metrics)."""
    rows = []
    for name, text in items:
        row = {
            "name": name,
            "text": text,
            "error": None,
            "result": None,
            "metrics": [],
            "parts": [],
            "held": "",
            "differs": "",
            "runs": 1,
        }
        try:
            results = preview_parts(text, tool=tool, op=op)
        except ParseError as exc:
            row["error"] = str(exc)
        else:
            row["result"] = results[0]
            if len(results) == 1:
                row["metrics"] = _shown(results[0].metrics)
            else:
                row["held"], row["differs"] = summarise_parts(results)
                row["runs"] = len(results)
                for result in results:
                    headline = [
                        m for m in metric_rows(m.to_dict() for m in result.metrics) if m.primary
                    ]
                    row["parts"].append(
                        {
                            "label": result.extra["part"]["label"],
                            "params": result.params,
                            "headline": _shown(headline),
                        }
                    )
        rows.append(row)
    return rows


@require_http_methods(["GET", "POST"])
def run_import(request: HttpRequest) -> HttpResponse:
    if request.method == "POST" and request.POST.get("action") == "save":
        return _save(request)
    form = ImportForm(request.POST or None, request.FILES or None, user=request.user)
    labels = [t.label for t in registry.parsed()]
    context: dict = {"form": form, "tool_labels": f"{', '.join(labels[:-1])} or {labels[-1]}"}
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        context["items"] = _preview_items(data["items"], data["tool"] or None, data["op"] or None)
        context["runs"] = sum(item["runs"] for item in context["items"])
        context["hidden"] = {
            "testbed": data["testbed"].uuid,
            "tuning_set": data["tuning_set"].uuid if data["tuning_set"] else "",
            "tool": data["tool"],
            "op": data["op"],
            "label": data["label"],
            "telemetry_json": data["telemetry_json"],
        }
    return render(request, "experiments/run_import.html", context)


def _save(request: HttpRequest) -> HttpResponse:
    names = request.POST.getlist("item_name")
    texts = request.POST.getlist("item_text")
    form = ImportForm(
        {k: request.POST.get(k, "") for k in ("testbed", "tuning_set", "tool", "op", "label")}
        | {"text": texts[0] if texts else ""},
        user=request.user,
    )
    if not form.is_valid() or len(names) != len(texts):
        refused = form.errors.get("testbed")
        messages.error(
            request, refused[0] if refused else "The import was incomplete; start again."
        )
        return redirect("experiments:run_import")
    data = form.cleaned_data
    # Every item is checked as the first was (size, storable text) before anything is
    # stored, and all are stored in one transaction: all or nothing.
    problems = [
        f"{name[:80]}: {problem}"
        for name, text in zip(names, texts, strict=True)
        if (problem := item_problem(name, text))
    ]
    docs = None
    if carried := request.POST.get("telemetry_json", ""):
        try:
            docs = json.loads(read_telemetry(carried))
        except ValueError as exc:
            problems.append(f"telemetry: {exc}")
        if len(texts) != 1:
            problems.append("telemetry belongs to one run: import one output with it.")
        else:
            try:
                parts = preview_parts(texts[0], tool=data["tool"] or None, op=data["op"] or None)
            except ParseError:
                parts = []
            if len(parts) > 1:
                problems.append(
                    f"telemetry belongs to one run: this output holds {describe_parts(parts)}."
                )
    if problems:
        messages.error(request, "Nothing was imported. " + " ".join(problems[:5]))
        return redirect("experiments:run_import")
    with transaction.atomic():
        runs = [
            run
            for name, text in zip(names, texts, strict=True)
            for run in import_runs(
                text,
                testbed=data["testbed"],
                tuning_set=data["tuning_set"],
                owner=request.user,
                tool=data["tool"] or None,
                op=data["op"] or None,
                label=data["label"] or name,
                telemetry_docs=docs,
            )
        ]
    failed = [r for r in runs if r.parse_error]
    messages.success(
        request,
        f"Imported {len(runs)} run{'s' if len(runs) != 1 else ''}"
        + (f"; {len(failed)} stored without metrics (see their pages)." if failed else "."),
    )
    if len(runs) == 1:
        return redirect(runs[0].get_absolute_url())
    return redirect("experiments:run_list")
