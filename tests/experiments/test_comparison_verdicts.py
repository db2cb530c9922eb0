"""The stored bottleneck verdicts in a comparison: counted per point (table column, API
``bottleneck``), the ``bottleneck=`` filter, and points whose runs collapsed flagged with
their steady-state vs whole-run throughput."""

from __future__ import annotations

import pytest

from experiments.comparison import ComparisonSpec, compute
from experiments.results import telemetry as stored
from tests.helpers.comparison import add_run
from tests.helpers.telemetry import node, with_tool

pytestmark = pytest.mark.django_db

QUERY = "metric=write_bw&x=param:threads&series=tool"
STEADY = [2e9] * 9
# 3 GB/s for a third, then 1 GB/s: collapsed; steady (median of the second half) 1 GB/s.
COLLAPSE = [3e9] * 3 + [1e9] * 6


def run_with(tb, value, threads, *, disk: bool, bw):
    run = add_run(tb, value, threads=threads)
    utilisation = [0.99] * 10 if disk else [0.2] * 10
    doc = with_tool(node("stor1", **{"disk_util:sdb": utilisation}), bw)
    stored.save(run, doc)
    return run


@pytest.fixture
def verdict_runs(bench):
    # threads=4: two disk-bound steady runs and one latency-bound collapsed run.
    run_with(bench, 2e9, 4, disk=True, bw=STEADY)
    run_with(bench, 2e9, 4, disk=True, bw=STEADY)
    run_with(bench, 1.5e9, 4, disk=False, bw=COLLAPSE)
    # threads=8: disk-bound, steady; plus one run without telemetry.
    run_with(bench, 3e9, 8, disk=True, bw=STEADY)
    add_run(bench, 3e9, threads=8)
    return bench


def points(result):
    return {p.x: p for p in result.points}


def test_verdict_counts_and_collapse_flag(verdict_runs):
    result = compute(ComparisonSpec.from_query(QUERY))
    four, eight = points(result)["4"], points(result)["8"]
    assert four.bottleneck == {"disk": 2, "none": 1}
    assert four.bottleneck_text == "disk 2, none 1"
    assert eight.bottleneck == {"disk": 1} and eight.bottleneck_text == "disk 1/2"
    assert four.collapsed == 1 and eight.collapsed == 0
    # Steady state: 2, 2 and 1 GB/s; whole run: 2, 2 and (3*3 + 1*6)/9 GB/s.
    assert four.steady == pytest.approx(5 / 3) and four.steady_n == 3
    assert four.whole == pytest.approx((2 + 2 + 15 / 9) / 3)
    (flag,) = [f for f in four.flags if f.startswith("collapsed")]
    assert "1 of 3 runs' throughput fell below 50% of its early rate" in flag
    assert "steady state 1.67 vs whole run 1.89 GB/s" in flag
    assert not any(f.startswith("collapsed") for f in eight.flags)
    assert result.has_verdicts and result.has_steady


def test_filter_on_the_verdict(verdict_runs):
    spec = ComparisonSpec.from_query(QUERY + "&bottleneck=disk")
    assert spec.bottleneck == "disk" and "bottleneck=disk" in spec.to_query()
    result = compute(spec)
    four, eight = points(result)["4"], points(result)["8"]
    assert (four.n, four.bottleneck, four.collapsed) == (2, {"disk": 2}, 0)
    assert (eight.n, eight.bottleneck_text) == (1, "disk 1/1")
    none = compute(ComparisonSpec.from_query(QUERY + "&bottleneck=none"))
    assert [(p.x, p.n) for p in none.points] == [("4", 1)]
    assert not compute(ComparisonSpec.from_query(QUERY + "&bottleneck=network")).points
    bad = ComparisonSpec.from_query(QUERY + "&bottleneck=disks")
    assert bad.bottleneck == "" and bad.errors == [
        "bottleneck: 'disks' is not one of disk, cpu, network, beegfs, none, unknown."
    ]


def test_normalised_points_show_no_steady_numbers(verdict_runs):
    result = compute(ComparisonSpec.from_query(QUERY + "&norm=server"))
    four = points(result)["4"]
    assert four.bottleneck == {"disk": 2, "none": 1} and four.steady is None
    assert any(f.startswith("collapsed: 1 of 3") for f in four.flags)


def test_no_verdict_column_without_telemetry(alice_client, bench):
    add_run(bench, 1e9, threads=4)
    html = alice_client.get(f"/compare/?{QUERY}").content.decode()
    assert "compare-table" in html and ">Bottleneck</th>" not in html
    assert 'name="bottleneck"' in html  # the builder offers the filter


def test_page_csv_and_api_show_the_verdicts(alice_client, verdict_runs):
    html = alice_client.get(f"/compare/?{QUERY}").content.decode()
    assert ">Bottleneck</th>" in html and ">Steady / whole</th>" in html
    assert '<td class="bottleneck">disk 2, none 1</td>' in html
    assert '<td class="bottleneck">disk 1/2</td>' in html
    assert 'class="flag collapsed"' in html
    filtered = alice_client.get(f"/compare/?{QUERY}&bottleneck=disk").content.decode()
    assert '<option value="disk" selected>' in filtered and "bottleneck: a disk" in filtered
    data = alice_client.get(f"/api/compare/?{QUERY}").json()
    by_x = {p["x"]: p for p in data["points"]}
    assert by_x["4"]["bottleneck"] == {"disk": 2, "none": 1}
    assert by_x["4"]["collapsed"] == 1 and by_x["8"]["bottleneck"] == {"disk": 1}
    assert by_x["4"]["steady"] == pytest.approx(5 / 3)
    csv = alice_client.get(f"/compare/export.csv?{QUERY}").content.decode()
    header = csv.splitlines()[0].split(",")
    assert header[-4:] == ["bottleneck", "collapsed_runs", "steady", "whole"]
    assert "disk 2, none 1" in csv
