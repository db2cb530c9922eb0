"""Announcing new change points to the subscribers of their testbed and matrix
(experiments.alerts.notify; docs/design-notes.md, "Change points" and "Alerts")."""

from __future__ import annotations

import logging

from django.conf import settings
from django.db import transaction
from django.urls import reverse
from django.utils import timezone

from experiments.alerts import notify
from experiments.models import ChangePoint

log = logging.getLogger(__name__)

KIND = "change_point"


def _value(mean: float | None, unit: str) -> str:
    return "no value" if mean is None else f"{mean:.4g} {unit}".strip()


def _side(name: str, mean: float | None, n: int, low: float | None, high: float | None, unit):
    interval = "" if low is None or high is None else f", 95% interval {low:.4g} to {high:.4g}"
    return f"{name}: {_value(mean, unit)} (n = {n}{interval})"


def subject(cp: ChangePoint) -> str:
    shift = f"{cp.shift:+.0%}" if cp.shift is not None else "changed"
    return f"{cp.metric} {shift}: {cp.configuration}"  # the configuration names its testbed


def text(cp: ChangePoint) -> str:
    diff = cp.differences or {}
    lines = [
        f"{cp.metric} of {cp.configuration} changed at run {cp.run.uuid} "
        f"(started {cp.at:%Y-%m-%d %H:%M} UTC).",
        _side("Before", cp.before_mean, cp.before_n, cp.before_low, cp.before_high, cp.unit),
        _side("After", cp.after_mean, cp.after_n, cp.after_low, cp.after_high, cp.unit),
        f"p = {cp.p_value:.3g} ({cp.method})",
        "",
        "What changed: "
        + (
            "nothing recorded changed"
            if diff.get("nothing_changed")
            else (diff.get("summary") or "see the change point's page")
        ),
    ]
    if settings.BASE_URL:
        url = reverse("experiments:change", kwargs={"uuid": cp.uuid})
        lines += ["", f"Change point: {settings.BASE_URL}{url}"]
    return "\n".join(lines)


def announce_pending(limit: int = 200) -> int:
    """Alert every new change point nobody was told of yet (at most ``limit``), each once:
    its claim (``announced_at``) and its alert (key ``change:<uuid>``) commit together, so a
    process that dies between them announces nothing twice and loses nothing."""
    sent = 0
    pending = ChangePoint.objects.to_announce().select_related(
        "testbed", "matrix", "run", "previous_run"
    )[:limit]
    for cp in pending:
        with transaction.atomic():
            if not ChangePoint.objects.claim_announcement(cp.pk, timezone.now()):
                continue
            notify(
                f"change:{cp.uuid}",
                KIND,
                testbed=cp.testbed,
                matrix=cp.matrix,
                subject=subject(cp),
                text=text(cp),
                data=cp.as_api(),
            )
            sent += 1
    if sent:
        log.info("announced %d change points", sent)
    return sent
