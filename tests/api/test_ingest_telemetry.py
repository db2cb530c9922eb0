"""Imported runs carry telemetry (docs/telemetry.md): POST /api/runs/ and /api/runs/bulk/
validate the documents strictly (a clear error, nothing half-stored), store them as
RunTelemetry rows, compute the run's verdict and export them back unchanged."""

from __future__ import annotations

import copy
import json
import math

import pytest

from experiments.models import Run, RunTelemetry
from tests.helpers.telemetry import documents

pytestmark = pytest.mark.django_db


def item(docs, key="k1"):
    return {
        "testbed": "bench",
        "tool": "fio",
        "key": key,
        "params": {"threads": 4},
        "metrics": [{"name": "write_bw", "value": 2e9}],
        "telemetry": docs,
    }


def test_bulk_stores_telemetry_and_the_verdict(api, testbed):
    docs = documents()
    answer = api.post("/api/runs/bulk/", [item(docs)]).json()
    assert answer["created"] == 1, answer
    run = Run.objects.get()
    assert RunTelemetry.objects.filter(run=run).count() == 2
    assert run.bottleneck == "disk" and run.collapsed is True
    assert "sdb on storage02 at 99% utilisation" in run.bottleneck_evidence
    detail = api.get(f"/api/runs/{run.uuid}/").json()
    exported = {d["hostname"]: d for d in detail["telemetry"]}
    assert exported["storage02"]["series"] == docs[1]["series"]
    assert exported["client01"]["tool"] == docs[0]["tool"]
    assert exported["client01"]["started_at"] == "2026-01-01T10:00:00+00:00"
    # The same key again: the existing run, its telemetry untouched.
    again = api.post("/api/runs/bulk/", [item(docs)]).json()
    assert again["existing"] == 1 and RunTelemetry.objects.count() == 2


def broken(change):
    docs = documents()
    change(docs)
    return docs


def _set(path, value):
    def change(docs):
        target = docs
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value

    return change


BAD = [
    ("not a list", lambda d: d.clear() or d.append("x"), "telemetry[0]: a JSON object"),
    ("format", _set([0, "format"], "other/1"), "telemetry[0].format: must be"),
    ("unknown field", _set([0, "extra"], 1), "telemetry[0]: unknown fields extra"),
    ("hostname", _set([0, "hostname"], "a b"), "telemetry[0].hostname: a host name"),
    ("same host twice", _set([1, "hostname"], "client01"), "'client01' has two documents"),
    ("naive time", _set([0, "started_at"], "2026-01-01T10:00:00"), "with its UTC offset"),
    ("interval", _set([0, "interval_s"], 0), "telemetry[0].interval_s"),
    ("times go back", _set([0, "t", 3], 2.5), "telemetry[0].t[3]: times must increase"),
    ("negative time", _set([0, "t", 0], -1.0), "telemetry[0].t[0]: a finite number"),
    ("series name", _set([0, "series", "gpu_busy"], [0.1] * 10), "'gpu_busy' is not a series"),
    ("tool name", _set([0, "tool", "series", "disk_util:sdb"], [1.0] * 9), "is not a series"),
    ("length", _set([0, "series", "cpu_busy"], [0.1] * 9), "cpu_busy: a list of 10 numbers"),
    ("huge", _set([1, "series", "cpu_busy", 2], 1e308), "finite numbers only"),
    ("string value", _set([1, "series", "cpu_busy", 2], "0.5"), "finite numbers only"),
    ("bool value", _set([1, "series", "cpu_busy", 2], True), "finite numbers only"),
    ("entity", _set([0, "series", "disk_util:"], [0.1] * 10), "a bad entity name"),
]


@pytest.mark.parametrize("change,message", [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_bad_telemetry_is_refused_and_nothing_is_stored(api, testbed, change, message):
    answer = api.post("/api/runs/bulk/", [item(broken(change))]).json()
    assert answer["invalid"] == 1, answer
    error = answer["results"][0]["errors"]["telemetry"]
    assert message in error and error.endswith("nothing was stored")
    assert not Run.objects.exists() and not RunTelemetry.objects.exists()


def test_non_finite_json_numbers_are_refused(api, testbed):
    # JSON has no NaN or Infinity; Python's encoder writes them: the server refuses them.
    body = item(documents())
    body["telemetry"][0]["t"][0] = math.nan
    body["telemetry"][1]["series"]["cpu_busy"][2] = math.inf
    response = api.post("/api/runs/bulk/", json.dumps([body]), content_type="application/json")
    assert response.status_code == 400, response.content
    assert not Run.objects.exists() and not RunTelemetry.objects.exists()


def test_size_bounds(api, testbed, monkeypatch):
    from experiments.results import telemetry

    monkeypatch.setattr(telemetry, "MAX_VALUES", 60)
    answer = api.post("/api/runs/bulk/", [item(documents())]).json()
    assert "at most 60 values" in answer["results"][0]["errors"]["telemetry"]
    monkeypatch.setattr(telemetry, "MAX_DOCUMENTS", 1)
    answer = api.post("/api/runs/bulk/", [item(documents())]).json()
    assert "at most 1 documents" in answer["results"][0]["errors"]["telemetry"]


def test_single_post_with_bad_telemetry_is_a_400(api, testbed):
    docs = documents()
    bad = copy.deepcopy(docs)
    bad[0]["t"][5] = 1.0
    response = api.post("/api/runs/", item(bad), format="json")
    assert response.status_code == 400
    assert "times must increase" in response.json()["errors"]["telemetry"]
    assert not Run.objects.exists()
    good = api.post("/api/runs/", item(docs, key="k2"), format="json")
    assert good.status_code == 201
    assert [d["hostname"] for d in good.json()["telemetry"]] == ["client01", "storage02"]
