"""Scheduled matrices: a matrix's schedule (cron or every N seconds) kept in step with the
django-celery-beat entry that fires it; each firing launches the matrix's cells again by its
owner's authority, or records why it could not (and alerts); a periodic check counts the
firings' runs once they have ended, and alerts a missing run (not finished by the schedule's
deadline) and a firing that did not arrive."""

from __future__ import annotations

import json
import logging
import re
from datetime import timedelta

from celery import shared_task
from celery.schedules import ParseException, crontab
from celery.schedules import schedule as every
from django.conf import settings
from django.db import transaction
from django.db.models import Count
from django.db.models.signals import post_delete
from django.dispatch import receiver
from django.utils import timezone
from django_celery_beat.models import CrontabSchedule, IntervalSchedule, PeriodicTask

from experiments.alerts import notify
from experiments.alerts.tasks import resend_lost
from experiments.execution.dispatch import BrokerUnavailable
from experiments.matrices.axes import MatrixError
from experiments.matrices.expansion import launch_again
from experiments.matrices.launching import launch_refused
from experiments.matrices.preview import plan
from experiments.models import (
    Matrix,
    MatrixSchedule,
    NodeLease,
    Run,
    ScheduleFiring,
    TestbedNode,
    Worker,
)
from experiments.models.alerts import MAX_EVERY_S, MIN_EVERY_S
from runners.launch import queue_for

log = logging.getLogger(__name__)

FIRE_TASK = "matrices.fire_schedule"
# How often a firing waiting for held nodes looks again (seconds).
HOLD_POLL_SECONDS = 10

SHORTCUTS = {
    "@hourly": "0 * * * *",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@nightly": "0 2 * * *",
    "@weekly": "0 0 * * 0",
    "@monthly": "0 0 1 * *",
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
}
CRON_FIELDS = ("minute", "hour", "day_of_month", "month_of_year", "day_of_week")
_CRON_FIELD = re.compile(r"[0-9A-Za-z*/,\-]{1,40}")


def parse_cron(text: str) -> dict[str, str]:
    """The five fields of a cron expression (or a shortcut such as ``@daily``) by name;
    MatrixError naming what is wrong otherwise."""
    text = " ".join((text or "").split())
    expanded = SHORTCUTS.get(text.lower(), text)
    parts = expanded.split(" ")
    if len(parts) != 5:
        raise MatrixError(
            "cron",
            f"{text!r} is not a cron expression: five fields (minute hour day-of-month month "
            "day-of-week, e.g. '30 2 * * *') or one of " + ", ".join(SHORTCUTS),
        )
    for name, part in zip(CRON_FIELDS, parts, strict=True):
        if not _CRON_FIELD.fullmatch(part):
            raise MatrixError("cron", f"cron {name.replace('_', ' ')} {part!r} is not valid")
    fields = dict(zip(CRON_FIELDS, parts, strict=True))
    try:
        crontab(**fields)
    except (ValueError, ParseException, IndexError, KeyError) as exc:
        raise MatrixError("cron", f"cron expression {text!r} is not valid: {exc}") from None
    return fields


def save_schedule(
    matrix: Matrix,
    *,
    cron: str = "",
    every_s: int | None = None,
    enabled: bool = True,
    deadline_s: int | None = None,
) -> MatrixSchedule:
    """Create or change the matrix's schedule and its beat entry, after checking every value
    (MatrixError naming the field; nothing is stored then)."""
    cron = " ".join((cron or "").split())
    if bool(cron) == (every_s is not None):
        raise MatrixError("cron", "give either a cron expression or an interval in seconds")
    if cron:
        parse_cron(cron)
    elif not isinstance(every_s, int) or not MIN_EVERY_S <= every_s <= MAX_EVERY_S:
        raise MatrixError("every_s", f"the interval is {MIN_EVERY_S} to {MAX_EVERY_S} seconds")
    if deadline_s is not None and (
        not isinstance(deadline_s, int) or not 1 <= deadline_s <= 7 * 24 * 3600
    ):
        raise MatrixError("deadline_s", "the deadline is 1 s to 7 days (604800 s)")
    if matrix.adaptive:
        raise MatrixError(
            "cron",
            "an adaptive matrix (repetitions until a CV) cannot be scheduled: its cells "
            "decide their own number of runs",
        )
    with transaction.atomic():
        schedule = MatrixSchedule.objects.select_for_update().filter(matrix=matrix).first()
        if schedule is None:
            schedule = MatrixSchedule(matrix=matrix)
        schedule.cron = cron
        schedule.every_s = None if cron else every_s
        schedule.enabled = bool(enabled)
        if deadline_s is not None:
            schedule.deadline_s = deadline_s
        schedule.save()
        sync_beat(schedule)
    return schedule


def sync_beat(schedule: MatrixSchedule) -> None:
    """The schedule's django-celery-beat entry, made to match it (beat sees the change
    within its 5 s)."""
    task = schedule.periodic_task or PeriodicTask(name=f"matrix schedule {schedule.uuid}")
    task.task = FIRE_TASK
    task.kwargs = json.dumps({"schedule": schedule.pk})
    task.enabled = schedule.enabled
    task.crontab = task.interval = None
    if schedule.cron:
        task.crontab, _ = CrontabSchedule.objects.get_or_create(
            **parse_cron(schedule.cron), timezone="UTC"
        )
    else:
        task.interval, _ = IntervalSchedule.objects.get_or_create(
            every=schedule.every_s, period=IntervalSchedule.SECONDS
        )
    task.description = f"Fires matrix {schedule.matrix.name} ({schedule.matrix.uuid})"[:200]
    task.save()
    if schedule.periodic_task_id != task.pk:
        MatrixSchedule.objects.filter(pk=schedule.pk).update(periodic_task=task)
        schedule.periodic_task = task


def delete_schedule(schedule: MatrixSchedule) -> None:
    with transaction.atomic():
        schedule.delete()  # and its beat entry (_drop_beat_entry)


@receiver(post_delete, sender=MatrixSchedule, dispatch_uid="matrices.schedules.beat_entry")
def _drop_beat_entry(sender, instance: MatrixSchedule, **kwargs) -> None:
    """A schedule deleted with its matrix takes its beat entry along (beat would otherwise
    go on sending firings of a schedule that is no more)."""
    if instance.periodic_task_id:
        PeriodicTask.objects.filter(pk=instance.periodic_task_id).delete()


def celery_schedule(schedule: MatrixSchedule):
    if schedule.cron:
        return crontab(**parse_cron(schedule.cron))
    return every(timedelta(seconds=schedule.every_s))


def next_firing(schedule: MatrixSchedule, after):
    """When the schedule fires next after ``after`` (aware datetime)."""
    return timezone.now() + celery_schedule(schedule).remaining_estimate(after)


# --- Firing --------------------------------------------------------------------------------


def _online_queues() -> set[str]:
    since = timezone.now() - Worker.ONLINE_AFTER
    queues: set[str] = set()
    for names in Worker.objects.filter(last_seen__gte=since).values_list("queues", flat=True):
        queues.update(n for n in names or [] if isinstance(n, str))
    return queues


def _held(matrix: Matrix) -> list[str]:
    """The matrix's testbeds' nodes that runs of other matrices hold now, as sentences."""
    names = set(
        TestbedNode.objects.filter(testbed__in=matrix.testbeds.all()).values_list(
            "node__hostname", flat=True
        )
    )
    stale = timezone.now() - timedelta(seconds=settings.RUN_STALE_SECONDS)
    leases = (
        NodeLease.objects.filter(
            hostname__in=names, run__status=Run.Status.RUNNING, run__heartbeat_at__gte=stale
        )
        .exclude(run__matrix=matrix)
        .select_related("run")
        .order_by("hostname")
    )
    return [
        f"{lease.hostname} held by run {lease.run.uuid} since {lease.acquired_at:%H:%M:%S}"
        for lease in leases
    ]


def refusal(matrix: Matrix) -> tuple[str, bool]:
    """Why the matrix cannot be fired now ("" when it can), and whether the reason may pass
    by itself while the firing waits (its nodes held by other runs)."""
    if matrix.owner is None or not matrix.owner.is_active:
        return "the matrix has no active owner, whose authority a scheduled launch needs", False
    refused = launch_refused(matrix, matrix.owner)
    if refused:
        return f"its owner may not launch it: {refused}", False
    if matrix.adaptive:
        return "an adaptive matrix cannot be scheduled", False
    active = matrix.runs.filter(status__in=[Run.Status.QUEUED, Run.Status.RUNNING]).count()
    if active:
        return (
            f"the matrix is still running: {active} run{'s' if active != 1 else ''} of an "
            "earlier launch queued or running",
            False,
        )
    try:
        result = plan(matrix)
    except MatrixError as exc:
        return f"the matrix cannot be expanded: {exc}", False
    if result.errors:
        return f"{len(result.errors)} cells cannot run: {result.errors[0].error}", False
    needed = sorted({queue_for(item.launcher) for item in result.active})
    online = _online_queues()
    missing = [q for q in needed if q not in online]
    if missing:
        return (
            "no worker online for the testbed: nobody serves queue "
            + ", ".join(missing)
            + f" (no heartbeat for {int(Worker.ONLINE_AFTER.total_seconds())} s)",
            False,
        )
    held = _held(matrix)
    if held:
        return "its nodes are held by other runs: " + "; ".join(held), True
    return "", False


def firing_data(firing: ScheduleFiring) -> dict:
    schedule = firing.schedule
    return {
        "matrix": str(schedule.matrix.uuid),
        "schedule": schedule.describe(),
        "fired_at": firing.fired_at.isoformat(),
        "outcome": firing.outcome,
        "reason": firing.reason,
        "runs": firing.runs,
        "repetitions": [firing.first_repetition, firing.last_repetition]
        if firing.first_repetition
        else None,
        "succeeded": firing.succeeded,
        "failed": firing.failed,
        "missing": firing.missing,
    }


def _not_run(firing: ScheduleFiring, reason: str) -> None:
    firing.outcome = ScheduleFiring.Outcome.NOT_RUN
    firing.reason = reason
    firing.save(update_fields=["outcome", "reason"])
    matrix = firing.schedule.matrix
    notify(
        f"firing:{firing.pk}:not_run",
        "schedule.not_run",
        matrix=matrix,
        subject=f"Scheduled run of {matrix.name} could not run",
        text=(
            f"The scheduled launch of matrix {matrix.name} ({firing.schedule.describe()}) "
            f"at {firing.fired_at:%Y-%m-%d %H:%M:%S} UTC could not run: {reason}."
        ),
        data=firing_data(firing),
    )


def fire(schedule_id: int, firing_id: int | None = None) -> ScheduleFiring | None:
    """One firing of the schedule (or a firing waiting for its nodes, looked at again):
    launch the matrix's cells again, or record why not and alert. None when the schedule is
    gone or paused (a message sent before the pause)."""
    schedule = MatrixSchedule.objects.select_related("matrix__owner").filter(pk=schedule_id).first()
    if schedule is None or (not schedule.enabled and firing_id is None):
        return None
    if firing_id is None:
        firing = ScheduleFiring.objects.create(
            schedule=schedule, fired_at=timezone.now(), outcome=ScheduleFiring.Outcome.WAITING
        )
    else:
        firing = ScheduleFiring.objects.filter(
            pk=firing_id, schedule=schedule, outcome=ScheduleFiring.Outcome.WAITING
        ).first()
        if firing is None:
            return None
    matrix = schedule.matrix
    reason, may_pass = refusal(matrix)
    if reason and may_pass:
        waited = (timezone.now() - firing.fired_at).total_seconds()
        if waited < settings.SCHEDULE_HOLD_WAIT_SECONDS:
            firing.reason = reason
            firing.save(update_fields=["reason"])
            fire_schedule.apply_async(
                kwargs={"schedule": schedule.pk, "firing": firing.pk},
                countdown=min(HOLD_POLL_SECONDS, settings.SCHEDULE_HOLD_WAIT_SECONDS - waited),
            )
            return firing
        reason = f"nodes held too long ({int(waited)} s): {reason.split(': ', 1)[1]}"
    if reason:
        _not_run(firing, reason)
        return firing
    try:
        counts = launch_again(matrix)
    except MatrixError as exc:
        _not_run(firing, f"the launch was refused: {exc}")
        return firing
    except BrokerUnavailable as exc:
        _not_run(firing, f"broker down: {exc.cause}")
        return firing
    firing.outcome = ScheduleFiring.Outcome.LAUNCHED
    firing.reason = (
        f"{counts['queued']} runs queued ({counts['excluded']} excluded by rules), "
        f"repetitions {counts['first']} to {counts['last']}"
    )
    firing.first_repetition, firing.last_repetition = counts["first"], counts["last"]
    firing.runs = counts["queued"]
    firing.save()
    log.info("schedule %s of matrix %s fired: %s", schedule.pk, matrix.pk, firing.reason)
    return firing


@shared_task(name=FIRE_TASK, ignore_result=True)
def fire_schedule(schedule: int, firing: int | None = None) -> str:
    done = fire(schedule, firing)
    return done.outcome if done else "skipped"


# --- The periodic check --------------------------------------------------------------------


def _count_firing(firing: ScheduleFiring, now) -> None:
    """Close a launched firing whose runs have all ended (alerting failed ones), or flag it
    missing once past its deadline (alerted once)."""
    schedule = firing.schedule
    matrix = schedule.matrix
    runs = matrix.runs.filter(
        repetition__gte=firing.first_repetition, repetition__lte=firing.last_repetition
    )
    counts = dict(runs.values_list("status").annotate(n=Count("id")).order_by())
    total = sum(counts.values())
    ended = sum(n for status, n in counts.items() if status in Run.TERMINAL)
    if total and ended == total:
        firing.finished_at = now
        firing.succeeded = counts.get(Run.Status.SUCCEEDED, 0)
        firing.failed = total - firing.succeeded
        firing.save(update_fields=["finished_at", "succeeded", "failed"])
        if firing.failed:
            notify(
                f"firing:{firing.pk}:failed",
                "schedule.runs_failed",
                matrix=matrix,
                subject=f"Scheduled run of {matrix.name}: {firing.failed} of {total} runs failed",
                text=(
                    f"The scheduled launch of matrix {matrix.name} at "
                    f"{firing.fired_at:%Y-%m-%d %H:%M:%S} UTC ended with {firing.failed} of "
                    f"{total} runs failed or cancelled."
                ),
                data=firing_data(firing),
            )
        return
    if not firing.missing and now - firing.fired_at > timedelta(seconds=schedule.deadline_s):
        firing.missing = True
        firing.save(update_fields=["missing"])
        notify(
            f"firing:{firing.pk}:missing",
            "schedule.missing_run",
            matrix=matrix,
            subject=f"Missing run: {matrix.name} has not finished",
            text=(
                f"The scheduled launch of matrix {matrix.name} at "
                f"{firing.fired_at:%Y-%m-%d %H:%M:%S} UTC has not finished within its "
                f"deadline of {schedule.deadline_s} s: {ended} of {total} runs ended."
            ),
            data=firing_data(firing),
        )


def _late(schedule: MatrixSchedule, now) -> None:
    """Alert once when an enabled schedule's next firing is overdue by more than
    BEEWEB_SCHEDULE_LATE_SECONDS (beat down, or its message lost)."""
    last = schedule.firings.order_by("-fired_at").values_list("fired_at", flat=True).first()
    since = max(filter(None, [last, schedule.updated]))
    due = next_firing(schedule, since)
    if (now - due).total_seconds() <= settings.SCHEDULE_LATE_SECONDS:
        return
    matrix = schedule.matrix
    notify(
        f"schedule:{schedule.pk}:late:{due:%Y%m%dT%H%M%S}",
        "schedule.missing_firing",
        matrix=matrix,
        subject=f"Missing run: the schedule of {matrix.name} did not fire",
        text=(
            f"Matrix {matrix.name} ({schedule.describe()}) should have fired at "
            f"{due:%Y-%m-%d %H:%M:%S} UTC and nothing arrived: is beat running?"
        ),
        data={"matrix": str(matrix.uuid), "schedule": schedule.describe(), "due": due.isoformat()},
    )


def check() -> dict[str, int]:
    """The periodic check (beat, every BEEWEB_SCHEDULE_CHECK_SECONDS)."""
    now = timezone.now()
    open_firings = ScheduleFiring.objects.filter(
        outcome=ScheduleFiring.Outcome.LAUNCHED, finished_at__isnull=True
    ).select_related("schedule__matrix")
    counted = 0
    for firing in open_firings[:500]:
        _count_firing(firing, now)
        counted += 1
    # A firing whose wait for its nodes was lost (its worker restarted).
    lost_before = now - timedelta(seconds=settings.SCHEDULE_HOLD_WAIT_SECONDS + 120)
    for firing in ScheduleFiring.objects.filter(
        outcome=ScheduleFiring.Outcome.WAITING, fired_at__lt=lost_before
    ).select_related("schedule__matrix"):
        _not_run(firing, f"its wait for the nodes was lost; last seen: {firing.reason}")
    late = 0
    for schedule in MatrixSchedule.objects.filter(enabled=True).select_related("matrix"):
        try:
            _late(schedule, now)
        except (MatrixError, ValueError, RuntimeError):
            log.exception("cannot tell when schedule %s fires next", schedule.pk)
        late += 1
    return {"firings": counted, "schedules": late, "resent": resend_lost()}


@shared_task(name="matrices.check_schedules", ignore_result=True)
def check_schedules() -> dict[str, int]:
    return check()
