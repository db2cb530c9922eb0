"""Requests a user's action addresses to one node's own worker, answered by its node agent.

A node's Celery worker runs benchmarks one at a time (solo pool), so a question for the node
(what does your BeeGFS look like right now?) queued behind a run would wait as long as the
run. Instead the server stores a ``NodeRequest`` for the node's hostname, the node agent
beside the worker's consumer (``experiments.execution.agent``) takes it at its next poll,
does it under the node's own policy, and writes the answer here; the server waits for it
with a bound (``experiments.execution.noderequests.ask``). What a kind of request may do is
fixed on the node's side: ``params`` carry only choices the node validates.
"""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models
from django.utils import timezone


class NodeRequest(models.Model):
    class Kind(models.TextChoices):
        BEEGFS_TOPOLOGY = "beegfs-topology", "BeeGFS topology (read-only beegfs-ctl listings)"

    uuid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    hostname = models.CharField(max_length=253, help_text="The node whose worker answers.")
    kind = models.CharField(max_length=40, choices=Kind.choices)
    params = models.JSONField(default=dict, blank=True)
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)
    taken_at = models.DateTimeField(null=True, blank=True)
    taken_by = models.CharField(max_length=255, blank=True, help_text="The worker that took it.")
    answered_at = models.DateTimeField(null=True, blank=True)
    result = models.JSONField(null=True, blank=True)
    error = models.TextField(blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["hostname", "answered_at"], name="noderequest_pending"),
        ]

    def __str__(self) -> str:
        return f"{self.kind} of {self.hostname} ({self.created_at:%Y-%m-%d %H:%M:%S})"

    @property
    def round_trip(self) -> float | None:
        """Seconds from the request to its answer."""
        if self.answered_at is None:
            return None
        return (self.answered_at - self.created_at).total_seconds()
