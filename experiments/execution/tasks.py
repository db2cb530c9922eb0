"""Celery tasks that run benchmarks: one task per run, on the launcher node's queue."""

from __future__ import annotations

from celery import shared_task
from celery.signals import task_prerun
from django.db import InterfaceError, OperationalError, close_old_connections, connection


@task_prerun.connect(dispatch_uid="beeweb-task-connections")
def fresh_connections(sender=None, task=None, **kwargs) -> None:
    """Before each task, what Django does before each request: close this thread's database
    connections that are broken, outlived CONN_MAX_AGE or were left in a bad state, and
    check the others once before use (CONN_HEALTH_CHECKS); the rest are reused. Celery's
    own fix-up closes them only every CELERY_DB_REUSE_MAX tasks (beeweb.settings): a new
    session per run cost a short run more than the run itself. Not for a task run eagerly
    (inside a request or a test's transaction, whose connection is not the task's)."""
    request = getattr(task or sender, "request", None)
    if getattr(request, "is_eager", False) or connection.in_atomic_block:
        return
    close_old_connections()


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
    """Run it; then, its outcome stored and its nodes free, say that it ended
    (``runs_ended``, the one signal every path that ends a run sends: the janitor and a
    cancel too; an adaptive matrix decides on it whether the cell needs another repetition)."""
    from experiments.execution.execute import execute
    from experiments.models.runs import Run, runs_ended

    status = execute(run_id, token, worker=self.request.hostname or "unknown")
    if status != "stale":
        runs_ended.send(sender=Run, run_ids=[run_id])
    return status


@shared_task(name="runners.janitor")
def janitor() -> dict[str, int]:
    """Requeue or fail runs whose worker stopped sending heartbeats (beat, every 30 s); then
    fill a bounded number of pending summary medians (experiments.results.summaries.settle)."""
    from experiments.execution.dispatch import janitor as sweep
    from experiments.results import summaries

    counts = sweep()
    counts["medians"] = summaries.settle(
        limit=summaries.SETTLE_ROWS, values=summaries.SETTLE_VALUES
    )
    return counts
