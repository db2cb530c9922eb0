"""Celery workers as they report themselves: which queues they serve and when last seen."""

from __future__ import annotations

from datetime import timedelta

from django.db import models
from django.utils import timezone


class Worker(models.Model):
    """One Celery worker process (``celery@host``), refreshed by its heartbeat bootstep."""

    ONLINE_AFTER = timedelta(seconds=90)

    name = models.CharField(max_length=255, unique=True)
    hostname = models.CharField(max_length=253)
    queues = models.JSONField(default=list)
    pid = models.PositiveIntegerField(null=True)
    started_at = models.DateTimeField()
    last_seen = models.DateTimeField()
    # Refreshed by the worker's node agent (experiments.execution.agent) while it runs: a run that
    # asks a
    # node for work waits for an answer only when the node has a live agent.
    agent_seen = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["hostname", "name"]

    def __str__(self) -> str:
        return self.name

    @property
    def online(self) -> bool:
        return timezone.now() - self.last_seen < self.ONLINE_AFTER
