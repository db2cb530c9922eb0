"""Reports (saved comparisons) and their share links (frozen, read-only, revocable)."""

from __future__ import annotations

import secrets

from django.conf import settings
from django.db import models
from django.urls import reverse
from django.utils import timezone

from experiments.models.common import OwnedModel


class Report(OwnedModel):
    """A saved comparison: what to compare (``query``, the builder's URL state without chart
    settings) and how to draw it (``chart``). Owners and staff edit; everyone signed in reads."""

    title = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    query = models.TextField(help_text="Filters, metrics and axes as the compare URL holds them.")
    chart = models.JSONField(
        default=dict, blank=True, help_text="Chart settings: type, error bars, unit, repetitions."
    )

    class Meta:
        ordering = ["-updated"]

    def __str__(self) -> str:
        return self.title

    def get_absolute_url(self) -> str:
        return reverse("experiments:report", args=[self.uuid])


def new_share_key() -> str:
    return secrets.token_urlsafe(32)


class ShareLinkQuerySet(models.QuerySet):
    def active(self) -> ShareLinkQuerySet:
        now = timezone.now()
        return self.filter(revoked_at__isnull=True).filter(
            models.Q(expires_at__isnull=True) | models.Q(expires_at__gt=now)
        )


class ShareLink(models.Model):
    """A read-only link to a report that opens without login. It shows the comparison as it
    was when the link was made (``snapshot``); it can expire and be revoked."""

    report = models.ForeignKey(Report, on_delete=models.CASCADE, related_name="share_links")
    key = models.CharField(max_length=64, unique=True, default=new_share_key, editable=False)
    created = models.DateTimeField(auto_now_add=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    expires_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    # {"query": full query string, "title", "description", "result": ComparisonResult.to_json()}
    snapshot = models.JSONField(default=dict, blank=True)

    objects = ShareLinkQuerySet.as_manager()

    class Meta:
        ordering = ["-created"]

    def __str__(self) -> str:
        return f"share link of {self.report} ({self.state})"

    def get_absolute_url(self) -> str:
        return reverse("experiments:share", args=[self.key])

    @property
    def state(self) -> str:
        if self.revoked_at:
            return "revoked"
        if self.expires_at and self.expires_at <= timezone.now():
            return "expired"
        return "active"

    @property
    def is_active(self) -> bool:
        return self.state == "active"
