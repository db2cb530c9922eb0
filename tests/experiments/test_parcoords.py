"""Parallel coordinates of a sweep (issue 16 item 3): the matrix page draws its runs' swept
parameters to its metric in display units, the compare page its points; both link nothing
heavy unless there is a chart (static/parcoords.js fetches the parallel-coordinates plotly
bundle)."""

from __future__ import annotations

import json
import re

import pytest

from experiments.comparison import parcoords
from experiments.models import Matrix
from tests.helpers.sweeps import make_sweep, write_bw

pytestmark = pytest.mark.django_db


def figure_of(body: str, element_id: str) -> dict:
    match = re.search(rf'<script id="{element_id}" type="application/json">(.*?)</script>', body)
    assert match, element_id
    return json.loads(match.group(1))


def test_matrix_page_draws_its_runs_parameters_to_its_metric(alice_client, alice):
    matrix = make_sweep(alice)
    body = alice_client.get(matrix.get_absolute_url()).content.decode()
    assert 'class="parcoords-chart"' in body and "parcoords.js" in body
    fig = figure_of(body, "matrix-parcoords-data")
    trace = fig["data"][0]
    assert trace["type"] == "parcoords"
    dims = trace["dimensions"]
    # The two swept parameters (one testbed, no tuning set: constant axes are left out).
    assert [d["label"] for d in dims] == ["numjobs", "bs", "Write throughput (GB/s)"]
    assert sorted(set(dims[0]["values"])) == [1, 2, 4, 8]
    assert dims[1]["ticktext"] == ["1m", "64k"]  # text in dimensions.sort_key order
    assert len(dims[2]["values"]) == 16
    assert max(dims[2]["values"]) == pytest.approx(write_bw(8, "1m", 1) / 1e9)
    assert trace["line"]["color"] == dims[2]["values"]
    # The runs table of the matrix, sorted by the same metric.
    href = re.search(r'href="(/runs/table/\?[^"]+)" id="table-link"', body).group(1)
    table = alice_client.get(href.replace("&amp;", "&")).content.decode()
    assert "Write throughput (GB/s)" in table
    assert table.count("<tr><td><a ") == 16


def test_matrix_without_results_has_no_chart(alice_client, alice):
    matrix = make_sweep(alice)
    empty = Matrix.objects.create(owner=alice, name="empty", tool="fio", axes=matrix.axes)
    empty.testbeds.set(matrix.testbeds.all())
    body = alice_client.get(empty.get_absolute_url()).content.decode()
    assert "matrix-parcoords-data" not in body
    assert parcoords.matrix_figure(empty, "write_bw") is None


def test_compare_page_draws_its_points(alice_client, alice):
    matrix = make_sweep(alice)
    body = alice_client.get(
        "/compare/",
        {
            "matrix": str(matrix.uuid),
            "metric": "write_bw",
            "x": "param:numjobs",
            "series": "param:bs",
        },
    ).content.decode()
    fig = figure_of(body, "compare-parcoords-data")
    dims = fig["data"][0]["dimensions"]
    labels = [d["label"] for d in dims]
    assert labels[-1] == "Write throughput (GB/s)"
    assert len(dims[-1]["values"]) == 8  # 4 numjobs × 2 bs, each the mean of 2 runs
    # x (numjobs) and series (bs) once each, numjobs as numbers: the attributes that repeat
    # them are left out.
    assert labels == ["numjobs", "bs", "Write throughput (GB/s)"]
    assert sorted(set(dims[0]["values"])) == [1, 2, 4, 8] and "ticktext" not in dims[0]
    assert max(dims[-1]["values"]) == pytest.approx(
        (write_bw(8, "1m", 0) + write_bw(8, "1m", 1)) / 2e9
    )
    # The share page and the report page do not fetch the parallel-coordinates bundle.
    assert (
        "plotly-parcoords"
        not in alice_client.get("/compare/print/", {"matrix": str(matrix.uuid)}).content.decode()
    )
