"""Celery tasks of the experiments app."""

from __future__ import annotations

from celery import shared_task
from django.utils import timezone

from experiments.models import Worker


@shared_task(name="experiments.ping")
def ping(worker_name: str | None = None) -> str:
    """A trivial round trip through the broker: marks the answering worker as seen."""
    now = timezone.now()
    if worker_name:
        Worker.objects.filter(name=worker_name).update(last_seen=now)
    return now.isoformat()
