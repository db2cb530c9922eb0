"""Change points: the inbox (acknowledge, mute, mark expected, with a note), one change
point's page, and the history pages of a configuration and of a testbed.

Every signed-in user reads them (the lab's shared results, as runs); changing a state needs
an operator of the change point's testbed (``experiments.api.changes.may_change``)."""

from __future__ import annotations

import re
from uuid import UUID

from django import forms
from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.db.models import Count
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST, require_safe

from experiments.api.changes import NOTE_MAX, may_change, set_state
from experiments.changes import history
from experiments.models import ChangePoint, Testbed
from experiments.shared import keyset
from experiments.views.common import get_for_user, safe_next

PAGE = 50
_KEY = keyset.Key.of(("-at", "-id"))
_CONFIG_KEY = re.compile(r"[0-9a-f]{32}")
_METRIC = re.compile(r"[a-z][a-z0-9_]{0,39}")


class StateForm(forms.Form):
    state = forms.ChoiceField(choices=ChangePoint.State.choices)
    note = forms.CharField(max_length=NOTE_MAX, required=False)


def _with_runs(changes):
    return changes.select_related("testbed", "run", "previous_run", "state_by")


def _get(uuid: UUID) -> ChangePoint:
    return get_object_or_404(
        _with_runs(ChangePoint.objects.filter(testbed__published=False)), uuid=uuid
    )


def _rows(request: HttpRequest, changes: list[ChangePoint]) -> list[dict]:
    """The rows of a list of change points, with whether the user may change each (one query
    for every testbed of the page: ``Testbed.operable_by``)."""
    testbeds = {cp.testbed_id for cp in changes}
    operable = set(
        Testbed.objects.operable_by(request.user)
        .filter(pk__in=testbeds)
        .values_list("pk", flat=True)
    ) if testbeds else set()  # fmt: skip
    return [
        {
            "cp": cp,
            "before": history.value_text(cp.before_mean, cp.unit),
            "after": history.value_text(cp.after_mean, cp.unit),
            "can_change": cp.testbed_id in operable,
            "form": StateForm(initial={"state": cp.state, "note": cp.state_note}),
        }
        for cp in changes
    ]


@require_safe
def change_list(request: HttpRequest) -> HttpResponse:
    """The inbox: change points in one state (new by default), newest first, 50 a page."""
    state = request.GET.get("state") or ChangePoint.State.NEW
    if state not in ChangePoint.State.values and state != "all":
        state = ChangePoint.State.NEW
    changes = ChangePoint.objects.filter(testbed__published=False)
    if state != "all":
        changes = changes.filter(state=state)
    testbed = None
    if request.GET.get("testbed"):
        try:
            testbed = get_for_user(request, Testbed, UUID(request.GET["testbed"]))
        except ValueError:
            raise Http404("No such testbed.") from None
        changes = changes.filter(testbed=testbed)
    try:
        found = keyset.page(_with_runs(changes), _KEY, PAGE, request.GET.get("cursor"))
    except keyset.BadCursor:
        raise Http404("Invalid cursor: follow the page's links.") from None
    counts = dict(
        ChangePoint.objects.filter(testbed__published=False)
        .order_by()
        .values_list("state")
        .annotate(n=Count("id"))
    )
    tabs = [(value, label, counts.get(value, 0)) for value, label in ChangePoint.State.choices]
    return render(
        request,
        "experiments/change_list.html",
        {
            "rows": _rows(request, found.rows),
            "state": state,
            "tabs": tabs,
            "testbed": testbed,
            "next_cursor": found.next,
            "previous_cursor": found.previous,
        },
    )


@require_safe
def change_detail(request: HttpRequest, uuid: UUID) -> HttpResponse:
    cp = _get(uuid)
    (row,) = _rows(request, [cp])
    return render(request, "experiments/change_detail.html", {"row": row, "cp": cp})


@require_POST
def change_state(request: HttpRequest, uuid: UUID) -> HttpResponse:
    """Acknowledge, mute or mark expected (with a note): the testbed's operators only. htmx
    gets the change point's row again; a plain form post goes back where it came from."""
    cp = _get(uuid)
    if not may_change(request.user, cp):
        raise PermissionDenied("Only an operator of the change point's testbed may change it.")
    form = StateForm(request.POST)
    if not form.is_valid():
        errors = "; ".join(f"{k}: {' '.join(v)}" for k, v in form.errors.items())
        if request.htmx:
            return HttpResponse(errors, status=400)
        messages.error(request, f"Not changed: {errors}")
        return redirect(safe_next(request, cp.get_absolute_url()))
    set_state(cp, request.user, form.cleaned_data["state"], form.cleaned_data["note"])
    if request.htmx:
        (row,) = _rows(request, [cp])
        return render(request, "experiments/_change_row.html", {"row": row})
    messages.success(request, f"Change point marked {cp.state}.")
    return redirect(safe_next(request, cp.get_absolute_url()))


@require_safe
def config_history(request: HttpRequest, key: str) -> HttpResponse:
    """One configuration's metric over time, its change points marked and listed."""
    if not _CONFIG_KEY.fullmatch(key):
        raise Http404("No such configuration.")
    metrics = history.metrics_of(key)
    if not metrics:
        raise Http404("No runs of this configuration have a headline metric.")
    metric = request.GET.get("metric") or metrics[0]
    if metric not in metrics:
        metric = metrics[0]
    ln = history.line(key, metric)
    text = ln.changes[0].configuration if ln.changes else history._text_of(key)
    ln.name = metric
    return render(
        request,
        "experiments/config_history.html",
        {
            "key": key,
            "metric": metric,
            "metrics": metrics,
            "text": text,
            "line": ln,
            "figure": history.figure([ln]),
            "rows": _rows(request, list(reversed(ln.changes))),
            "shown": len(ln.points),
            "total": ln.total,
        },
    )


@require_safe
def testbed_history(request: HttpRequest, uuid: UUID) -> HttpResponse:
    """A testbed's configurations with the most runs over time, and its change points (newest
    first, 50 a page)."""
    testbed = get_for_user(request, Testbed, uuid)
    metric = request.GET.get("metric") or None
    if metric and not _METRIC.fullmatch(metric):
        metric = None
    lines = history.testbed_lines(testbed.pk, metric)
    changes = ChangePoint.objects.filter(testbed=testbed)
    try:
        found = keyset.page(_with_runs(changes), _KEY, PAGE, request.GET.get("cursor"))
    except keyset.BadCursor:
        raise Http404("Invalid cursor: follow the page's links.") from None
    return render(
        request,
        "experiments/testbed_history.html",
        {
            "testbed": testbed,
            "metric": metric or "",
            "lines": lines,
            "figure": history.figure(lines) if lines else None,
            "rows": _rows(request, found.rows),
            "next_cursor": found.next,
            "previous_cursor": found.previous,
            "max_configs": history.MAX_CONFIGS,
            "max_points": history.TESTBED_POINTS,
            "recent_runs": history.RECENT_RUNS,
        },
    )
