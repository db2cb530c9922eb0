"""Bulk ingest of an output holding several independent measurements (issue 25, finding 2):
the client sends the raw output once, as one item; the server stores one run per part (each
with the whole raw output and its part's index), answers with every part's run, and a retry
of the same key creates nothing.

Numbers were read from the sample file (each job's write io_bytes and runtime)."""

from __future__ import annotations

import pytest

from experiments.models import Metric, Run
from experiments.results.store import reparse
from tests.helpers.samples import sample

pytestmark = pytest.mark.django_db

STONEWALL = "fio/fio-3.28-json-15jobs-stonewall-seqwrite-direct-beegfs-thesis.json"
KIB, MIB = 1024, 1024**2
# bs_1k, bs_4M and bs_16M: (part, bs, write io_bytes, write runtime ms)
SOME_JOBS = [(0, KIB, 137252864, 16001), (12, 4 * MIB, 11618222080, 16003)]
SOME_JOBS += [(14, 16 * MIB, 11727273984, 16003)]


def test_one_item_of_fifteen_stonewalled_jobs_is_fifteen_runs(api, testbed):
    text = sample(STONEWALL)
    item = {"testbed": "bench", "raw_output": text, "key": "thesis", "params": {"site": "a"}}
    data = api.post("/api/runs/bulk/", [item]).json()
    assert data["created"] == 1  # items, as before
    result = data["results"][0]
    assert result["status"] == "created"
    parts = result["parts"]
    assert [p["label"] for p in parts][:2] == ["bs_1k", "bs_2k"] and len(parts) == 15
    assert result["uuid"] == parts[0]["uuid"]
    assert result["held"] == "15 independent jobs (bs 1k … 16M)"
    assert Run.objects.count() == 15
    runs = {str(r.uuid): r for r in Run.objects.all()}
    for index, bs, io_bytes, runtime_ms in SOME_JOBS:
        run = runs[parts[index]["uuid"]]
        assert run.raw_output == text and not run.parse_error
        assert run.params["transfer_size"] == bs
        assert run.params["site"] == "a"  # the client's parameters hold for every part
        assert run.launch["parse_options"]["part"] == index
        headline = Metric.objects.get(run=run, name="write_bw", primary=True)
        assert headline.value == pytest.approx(io_bytes * 1000 / runtime_ms)
        assert parts[index]["metrics"] == run.metrics.count()
    keys = sorted(r.client_key for r in runs.values())
    assert "thesis" in keys and len(set(keys)) == 15

    # A retry of the same key (a lost answer) creates nothing and names the same runs.
    again = api.post("/api/runs/bulk/", [item]).json()
    assert again["existing"] == 1 and again["created"] == 0
    assert [p["uuid"] for p in again["results"][0]["parts"]] == [p["uuid"] for p in parts]
    assert again["results"][0]["held"] == result["held"]
    assert Run.objects.count() == 15

    # Each run reparses to its own part.
    run = runs[parts[12]["uuid"]]
    Metric.objects.filter(run=run).delete()
    assert reparse(run) is None
    assert Metric.objects.get(run=run, name="write_bw", primary=True).value == pytest.approx(
        11618222080 / 16.003
    )


def test_single_post_of_a_multi_part_output_answers_its_parts(api, testbed):
    response = api.post("/api/runs/", {"testbed": "bench", "raw_output": sample(STONEWALL)})
    assert response.status_code == 201
    assert len(response.json()["parts"]) == 15 and Run.objects.count() == 15


def test_telemetry_of_a_multi_part_output_is_refused(api, testbed):
    from tests.helpers.telemetry import documents

    item = {"testbed": "bench", "raw_output": sample(STONEWALL), "telemetry": documents()}
    data = api.post("/api/runs/bulk/", [item]).json()
    result = data["results"][0]
    assert result["status"] == "invalid"
    assert "15 independent jobs" in result["errors"]["telemetry"]
    assert not Run.objects.exists()


def test_items_of_one_measurement_answer_no_parts(api, testbed):
    text = sample("fio/fio-3.6-json-randread-4k-qd1-ceph.json")
    result = api.post("/api/runs/bulk/", [{"testbed": "bench", "raw_output": text}]).json()
    assert "parts" not in result["results"][0] and Run.objects.count() == 1
