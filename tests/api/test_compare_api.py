"""GET /api/compare/: the comparison page's result (experiments.comparison) as JSON, from the
page's own query string."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.django_db


def test_compare_groups_and_aggregates_like_the_page(api, testbed):
    items = [
        {
            "testbed": "bench",
            "tool": "fio",
            "params": {"threads": t},
            "metrics": [{"name": "write_bw", "value": v}],
        }
        for t, v in [(1, 10e9), (1, 20e9), (2, 40e9)]
    ]
    items.append(
        {
            "testbed": "bench",
            "tool": "dd",
            "params": {"threads": 1},
            "metrics": [{"name": "write_bw", "value": 1000e9}],
        }
    )
    api.post("/api/runs/bulk/", items)
    query = {
        "metric": "write_bw",
        "x": "param:threads",
        "series": "tool",
        "tool": "fio",
        "testbed": str(testbed.uuid),
    }
    data = api.get("/api/compare/", query).json()
    assert data["metrics"][0]["unit"] == "GB/s" and data["n_runs"] == 3
    points = {(p["series_key"], p["x_key"]): p for p in data["points"]}
    assert set(points) == {("fio", "1"), ("fio", "2")}
    assert points[("fio", "1")]["n"] == 2 and points[("fio", "1")]["mean"] == 15.0
    assert points[("fio", "1")]["stddev"] == pytest.approx(7.0710678)
    assert points[("fio", "2")]["max"] == 40.0
    assert data["charts"]  # the page's figures too

    from experiments import comparison
    from experiments.models import Run

    page = comparison.compute(comparison.ComparisonSpec.from_query(query), Run.objects.all())
    assert [p["mean"] for p in data["points"]] == [p.mean for p in page.points]


def test_compare_rejects_unknown_metric_and_dimension(api):
    assert api.get("/api/compare/", {"metric": "speed"}).status_code == 400
    bad = api.get("/api/compare/", {"metric": "write_bw", "x": "nope"})
    assert bad.status_code == 400 and bad.json()["errors"]
