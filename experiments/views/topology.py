"""Testbed inventory from BeeGFS CLI output: pasted or uploaded, or read from the live cluster
by a node's worker; preview, then save."""

from __future__ import annotations

from datetime import timedelta
from uuid import UUID

from django.conf import settings
from django.contrib import messages
from django.core.exceptions import BadRequest, PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.http import require_http_methods

from experiments.execution.noderequests import NodeRequestError, ask
from experiments.forms import TopologyImportForm, visible
from experiments.inventory.live import LiveError, differences, plan_live, read_answer
from experiments.inventory.topology import apply_topology, plan_topology
from experiments.matrices.launching import node_problem
from experiments.matrices.livecheck import live_node_choices
from experiments.models import HardwareProfile, Node, NodeRequest, Testbed
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


# --- from the live cluster ---------------------------------------------------------------

LIVE_TEMPLATE = "experiments/testbed_topology_live.html"
# A preview's answer may be saved for this long; later, the cluster is asked again.
LIVE_ANSWER_TTL = timedelta(hours=1)


def _live_context(testbed: Testbed, user, **extra) -> dict:
    choices = live_node_choices(testbed)
    return {
        "object": testbed,
        "choices": choices,
        "chosen": extra.pop("chosen", None) or (choices[0].uuid if choices else None),
        "profiles": visible(HardwareProfile, user).order_by("name"),
        "timeout": settings.LIVE_TOPOLOGY_SECONDS,
        **extra,
    }


def _chosen_node(request: HttpRequest, testbed: Testbed, value: str) -> Node:
    """The node the form names: 400 for no or a malformed choice, 404 for no such node, 403
    for a node this testbed's runs may not use (another user's node they do not share)."""
    if not value or not is_uuid(value):
        raise BadRequest("Choose the node whose worker reads the live cluster.")
    node = Node.objects.filter(uuid=value).select_related("owner").first()
    if node is None:
        raise Http404("No such node.")
    problem = node_problem(testbed, node)
    if problem:
        raise PermissionDenied(f"This node cannot be asked for this testbed: {problem}.")
    return node


@require_http_methods(["GET", "POST"])
def testbed_topology_live(request: HttpRequest, uuid: UUID) -> HttpResponse:
    """Read the testbed's running cluster through a node's worker (a node request its agent
    answers), preview the import as for pasted output, then save it, remembering the node."""
    testbed = get_for_user(request, Testbed, uuid, write=True)
    if request.method == "GET":
        return render(request, LIVE_TEMPLATE, _live_context(testbed, request.user))
    node = _chosen_node(request, testbed, request.POST.get("node", ""))
    profile_uuid = request.POST.get("profile", "")
    profile = None
    if profile_uuid:
        if not is_uuid(profile_uuid):
            raise BadRequest("No such hardware profile.")
        profile = visible(HardwareProfile, request.user).filter(uuid=profile_uuid).first()
        if profile is None:
            raise BadRequest("No such hardware profile.")
    if request.POST.get("action") == "save":
        return _live_save(request, testbed, node, profile)
    context = _live_context(testbed, request.user, chosen=node.uuid, profile=profile)
    try:
        answer = ask(
            node.hostname,
            NodeRequest.Kind.BEEGFS_TOPOLOGY,
            user=request.user,
            timeout=settings.LIVE_TOPOLOGY_SECONDS,
        )
        live = read_answer(answer.result)
    except (NodeRequestError, LiveError) as exc:
        context["ask_error"] = f"{node.hostname} could not tell the live topology: {exc}"
        return render(request, LIVE_TEMPLATE, context)
    plan = plan_live(testbed, live)
    if plan.errors or plan.is_empty:
        problems = "; ".join(f"{e.label}: {e}" for e in plan.errors) or "nothing listed"
        context["ask_error"] = f"The listings of {node.hostname} could not be read: {problems}"
        return render(request, LIVE_TEMPLATE, context)
    context.update(
        node=node,
        answer=answer,
        live=live,
        plan=plan,
        summary=apply_topology(testbed, plan, request.user, profile=profile, dry_run=True),
        # A first import has nothing to differ from: every row would read "added".
        drift=differences(testbed, live)
        if testbed.targets.filter(target_id__isnull=False).exists()
        else [],
    )
    return render(request, LIVE_TEMPLATE, context)


def _live_save(
    request: HttpRequest, testbed: Testbed, node: Node, profile: HardwareProfile | None
) -> HttpResponse:
    """Save the answer the preview showed: read again from the database (the form carries
    only its UUID), so what is saved is what the node said, not what a form posts."""
    again = redirect("experiments:testbed_topology_live", testbed.uuid)
    value = request.POST.get("answer", "")
    answer = None
    if is_uuid(value):
        answer = NodeRequest.objects.filter(
            uuid=value,
            kind=NodeRequest.Kind.BEEGFS_TOPOLOGY,
            hostname=node.hostname,
            requested_by=request.user,
            answered_at__isnull=False,
            error="",
            created_at__gte=timezone.now() - LIVE_ANSWER_TTL,
        ).first()
    if answer is None:
        messages.error(request, "That reading of the live cluster is gone or too old: read again.")
        return again
    try:
        plan = plan_live(testbed, read_answer(answer.result))
    except LiveError as exc:
        messages.error(request, f"The reading could not be used: {exc}")
        return again
    if plan.errors or plan.is_empty:
        messages.error(request, "The reading could not be used any more; read it again.")
        return again
    summary = apply_topology(testbed, plan, request.user, profile=profile)
    Testbed.objects.filter(pk=testbed.pk).update(live_node=node, live_imported_at=timezone.now())
    messages.success(
        request,
        f"Imported the live BeeGFS topology read by {node.hostname}: {summary.describe()}.",
    )
    for warning in summary.warnings:
        messages.warning(request, warning)
    return redirect(testbed.get_absolute_url())
