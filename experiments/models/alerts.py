"""Scheduled matrices and their firings; alerts, who subscribes to them and their deliveries.

A ``MatrixSchedule`` fires its matrix through a django-celery-beat ``PeriodicTask`` it keeps
in step (experiments.matrices.schedules); each firing is a ``ScheduleFiring``. Anything worth
telling people (a firing that could not run, a missing run, a change point) is one ``Alert``,
delivered once per subscribed channel as a ``Delivery`` (experiments.alerts).
"""

from __future__ import annotations

import secrets

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models

from experiments.models.common import UUIDModel
from experiments.models.inventory import Testbed
from experiments.models.matrices import Matrix

# The shortest interval a schedule may fire at (seconds): a test's schedule fires every few
# seconds, a lab's nightly; shorter would fire faster than beat looks (django-celery-beat
# wakes every 5 s at most).
MIN_EVERY_S = 10
MAX_EVERY_S = 366 * 24 * 3600


def new_secret() -> str:
    return secrets.token_urlsafe(32)


class MatrixSchedule(UUIDModel):
    """When a matrix runs again by itself: a cron expression (``cron``: five fields or
    ``@daily``, ``@weekly``…) or every ``every_s`` seconds, paused when not ``enabled``.
    Each firing is a new launch of the matrix's cells by its owner's authority."""

    matrix = models.OneToOneField(Matrix, on_delete=models.CASCADE, related_name="schedule")
    cron = models.CharField(
        max_length=100,
        blank=True,
        help_text="minute hour day-of-month month day-of-week, or @hourly, @daily, @weekly, "
        "@monthly (UTC).",
    )
    every_s = models.PositiveIntegerField(
        "every (s)",
        null=True,
        blank=True,
        validators=[MinValueValidator(MIN_EVERY_S), MaxValueValidator(MAX_EVERY_S)],
        help_text="Or fire every this many seconds.",
    )
    enabled = models.BooleanField(default=True, help_text="Unticked: paused, nothing fires.")
    deadline_s = models.PositiveIntegerField(
        "deadline (s)",
        default=6 * 3600,
        validators=[MinValueValidator(1), MaxValueValidator(7 * 24 * 3600)],
        help_text="A firing whose runs have not all finished this long after it is a missing "
        "run (alerted).",
    )
    # The beat entry that fires it (django-celery-beat's DatabaseScheduler reads it).
    periodic_task = models.OneToOneField(
        "django_celery_beat.PeriodicTask",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        editable=False,
    )
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=(~models.Q(cron="") & models.Q(every_s__isnull=True))
                | (models.Q(cron="") & models.Q(every_s__isnull=False)),
                name="%(app_label)s_%(class)s_cron_or_every",
            )
        ]

    def __str__(self) -> str:
        return f"{self.matrix}: {self.describe()}"

    def describe(self) -> str:
        when = f"cron {self.cron}" if self.cron else f"every {self.every_s} s"
        return when if self.enabled else f"{when} (paused)"


class ScheduleFiring(models.Model):
    """One firing of a schedule and what came of it: launched (the repetitions it created),
    or not run, with the reason; a launched firing's runs counted once they have all ended,
    and flagged ``missing`` when they had not by the schedule's deadline."""

    class Outcome(models.TextChoices):
        WAITING = "waiting", "waiting for its nodes"
        LAUNCHED = "launched", "launched"
        NOT_RUN = "not_run", "could not run"

    schedule = models.ForeignKey(MatrixSchedule, on_delete=models.CASCADE, related_name="firings")
    fired_at = models.DateTimeField()
    outcome = models.CharField(max_length=10, choices=Outcome.choices)
    reason = models.TextField(blank=True)
    first_repetition = models.PositiveSmallIntegerField(null=True, blank=True)
    last_repetition = models.PositiveSmallIntegerField(null=True, blank=True)
    runs = models.PositiveIntegerField(default=0)
    finished_at = models.DateTimeField(null=True, blank=True)
    succeeded = models.PositiveIntegerField(default=0)
    failed = models.PositiveIntegerField(default=0)
    missing = models.BooleanField(default=False, help_text="Not finished by the deadline.")

    class Meta:
        ordering = ["-fired_at", "-pk"]
        indexes = [
            # The matrix page's recent firings; the check of the schedule's unfinished ones.
            models.Index(fields=["schedule", "-fired_at"], name="exp_firing_schedule_fired"),
        ]

    def __str__(self) -> str:
        return f"{self.fired_at:%Y-%m-%d %H:%M:%S}: {self.get_outcome_display()}"


class Subscription(UUIDModel):
    """``user`` wants the alerts of one testbed or one matrix by e-mail and/or webhook."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="alert_subscriptions"
    )
    testbed = models.ForeignKey(
        Testbed, null=True, blank=True, on_delete=models.CASCADE, related_name="subscriptions"
    )
    matrix = models.ForeignKey(
        Matrix, null=True, blank=True, on_delete=models.CASCADE, related_name="subscriptions"
    )
    email = models.EmailField(blank=True, help_text="Send alerts to this address.")
    webhook_url = models.URLField(
        "webhook URL", max_length=500, blank=True, help_text="POST each alert as JSON here."
    )
    # Signs each webhook body (HMAC-SHA256, header X-Beeweb-Signature); shown to its user.
    secret = models.CharField(max_length=64, default=new_secret, editable=False)
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created", "-pk"]
        constraints = [
            models.CheckConstraint(
                condition=(models.Q(testbed__isnull=True) & models.Q(matrix__isnull=False))
                | (models.Q(testbed__isnull=False) & models.Q(matrix__isnull=True)),
                name="%(app_label)s_%(class)s_testbed_or_matrix",
            ),
            models.CheckConstraint(
                condition=~models.Q(email="") | ~models.Q(webhook_url=""),
                name="%(app_label)s_%(class)s_some_channel",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.user} on {self.testbed or self.matrix}"

    @property
    def subject(self):
        return self.testbed or self.matrix


class Alert(UUIDModel):
    """Something subscribers are told once: ``key`` names it (a change point, a firing), so
    the same key is never delivered twice."""

    key = models.CharField(max_length=200, unique=True)
    kind = models.CharField(max_length=40)
    testbed = models.ForeignKey(
        Testbed, null=True, blank=True, on_delete=models.SET_NULL, related_name="alerts"
    )
    matrix = models.ForeignKey(
        Matrix, null=True, blank=True, on_delete=models.SET_NULL, related_name="alerts"
    )
    subject = models.CharField(max_length=200)
    text = models.TextField()
    data = models.JSONField(default=dict, blank=True)
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created", "-pk"]

    def __str__(self) -> str:
        return self.subject


class Delivery(UUIDModel):
    """One alert sent (or being sent) on one channel to one address or URL."""

    class Channel(models.TextChoices):
        EMAIL = "email", "e-mail"
        WEBHOOK = "webhook", "webhook"

    class Status(models.TextChoices):
        PENDING = "pending", "pending"
        SENT = "sent", "sent"
        FAILED = "failed", "failed"

    alert = models.ForeignKey(Alert, on_delete=models.CASCADE, related_name="deliveries")
    subscription = models.ForeignKey(
        Subscription, null=True, blank=True, on_delete=models.SET_NULL, related_name="deliveries"
    )
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="alert_deliveries"
    )
    channel = models.CharField(max_length=8, choices=Channel.choices)
    target = models.CharField(max_length=500)
    status = models.CharField(max_length=8, choices=Status.choices, default=Status.PENDING)
    attempts = models.PositiveSmallIntegerField(default=0)
    last_error = models.TextField(blank=True)
    created = models.DateTimeField(auto_now_add=True)
    sent_at = models.DateTimeField(null=True, blank=True)
    last_attempt_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created", "-pk"]
        constraints = [
            models.UniqueConstraint(
                fields=["alert", "channel", "target"],
                name="%(app_label)s_%(class)s_unique_alert_channel_target",
            )
        ]
        indexes = [
            # The sweep that sends again pending deliveries whose message was lost.
            models.Index(fields=["status", "last_attempt_at"], name="exp_delivery_status"),
        ]

    def __str__(self) -> str:
        return f"{self.get_channel_display()} to {self.target}: {self.status}"
