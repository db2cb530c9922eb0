"""Tuning set pages: list, detail with inherited values, edit as .conf text, diff, import/export."""

from __future__ import annotations

from uuid import UUID

from django.contrib import messages
from django.db import transaction
from django.db.models import Count, ProtectedError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.text import slugify
from django.views.decorators.http import require_http_methods

from experiments.forms import ConfImportForm, TuningSetForm
from experiments.models import TuningSet
from experiments.shared.tuning_keys import SCOPES, describe, format_conf, normalise
from experiments.views.common import counted, get_for_user, render_form


def tuningset_list(request: HttpRequest) -> HttpResponse:
    sets = TuningSet.objects.select_related("parent").annotate(n_params=Count("params"))
    return render(request, "experiments/tuningset_list.html", {"sets": sets})


def _effective_rows(tuning_set: TuningSet) -> list[dict]:
    rows = []
    own = {(p.scope, p.key): p for p in tuning_set.params.all()}
    for (scope, key), (value, origin) in sorted(tuning_set.effective_params().items()):
        spec = describe(scope, key)
        param = own.get((scope, key))
        try:
            normalized, known = normalise(scope, key, value)
        except ValueError:
            normalized, known = None, spec is not None
        rows.append(
            {
                "scope": scope,
                "key": key,
                "value": value,
                "normalized": normalized,
                "known": known,
                "help": spec.help if spec else "",
                "inherited_from": None if origin.pk == tuning_set.pk else origin,
                "source_ref": param.source_ref if param else "",
            }
        )
    return rows


def tuningset_detail(request: HttpRequest, uuid: UUID) -> HttpResponse:
    tuning_set = get_for_user(
        request, TuningSet, uuid, queryset=TuningSet.objects.select_related("parent")
    )
    rows = _effective_rows(tuning_set)
    by_scope = [(scope, label, [r for r in rows if r["scope"] == scope]) for scope, label in SCOPES]
    return render(
        request,
        "experiments/tuningset_detail.html",
        {
            "object": tuning_set,
            "by_scope": by_scope,
            "revisions": tuning_set.revisions.select_related("author")[:20],
            "others": TuningSet.objects.exclude(pk=tuning_set.pk).only("uuid", "name"),
            "can_edit": tuning_set.can_edit(request.user),
            "children": tuning_set.children.all(),
        },
    )


@require_http_methods(["GET", "POST"])
def tuningset_edit(request: HttpRequest, uuid: UUID | None = None) -> HttpResponse:
    tuning_set = get_for_user(request, TuningSet, uuid, write=True) if uuid else None
    form = TuningSetForm(request.POST or None, instance=tuning_set, user=request.user)
    if request.method == "POST" and form.is_valid():
        with transaction.atomic():
            saved = form.save(commit=False)
            if tuning_set is None:
                saved.owner = request.user
            saved.save()
            saved.replace_params(form.entries, author=request.user)
        if form.unknown_keys:
            messages.warning(
                request,
                "Saved; keys beeweb does not know (kept as text): " + ", ".join(form.unknown_keys),
            )
        else:
            messages.success(request, f"Saved tuning set {saved} (revision {saved.revision}).")
        return render_form(request, {}, success_url=saved.get_absolute_url())
    return render_form(
        request,
        {
            "form": form,
            "object": tuning_set,
            "title": f"Edit {tuning_set}" if tuning_set else "New tuning set",
            "action": request.path,
            "help": "One 'key = value' per line, as in BeeGFS .conf files; '#' starts a comment. "
            "Sizes such as 512k or 1m become bytes; unknown keys are kept and marked.",
            "cancel": tuning_set.get_absolute_url()
            if tuning_set
            else reverse("experiments:tuningset_list"),
        },
    )


@require_http_methods(["GET", "POST"])
def tuningset_delete(request: HttpRequest, uuid: UUID) -> HttpResponse:
    tuning_set = get_for_user(request, TuningSet, uuid, write=True)
    if request.method == "POST":
        try:
            tuning_set.delete()
        except ProtectedError:
            messages.error(request, f"{tuning_set} is used by runs or by child sets.")
            return redirect(tuning_set.get_absolute_url())
        messages.success(request, f"Deleted tuning set {tuning_set}.")
        return redirect("experiments:tuningset_list")
    return render(
        request,
        "experiments/confirm_delete.html",
        {
            "object": tuning_set,
            "cancel": tuning_set.get_absolute_url(),
        },
    )


def diff_rows(a: TuningSet, b: TuningSet) -> list[dict]:
    """Every effective key of either set with both values and whether they differ."""
    ea, eb = a.effective_params(), b.effective_params()
    rows = []
    for scope, key in sorted(
        set(ea) | set(eb),
        key=lambda sk: (
            [s for s, _ in SCOPES].index(sk[0]) if sk[0] in dict(SCOPES) else 99,
            sk[1],
        ),
    ):
        va, vb = ea.get((scope, key)), eb.get((scope, key))
        na = _norm(scope, key, va[0]) if va else None
        nb = _norm(scope, key, vb[0]) if vb else None
        if va is None:
            state = "only_b"
        elif vb is None:
            state = "only_a"
        else:
            state = "same" if na == nb else "changed"
        rows.append(
            {
                "scope": scope,
                "key": key,
                "a": va[0] if va else None,
                "b": vb[0] if vb else None,
                "state": state,
                "a_from": va[1] if va and va[1].pk != a.pk else None,
                "b_from": vb[1] if vb and vb[1].pk != b.pk else None,
            }
        )
    return rows


def _norm(scope: str, key: str, value: str):
    try:
        return normalise(scope, key, value)[0]
    except ValueError:
        return value


def tuningset_diff(request: HttpRequest) -> HttpResponse:
    sets = TuningSet.objects.only("uuid", "name")
    a_id, b_id = request.GET.get("a"), request.GET.get("b")
    context: dict = {
        "sets": sets,
        "a_id": a_id,
        "b_id": b_id,
        "only_changes": request.GET.get("changes") == "1",
    }
    if a_id and b_id:
        try:
            a = get_for_user(request, TuningSet, UUID(a_id))
            b = get_for_user(request, TuningSet, UUID(b_id))
        except ValueError:
            messages.error(request, "Choose two tuning sets.")
        else:
            rows = diff_rows(a, b)
            context.update(
                a=a,
                b=b,
                rows=[r for r in rows if r["state"] != "same"] if context["only_changes"] else rows,
                n_changed=sum(r["state"] != "same" for r in rows),
            )
    template = "experiments/_tuning_diff.html" if request.htmx else "experiments/tuning_diff.html"
    return render(request, template, context)


def tuningset_export(request: HttpRequest, uuid: UUID, scope: str) -> HttpResponse:
    tuning_set = get_for_user(request, TuningSet, uuid)
    if scope not in dict(SCOPES):
        return HttpResponse(status=404)
    items = [
        (key, value)
        for (s, key), (value, _) in sorted(tuning_set.effective_params().items())
        if s == scope
    ]
    header = (
        f"# beeweb tuning set: {tuning_set.name} (revision {tuning_set.revision})\n"
        f"# scope: {dict(SCOPES)[scope]}\n"
    )
    response = HttpResponse(header + format_conf(items), content_type="text/plain; charset=utf-8")
    filename = f"{slugify(tuning_set.name) or 'tuning'}-{scope}.conf"
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response


@require_http_methods(["GET", "POST"])
def tuningset_import(request: HttpRequest, uuid: UUID) -> HttpResponse:
    tuning_set = get_for_user(request, TuningSet, uuid, write=True)
    form = ConfImportForm(request.POST or None, request.FILES or None)
    if request.method == "POST" and form.is_valid():
        scope = form.cleaned_data["scope"]
        current = {(p.scope, p.key): p.value for p in tuning_set.params.all()}
        for key, value in form.cleaned_data["entries"]:
            current[(scope, key)] = value
        tuning_set.replace_params([(s, k, v) for (s, k), v in current.items()], author=request.user)
        messages.success(
            request,
            f"Imported {counted(len(form.cleaned_data['entries']), 'key')} into "
            f"{dict(SCOPES)[scope]}.",
        )
        return render_form(request, {}, success_url=tuning_set.get_absolute_url())
    return render_form(
        request,
        {
            "form": form,
            "object": tuning_set,
            "title": f"Import .conf into {tuning_set}",
            "action": request.path,
            "multipart": True,
            "cancel": tuning_set.get_absolute_url(),
        },
    )
