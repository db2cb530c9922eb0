"""Inventory pages: hardware profiles, nodes and testbeds, with their parts edited inline."""

from __future__ import annotations

from dataclasses import dataclass
from uuid import UUID

from django.contrib import messages
from django.db.models import Count, ProtectedError
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods

from experiments import forms
from experiments.inventory.limits import compute_limits
from experiments.models import (
    Drive,
    HardwareProfile,
    Nic,
    Node,
    StoragePool,
    Target,
    Testbed,
    TestbedNode,
)
from experiments.shared import keyset
from experiments.views.common import get_for_user, render_form


@dataclass(frozen=True)
class Kind:
    """One top-level inventory model and how its pages look."""

    slug: str
    model: type
    form: type
    title: str
    plural: str
    columns: tuple[tuple[str, str], ...]  # (attribute, heading)

    def url(self, view: str = "list", *args) -> str:
        name = self.slug if view == "detail" else f"{self.slug}_{view}"
        return reverse(f"experiments:{name}", args=args)

    @property
    def list_url(self) -> str:
        return self.url("list")

    @property
    def new_url(self) -> str:
        return self.url("new")


KINDS = {
    "hardware": Kind(
        "hardware",
        HardwareProfile,
        forms.HardwareProfileForm,
        "hardware profile",
        "Hardware profiles",
        (
            ("name", "Name"),
            ("vendor", "Vendor"),
            ("get_architecture_display", "Arch"),
            ("cpu_model", "CPU"),
            ("memory_gib", "Memory (GiB)"),
        ),
    ),
    "node": Kind(
        "node",
        Node,
        forms.NodeForm,
        "node",
        "Nodes",
        (
            ("hostname", "Hostname"),
            ("profile", "Profile"),
            ("address", "Address"),
            ("os", "OS"),
            ("kernel", "Kernel"),
        ),
    ),
    "testbed": Kind(
        "testbed",
        Testbed,
        forms.TestbedForm,
        "testbed",
        "Testbeds",
        (
            ("name", "Name"),
            ("beegfs_version", "BeeGFS"),
            ("get_fabric_display", "Fabric"),
            ("member_count", "Nodes"),
            ("target_count", "Targets"),
        ),
    ),
}


PREFIXES = {"hardware": "hardware", "node": "nodes", "testbed": "testbeds"}
KIND_BY_PREFIX = {prefix: kind for kind, prefix in PREFIXES.items()}


def _kind(slug: str) -> Kind:
    try:
        return KINDS[slug]
    except KeyError:
        raise Http404 from None


def object_list(request: HttpRequest, kind: str) -> HttpResponse:
    k = _kind(kind)
    objects = k.model.objects.all()
    if k.model is Node:
        objects = objects.select_related("profile")
    if k.model is Testbed:
        objects = objects.annotate(
            member_count=Count("members", distinct=True),
            target_count=Count("targets", distinct=True),
        )
    show = request.GET.get("show", "all")
    if show == "mine":
        objects = objects.filter(owner=request.user)
    elif show == "published":
        objects = objects.filter(published=True)
    rows = [(obj, [_cell(obj, attr) for attr, _ in k.columns]) for obj in objects]
    return render(
        request,
        "experiments/object_list.html",
        {
            "kind": k,
            "rows": rows,
            "show": show,
        },
    )


def _cell(obj, attr: str):
    value = getattr(obj, attr)
    return value() if callable(value) else value


def object_detail(request: HttpRequest, kind: str, uuid: UUID) -> HttpResponse:
    k = _kind(kind)
    obj = get_for_user(request, k.model, uuid)
    context = {
        "kind": k,
        "object": obj,
        "can_edit": obj.can_edit(request.user),
        "edit_url": k.url("edit", obj.uuid),
        "delete_url": k.url("delete", obj.uuid),
        "prefix": PREFIXES[kind],
    }
    if k.model is HardwareProfile:
        context.update(drives=obj.drives.all(), nics=obj.nics.all(), nodes=obj.nodes.all())
    elif k.model is Node:
        context.update(memberships=obj.memberships.select_related("testbed"))
    elif k.model is Testbed:
        context.update(
            members=obj.members.select_related("node__profile"),
            targets=obj.targets.select_related("node", "drive", "pool"),
            pools=obj.pools.annotate(n_targets=Count("targets")),
            limits=compute_limits(obj),
            # Bounded like the run list's (never a count of every run at a million runs).
            run_total=keyset.total(obj.runs.all(), keyset.Key.of(("-created", "-id"))),
            operators=obj.operators.order_by("username"),
            operator_groups=obj.operator_groups.order_by("name"),
            can_operate=obj.can_operate(request.user),
            operator_form=forms.OperatorForm(testbed=obj) if context["can_edit"] else None,
        )
    return render(request, f"experiments/{kind}_detail.html", context)


@require_http_methods(["GET", "POST"])
def object_edit(request: HttpRequest, kind: str, uuid: UUID | None = None) -> HttpResponse:
    k = _kind(kind)
    obj = get_for_user(request, k.model, uuid, write=True) if uuid else None
    form = k.form(request.POST or None, instance=obj, user=request.user)
    if request.method == "POST" and form.is_valid():
        saved = form.save(commit=False)
        if obj is None:
            saved.owner = request.user
        saved.save()
        messages.success(request, f"Saved {k.title} {saved}.")
        return render_form(request, {}, success_url=saved.get_absolute_url())
    return render_form(
        request,
        {
            "form": form,
            "kind": k,
            "object": obj,
            "title": f"Edit {obj}" if obj else f"New {k.title}",
            "action": request.path,
            "cancel": obj.get_absolute_url() if obj else k.list_url,
        },
    )


@require_http_methods(["POST"])
def testbed_operators(request: HttpRequest, uuid: UUID) -> HttpResponse:
    """Grant or revoke operator rights on a testbed (its owner and staff only)."""
    testbed = get_for_user(request, Testbed, uuid, write=True)
    form = forms.OperatorForm(request.POST, testbed=testbed)
    if form.is_valid():
        messages.success(request, form.apply())
    else:
        errors = [e for field_errors in form.errors.values() for e in field_errors]
        messages.error(request, " ".join(errors))
    return redirect(f"{testbed.get_absolute_url()}#operators")


@require_http_methods(["GET", "POST"])
def object_delete(request: HttpRequest, kind: str, uuid: UUID) -> HttpResponse:
    k = _kind(kind)
    obj = get_for_user(request, k.model, uuid, write=True)
    if request.method == "POST":
        try:
            obj.delete()
        except ProtectedError as exc:
            blockers = sorted({str(o) for o in exc.protected_objects})[:5]
            messages.error(request, f"{obj} is still used by: {', '.join(blockers)}.")
            return redirect(obj.get_absolute_url())
        messages.success(request, f"Deleted {k.title} {obj}.")
        return redirect(k.list_url)
    return render(
        request,
        "experiments/confirm_delete.html",
        {
            "object": obj,
            "kind": k,
            "cancel": obj.get_absolute_url(),
        },
    )


@dataclass(frozen=True)
class Part:
    """A row edited inline on its parent's page (drives and NICs of a profile, …)."""

    parent_kind: str
    model: type
    form: type
    fk: str
    title: str


PARTS = {
    ("hardware", "drive"): Part("hardware", Drive, forms.DriveForm, "profile", "drive"),
    ("hardware", "nic"): Part("hardware", Nic, forms.NicForm, "profile", "NIC"),
    ("testbed", "member"): Part(
        "testbed", TestbedNode, forms.TestbedNodeForm, "testbed", "node role"
    ),
    ("testbed", "target"): Part("testbed", Target, forms.TargetForm, "testbed", "target"),
    ("testbed", "pool"): Part(
        "testbed", StoragePool, forms.StoragePoolForm, "testbed", "storage pool"
    ),
}


def _part(kind: str, part: str) -> Part:
    try:
        return PARTS[(kind, part)]
    except KeyError:
        raise Http404 from None


@require_http_methods(["GET", "POST"])
def part_edit(
    request: HttpRequest, prefix: str, uuid: UUID, part: str, part_uuid: UUID | None = None
) -> HttpResponse:
    kind = KIND_BY_PREFIX.get(prefix, "")
    p = _part(kind, part)
    parent = get_for_user(request, KINDS[kind].model, uuid, write=True)
    instance = get_object_or_404(p.model, uuid=part_uuid, **{p.fk: parent}) if part_uuid else None
    form = p.form(request.POST or None, instance=instance, parent=parent, user=request.user)
    if request.method == "POST" and form.is_valid():
        saved = form.save(commit=False)
        setattr(saved, p.fk, parent)
        saved.save()
        messages.success(request, f"Saved {p.title}.")
        return render_form(request, {}, success_url=parent.get_absolute_url())
    return render_form(
        request,
        {
            "form": form,
            "object": parent,
            "title": f"{'Edit' if instance else 'Add'} {p.title} — {parent}",
            "action": request.path,
            "cancel": parent.get_absolute_url(),
        },
    )


@require_http_methods(["POST"])
def part_delete(
    request: HttpRequest, prefix: str, uuid: UUID, part: str, part_uuid: UUID
) -> HttpResponse:
    kind = KIND_BY_PREFIX.get(prefix, "")
    p = _part(kind, part)
    parent = get_for_user(request, KINDS[kind].model, uuid, write=True)
    instance = get_object_or_404(p.model, uuid=part_uuid, **{p.fk: parent})
    try:
        instance.delete()
        messages.success(request, f"Removed {p.title} {instance}.")
    except ProtectedError:
        messages.error(request, f"{instance} is still in use.")
    return render_form(request, {}, success_url=parent.get_absolute_url())
