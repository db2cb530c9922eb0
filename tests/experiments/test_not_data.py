"""Only runs that finished as measured are data (issue 25, finding 1): a cancelled, failed
or timed-out run keeps what it measured on its own page, labelled as not data, but its
metrics are never a comparison point, a sentence, a configuration summary, a runs-table
value or an API aggregate, whichever way they were stored and whatever status the run had
before; and the comparison counts the runs it shows."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from experiments.comparison import ComparisonSpec, compute
from experiments.models import ConfigSummary, Metric, Run
from experiments.models.runs import update_row
from experiments.results import summaries
from experiments.results.store import parse_stored, replace_metrics
from tests.helpers.comparison import add_run, make_testbed

pytestmark = pytest.mark.django_db

FIO = Path(__file__).resolve().parents[1] / "parsers/fixtures/fio"
FIO_WRITE = (FIO / "fio-3.33-json-numjobs2-group-reporting.json").read_text()


def points(query: str, runs=None) -> list:
    spec = ComparisonSpec.from_query(query)
    return compute(spec, Run.objects.all() if runs is None else runs).points


def both_paths(query: str) -> list[list]:
    """The comparison from the configuration summaries and from the metric rows."""
    return [points(query), points(query, Run.objects.filter(tool="fio"))]


def cancelled_mid_way(tb, **params) -> Run:
    """An executed fio run cancelled while it ran: fio printed its results on SIGTERM and the
    executor parsed them with the run's final status (its ``outcome``)."""
    run = Run.objects.create(
        testbed=tb, tool="fio", status="running", params=params, raw_output=FIO_WRITE
    )
    parse_stored(
        run,
        outcome=lambda r: {"status": "cancelled", "error": "cancelled while running"},
    )
    return run


def test_a_cancelled_run_is_never_a_point_nor_a_summary(alice, alice_client):
    tb = make_testbed(alice, "lab", "x86_64", "0")
    add_run(tb, 1.0e9, threads=4)
    cancelled = cancelled_mid_way(tb, threads=8)
    assert cancelled.metrics.filter(name="write_bw").exists()  # what it measured is kept
    assert not Metric.objects.filter(run=cancelled, primary=True).exists()
    assert not ConfigSummary.objects.filter(config_key=summaries.key_of(cancelled)).exists()
    assert summaries.differences() == []
    for pts in both_paths("metric=write_bw&x=param:threads"):
        assert [(p.x_key, p.n) for p in pts] == [("4", 1)]
    # The runs table (and its export) shows the run and its status, but no value.
    response = alice_client.get("/runs/table/runs.json?cols=metric:write_bw,status")
    export = json.loads(b"".join(response.streaming_content))
    row = next(r for r in export["runs"] if r["uuid"] == str(cancelled.uuid))
    assert row["values"]["status"] == "cancelled"
    assert row["values"]["metric:write_bw"]["value"] is None
    # Its own page still shows what it measured, labelled as not data.
    body = alice_client.get(cancelled.get_absolute_url()).content.decode()
    assert "2.10" in body or "2.097" in body
    assert "not data" in body.lower()


def test_failed_and_timed_out_runs_stored_with_metrics_are_not_data(alice):
    tb = make_testbed(alice, "lab", "x86_64", "0")
    add_run(tb, 1.0e9, threads=4)
    failed = Run.objects.create(testbed=tb, tool="fio", status="failed", params={"threads": 4})
    replace_metrics(failed, [{"name": "write_bw", "value": 9.0e9, "unit": "B/s"}])
    timed_out = Run.objects.create(
        testbed=tb, tool="fio", status="running", params={"threads": 4}, raw_output=FIO_WRITE
    )
    parse_stored(timed_out, outcome=lambda r: {"status": "failed", "error": "timed out after 60 s"})
    for pts in both_paths("metric=write_bw&x=param:threads"):
        assert [(p.n, p.mean) for p in pts] == [(1, 1.0)]
    assert summaries.differences() == []


def test_a_status_change_moves_the_run_in_and_out_of_the_data(alice):
    tb = make_testbed(alice, "lab", "x86_64", "0")
    run = add_run(tb, 1.0e9, threads=4)
    add_run(tb, 3.0e9, threads=4)

    def n() -> list[int]:
        return [p.n for pts in both_paths("metric=write_bw&x=param:threads") for p in pts]

    assert n() == [2, 2]
    Run.objects.filter(pk=run.pk).update(status="cancelled")
    assert n() == [1, 1] and summaries.differences() == []
    run.refresh_from_db()
    run.status = "succeeded"
    run.save()
    assert n() == [2, 2] and summaries.differences() == []
    update_row(run.pk, {"status": "failed"})
    assert n() == [1, 1] and summaries.differences() == []


def test_a_rerun_of_a_cancelled_run_counts_once_it_succeeds(alice):
    tb = make_testbed(alice, "lab", "x86_64", "0")
    run = cancelled_mid_way(tb, threads=2)
    assert points("metric=write_bw&x=param:threads") == []
    Run.objects.filter(pk=run.pk).update(status="queued")  # "re-run failed" dispatches it
    run.refresh_from_db()
    run.status = "running"
    run.save()
    assert points("metric=write_bw&x=param:threads") == []
    parse_stored(run, outcome=lambda r: {"status": "succeeded", "error": ""})
    for pts in both_paths("metric=write_bw&x=param:threads"):
        assert [p.n for p in pts] == [1]
    assert summaries.differences() == []


def test_migration_takes_existing_non_data_runs_out_of_the_data(alice):
    """Rows stored before the rule: a cancelled run's headline metrics primary and in its
    configuration's summary. The data migration demotes them and recomputes the summaries."""
    import importlib

    from django.apps import apps

    tb = make_testbed(alice, "lab", "x86_64", "0")
    add_run(tb, 1.0e9, threads=4)
    old = add_run(tb, 5.0e9, threads=4)
    # As the old code left it: cancelled afterwards, its metric still primary and summarised.
    Run.objects.filter(pk=old.pk).update(status="cancelled")
    Metric.objects.filter(run=old, name="write_bw", extra={}).update(primary=True)
    summaries.rebuild()
    assert [p.n for p in points("metric=write_bw&x=param:threads")] == [2]

    migration = importlib.import_module("experiments.migrations.0022_runs_that_are_data")
    migration.demote_non_data(apps, None)
    assert not Metric.objects.filter(run=old, primary=True).exists()
    for pts in both_paths("metric=write_bw&x=param:threads"):
        assert [(p.n, p.mean) for p in pts] == [(1, 1.0)]
    assert summaries.differences() == []


def test_the_page_counts_the_runs_it_shows(alice, alice_client):
    """Two runs, one measured writes and the other reads: the page said "1 run"."""
    tb = make_testbed(alice, "lab", "x86_64", "0")
    add_run(tb, 1.0e9, metric="write_bw", threads=4)
    add_run(tb, 2.0e9, metric="read_bw", threads=4)
    body = alice_client.get("/compare/?metric=write_bw&metric=read_bw&x=param:threads").content
    text = body.decode()
    assert "1 run;" not in text
    assert "Runs: 1 for write_bw, 1 for read_bw" in text


def test_api_aggregates_leave_non_data_runs_out(alice, testbed):
    """Bulk ingest of a failed run with metrics, and an executed run cancelled mid-way: the
    compare API pools neither; the metrics API lists their values but no headline."""
    from tests.helpers.api import token_client

    api = token_client(alice)
    items = [
        {
            "testbed": "bench",
            "tool": "fio",
            "params": {"threads": 1},
            "status": status,
            "metrics": [{"name": "write_bw", "value": v}],
        }
        for status, v in [("succeeded", 1e9), ("failed", 50e9), ("imported", 3e9)]
    ]
    assert api.post("/api/runs/bulk/", items, format="json").status_code in (200, 201)
    cancelled = cancelled_mid_way(testbed, threads=1)
    data = api.get("/api/compare/", {"metric": "write_bw", "x": "param:threads"}).json()
    assert [(p["x_key"], p["n"], p["max"]) for p in data["points"]] == [("1", 2, 3.0)]
    assert data["n_runs"] == 2
    headline = api.get("/api/metrics/", {"name": "write_bw", "primary": "true"}).json()
    assert sorted(m["value"] for m in headline["results"]) == [1e9, 3e9]
    run = api.get(f"/api/runs/{cancelled.uuid}/").json()
    assert run["status"] == "cancelled" and run["metrics"]  # what it measured, kept
    assert summaries.differences() == []
