"""The executor's Attempt (experiments.execution.attempt): the claim creates it and the steps
take it; what belongs to one attempt (nodes held, staged fields, the telemetry document, the
release) is on it, never on the Run instance."""

from __future__ import annotations

import shutil
import subprocess
from datetime import timedelta

import pytest
from django.utils import timezone

from experiments.execution import dispatch, execute, holding
from experiments.execution.attempt import Attempt
from experiments.models import Run, RunTelemetry
from experiments.results import telemetry
from runners.sampler import FORMAT
from tests.helpers.execution import make_matrix, queue

pytestmark = pytest.mark.skipif(shutil.which("dd") is None, reason="dd is not installed")


@pytest.fixture
def run(alice, executing_bench) -> Run:
    return make_matrix(
        alice, executing_bench, tool="dd", params={"bs": "4k", "count": 1}
    ).runs.get()


def _extra_state(run: Run) -> set[str]:
    """What sits on the instance besides what a freshly read one has (its fields, Django's
    state and the model's own)."""
    return set(run.__dict__) - set(Run.objects.get(pk=run.pk).__dict__)


@pytest.mark.django_db
def test_the_claim_starts_an_attempt_and_keeps_nothing_on_the_run(run):
    token = queue(run)
    attempt = execute.claim(run.pk, token, "w@test")
    try:
        assert isinstance(attempt, Attempt)
        assert (attempt.token, attempt.worker, attempt.held) == (token, "w@test", True)
        assert attempt.run.status == Run.Status.RUNNING and attempt.run.nodes_held
        assert not attempt.staged and attempt.telemetry is None and not attempt.released
        assert _extra_state(attempt.run) == set()
        assert execute.claim(run.pk, token, "w@test") is None, "the delivery is stale now"
    finally:
        holding.release(attempt.run)


@pytest.mark.django_db
def test_staged_fields_are_written_with_the_next_write(run):
    attempt = execute.claim(run.pk, queue(run), "w@test")
    try:
        attempt.stage(tool_version="dd 9.9", pid=4242)
        assert (attempt.run.tool_version, attempt.run.pid) == ("dd 9.9", 4242)
        row = Run.objects.get(pk=run.pk)
        assert (row.tool_version, row.pid) != ("dd 9.9", 4242), "not written yet"
        assert attempt.update(heartbeat_at=timezone.now()) == 1
        row = Run.objects.get(pk=run.pk)
        assert (row.tool_version, row.pid) == ("dd 9.9", 4242)
        assert attempt.staged == {} and _extra_state(attempt.run) == set()
    finally:
        holding.release(attempt.run)


@pytest.mark.django_db
def test_a_finished_attempt_stores_its_kept_telemetry_and_releases_its_nodes(run, tmp_path):
    attempt = execute.claim(run.pk, queue(run), "w@test")
    kept: list[dict] = []
    with telemetry.recording(attempt.run, tmp_path, keep=kept.append):
        pass
    assert len(kept) == 1 and kept[0]["format"] == FORMAT
    assert not RunTelemetry.objects.filter(run=run).exists(), "handed over, not stored"
    attempt.keep_telemetry(kept[0])
    execute._finish(attempt, Run.Status.FAILED, "", None, "stopped by the test")
    assert attempt.released and attempt.telemetry is None
    assert RunTelemetry.objects.filter(run=run).count() == 1
    row = Run.objects.get(pk=run.pk)
    assert (row.status, row.error) == (Run.Status.FAILED, "stopped by the test")
    assert row.leases.count() == 0


def _dd_output(tmp_path) -> str:
    """What a real dd of 4 KiB prints (its statistics, on stderr)."""
    return subprocess.run(
        ["dd", "if=/dev/zero", f"of={tmp_path / 'dd.out'}", "bs=4k", "count=1"],
        capture_output=True,
        text=True,
        check=True,
    ).stderr


@pytest.mark.django_db
def test_an_attempt_the_janitor_took_writes_nothing_over_the_run(
    run, tmp_path, settings, django_capture_on_commit_callbacks
):
    """A worker cut off mid-run comes back after the janitor requeued its run: its heartbeat
    and its outcome find the run no longer running its attempt and write nothing."""
    settings.RUN_MAX_ATTEMPTS = 2
    attempt = execute.claim(run.pk, queue(run), "w@test")
    Run.objects.filter(pk=run.pk).update(heartbeat_at=timezone.now() - timedelta(minutes=5))
    with django_capture_on_commit_callbacks(execute=False):
        assert dispatch.janitor(stale_seconds=60)["requeued"] == 1
    taken = Run.objects.get(pk=run.pk)
    assert taken.status == Run.Status.QUEUED and taken.attempts == 1
    assert attempt.update(heartbeat_at=timezone.now()) == 0
    execute._finish(attempt, Run.Status.SUCCEEDED, _dd_output(tmp_path), 0, "")
    row = Run.objects.get(pk=run.pk)
    assert (row.status, row.raw_output, row.exit_code) == (Run.Status.QUEUED, "", None)
    assert row.heartbeat_at == taken.heartbeat_at and row.error == taken.error
    assert not row.metrics.exists() and not row.leases.exists()


@pytest.mark.django_db
def test_an_attempt_a_later_attempt_replaced_writes_nothing_over_it(run, tmp_path):
    """The janitor requeued the run and its next attempt (another worker) claimed it: the first
    attempt's outcome is dropped; the second's leases and row are untouched."""
    first = execute.claim(run.pk, queue(run), "w1@test")
    holding.release(first.run)
    Run.objects.filter(pk=run.pk).update(status=Run.Status.FAILED)  # the janitor's requeue
    second = execute.claim(run.pk, queue(run), "w2@test")
    try:
        assert second.run.attempts == 2 and second.held
        execute._finish(first, Run.Status.SUCCEEDED, _dd_output(tmp_path), 0, "")
        row = Run.objects.get(pk=run.pk)
        assert (row.status, row.attempts, row.worker) == (Run.Status.RUNNING, 2, "w2@test")
        assert row.raw_output == "" and not row.metrics.exists()
        assert row.leases.filter(attempt=2).exists(), "the second attempt still holds its node"
        execute._finish(second, Run.Status.SUCCEEDED, _dd_output(tmp_path), 0, "")
        row = Run.objects.get(pk=run.pk)
        assert row.status == Run.Status.SUCCEEDED and row.metrics.exists()
    finally:
        holding.release(second.run)
