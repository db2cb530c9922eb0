"""The executor's Attempt (experiments.execution.attempt): the claim creates it and the steps
take it; what belongs to one attempt (nodes held, staged fields, the telemetry document, the
release) is on it, never on the Run instance."""

from __future__ import annotations

import shutil

import pytest
from django.utils import timezone

from experiments.execution import execute, holding
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
