"""Bulk ingest stays strict and atomic however it is sped up: each bad item is named with
its field (and nothing of it stored), the valid items of a request are written in one
transaction (all of them, each with every metric, or none), and two requests racing with the
same client keys store each run once. On PostgreSQL (COPY) and SQLite (bulk_create)."""

from __future__ import annotations

import threading
import uuid

import pytest
from django.db import IntegrityError, connection, connections

from experiments.models import Metric, Run
from experiments.results import ingest as ingest_module
from experiments.results.ingest import ingest


def item(i: int, **changes) -> dict:
    data = {
        "key": f"k-{i}",
        "testbed": "bench",
        "tool": "fio",
        "params": {"threads": i, "rw": "write"},
        "metrics": [
            {"name": "write_bw", "value": 1e9 + i},
            {"name": "write_lat", "value": 0.001, "stat": "mean", "extra": {"unit_note": "x"}},
            {"name": "elapsed", "value": 60},
        ],
    }
    data.update(changes)
    return data


DEEP: list = [1]
for _ in range(21):  # 21 lists in a parameter: deeper than the 20 levels a run's JSON may have
    DEEP = [DEEP]


def bad_metric(**fields) -> list[dict]:
    return [{"name": "write_bw", "value": 1.0, **fields}]


BAD = {
    "metric value is text": (
        {"metrics": bad_metric(value="fast")},
        "metrics[0]",
        "value must be a number",
    ),
    "unknown metric": ({"metrics": [{"name": "speed", "value": 1}]}, "metrics[0]", "speed"),
    "unit not the base unit": ({"metrics": bad_metric(unit="MB/s")}, "metrics[0]", "B/s"),
    "negative iteration": ({"metrics": bad_metric(iteration=-1)}, "metrics[0]", "iteration"),
    "unknown statistic": ({"metrics": bad_metric(stat="p42")}, "metrics[0]", "statistic"),
    "extra not an object": ({"metrics": bad_metric(extra=[1])}, "metrics[0]", "extra"),
    "unknown metric field": ({"metrics": bad_metric(colour=1)}, "metrics[0]", "colour"),
    "params not an object": ({"params": [1, 2]}, "params", "object"),
    "params nested too deep": ({"params": {"a": DEEP}}, "params", "deeper"),
    "start not a date": ({"started_at": "yesterday"}, "started_at", "ISO 8601"),
    "unknown tool": ({"tool": "hammer"}, "tool", "hammer"),
    "unknown status": ({"status": "running"}, "status", "one of"),
    "exit code not an integer": ({"exit_code": 1.5}, "exit_code", "integer"),
    "no such testbed": ({"testbed": "nowhere"}, "testbed", "nowhere"),
    "no such tuning set": ({"tuning_set": "nothing"}, "tuning_set", "nothing"),
    "unknown item field": ({"colour": "red"}, "item", "colour"),
    "label too long": ({"label": "x" * 201}, "label", "200"),
}


@pytest.mark.django_db
@pytest.mark.parametrize("case", BAD, ids=list(BAD))
def test_a_bad_item_is_named_with_its_field_and_the_rest_stored_whole(api, testbed, case):
    changes, field, words = BAD[case]
    items = [item(0), item(1, **changes), item(2)]
    response = api.post("/api/runs/bulk/", items)
    assert response.status_code == 200
    data = response.json()
    assert (data["created"], data["invalid"]) == (2, 1)
    bad = data["results"][1]
    assert bad["index"] == 1 and bad["status"] == "invalid" and "uuid" not in bad
    assert field in bad["errors"], bad["errors"]
    assert words in bad["errors"][field]
    assert set(Run.objects.values_list("client_key", flat=True)) == {"k-0", "k-2"}
    for run in Run.objects.all():
        assert run.metrics.count() == 3


@pytest.mark.django_db
def test_one_run_posted_alone_answers_400_naming_the_field(api, testbed):
    response = api.post("/api/runs/", item(0, metrics=bad_metric(unit="GB/s")))
    assert response.status_code == 400
    assert "metrics[0]" in response.json()["errors"]
    assert not Run.objects.exists()


@pytest.mark.django_db
def test_an_unstorable_body_is_refused_whole_with_its_place(api, testbed):
    items = [item(0), item(1, params={"threads": 1, "path": "/mnt/\x00"})]
    response = api.post("/api/runs/bulk/", items)
    assert response.status_code == 400
    assert "$[1].params.path" in response.json()["detail"]
    assert not Run.objects.exists() and not Metric.objects.exists()


@pytest.mark.django_db
def test_a_database_error_in_a_batch_stores_nothing_of_it(alice, testbed, monkeypatch):
    """The third run collides with the first (the same uuid, unique in the table) when the
    batch is written: the runs, metrics and telemetry of the whole batch roll back."""
    made = []
    real = ingest_module._run

    def colliding(defaults, values):
        row = real(defaults, values)
        made.append(row)
        if len(made) % 3 == 0:
            row.uuid = made[-3].uuid
        return row

    monkeypatch.setattr(ingest_module, "_run", colliding)
    with pytest.raises(IntegrityError):
        ingest([item(i) for i in range(5)], alice)
    assert not Run.objects.exists() and not Metric.objects.exists()
    monkeypatch.setattr(ingest_module, "_run", real)
    results = ingest([item(i) for i in range(5)], alice)
    assert [r["status"] for r in results] == ["created"] * 5
    assert Metric.objects.count() == 15


@pytest.mark.django_db(transaction=True)
def test_racing_requests_with_the_same_keys_store_each_run_once(alice, testbed):
    if connection.vendor != "postgresql":
        pytest.skip("SQLite serialises writers: there is no race to lose")
    items = [item(i) for i in range(200)]
    outcomes: list[list[str]] = []
    errors: list[BaseException] = []
    start = threading.Barrier(3)

    def post():
        try:
            start.wait()
            outcomes.append([r["status"] for r in ingest(items, alice)])
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=post) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    statuses = sorted(s for outcome in outcomes for s in outcome)
    assert statuses.count("created") == 200 and statuses.count("existing") == 400
    assert Run.objects.count() == 200 and Metric.objects.count() == 600
    assert len(set(Run.objects.values_list("uuid", flat=True))) == 200
    run = Run.objects.get(client_key="k-7")
    assert sorted(run.metrics.values_list("name", flat=True)) == [
        "elapsed",
        "write_bw",
        "write_lat",
    ]


@pytest.mark.django_db
def test_copy_writes_every_column_as_the_orm_reads_it(alice, testbed, tuning_set):
    """The rows written by COPY (PostgreSQL) or bulk_create (SQLite) read back as given:
    JSON columns (empty ones too), dates, nulls, text with tabs, newlines and backslashes."""
    text = 'tab\there\nnew line \\ backslash "quoted"'
    results = ingest(
        [
            item(
                0,
                label=text,
                notes=text,
                tuning_set="base",
                params={"nested": {"a": [1, 2.5, None, True]}, "s": text},
                started_at="2026-01-02T03:04:05.123456Z",
                exit_code=-3,
                metrics=[
                    {"name": "write_bw", "value": 2.5e9, "extra": {"job": "j1", "t": text}},
                    {"name": "write_bw", "value": 2e9, "iteration": 3, "source_ref": "line 9"},
                ],
            )
        ],
        alice,
    )
    run = Run.objects.get(uuid=uuid.UUID(results[0]["uuid"]))
    assert run.label == text and run.notes == text
    assert run.params == {"nested": {"a": [1, 2.5, None, True]}, "s": text}
    assert run.started_at.isoformat() == "2026-01-02T03:04:05.123456+00:00"
    assert run.exit_code == -3 and run.finished_at is None and run.matrix_id is None
    assert run.tuning_set == tuning_set and run.steady == {} and run.argv == []
    assert run.launch["metrics_given"] is True
    metrics = {(m.iteration, m.value): m for m in run.metrics.all()}
    assert metrics[(None, 2.5e9)].extra == {"job": "j1", "t": text}
    assert metrics[(3, 2e9)].source_ref == "line 9" and metrics[(3, 2e9)].extra == {}
    assert not any(m.primary for m in run.metrics.all())  # a job's value, an iteration
