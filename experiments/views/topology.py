"""Testbed inventory from pasted BeeGFS CLI output: paste or upload, preview, then save."""

from __future__ import annotations

from uuid import UUID

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from experiments.forms import TopologyImportForm, visible
from experiments.inventory.topology import apply_topology, plan_topology
from experiments.models import HardwareProfile, Testbed
from experiments.shared.utils import is_uuid
from experiments.views.common import get_for_user

TEMPLATE = "experiments/testbed_topology_import.html"


@require_http_methods(["GET", "POST"])
def testbed_topology_import(request: HttpRequest, uuid: UUID) -> HttpResponse:
    testbed = get_for_user(request, Testbed, uuid, write=True)
    if request.method == "POST" and request.POST.get("action") == "save":
        return _save(request, testbed)
    form = TopologyImportForm(request.POST or None, request.FILES or None, user=request.user)
    context: dict = {"form": form, "object": testbed}
    if request.method != "POST" or not form.is_valid():
        return render(request, TEMPLATE, context)

    items = form.cleaned_data["items"]
    plan = plan_topology(
        testbed,
        [(text, node_type or None) for _, _, text, node_type in items],
        labels=[label for _, label, _, _ in items],
    )
    if plan.errors:
        # Back to the form, each error under the box (or upload) its text came from.
        for error in plan.errors:
            form.add_error(items[error.index][0], f"{error.label}: {error}")
        return render(request, TEMPLATE, context)
    if plan.is_empty:
        form.add_error(None, "The outputs list no nodes, targets, pools or buddy groups.")
        return render(request, TEMPLATE, context)
    profile = form.cleaned_data["profile"]
    context.update(
        plan=plan,
        summary=apply_topology(testbed, plan, request.user, profile=profile, dry_run=True),
        items=[
            {"label": label, "text": text, "node_type": node_type}
            for _, label, text, node_type in items
        ],
        profile=profile,
    )
    return render(request, TEMPLATE, context)


def _save(request: HttpRequest, testbed: Testbed) -> HttpResponse:
    labels = request.POST.getlist("item_label")
    texts = request.POST.getlist("item_text")
    node_types = request.POST.getlist("item_node_type")
    profile_uuid = request.POST.get("profile", "")
    profile = None
    if profile_uuid and is_uuid(profile_uuid):
        profile = visible(HardwareProfile, request.user).filter(uuid=profile_uuid).first()
    again = redirect("experiments:testbed_topology_import", testbed.uuid)
    if (
        not texts
        or not (len(labels) == len(texts) == len(node_types))
        or (profile_uuid and profile is None)
    ):
        messages.error(request, "The import was incomplete; start again.")
        return again
    plan = plan_topology(
        testbed, [(t, nt or None) for t, nt in zip(texts, node_types, strict=True)], labels=labels
    )
    if plan.errors or plan.is_empty:
        messages.error(request, "The pasted output could not be read any more; start again.")
        return again
    summary = apply_topology(testbed, plan, request.user, profile=profile)
    messages.success(request, f"Imported the BeeGFS topology: {summary.describe()}.")
    for warning in summary.warnings:
        messages.warning(request, warning)
    return redirect(testbed.get_absolute_url())
