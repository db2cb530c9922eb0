"""Scheduled matrices (experiments.matrices.schedules): schedules validated and kept in step with
their django-celery-beat entry; each firing a new launch of the same cells by the owner's
authority, or recorded (and alerted) with the reason it could not run; paused schedules do
not fire; the periodic check counts a firing's runs, and alerts missing runs and firings."""

from __future__ import annotations

from datetime import timedelta
from unittest import mock

import pytest
from django.utils import timezone
from django_celery_beat.models import PeriodicTask

from experiments.matrices import schedules
from experiments.matrices.axes import MatrixError
from experiments.models import (
    Alert,
    Matrix,
    MatrixSchedule,
    NodeLease,
    Run,
    ScheduleFiring,
    Subscription,
    Worker,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def matrix(alice, bench):
    m = Matrix.objects.create(
        owner=alice,
        name="nightly fio",
        tool="fio",
        fixed_params={"rw": "write", "size": "1m", "bs": "1m"},
        axes=[{"param": "numjobs", "values": [1, 2]}],
        repetitions=2,
        drop_caches=False,
    )
    m.testbeds.set([bench])
    return m


@pytest.fixture
def online(bench):
    """A worker serving the launcher's queue, seen just now."""
    now = timezone.now()
    return Worker.objects.create(
        name="node@stor1", hostname="stor1", queues=["node.stor1"], started_at=now, last_seen=now
    )


@pytest.fixture
def subscribed(alice, matrix):
    return Subscription.objects.create(user=alice, matrix=matrix, email="alice@example.org")


def sent():
    """Dispatch's sends, captured (the firing's transaction never commits in a test)."""
    return mock.patch("experiments.execution.tasks.execute_run.apply_async")


@pytest.mark.parametrize(
    "text", ["30 2 * * *", "@daily", "@nightly", "*/15 * * * 1-5", "0 0 1 * *", " 0  3 * * 0 "]
)
def test_it_accepts_cron_expressions(text):
    assert len(schedules.parse_cron(text)) == 5


@pytest.mark.parametrize(
    "text",
    ["", "* * * *", "61 * * * *", "* 25 * * *", "@sometimes", "* * * * * *", "0 0 32 * *",
     "a b c d e", "0;rm * * * *", "0 0 * * 8"],
)  # fmt: skip
def test_it_refuses_bad_cron_expressions(matrix, text):
    with pytest.raises(MatrixError) as caught:
        schedules.save_schedule(matrix, cron=text)
    assert caught.value.field == "cron"
    assert (
        not MatrixSchedule.objects.exists()
        and not PeriodicTask.objects.filter(task=schedules.FIRE_TASK).exists()
    )


def test_a_schedule_keeps_its_beat_entry_in_step(matrix):
    schedule = schedules.save_schedule(matrix, cron="30 2 * * *")
    task = PeriodicTask.objects.get(task=schedules.FIRE_TASK)
    assert task.enabled and task.crontab.minute == "30" and task.crontab.hour == "2"
    assert task.interval is None and task.kwargs == f'{{"schedule": {schedule.pk}}}'
    schedules.save_schedule(matrix, every_s=15, enabled=False)
    task.refresh_from_db()
    assert not task.enabled and task.crontab is None and task.interval.every == 15
    assert MatrixSchedule.objects.get().describe() == "every 15 s (paused)"
    schedules.delete_schedule(MatrixSchedule.objects.get())
    assert not PeriodicTask.objects.filter(task=schedules.FIRE_TASK).exists()


def test_it_refuses_an_interval_too_short_and_an_adaptive_matrix(matrix):
    with pytest.raises(MatrixError, match="interval is 10 to"):
        schedules.save_schedule(matrix, every_s=1)
    with pytest.raises(MatrixError, match="either a cron expression or an interval"):
        schedules.save_schedule(matrix, cron="@daily", every_s=60)
    matrix.max_repetitions, matrix.target_cv = 10, 3.0
    with pytest.raises(MatrixError, match="adaptive"):
        schedules.save_schedule(matrix, every_s=60)


def test_each_firing_is_a_new_launch_of_the_same_cells(matrix, online):
    schedule = schedules.save_schedule(matrix, every_s=60)
    with sent():
        first = schedules.fire(schedule.pk)
    assert first.outcome == "launched" and (first.first_repetition, first.last_repetition) == (1, 2)
    assert first.runs == 4
    # Still running: the next firing does not pile a launch on top.
    busy = schedules.fire(schedule.pk)
    assert busy.outcome == "not_run" and "still running: 4 runs" in busy.reason
    assert matrix.runs.count() == 4
    matrix.runs.update(status=Run.Status.SUCCEEDED, finished_at=timezone.now())
    with sent():
        second = schedules.fire(schedule.pk)
    assert (second.first_repetition, second.last_repetition, second.runs) == (3, 4, 4)
    cells = {
        rep: sorted(matrix.runs.filter(repetition=rep).values_list("cell_key", flat=True))
        for rep in (1, 2, 3, 4)
    }
    assert cells[1] == cells[2] == cells[3] == cells[4] and len(cells[1]) == 2
    assert set(matrix.runs.filter(repetition__gte=3).values_list("status", flat=True)) == {"queued"}
    # The check closes the first firing with its counts.
    schedules.check()
    first.refresh_from_db()
    assert first.finished_at is not None and (first.succeeded, first.failed) == (4, 0)


def test_a_firing_without_an_online_worker_is_recorded_and_alerted(matrix, subscribed):
    schedule = schedules.save_schedule(matrix, every_s=60)
    firing = schedules.fire(schedule.pk)
    assert firing.outcome == "not_run"
    assert "no worker online for the testbed: nobody serves queue node.stor1" in firing.reason
    assert not matrix.runs.exists()
    alert = Alert.objects.get()
    assert alert.key == f"firing:{firing.pk}:not_run" and alert.kind == "schedule.not_run"
    assert "could not run: no worker online" in alert.text
    assert alert.data["outcome"] == "not_run" and alert.data["matrix"] == str(matrix.uuid)
    assert list(alert.deliveries.values_list("target", flat=True)) == ["alice@example.org"]


def test_a_firing_while_the_nodes_are_held_waits_then_is_not_run(
    alice, matrix, online, subscribed, settings, bench
):
    other = Matrix.objects.create(owner=alice, name="other", tool="fio")
    holder = Run.objects.create(
        owner=alice, testbed=bench, matrix=other, tool="fio", status=Run.Status.RUNNING,
        heartbeat_at=timezone.now(), attempts=1,
    )  # fmt: skip
    NodeLease.objects.create(hostname="stor1", run=holder, attempt=1, acquired_at=timezone.now())
    schedule = schedules.save_schedule(matrix, every_s=60)
    settings.SCHEDULE_HOLD_WAIT_SECONDS = 600
    with mock.patch.object(schedules.fire_schedule, "apply_async") as later:
        waiting = schedules.fire(schedule.pk)
    assert waiting.outcome == "waiting" and f"stor1 held by run {holder.uuid}" in waiting.reason
    assert later.call_args.kwargs["kwargs"] == {"schedule": schedule.pk, "firing": waiting.pk}
    # Its next look, once the wait is over: not run, alerted.
    settings.SCHEDULE_HOLD_WAIT_SECONDS = 0
    done = schedules.fire(schedule.pk, waiting.pk)
    assert done.pk == waiting.pk and done.outcome == "not_run"
    assert done.reason.startswith("nodes held too long (")
    assert not matrix.runs.exists()
    assert Alert.objects.get().kind == "schedule.not_run"


def test_a_paused_schedule_does_not_fire(matrix, online):
    schedule = schedules.save_schedule(matrix, every_s=60, enabled=False)
    assert schedules.fire(schedule.pk) is None
    assert not ScheduleFiring.objects.exists() and not matrix.runs.exists()


def test_a_firing_when_the_owner_no_longer_operates_the_testbed(matrix, online, bob, bench):
    bench.owner = bob
    bench.save()
    schedule = schedules.save_schedule(matrix, every_s=60)
    firing = schedules.fire(schedule.pk)
    assert firing.outcome == "not_run"
    assert "its owner may not launch it: you are not an operator of testbed 'bench'" in (
        firing.reason
    )


@pytest.mark.django_db(transaction=True)
def test_a_firing_whose_broker_is_down_leaves_nothing_planned(matrix, online, subscribed):
    schedule = schedules.save_schedule(matrix, every_s=60)

    def down(*args, **kwargs):
        raise ConnectionRefusedError(111, "Connection refused")

    with mock.patch("experiments.execution.tasks.execute_run.apply_async", side_effect=down):
        firing = schedules.fire(schedule.pk)
    assert firing.outcome == "not_run" and firing.reason.startswith("broker down:")
    assert not matrix.runs.exists()
    assert Alert.objects.get().kind == "schedule.not_run"


def test_a_launched_firing_not_finished_by_its_deadline_is_a_missing_run(
    matrix, online, subscribed
):
    schedule = schedules.save_schedule(matrix, every_s=60, deadline_s=60)
    with sent():
        firing = schedules.fire(schedule.pk)
    schedules.check()
    assert not Alert.objects.filter(kind="schedule.missing_run").exists()
    ScheduleFiring.objects.filter(pk=firing.pk).update(
        fired_at=timezone.now() - timedelta(seconds=61)
    )
    schedules.check()
    schedules.check()  # alerted once
    alert = Alert.objects.get(kind="schedule.missing_run")
    assert "has not finished within its deadline of 60 s: 0 of 4 runs ended" in alert.text
    firing.refresh_from_db()
    assert firing.missing and firing.finished_at is None


def test_a_firing_with_failed_runs_is_alerted_when_it_ends(matrix, online, subscribed):
    schedule = schedules.save_schedule(matrix, every_s=60)
    with sent():
        firing = schedules.fire(schedule.pk)
    runs = matrix.runs.order_by("pk")
    runs.update(status=Run.Status.SUCCEEDED)
    Run.objects.filter(pk=runs.first().pk).update(status=Run.Status.FAILED)
    schedules.check()
    firing.refresh_from_db()
    assert (firing.succeeded, firing.failed) == (3, 1)
    assert Alert.objects.get().subject.endswith("1 of 4 runs failed")


def test_a_schedule_that_did_not_fire_is_alerted(matrix, subscribed, settings):
    settings.SCHEDULE_LATE_SECONDS = 30
    schedule = schedules.save_schedule(matrix, every_s=60)
    schedules.check()
    assert not Alert.objects.exists()
    MatrixSchedule.objects.filter(pk=schedule.pk).update(
        updated=timezone.now() - timedelta(seconds=200)
    )
    schedules.check()
    schedules.check()
    alert = Alert.objects.get()
    assert alert.kind == "schedule.missing_firing" and "did not fire" in alert.subject
    # Paused: not expected to fire.
    Alert.objects.all().delete()
    MatrixSchedule.objects.filter(pk=schedule.pk).update(enabled=False)
    schedules.check()
    assert not Alert.objects.exists()


def test_a_cron_schedule_that_did_not_fire_is_alerted(matrix, subscribed, settings):
    settings.SCHEDULE_LATE_SECONDS = 60
    schedule = schedules.save_schedule(matrix, cron="*/5 * * * *")
    schedules.check()
    assert not Alert.objects.exists()
    MatrixSchedule.objects.filter(pk=schedule.pk).update(
        updated=timezone.now() - timedelta(minutes=20)
    )
    schedules.check()
    alert = Alert.objects.get()
    assert alert.kind == "schedule.missing_firing" and "cron */5 * * * *" in alert.text
    # A firing since: nothing more is due late.
    ScheduleFiring.objects.create(
        schedule=schedule, fired_at=timezone.now(), outcome=ScheduleFiring.Outcome.LAUNCHED,
        finished_at=timezone.now(),
    )  # fmt: skip
    schedules.check()
    assert Alert.objects.count() == 1


def test_deleting_the_matrix_takes_its_beat_entry_along(matrix):
    schedules.save_schedule(matrix, every_s=60)
    assert PeriodicTask.objects.filter(task=schedules.FIRE_TASK).exists()
    matrix.delete()
    assert not MatrixSchedule.objects.exists()
    assert not PeriodicTask.objects.filter(task=schedules.FIRE_TASK).exists()
