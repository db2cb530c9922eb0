"""Saving reports and sharing them: what the report pages (experiments/views/reports.py) and
the API (experiments/api/) both do, in one place.

A report stores the comparison's data selection (``query``) apart from its chart settings
(``chart``). A share link freezes the comparison as it is when the link is made
(``snapshot``); revoking it keeps the row (who shared what, when) but makes it answer 404.
"""

from __future__ import annotations

import datetime as dt
from urllib.parse import urlencode

from django.utils import timezone

from experiments import comparison
from experiments.comparison import ComparisonResult, ComparisonSpec, latency_sweep
from experiments.models import Report, Run, ShareLink

MAX_EXPIRY_DAYS = 3650


def data_query(spec: ComparisonSpec) -> str:
    """The spec's query without its chart settings (those are stored apart)."""
    chart_keys = set(spec.chart_settings())
    return urlencode([(k, v) for k, v in spec.query_pairs() if k not in chart_keys])


def chart_settings(spec: ComparisonSpec) -> dict:
    """The spec's chart settings that differ from nothing (what ``Report.chart`` holds)."""
    return {k: v for k, v in spec.chart_settings().items() if v}


def full_query(report: Report) -> str:
    """A report's whole state as a query string: its data selection plus its chart settings
    (in the spec's order: jsonb does not keep the order of keys)."""
    order = list(ComparisonSpec().chart_settings())
    chart = sorted(
        (report.chart or {}).items(),
        key=lambda kv: (order.index(kv[0]) if kv[0] in order else len(order), kv[0]),
    )
    extra = urlencode([(k, v) for k, v in chart if v not in ("", None)])
    return "&".join(part for part in (report.query, extra) if part)


def report_spec(report: Report) -> ComparisonSpec:
    """What a report compares (the models know nothing of comparisons)."""
    return ComparisonSpec.from_query(full_query(report))


def snapshot(report: Report, result: ComparisonResult | None = None) -> dict:
    """What a share link shows: the comparison computed now over every run, frozen."""
    spec = report_spec(report)
    if result is None:
        result = comparison.compute(spec, Run.objects.all())
    return {
        "query": spec.to_query(),
        "title": report.title,
        "description": report.description,
        "result": result.to_json(),
        # The page's latency charts (iodepth / numjobs on x), frozen with the rest.
        "latency_sweep": latency_sweep.comparison_context(spec, Run.objects.all()),
    }


def latest_expiry() -> dt.datetime:
    return timezone.now() + dt.timedelta(days=MAX_EXPIRY_DAYS)


def create_share_link(report: Report, user, expires_at: dt.datetime | None = None) -> ShareLink:
    """A new share link of ``report`` showing its comparison frozen as of now."""
    return ShareLink.objects.create(
        report=report, created_by=user, expires_at=expires_at, snapshot=snapshot(report)
    )


def revoke_share_link(link: ShareLink) -> ShareLink:
    """Make the link answer 404 from now on (idempotent: the first revocation time stays)."""
    if not link.revoked_at:
        link.revoked_at = timezone.now()
        link.save(update_fields=["revoked_at"])
    return link
