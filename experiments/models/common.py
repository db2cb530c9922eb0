"""Abstract bases: public UUIDs and ownership, and the published-study provenance fields."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models


class OwnedModel(models.Model):
    """A top-level object: public UUID for URLs, an owner who may edit it, timestamps."""

    uuid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="Who may edit it. Published study data has no owner.",
    )
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        abstract = True

    def can_edit(self, user) -> bool:
        """Owners and staff edit; published data stays read-only for everyone."""
        if getattr(self, "published", False):
            return False
        return bool(user.is_authenticated and (user.is_staff or self.owner_id == user.pk))


class PublishedModel(models.Model):
    """Provenance of values taken from a published study (../shared/seeds)."""

    published = models.BooleanField(
        default=False, help_text="Read-only data stated in a published study."
    )
    published_key = models.CharField(
        max_length=120,
        blank=True,
        default="",
        editable=False,
        help_text="Stable key that makes load_published idempotent.",
    )
    source = models.CharField(
        max_length=200, blank=True, help_text="Document the values come from."
    )
    source_ref = models.CharField(
        max_length=200, blank=True, help_text="Table, figure or section of that document."
    )

    class Meta:
        abstract = True

    @property
    def citation(self) -> str:
        return ", ".join(part for part in (self.source, self.source_ref) if part)


class UUIDModel(models.Model):
    """A row that appears in URLs under its parent: addressed by UUID, never by primary key."""

    uuid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)

    class Meta:
        abstract = True


def published_key_constraint() -> models.UniqueConstraint:
    """One row per published key (empty keys are user data and not constrained)."""
    return models.UniqueConstraint(
        fields=["published_key"],
        condition=~models.Q(published_key=""),
        name="%(app_label)s_%(class)s_unique_published_key",
    )
