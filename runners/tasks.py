"""Celery tasks that run benchmarks: one task per run, on the launcher node's queue."""

from __future__ import annotations

from celery import shared_task
from django.db import InterfaceError, OperationalError


# Only transient errors (the database unreachable while claiming or storing) are retried;
# a tool that fails is a result, not an error, and is never run again automatically.
@shared_task(
    name="runners.execute_run",
    bind=True,
    acks_late=True,
    autoretry_for=(OperationalError, InterfaceError),
    retry_backoff=2,
    retry_backoff_max=60,
    max_retries=5,
)
def execute_run(self, run_id: int, token: str) -> str:
    """Run it; then, its outcome stored and its nodes free, let an adaptive matrix decide
    whether its cell needs another repetition (experiments.adaptive)."""
    from experiments.adaptive import after_run
    from runners.execute import execute

    status = execute(run_id, token, worker=self.request.hostname or "unknown")
    if status != "stale":
        after_run(run_id)
    return status


@shared_task(name="runners.janitor")
def janitor() -> dict[str, int]:
    """Requeue or fail runs whose worker stopped sending heartbeats (beat, every 30 s); then
    fill a bounded number of pending summary medians (experiments.summaries.settle)."""
    from experiments import summaries
    from runners.dispatch import janitor as sweep

    counts = sweep()
    counts["medians"] = summaries.settle(
        limit=summaries.SETTLE_ROWS, values=summaries.SETTLE_VALUES
    )
    return counts
