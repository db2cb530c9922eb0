"""Runs: list with filters, and one run's page with its metrics and raw output."""

from __future__ import annotations

import json
from uuid import UUID

from django.core.paginator import Paginator
from django.db.models import Count
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.utils import timezone

from experiments import run_story
from experiments.comparison.charts import display_unit
from experiments.comparison.presets import DASHBOARD_PRESETS
from experiments.models import HardwareProfile, Run, Testbed, TuningSet
from experiments.models.runs import Tool


def dashboard(request: HttpRequest) -> HttpResponse:
    context = {
        "presets": DASHBOARD_PRESETS,
        "counts": {
            "hardware": HardwareProfile.objects.count(),
            "testbeds": Testbed.objects.count(),
            "tuning": TuningSet.objects.count(),
            "runs": Run.objects.count(),
        },
        "recent": Run.objects.select_related("testbed", "tuning_set")[:10],
        "studies": (
            Run.objects.filter(published=True)
            .values("source")
            .annotate(n=Count("id"))
            .order_by("source")
        ),
    }
    return render(request, "experiments/dashboard.html", context)


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
    if tool:
        runs = runs.filter(tool=tool)
    if testbed:
        try:
            runs = runs.filter(testbed__uuid=UUID(testbed))
        except ValueError:
            runs = runs.none()
    page = Paginator(runs.order_by("-created", "-id"), 50).get_page(request.GET.get("page"))
    return render(
        request,
        "experiments/run_list.html",
        {
            "page": page,
            "tools": Tool.choices,
            "tool": tool,
            "testbed": testbed,
            "testbeds": Testbed.objects.only("uuid", "name"),
        },
    )


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
            "can_edit": run.can_edit(request.user),
            "config": json.dumps(run.effective_config, indent=2) if run.effective_config else "",
            # Telemetry, bottleneck verdict, latency percentiles (experiments.run_story).
            **run_story.context(run),
        },
    )
