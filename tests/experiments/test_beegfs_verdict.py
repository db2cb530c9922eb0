"""A BeeGFS server's own statistics (runners.beegfs_stats) in the verdict, the stored summary,
the telemetry checks and the run page: documents as a held server node's agent stores them
(``beegfs_*:storage|meta`` series, ``meta.beegfs`` with the worker count in force)."""

from __future__ import annotations

import pytest

from experiments.results import telemetry as stored
from experiments.shared.bottleneck import LATENCY_BOUND, summary, verdicts
from tests.helpers.comparison import add_run
from tests.helpers.telemetry import node, telemetry_doc


def server(busy, queue, workers=16, service="storage", host="node2", **series):
    """A storage (or metadata) server's document with its daemon's statistics."""
    n = len(busy)
    doc = node(host, n=n, **{"disk_util:sdb": [0.3] * n, **series})
    doc["series"].update(
        {
            f"beegfs_reqs:{service}": [500] * n,
            f"beegfs_queue:{service}": queue,
            f"beegfs_busy_workers:{service}": busy,
        }
    )
    if service == "storage":
        doc["series"]["beegfs_write_bw:storage"] = [1e9] * n
        doc["series"]["beegfs_read_bw:storage"] = [0] * n
    doc["meta"]["beegfs"] = {
        service: {"node_id": 2, "node_name": host, "workers": workers, "workers_from": "…"}
    }
    return doc


def test_every_worker_busy_with_a_queue_building_up_is_the_verdict():
    doc = server([16] * 8 + [3, 2], [4, 9, 15, 22, 30, 41, 50, 62, 0, 0])
    (v,) = verdicts([doc])
    assert v.headline == (
        "the BeeGFS storage service on node2 had all its workers busy (16 of 16, 29.1 requests "
        "queued on average) for 80% of the run"
    )
    assert [(f.resource, f.entity) for f in v.saturated] == [("beegfs", "storage workers")]
    assert summary([doc])["bottleneck"] == "beegfs"


def test_busy_workers_without_a_queue_or_below_the_count_are_not_saturated():
    # All 16 busy but nothing waiting: the daemon kept up.
    (v,) = verdicts([server([16] * 10, [0] * 10)])
    assert v.headline == LATENCY_BOUND
    assert "BeeGFS storage workers on node2 100% busy" in v.busiest
    # A queue, but 12 of 16 busy (a mean over the interval): not all of them.
    (v,) = verdicts([server([12] * 10, [5] * 10)])
    assert v.headline == LATENCY_BOUND
    # Part of the run: named as such.
    (v,) = verdicts([server([16] * 3 + [1] * 7, [8] * 3 + [0] * 7)])
    assert v.headline == (
        "no resource saturated during half of the run; the BeeGFS storage service on node2 had "
        "all its workers busy (16 of 16, 8.0 requests queued on average) for 30% of it"
    )


def test_the_metadata_service_and_its_phase():
    meta = server([4] * 6, [3] * 6, workers=4, service="meta", host="node1")
    client = node("client01", n=6)
    client["tool"] = {"t": [2.0, 3.0, 4.0, 5.0], "series": {"write_bw": [1, 2, 2, 1]}}
    (v,) = verdicts([client, meta])
    assert v.phase == "write"
    assert v.headline.startswith(
        "the BeeGFS metadata service on node1 had all its workers busy (4 of 4, 3.0 requests "
    )
    assert v.headline.endswith("of the write phase")


def test_a_disk_saturated_harder_comes_first_and_no_worker_count_no_verdict():
    doc = server([16] * 10, [5] * 10, **{"disk_util:sdb": [1.0] * 10})
    found = verdicts([doc])[0].saturated
    assert {f.resource for f in found} == {"disk", "beegfs"}
    # An imported document without the worker count (or a made-up one) says nothing of it.
    for bad in ({}, {"storage": {"workers": "16"}}, {"storage": {"workers": True}}, "x"):
        doc = server([16] * 10, [5] * 10)
        doc["meta"]["beegfs"] = bad
        assert verdicts([doc])[0].headline == LATENCY_BOUND


def test_older_documents_without_beegfs_series_keep_their_verdict():
    doc = node("storage02", **{"disk_util:sdb": [0.99] * 10})
    assert verdicts([doc])[0].headline.startswith("sdb on storage02 at 99% utilisation")


def test_the_series_pass_the_telemetry_checks_and_unknown_ones_do_not():
    doc = server([16] * 10, [5] * 10)
    assert stored.validate([doc])  # no exception: DESIGN.md's vocabulary
    bad = server([16] * 10, [5] * 10)
    bad["series"]["beegfs_bogus:storage"] = [0] * 10
    with pytest.raises(stored.TelemetryInvalid, match="beegfs_bogus"):
        stored.validate([bad])


@pytest.mark.django_db
def test_the_run_page_shows_the_daemons_panels_and_verdict(alice_client, bench):
    run = add_run(bench, 1.2e9)
    client = telemetry_doc("client01", "2026-01-01T10:00:00+00:00")
    stored.save(run, client)
    doc = server([16] * 8 + [2, 2], [6] * 8 + [0, 0])
    doc["started_at"] = "2026-01-01T10:00:00.300000+00:00"
    stored.save(run, doc)
    meta = server([1] * 10, [0] * 10, workers=4, service="meta", host="node1")
    stored.save(run, meta)
    run.refresh_from_db()
    assert run.bottleneck == "beegfs"
    assert "BeeGFS storage service on node2 had all its workers busy" in run.bottleneck_evidence
    page = alice_client.get(f"/runs/{run.uuid}/").content.decode()
    for title in (
        "BeeGFS storage throughput on node2",
        "BeeGFS storage requests on node2",
        "BeeGFS storage workers on node2",
        "BeeGFS metadata requests on node1",
        "BeeGFS metadata workers on node1",
    ):
        assert title in page, title
    assert "BeeGFS metadata throughput" not in page  # the metadata service moves no bytes
    assert "workers (16)" in page and "workers (4)" in page
    assert "had all its workers busy (16 of 16" in page
