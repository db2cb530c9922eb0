"""Change points: where a configuration's primary metric shifted over its runs in time order,
what differs between the runs either side, and what the lab made of it (experiments.changes
finds and explains them)."""

from __future__ import annotations

import uuid
from typing import Any

from django.conf import settings
from django.db import models
from django.urls import reverse

from experiments.models.inventory import Testbed
from experiments.models.matrices import Matrix
from experiments.models.runs import Run


class ChangePointQuerySet(models.QuerySet):
    def to_announce(self) -> ChangePointQuerySet:
        """New change points nobody was told of yet, oldest first (the alerts' work; index
        exp_change_unannounced). Expected, muted (known) and acknowledged ones are not."""
        return self.filter(state=ChangePoint.State.NEW, announced_at__isnull=True).order_by(
            "created_at", "id"
        )

    def claim_announcement(self, pk: int, when) -> bool:
        """Mark one change point announced at ``when`` unless another process did: one
        conditional UPDATE (False: taken already, or no longer new)."""
        return bool(
            self.filter(pk=pk, state=ChangePoint.State.NEW, announced_at__isnull=True).update(
                announced_at=when
            )
        )


class ChangePoint(models.Model):
    """One shift of ``metric`` over the runs of one configuration (``config_key``: the
    alike-runs identity of the summaries, experiments.results.summaries.config_key), between
    ``previous_run`` (the last run before) and ``run`` (the first run after), in the order the
    runs were started.

    ``before``/``after`` are the segments between this change point and its neighbours (or the
    ends of the analysed history): mean, count and the 95 % t interval of the mean.
    ``p_value`` is the e-divisive permutation test's (experiments.changes.detection).
    ``differences`` is what the runs either side differ in (experiments.changes.explain):
    ``{"items": [{"what", "node", "before", "after"}], "nothing_changed": bool,
    "verdicts": {"before": {kind: n}, "after": {kind: n}}}``.

    ``state`` is the lab's answer; a change point found where the lab already marked one as
    expected or muted (same configuration and metric, a shift of the same sign and similar
    size around the same run) is stored in that state, never as new again (``known``)."""

    class State(models.TextChoices):
        NEW = "new", "new"
        ACKNOWLEDGED = "acknowledged", "acknowledged"
        EXPECTED = "expected", "expected"
        MUTED = "muted", "muted"

    # States that mean "we know": a change found again like one of these is not new.
    KNOWN = frozenset({State.EXPECTED, State.MUTED})

    uuid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    config_key = models.CharField(max_length=32)
    metric = models.CharField(max_length=40)
    unit = models.CharField(max_length=8, blank=True)
    # The configuration in words (tool, parameters, testbed, target, tuning set, data source).
    configuration = models.TextField(blank=True)
    # Denormalised from the runs for the filters and the permission checks.
    testbed = models.ForeignKey(Testbed, on_delete=models.CASCADE, related_name="change_points")
    matrix = models.ForeignKey(
        Matrix, null=True, blank=True, on_delete=models.SET_NULL, related_name="change_points"
    )
    tool = models.CharField(max_length=40)
    # The first run after the change and the last before it.
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="+")
    previous_run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="+")
    # Start time of ``run`` (the history's order): the history page marks it there.
    at = models.DateTimeField()
    before_mean = models.FloatField()
    before_n = models.PositiveIntegerField()
    before_low = models.FloatField(null=True, blank=True)
    before_high = models.FloatField(null=True, blank=True)
    after_mean = models.FloatField()
    after_n = models.PositiveIntegerField()
    after_low = models.FloatField(null=True, blank=True)
    after_high = models.FloatField(null=True, blank=True)
    p_value = models.FloatField()
    method = models.CharField(max_length=120)
    differences = models.JSONField(default=dict, blank=True)
    state = models.CharField(max_length=12, choices=State.choices, default=State.NEW)
    state_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    state_at = models.DateTimeField(null=True, blank=True)
    state_note = models.TextField(blank=True)
    # Set when found like a change the lab marked expected or muted (``state`` copied).
    known = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    # Set by the alerts (experiments.alerts) once they have told the subscribers.
    announced_at = models.DateTimeField(null=True, blank=True)

    objects = ChangePointQuerySet.as_manager()

    class Meta:
        ordering = ["-at", "-id"]
        constraints = [
            # A rescan finds the same change again: one row per configuration, metric, run.
            models.UniqueConstraint(
                fields=["config_key", "metric", "run"],
                name="%(app_label)s_%(class)s_unique_key_metric_run",
            ),
        ]
        indexes = [
            # Inbox: new first, newest first (the state filter of GET /api/changes/ too).
            models.Index(fields=["state", "-at", "-id"], name="exp_change_state_at"),
            # A testbed's history page and the testbed filter.
            models.Index(fields=["testbed", "-at", "-id"], name="exp_change_testbed_at"),
            # A configuration's history page; ``known`` looks up its metric's past changes.
            models.Index(fields=["config_key", "metric", "-at"], name="exp_change_key_at"),
            # The alerts: change points not announced yet.
            models.Index(
                fields=["created_at"],
                condition=models.Q(announced_at__isnull=True),
                name="exp_change_unannounced",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.metric} {self.shift_text} at {self.run.uuid} ({self.state})"

    def get_absolute_url(self) -> str:
        return reverse("experiments:change", args=[self.uuid])

    @property
    def shift(self) -> float | None:
        """Relative shift (after / before - 1), None when the mean before is 0."""
        if not self.before_mean:
            return None
        return self.after_mean / self.before_mean - 1.0

    @property
    def shift_text(self) -> str:
        shift = self.shift
        if shift is None:
            return f"{self.before_mean:.4g} → {self.after_mean:.4g}"
        return f"{shift * 100:+.1f} %"

    def history_url(self) -> str:
        return reverse("experiments:config_history", args=[self.config_key]) + (
            f"?metric={self.metric}"
        )

    def as_api(self) -> dict[str, Any]:
        """The change point as GET /api/changes/ gives it (and the alerts' webhook sends it):
        docs/design-notes.md, "Change points"."""
        return {
            "id": str(self.uuid),
            "metric": self.metric,
            "unit": self.unit,
            "configuration": {
                "key": self.config_key,
                "text": self.configuration,
                "tool": self.tool,
                "testbed": str(self.testbed.uuid),
                "testbed_name": self.testbed.name,
                "matrix": str(self.matrix.uuid) if self.matrix_id else None,
            },
            "run": str(self.run.uuid),
            "previous_run": str(self.previous_run.uuid),
            "at": self.at.isoformat(),
            "before": {
                "mean": self.before_mean,
                "n": self.before_n,
                "interval": _interval(self.before_low, self.before_high),
            },
            "after": {
                "mean": self.after_mean,
                "n": self.after_n,
                "interval": _interval(self.after_low, self.after_high),
            },
            "shift": self.shift,
            "p_value": self.p_value,
            "method": self.method,
            "differences": self.differences,
            "state": self.state,
            "state_note": self.state_note,
            "state_at": self.state_at.isoformat() if self.state_at else None,
            "created_at": self.created_at.isoformat() if self.created_at else None,
            "announced_at": self.announced_at.isoformat() if self.announced_at else None,
        }


def _interval(low: float | None, high: float | None) -> list[float] | None:
    return None if low is None or high is None else [low, high]


class ChangeScan(models.Model):
    """The watermark of detection per configuration and metric: the run count of its summary
    (experiments.models.ConfigSummary.n) when it was last analysed. A summary whose count
    differs has runs the detection has not seen (new, imported, deleted). One row with an
    empty key and metric holds the highest metric row id a sweep has looked at."""

    config_key = models.CharField(max_length=32)
    metric = models.CharField(max_length=40)
    # The run count analysed; in the row of no configuration (experiments.changes.scan), the
    # highest metric row id a sweep has looked at.
    n = models.PositiveBigIntegerField()
    scanned_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["config_key", "metric"], name="%(app_label)s_%(class)s_unique_key_metric"
            )
        ]

    def __str__(self) -> str:
        return f"{self.metric} of {self.config_key}: {self.n} runs analysed"
