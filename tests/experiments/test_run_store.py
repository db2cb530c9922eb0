"""A run's stored outcome in few statements (issue 17): the parsed fields, the executor's
status and error and the configuration key in one UPDATE (experiments.models.runs.store_row),
its metrics in one INSERT, the summaries' append without reading the key back; update_row
keeps RunQuerySet.update's summaries rule for one run in one statement. Each with the
summaries exact (experiments.results.summaries.differences) and nothing else changed."""

from __future__ import annotations

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from experiments.models import ConfigSummary, Metric, Run
from experiments.models.runs import update_row
from experiments.results import summaries
from experiments.results.store import parse_options, parse_stored, record_launch
from tests.helpers.comparison import make_testbed

DD = (
    "1+0 records in\n1+0 records out\n4096 bytes (4.1 kB, 4.0 KiB) copied, {seconds} s, 95.4 MB/s\n"
)


def _run(testbed, seconds: float = 4.2922e-05, **fields) -> Run:
    run = Run.objects.create(
        testbed=testbed,
        owner=testbed.owner,
        tool="dd",
        status=Run.Status.RUNNING,
        raw_output=DD.format(seconds=seconds),
        launch=record_launch({}, {"bs": "4k"}, parse_options("write")),
        **fields,
    )
    return Run.objects.get(pk=run.pk)  # as the executor's claim reads it


def _succeeded(run: Run) -> dict:
    if run.parse_error:
        return {"status": Run.Status.FAILED, "error": f"unparsable: {run.parse_error}"}
    return {"status": Run.Status.SUCCEEDED, "error": ""}


def _writes(queries, table: str) -> list[str]:
    """The statements that wrote ``table``."""
    targets = (f'UPDATE "{table}" ', f'INSERT INTO "{table}" ', f'DELETE FROM "{table}" ')
    return [q["sql"] for q in queries.captured_queries if q["sql"].startswith(targets)]


@pytest.mark.django_db
def test_a_first_store_is_one_update_of_the_run_with_its_outcome_and_key(alice):
    testbed = make_testbed(alice, "lab", "x86_64", "0")
    first = _run(testbed)
    parse_stored(first, outcome=_succeeded)
    run = _run(testbed, seconds=8.0e-05)
    with CaptureQueriesContext(connection) as queries:
        assert parse_stored(run, outcome=_succeeded) is None
    assert len(_writes(queries, "experiments_run")) == 1, "one UPDATE of the run"
    assert len(_writes(queries, "experiments_metric")) == 1, "one INSERT of its metrics"
    summary = _writes(queries, "experiments_configsummary")
    assert len(summary) == 1 and "ON CONFLICT" in summary[0], "appended, not recomputed"
    stored = Run.objects.get(pk=run.pk)
    assert (stored.status, stored.error, stored.parse_error) == ("succeeded", "", "")
    assert (run.status, run.error) == ("succeeded", ""), "the run in hand too"
    assert stored.params["bs"] == 4096, "launched parameters win (in bytes)"
    assert stored.config_key == summaries.key_of(stored) == Run.objects.get(pk=first.pk).config_key
    assert sorted(Metric.objects.filter(run=run).values_list("name", flat=True)) == sorted(
        Metric.objects.filter(run=first).values_list("name", flat=True)
    )
    assert ConfigSummary.objects.get(name="write_bw").n == 2
    assert summaries.differences(limit=0) == []


@pytest.mark.django_db
def test_the_outcome_sees_the_parse_error(alice):
    testbed = make_testbed(alice, "lab", "x86_64", "0")
    run = _run(testbed)
    run.raw_output = "dd: failed to open 'x': Permission denied\n"
    Run.objects.filter(pk=run.pk).update(raw_output=run.raw_output)
    assert parse_stored(run, outcome=_succeeded)
    stored = Run.objects.get(pk=run.pk)
    assert stored.status == "failed" and stored.error.startswith("unparsable: ")
    assert stored.parse_error and not Metric.objects.filter(run=run).exists()
    assert stored.config_key == summaries.key_of(stored)
    assert summaries.differences(limit=0) == []


@pytest.mark.django_db
def test_a_run_in_hand_older_than_its_row_gets_the_rows_key(alice):
    testbed = make_testbed(alice, "lab", "x86_64", "0")
    other = make_testbed(alice, "other", "aarch64", "0")
    run = _run(testbed)
    # Moved to another testbed after the executor read it (no metric: no refresh).
    Run.objects.filter(pk=run.pk).update(testbed=other)
    parse_stored(run, outcome=_succeeded)
    stored = Run.objects.get(pk=run.pk)
    assert stored.testbed_id == other.pk
    assert stored.config_key == summaries.key_of(stored) != summaries.key_of(run)
    assert summaries.differences(limit=0) == []


@pytest.mark.django_db
def test_a_run_that_had_metrics_has_them_replaced_and_its_summaries_recomputed(alice):
    testbed = make_testbed(alice, "lab", "x86_64", "0")
    keep = _run(testbed)
    parse_stored(keep, outcome=_succeeded)
    run = _run(testbed, seconds=8.0e-05)
    parse_stored(run, outcome=_succeeded)
    old_key = Run.objects.get(pk=run.pk).config_key
    # A requeued attempt of another configuration (its launched parameters differ).
    run.raw_output = DD.format(seconds=1.6e-04)
    run.launch = record_launch({}, {"bs": "8k"}, parse_options("write"))
    run.launch["params"] = {"bs": "8k"}
    Run.objects.filter(pk=run.pk).update(raw_output=run.raw_output, launch=run.launch)
    parse_stored(run, outcome=_succeeded)
    stored = Run.objects.get(pk=run.pk)
    assert stored.params["bs"] == 8192 and stored.config_key != old_key
    assert stored.config_key == summaries.key_of(stored)
    assert Metric.objects.filter(run=run, name="write_bw").count() == 1
    assert ConfigSummary.objects.get(name="write_bw", config_key=old_key).n == 1
    assert ConfigSummary.objects.get(name="write_bw", config_key=stored.config_key).n == 1
    assert summaries.differences(limit=0) == []


@pytest.mark.django_db
def test_a_run_deleted_meanwhile_stores_nothing(alice):
    testbed = make_testbed(alice, "lab", "x86_64", "0")
    run = _run(testbed)
    Run.objects.filter(pk=run.pk).delete()
    parse_stored(run, outcome=_succeeded)
    assert not Run.objects.filter(pk=run.pk).exists()
    assert not Metric.objects.exists() and not ConfigSummary.objects.exists()


@pytest.mark.django_db
def test_update_row_refreshes_the_summaries_of_a_summarised_run_only(alice):
    testbed = make_testbed(alice, "lab", "x86_64", "0")
    run = _run(testbed)
    bare = _run(testbed)
    parse_stored(run, outcome=_succeeded)
    with CaptureQueriesContext(connection) as queries:
        assert update_row(bare.pk, {"bottleneck": "disk"}) == 1
        assert update_row(run.pk, {"notes": "n"}) == 1
    assert not _writes(queries, "experiments_configsummary"), (
        "no headline metric, or no summarised field"
    )
    assert len(queries.captured_queries) == 2, "one statement each"
    with CaptureQueriesContext(connection) as queries:
        assert update_row(run.pk, {"bottleneck": "disk"}) == 1
    assert _writes(queries, "experiments_configsummary"), "a summarised column of a summarised run"
    assert ConfigSummary.objects.get(name="write_bw").bn_disk == 1
    assert summaries.differences(limit=0) == []
    assert update_row(run.pk + bare.pk + 1000, {"bottleneck": "cpu"}) == 0


@pytest.mark.django_db
def test_the_claims_row_read_equals_the_orms(alice):
    from experiments.execution.execute import _locked_run

    testbed = make_testbed(alice, "lab", "x86_64", "0")
    run = _run(testbed, params={"x": [1, 2.5]}, steady={"write_bw": {"whole": 1.0}})
    with transaction.atomic():
        read = _locked_run(run.pk)
    orm = Run.objects.get(pk=run.pk)
    for field in Run._meta.concrete_fields:
        assert getattr(read, field.attname) == getattr(orm, field.attname), field.name
    assert read._state.adding is False and read._summarised == orm._summarised
    assert _locked_run(run.pk + 1000) is None


@pytest.mark.django_db
def test_a_few_metric_rows_are_one_insert_with_their_ids(alice):
    from experiments.results.store import insert, metric_rows

    testbed = make_testbed(alice, "lab", "x86_64", "0")
    run = _run(testbed)
    rows = metric_rows(
        [
            {"name": "write_bw", "value": 1.5, "unit": "B/s", "extra": {"job": "a"}},
            {"name": "elapsed", "value": 2.0, "unit": "s", "iteration": 3},
        ],
        run.pk,
    )
    with CaptureQueriesContext(connection) as queries:
        insert(Metric, rows)
    if connection.vendor == "postgresql":
        assert len(queries.captured_queries) == 1
    stored = {m.pk: m for m in Metric.objects.filter(run=run)}
    assert sorted(stored) == sorted(row.id for row in rows)
    for row in rows:
        metric = stored[row.id]
        assert (metric.name, metric.value, metric.extra, metric.iteration, metric.primary) == (
            row.name,
            row.value,
            row.extra,
            row.iteration,
            row.primary,
        )


@pytest.mark.django_db
def test_update_rows_set_clause_prepares_values_as_their_fields_do():
    """``_set_clause`` keeps a text, float or bool as it is and has every other value
    prepared by its field (worked out once per field): the same parameters, of the same
    types, as each field's get_db_prep_save gives (PostgreSQL wraps an int in Int4, a JSON
    value in Jsonb; a datetime, a None and a choice pass through the field)."""
    from django.utils import timezone

    from experiments.models.runs import _set_clause

    now = timezone.now()
    fields = {
        "status": Run.Status.RUNNING,
        "worker": "w@test",
        "raw_output": "out",
        "pid": 4242,
        "exit_code": None,
        "attempts": 2,
        "started_at": now,
        "launch": {"history": []},
        "nodes_held": ["stor1"],
        "write_steady": 1.5,
        "collapsed": True,
    }
    for _ in range(2):  # worked out, then from the plan
        columns, params = _set_clause(fields)
        expected = [
            Run._meta.get_field(name).get_db_prep_save(value, connection)
            for name, value in fields.items()
        ]
        assert [type(p) for p in params] == [type(e) for e in expected]
        assert [repr(p) for p in params] == [repr(e) for e in expected]
        assert columns == [
            f"{connection.ops.quote_name(Run._meta.get_field(n).column)} = %s" for n in fields
        ]
