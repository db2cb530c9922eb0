"""Reports (saved comparisons) and share links.

A share link opens without login (``login_not_required``), read-only (GET/HEAD only) and shows
the comparison frozen as it was when the link was made; signed-in users may switch to live
data with ``?live=1``. A revoked, expired or unknown key answers 404.
"""

from __future__ import annotations

import datetime as dt
import re
from functools import wraps
from uuid import UUID

from django.contrib import messages
from django.contrib.auth.decorators import login_not_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods, require_POST, require_safe

from experiments import comparison
from experiments.comparison import ComparisonResult, ComparisonSpec, latency_sweep
from experiments.comparison.reports import (
    MAX_EXPIRY_DAYS,
    chart_settings,
    create_share_link,
    data_query,
    report_spec,
    revoke_share_link,
)
from experiments.models import Report, Run, ShareLink
from experiments.views.common import confirm_page, get_for_user
from experiments.views.compare import charts_payload, export_response


@require_safe
def report_list(request: HttpRequest) -> HttpResponse:
    reports = Report.objects.select_related("owner")
    return render(request, "experiments/report_list.html", {"reports": reports})


@require_POST
def report_new(request: HttpRequest) -> HttpResponse:
    spec = ComparisonSpec.from_query(request.POST.get("query", ""))
    title = request.POST.get("title", "").strip()[:200]
    if not title:
        messages.error(request, "A report needs a title.")
        return redirect(f"{reverse('experiments:compare')}?{spec.to_query()}")
    report = Report.objects.create(
        owner=request.user,
        title=title,
        description=request.POST.get("description", "").strip(),
        query=data_query(spec),
        chart=chart_settings(spec),
    )
    messages.success(request, f"Saved the report “{report.title}”.")
    return redirect(report)


def _report_context(request: HttpRequest, report: Report) -> dict:
    spec = report_spec(report)
    runs = Run.objects.visible_to(request.user)
    result = comparison.compute(spec, runs)
    return {
        "report": report,
        "spec": spec,
        "result": result,
        "latency_sweep": latency_sweep.comparison_context(spec, runs),
        "charts_json": charts_payload(result),
        "can_edit": report.can_edit(request.user),
        "links": report.share_links.all(),
        "builder_url": f"{reverse('experiments:compare')}?{spec.to_query()}",
        "export_csv": f"{reverse('experiments:compare_export', args=['csv'])}?{spec.to_query()}",
        "export_json": f"{reverse('experiments:compare_export', args=['json'])}?{spec.to_query()}",
        "print_url": reverse("experiments:report_print", args=[report.uuid]),
    }


@never_cache  # lists the share links, whose keys open the report without login
@require_safe
def report_detail(request: HttpRequest, uuid: UUID) -> HttpResponse:
    report = get_for_user(request, Report, uuid)
    return render(request, "experiments/report_detail.html", _report_context(request, report))


@require_safe
def report_print(request: HttpRequest, uuid: UUID) -> HttpResponse:
    report = get_for_user(request, Report, uuid)
    context = _report_context(request, report)
    return render(
        request,
        "experiments/comparison_print.html",
        {
            **context,
            "title": report.title,
            "description": report.description,
            "source": "live data",
        },
    )


@require_POST
def report_edit(request: HttpRequest, uuid: UUID) -> HttpResponse:
    report = get_for_user(request, Report, uuid, write=True)
    title = request.POST.get("title", "").strip()[:200]
    if title:
        report.title = title
    report.description = request.POST.get("description", report.description).strip()
    if "query" in request.POST:
        spec = ComparisonSpec.from_query(request.POST["query"])
        report.query, report.chart = data_query(spec), chart_settings(spec)
    report.save()
    messages.success(request, "Report updated.")
    return redirect(report)


@require_POST
def report_delete(request: HttpRequest, uuid: UUID) -> HttpResponse:
    report = get_for_user(request, Report, uuid, write=True)
    report.delete()
    messages.success(request, f"Deleted the report “{report.title}” and its share links.")
    return redirect("experiments:report_list")


@require_POST
def share_create(request: HttpRequest, uuid: UUID) -> HttpResponse:
    report = get_for_user(request, Report, uuid, write=True)
    expires_at = None
    days = request.POST.get("expires_days", "").strip()
    if days:
        try:
            n = int(days)
            if not 1 <= n <= MAX_EXPIRY_DAYS:
                raise ValueError
        except ValueError:
            messages.error(request, f"Expiry must be 1 to {MAX_EXPIRY_DAYS} days.")
            return redirect(report)
        expires_at = timezone.now() + dt.timedelta(days=n)
    link = create_share_link(report, request.user, expires_at)
    messages.success(request, "Share link created: it shows the data as of now.")
    return redirect(f"{report.get_absolute_url()}#link-{link.pk}")


@require_http_methods(["GET", "POST"])
def share_revoke(request: HttpRequest, uuid: UUID, key: str) -> HttpResponse:
    report = get_for_user(request, Report, uuid, write=True)
    link = report.share_links.filter(key=key).first()
    if link is None:
        raise Http404("No such share link.")
    if request.method == "GET":
        return confirm_page(
            request,
            "Revoke this share link?",
            "Revoke",
            report.get_absolute_url(),
            "Whoever opens it afterwards gets a page saying it no longer works.",
        )
    revoke_share_link(link)
    messages.success(request, "Share link revoked: it now answers 404.")
    return redirect(report)


# Keys are secrets.token_urlsafe(32); anything else (a NUL character, which PostgreSQL
# refuses in a query, included) is no share link and never reaches the database.
_SHARE_KEY = re.compile(r"[A-Za-z0-9_-]{20,64}\Z")


class ShareGone(Http404):
    """No active share link has this key."""


def _active_link(key: str) -> ShareLink:
    link = (
        ShareLink.objects.active().select_related("report").filter(key=key).first()
        if _SHARE_KEY.match(key)
        else None
    )
    if link is None:
        raise ShareGone("This share link does not exist, was revoked or has expired.")
    return link


def _gone(request: HttpRequest) -> HttpResponse:
    """The page a dead share link answers (status 404): in the site's style, one sentence
    for every case, so that a guessed key learns nothing about which keys once existed."""
    return _private(render(request, "experiments/share_gone.html", status=404))


def _share_view(view):
    """A share view that answers the styled 404 page when the link is not active."""

    @wraps(view)
    def wrapped(request: HttpRequest, key: str, *args, **kwargs) -> HttpResponse:
        try:
            return view(request, key, *args, **kwargs)
        except ShareGone:
            return _gone(request)

    return wrapped


def _share_data(request: HttpRequest, link: ShareLink) -> tuple[ComparisonResult, dict, bool]:
    """The comparison and its latency charts a share link shows: frozen as shared, or live
    (a signed-in colleague, over the runs they may see); and whether live."""
    live = request.GET.get("live") == "1" and request.user.is_authenticated
    if live:
        spec = ComparisonSpec.from_query(link.snapshot.get("query", ""))
        runs = Run.objects.visible_to(request.user)
        return (
            comparison.compute(spec, runs),
            latency_sweep.comparison_context(spec, runs),
            True,
        )
    # Links made before the latency charts were frozen with the rest have none.
    frozen = link.snapshot.get("latency_sweep") or {}
    return ComparisonResult.from_json(link.snapshot.get("result", {})), frozen, False


def _private(response: HttpResponse) -> HttpResponse:
    response["X-Robots-Tag"] = "noindex, nofollow"
    response["Referrer-Policy"] = "no-referrer"
    response["Cache-Control"] = "private, no-store"
    return response


@login_not_required
@require_safe
@_share_view
def share(request: HttpRequest, key: str) -> HttpResponse:
    link = _active_link(key)
    result, sweep, live = _share_data(request, link)
    base = reverse("experiments:share", args=[key])
    return _private(
        render(
            request,
            "experiments/share.html",
            {
                "link": link,
                "result": result,
                "latency_sweep": sweep,
                "live": live,
                "charts_json": charts_payload(result),
                "title": link.snapshot.get("title") or link.report.title,
                "description": link.snapshot.get("description", ""),
                "suffix": "?live=1" if live else "",
                "export_csv": reverse("experiments:share_export", args=[key, "csv"])
                + ("?live=1" if live else ""),
                "export_json": reverse("experiments:share_export", args=[key, "json"])
                + ("?live=1" if live else ""),
                "print_url": reverse("experiments:share_print", args=[key])
                + ("?live=1" if live else ""),
                "frozen_url": base,
                "live_url": f"{base}?live=1",
            },
        )
    )


@login_not_required
@require_safe
@_share_view
def share_print(request: HttpRequest, key: str) -> HttpResponse:
    link = _active_link(key)
    result, sweep, live = _share_data(request, link)
    return _private(
        render(
            request,
            "experiments/comparison_print.html",
            {
                "title": link.snapshot.get("title") or link.report.title,
                "description": link.snapshot.get("description", ""),
                "result": result,
                "latency_sweep": sweep,
                "charts_json": charts_payload(result),
                "source": "live data" if live else "data as shared",
            },
        )
    )


@login_not_required
@require_safe
@_share_view
def share_export(request: HttpRequest, key: str, fmt: str) -> HttpResponse:
    link = _active_link(key)
    result, sweep, live = _share_data(request, link)
    return _private(
        export_response(
            result,
            fmt,
            "beeweb-report",
            {
                "title": link.snapshot.get("title", ""),
                "query": link.snapshot.get("query", ""),
                "data": "live" if live else "frozen",
            },
            sweep=sweep,
        )
    )
