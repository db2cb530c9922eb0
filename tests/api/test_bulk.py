"""Bulk ingest (POST /api/runs/bulk/ and /api/runs/): raw output stored then parsed, explicit
metrics validated against DESIGN.md's vocabulary, idempotent client keys, constant query
count."""

from __future__ import annotations

import json

import pytest

from experiments.models import Metric, Run
from tests.helpers.samples import sample

pytestmark = pytest.mark.django_db


def metric_item(i: int, **extra) -> dict:
    return {
        "testbed": "bench",
        "tool": "fio",
        "key": f"job-{i}",
        "params": {"threads": i},
        "metrics": [
            {"name": "write_bw", "value": 1e9 + i},
            {"name": "write_iops", "value": 100.0, "unit": "op/s"},
            {"name": "write_lat", "value": 0.001, "stat": "mean"},
            {"name": "write_lat", "value": 0.002, "stat": "max"},
            {"name": "write_bw", "value": 9.0, "iteration": 0},
        ],
        **extra,
    }


def test_bulk_creates_runs_with_metrics_and_primary(api, testbed, tuning_set):
    response = api.post("/api/runs/bulk/", [metric_item(i, tuning_set="base") for i in range(3)])
    assert response.status_code == 200
    assert response.json()["created"] == 3
    run = Run.objects.get(client_key="job-2")
    assert run.owner.username == "alice" and run.testbed == testbed
    assert run.tuning_set == tuning_set and run.status == "imported"
    assert run.params == {"threads": 2}
    primary = {(m.name, m.stat) for m in run.metrics.filter(primary=True)}
    assert primary == {("write_bw", "value"), ("write_iops", "value"), ("write_lat", "mean")}
    assert run.metrics.get(name="write_bw", primary=True).value == 1e9 + 2


def test_bulk_is_idempotent_by_key(api, testbed):
    first = api.post("/api/runs/bulk/", [metric_item(1), metric_item(2)]).json()
    again = api.post("/api/runs/bulk/", [metric_item(1), metric_item(3), metric_item(3)]).json()
    assert (again["created"], again["existing"]) == (1, 2)
    assert again["results"][0]["uuid"] == first["results"][0]["uuid"]
    assert again["results"][2]["uuid"] == again["results"][1]["uuid"]
    assert Run.objects.count() == 3
    assert Metric.objects.count() == 15


def test_keys_are_per_owner(api, bob, bob_api, testbed):
    testbed.operators.add(bob)  # bob stores runs in alice's testbed as its operator
    api.post("/api/runs/bulk/", [metric_item(1)])
    assert bob_api.post("/api/runs/bulk/", [metric_item(1)]).json()["created"] == 1
    assert Run.objects.filter(client_key="job-1").count() == 2


def test_invalid_items_are_reported_and_the_rest_stored(api, testbed):
    items = [
        metric_item(1),
        {"testbed": "bench", "tool": "fio", "metrics": [{"name": "speed", "value": 1}]},
        {
            "testbed": "bench",
            "tool": "fio",
            "metrics": [{"name": "write_bw", "value": 1, "unit": "MB/s"}],
        },
        {"testbed": "nowhere", "tool": "fio", "metrics": []},
        {"testbed": "bench", "tool": "fio", "metrics": [{"name": "write_bw", "value": "fast"}]},
        {"testbed": "bench"},
        "not an object",
        {"testbed": "bench", "tool": "fio", "metrics": [], "bogus": 1},
    ]
    data = api.post("/api/runs/bulk/", items).json()
    assert [r["status"] for r in data["results"]] == ["created"] + ["invalid"] * 7
    errors = [json.dumps(r.get("errors")) for r in data["results"]]
    assert "unknown metric name 'speed'" in errors[1]
    assert "unit must be 'B/s'" in errors[2]
    assert "no testbed 'nowhere'" in errors[3]
    assert "raw_output" in errors[5]
    assert Run.objects.count() == 1


def test_malformed_requests_are_400(api, testbed):
    assert api.post("/api/runs/bulk/", {"testbed": "bench"}).status_code == 400
    assert api.post("/api/runs/bulk/", "[1,", content_type="application/json").status_code == 400


def test_raw_output_is_stored_and_parsed(api, testbed):
    text = sample("fio/fio-3.28-json-15jobs-randread-buffered-beegfs-thesis.json")
    data = api.post(
        "/api/runs/bulk/",
        [{"testbed": str(testbed.uuid), "raw_output": text, "key": "f1", "params": {"site": "a"}}],
    ).json()
    assert data["results"][0]["status"] == "created"
    run = Run.objects.get(uuid=data["results"][0]["uuid"])
    assert run.tool == "fio" and run.raw_output == text and not run.parse_error
    assert run.params["site"] == "a" and "threads" in run.params
    assert run.metrics.filter(name="read_bw", primary=True).count() == 1


def test_unparsable_output_keeps_the_run_with_its_error(api, testbed):
    data = api.post(
        "/api/runs/", {"testbed": "bench", "raw_output": "hello\nworld\n", "tool": "ior"}
    )
    assert data.status_code == 201
    run = Run.objects.get(uuid=data.json()["uuid"])
    assert run.raw_output == "hello\nworld\n" and run.parse_error
    assert not run.metrics.exists()
    assert data.json()["parse_error"] == run.parse_error


def test_json_lines(api, testbed):
    body = "\n".join(json.dumps(metric_item(i)) for i in range(4)) + "\n"
    response = api.post("/api/runs/bulk/", body, content_type="application/x-ndjson")
    assert response.status_code == 200 and response.json()["created"] == 4
    bad = api.post("/api/runs/bulk/", '{"a": 1}\n{oops', content_type="application/x-ndjson")
    assert bad.status_code == 400 and "line 2" in bad.json()["detail"]


def test_single_run_post_is_idempotent_too(api, testbed):
    first = api.post("/api/runs/", metric_item(7))
    again = api.post("/api/runs/", metric_item(7))
    assert (first.status_code, again.status_code) == (201, 200)
    assert first.json()["uuid"] == again.json()["uuid"]
    assert api.post("/api/runs/", [metric_item(8)]).status_code == 400


def test_testbed_name_shared_by_several_needs_a_uuid(api, bob, testbed):
    from experiments.models import Testbed

    other = Testbed.objects.create(owner=bob, name="bench")
    ok = api.post("/api/runs/", metric_item(1))  # alice's own "bench" wins
    assert Run.objects.get(uuid=ok.json()["uuid"]).testbed == testbed
    Testbed.objects.create(owner=None, name="shared")
    Testbed.objects.create(owner=None, name="shared")
    bad = api.post("/api/runs/", {**metric_item(2), "testbed": "shared"})
    assert bad.status_code == 400 and "use its UUID" in json.dumps(bad.json())
    by_uuid = api.post("/api/runs/", {**metric_item(3), "testbed": str(other.uuid)})
    assert by_uuid.status_code == 400 and "not an operator" in json.dumps(by_uuid.json())
    other.operators.add(testbed.owner)
    by_uuid = api.post("/api/runs/", {**metric_item(3), "testbed": str(other.uuid)})
    assert by_uuid.status_code == 201


def test_query_count_does_not_grow_with_the_batch(api, testbed, tuning_set):
    from django.db import connection, reset_queries
    from django.test.utils import CaptureQueriesContext

    def queries(items):
        reset_queries()  # the request resets the log; count from an empty one
        with CaptureQueriesContext(connection) as ctx:
            data = api.post("/api/runs/bulk/", items).json()
        assert data["created"] == len(items)
        return len(ctx.captured_queries)

    small = queries([metric_item(i, tuning_set="base") for i in range(5)])
    # As many runs as one request may hold (experiments.results.ingest.MAX_ITEMS).
    large = queries([metric_item(i, tuning_set="base") for i in range(100, 600)])
    if connection.vendor == "postgresql":
        # One INSERT per 1,000 runs and one per 5,000 metrics.
        assert large <= small + 1, (small, large)
    else:
        # SQLite caps the variables of one statement: bulk_create splits, still no
        # query per run.
        assert large < 200, large


def _scans(plan: dict):
    yield plan
    for child in plan.get("Plans", ()):
        yield from _scans(child)


def test_existing_keys_found_one_index_lookup_each_whatever_the_statistics(api, alice, testbed):
    """The request's keys are looked up in the (owner, client_key) index one by one even when
    the table's statistics were gathered before the owner had keyed runs: a plain
    ``client_key = ANY(keys)`` was then planned as a read of every keyed run of the owner,
    filtered (issue 17: 19 ms a request at 20,000 keyed runs, growing)."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from experiments.results import ingest

    if connection.vendor != "postgresql":
        pytest.skip("PostgreSQL's planner")
    unkeyed = [{k: v for k, v in metric_item(i).items() if k != "key"} for i in range(50)]
    assert api.post("/api/runs/bulk/", unkeyed).json()["created"] == 50
    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE {Run._meta.db_table}")  # no run has a key yet
    assert api.post("/api/runs/bulk/", [metric_item(i) for i in range(400)]).json()["created"]
    keys = {f"job-{i}" for i in range(400, 450)} | {"job-7"}
    with CaptureQueriesContext(connection) as captured:
        found = ingest._existing(alice, keys)
    assert list(found) == ["job-7"]
    assert found["job-7"] == Run.objects.get(client_key="job-7").uuid
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + captured.captured_queries[0]["sql"])
        plan = cursor.fetchone()[0][0]["Plan"]
    runs = [node for node in _scans(plan) if node.get("Relation Name") == Run._meta.db_table]
    assert runs and all("client_key" in node.get("Index Cond", "") for node in runs), plan
    assert not any(node.get("Rows Removed by Filter") for node in runs), plan


def test_the_collector_runs_again_after_a_bulk_request(api, testbed, monkeypatch):
    """The bulk view pauses the cyclic GC while it parses and stores; every way out (a
    stored batch, a refused one, an error inside) leaves it enabled, and the parsed body is
    let go of (freed by reference counting, not left to a collection)."""
    import gc
    import weakref

    from experiments.api import views

    class Items(list):  # (a list subclass: weak references to it can be taken)
        pass

    seen = []
    real = views.ingest

    def ingest(items, user, check=None):
        assert not gc.isenabled()
        seen.append(weakref.ref(items))
        if len(items) > 1:
            raise RuntimeError("inside")
        return real(items, user, check)

    monkeypatch.setattr(views, "ingest", ingest)
    monkeypatch.setattr(
        views.BulkJSONParser,
        "parse",
        lambda self, *a, **k: views.UncheckedJSON(Items(body), json.dumps(body)),
    )
    body = [metric_item(1)]
    gc.disable()  # no collection may free the body: only its reference count
    try:
        assert api.post("/api/runs/bulk/", []).status_code == 200
        assert seen[0]() is None
    finally:
        gc.enable()
    assert gc.isenabled()
    body = {"not": "a list"}
    monkeypatch.undo()
    assert api.post("/api/runs/bulk/", body).status_code == 400
    assert gc.isenabled()
    monkeypatch.setattr(views, "ingest", ingest)
    api.raise_request_exception = False
    assert api.post("/api/runs/bulk/", [metric_item(2), metric_item(3)]).status_code == 500
    assert gc.isenabled()
