"""Sending runs to their workers and finding the ones that got lost: ``dispatch`` (a fresh
token per run, sent to the launcher node's queue once the transaction commits) and the
``janitor`` sweep (runs whose worker died, messages the broker lost). The matrix expansion
(``experiments.matrices.expansion``) creates the runs; this module moves them.
"""

from __future__ import annotations

import logging
import uuid
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from experiments.execution import holding
from experiments.execution.attempt import update_run
from experiments.models import Run, Worker
from experiments.models.runs import runs_ended
from experiments.shared import clock

log = logging.getLogger(__name__)


def _execute_task():
    """The ``runners.execute_run`` Celery task (experiments/execution/tasks.py), looked up by name
    in the
    app's registry: the tasks call into this module, never the other way round."""
    from celery import current_app

    return current_app.tasks["runners.execute_run"]


class BrokerUnavailable(RuntimeError):
    """The broker refused or lost the connection while runs were being sent; the runs that
    were not sent are back in their earlier state (a launch leaves them planned)."""

    def __init__(self, unsent: int, total: int, cause: Exception):
        self.unsent = unsent
        self.total = total
        self.cause = cause
        super().__init__(
            f"The message broker is unreachable ({cause}); {unsent} of {total} runs were not "
            "queued and are as they were. Try again once the broker is back."
        )


# What a failed send raises: kombu's OperationalError for a refused or lost connection (it is
# a KombuError), and plain socket errors from transports that do not wrap them.
def _send_errors() -> tuple[type[BaseException], ...]:
    from kombu.exceptions import KombuError

    return (KombuError, OSError)


def dispatch(run_ids: list[int], revert: bool = True) -> int:
    """Queue runs: each gets a fresh dispatch token and is sent to its launcher node's queue
    once the transaction commits (so the worker always finds the row).

    When the broker cannot be reached, the runs not sent yet go back to the status, token
    and queue time they had (``revert``) and BrokerUnavailable is raised; without
    ``revert`` (the janitor) they stay queued with a token no message carries, and the
    janitor sends them again later (see ``janitor``)."""
    execute_run = _execute_task()
    if not run_ids:
        return 0
    now = clock.now()
    sends: list[tuple[int, str, str]] = []
    before: dict[int, tuple[str, Any, Any]] = {}
    with transaction.atomic():
        runs = list(
            Run.objects.select_for_update()
            .filter(
                pk__in=run_ids,
                status__in=[
                    Run.Status.PLANNED,
                    Run.Status.QUEUED,
                    Run.Status.FAILED,
                    Run.Status.CANCELLED,
                ],
            )
            .only("pk", "queue", "status", "dispatch_token", "queued_at")
            # Sent (and so run) in the matrix's cell order; rows locked in one order.
            .order_by("pk")
        )
        for run in runs:
            before[run.pk] = (run.status, run.dispatch_token, run.queued_at)
            run.status = Run.Status.QUEUED
            run.dispatch_token = uuid.uuid4()
            run.queued_at = run.updated = now
            run.cancel_requested = False
            sends.append((run.pk, str(run.dispatch_token), run.queue or "default"))
        # One UPDATE per batch, not per run: launching a 20,000-run matrix stays quick.
        Run.objects.bulk_update(
            runs,
            ["status", "dispatch_token", "queued_at", "cancel_requested", "updated"],
            batch_size=500,
        )

        def send() -> None:
            for index, (pk, token, queue) in enumerate(sends):
                try:
                    execute_run.apply_async(args=[pk, token], queue=queue)
                except _send_errors() as exc:
                    unsent = sends[index:]
                    if revert:
                        _unqueue(unsent, before)
                    raise BrokerUnavailable(len(unsent), len(sends), exc) from exc

        transaction.on_commit(send)
    return len(sends)


def _unqueue(unsent: list[tuple[int, str, str]], before: dict[int, tuple[str, Any, Any]]) -> None:
    """Put runs whose message was never sent back as they were before dispatch(), unless a
    later dispatch gave them another token meanwhile."""
    now = clock.now()
    with transaction.atomic():
        runs = list(
            Run.objects.select_for_update()
            .filter(
                pk__in=[pk for pk, _, _ in unsent],
                status=Run.Status.QUEUED,
                dispatch_token__in=[token for _, token, _ in unsent],
            )
            .only("pk")
        )
        for run in runs:
            run.status, run.dispatch_token, run.queued_at = before[run.pk]
            run.updated = now
        Run.objects.bulk_update(
            runs, ["status", "dispatch_token", "queued_at", "updated"], batch_size=500
        )


def janitor(stale_seconds: int | None = None, restarted_worker: str = "") -> dict[str, int]:
    """One sweep (beat every BEEWEB_JANITOR_SECONDS, and each worker once as it starts):

    - a running run whose worker stopped writing heartbeats (or, for ``restarted_worker``,
      that this worker's previous process was running) is cancelled when a cancel was
      requested, else requeued, or failed after RUN_MAX_ATTEMPTS;
    - queued runs whose message the broker lost are sent again (see ``_lost_messages``);
    - node leases whose run no longer holds them are deleted
    (``experiments.execution.holding.sweep``);
    - the adaptive cells of the runs it failed or cancelled for good are decided
      (``runs_ended``, on which experiments.matrices.adaptive decides: no worker's hook
      passes them).

    A run with a cancel request is never sent again."""
    stale_seconds = settings.RUN_STALE_SECONDS if stale_seconds is None else stale_seconds
    now = clock.now()
    orphaned = Q(heartbeat_at__lt=now - timezone.timedelta(seconds=stale_seconds))
    if restarted_worker:
        orphaned |= Q(worker=restarted_worker)
    requeue: list[int] = []
    ended: list[int] = []  # failed or cancelled for good: their adaptive cells are decided
    failed = cancelled = 0
    with transaction.atomic():
        for run in Run.objects.select_for_update(skip_locked=True).filter(
            orphaned, status=Run.Status.RUNNING
        ):
            if run.heartbeat_at and run.heartbeat_at < now - timezone.timedelta(
                seconds=stale_seconds
            ):
                reason = (
                    f"worker {run.worker or '?'} stopped sending heartbeats during attempt "
                    f"{run.attempts} (last {run.heartbeat_at:%Y-%m-%d %H:%M:%S} UTC)"
                )
            else:
                reason = f"worker {run.worker} restarted during attempt {run.attempts}"
            if run.cancel_requested:
                update_run(
                    run,
                    status=Run.Status.CANCELLED,
                    finished_at=now,
                    waiting_for="",
                    dispatch_token=None,
                    error=f"{reason}; cancelled as requested, not run again",
                )
                cancelled += 1
                ended.append(run.pk)
            elif run.attempts < settings.RUN_MAX_ATTEMPTS:
                update_run(
                    run, error=f"{reason}; requeued", status=Run.Status.FAILED, waiting_for=""
                )
                requeue.append(run.pk)
            else:
                update_run(
                    run,
                    status=Run.Status.FAILED,
                    finished_at=now,
                    waiting_for="",
                    error=f"{reason}; gave up after {run.attempts} attempts",
                )
                failed += 1
                ended.append(run.pk)
    holding.sweep()
    if ended:
        runs_ended.send(sender=Run, run_ids=ended)
    counts = {"requeued": 0, "failed": failed, "cancelled": cancelled, "redispatched": 0}
    for key, ids in (("requeued", requeue), ("redispatched", _lost_messages(now))):
        # The broker may be down: what could not be sent stays queued, and a later sweep
        # finds it again once its queue's worker is idle.
        try:
            counts[key] = dispatch(ids, revert=False)
        except BrokerUnavailable as exc:
            log.warning("janitor: %s", exc)
            counts[key] = exc.total - exc.unsent
    return counts


def _lost_messages(now) -> list[int]:
    """Queued runs whose message the broker lost (a restart without persistence, a flushed
    database), marked as sent again in ``launch["redispatched"]`` ({count, at}).

    A run counts as lost when it has been queued for RUN_REDISPATCH_SECONDS on a queue that a
    worker has served, online, for at least as long without working on any run: that worker
    takes the next message within a second, so none is left for the run. A queue without an
    online worker is left alone (its messages wait in the broker), and as sending again
    renews ``queued_at``, a run is sent at most once per RUN_REDISPATCH_SECONDS."""
    wait = settings.RUN_REDISPATCH_SECONDS
    if wait <= 0:
        return []
    since = now - timezone.timedelta(seconds=wait)
    waiting = set(
        Run.objects.filter(status=Run.Status.QUEUED, queued_at__lt=since)
        .order_by()
        .values_list("queue", flat=True)
        .distinct()
    )
    if not waiting:
        return []
    served = {
        queue
        for queues in Worker.objects.filter(
            last_seen__gte=now - Worker.ONLINE_AFTER, started_at__lte=since
        ).values_list("queues", flat=True)
        for queue in queues or []
    }
    busy = set(
        Run.objects.filter(
            queue__in=waiting & served,
            status__in=[
                Run.Status.RUNNING,
                Run.Status.SUCCEEDED,
                Run.Status.FAILED,
                Run.Status.CANCELLED,
            ],
            heartbeat_at__gte=since,
        )
        .order_by()
        .values_list("queue", flat=True)
        .distinct()
    )
    idle = (waiting & served) - busy
    if not idle:
        return []
    with transaction.atomic():
        runs = list(
            Run.objects.select_for_update(skip_locked=True)
            .filter(status=Run.Status.QUEUED, queued_at__lt=since, queue__in=idle)
            .only("pk", "launch", "queue")
        )
        for run in runs:
            launch = dict(run.launch or {})
            count = int((launch.get("redispatched") or {}).get("count") or 0) + 1
            launch["redispatched"] = {"count": count, "at": now.isoformat(timespec="seconds")}
            run.launch = launch
            run.queued_at = now  # a sweep running alongside this one leaves them alone
        Run.objects.bulk_update(runs, ["launch", "queued_at"], batch_size=500)
    for queue in sorted(idle):
        lost = sum(1 for r in runs if r.queue == queue)
        if lost:
            log.warning(
                "janitor: %d runs queued on %s for over %d s while its worker was idle: "
                "their messages were lost; sending them again",
                lost,
                queue,
                wait,
            )
    return [run.pk for run in runs]
