"""IOPS and latency percentiles against iodepth / numjobs on the matrix page (fio-plot's
chart): the figure builder, the grouping into alike runs, a real fio sample stored as a run,
and a real sweep of iodepth 1, 4, 16 run by fio through the executor."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from experiments.comparison import latency_sweep
from experiments.comparison.latency_sweep import Chart, Point, charts_for, figure
from experiments.execution import execute
from experiments.models import Matrix, Run
from experiments.results.store import parse_stored, replace_metrics
from tests.helpers.comparison import make_testbed
from tests.helpers.execution import make_matrix, queue

SAMPLES = Path("/work/shared/samples/fio")


def chart_data(html: str) -> list[dict]:
    """The figures the matrix page embeds for its latency charts."""
    found = re.findall(
        r'<script id="latency-sweep-data-\d+" type="application/json">(.*?)</script>', html
    )
    return [json.loads(text) for text in found]


def test_figure_puts_iops_left_and_percentiles_right_on_a_log_axis():
    chart = Chart("iodepth", "read", {"bs": "4k"})
    for x, iops, p50, p99 in ((16, [9000, 11000], 1.7e-3, 4e-3), (1, [1000], 0.9e-3, 2e-3)):
        point = chart.points.setdefault(x, Point(x))
        point.iops += iops
        point.runs += len(iops)
        point.pct["p50"].append(p50)
        point.pct["p99"].append(p99)
    fig = figure(chart)
    bars, p50, p99 = fig["data"]  # no p99.9 anywhere: no line for it
    assert bars["type"] == "bar" and bars["x"] == ["1", "16"]  # numeric order, as categories
    assert bars["y"] == [1000, 10000] and bars["customdata"] == [1, 2]
    assert p50["name"] == "p50 latency" and p50["yaxis"] == "y2" and p50["y"] == [0.9, 1.7]
    assert p99["y"] == [2.0, 4.0] and p99["line"]["dash"] == "dash"
    layout = fig["layout"]
    assert layout["yaxis2"]["type"] == "log" and layout["yaxis2"]["overlaying"] == "y"
    assert layout["xaxis"]["title"]["text"] == "iodepth"
    assert "bs 4k" in layout["title"]["text"]


def test_a_point_without_percentiles_is_named():
    chart = Chart("numjobs", "write", {})
    chart.points[1.0] = Point(1.0, iops=[5.0], runs=1)
    chart.points[1.0].pct["p99"].append(1e-3)
    chart.points[4.0] = Point(4.0, iops=[9.0], runs=1)
    assert chart.missing() == ["numjobs=4"]
    lines = [t for t in figure(chart)["data"] if t["type"] == "scatter"]
    assert [t["y"] for t in lines] == [[1.0, None]]


@pytest.mark.django_db
def test_runs_that_differ_in_more_than_the_swept_parameter_are_never_joined(alice):
    tb = make_testbed(alice, "lat-lab", "x86_64", "0")
    runs = []
    for bs in ("4k", "64k"):
        for depth in (1, 4):
            run = Run.objects.create(
                owner=alice,
                testbed=tb,
                tool="fio",
                status="succeeded",
                params={"rw": "randread", "bs": bs, "iodepth": depth, "threads": 1},
            )
            replace_metrics(
                run,
                [
                    {
                        "name": "read_iops",
                        "value": depth * (10 if bs == "4k" else 1),
                        "unit": "op/s",
                    },
                    {"name": "read_lat", "value": depth * 1e-4, "unit": "s", "stat": "p99"},
                    # a job's own value is a detail, never the run's
                    {"name": "read_iops", "value": 1.0, "unit": "op/s", "extra": {"job": "a"}},
                ],
            )
            runs.append(run)
    # A published study's run of the same setup is not alike: a chart of its own.
    study = Run.objects.create(
        owner=alice,
        testbed=tb,
        tool="fio",
        status="succeeded",
        published=True,
        source="Study 2020",
        params={"rw": "randread", "bs": "4k", "iodepth": 1, "threads": 1},
    )
    replace_metrics(study, [{"name": "read_iops", "value": 7.0, "unit": "op/s"}])
    charts = charts_for([*runs, study], "iodepth")
    assert [c.setup for c in charts] == [
        {"bs": "4 KiB", "data source": "Study 2020"},
        {"bs": "4 KiB", "data source": "own runs"},
        {"bs": "64 KiB", "data source": "own runs"},
    ]
    charts = charts_for(runs, "iodepth")
    assert [c.setup for c in charts] == [{"bs": "4 KiB"}, {"bs": "64 KiB"}]
    # Of the charts drawn (two points at least), the study's single point is not one: the
    # drawn charts differ only in bs.
    drawn = latency_sweep._context([*runs, study], "iodepth", "these runs")
    assert drawn["varying"] == ["bs"]
    assert [f["label"] for f in drawn["figures"]] == ["bs 4 KiB", "bs 64 KiB"]
    small = charts[0]
    assert {x: p.iops for x, p in small.points.items()} == {1.0: [10.0], 4.0: [40.0]}
    assert small.points[4.0].pct["p99"] == [pytest.approx(4e-4)]


@pytest.mark.django_db
def test_a_real_fio_sample_gives_its_clat_percentiles(alice, alice_client):
    """fio-3.6's JSON of a 4k random read at iodepth 1 (ceph), stored as the run of a matrix
    cell: the chart shows what fio printed (read iops 1430.242829; clat_ns percentiles
    50.000000: 634880, 99.000000: 864256, 99.900000: 1187840), beside a second cell."""
    tb = make_testbed(alice, "ceph-lab", "x86_64", "0")
    matrix = Matrix.objects.create(
        owner=alice,
        name="qd",
        tool="fio",
        fixed_params={"rw": "randread", "bs": "4k"},
        axes=[{"param": "iodepth", "values": [1, 2]}],
    )
    matrix.testbeds.set([tb])
    raw = (SAMPLES / "fio-3.6-json-randread-4k-qd1-ceph.json").read_text()
    for depth in (1, 2):
        run = Run.objects.create(
            owner=alice,
            testbed=tb,
            tool="fio",
            status="succeeded",
            matrix=matrix,
            cell_key=str(depth),
            params={"rw": "randread", "bs": "4k", "iodepth": depth},
            raw_output=raw,
        )
        assert parse_stored(run) is None
        Run.objects.filter(pk=run.pk).update(params={**run.params, "iodepth": depth})
    html = alice_client.get(matrix.get_absolute_url()).content.decode()
    (fig,) = chart_data(html)
    bars, p50, p99, p999 = fig["data"]
    assert bars["x"] == ["1", "2"] and bars["y"] == [1430, 1430]
    assert p50["y"][0] == pytest.approx(0.6349)
    assert p99["y"][0] == pytest.approx(0.8643)
    assert p999["y"][0] == pytest.approx(1.1878)
    assert "Latency against iodepth" in html


@pytest.mark.django_db
def test_no_chart_for_a_sweep_of_another_parameter(alice, alice_client):
    from tests.helpers.sweeps import make_sweep

    matrix = make_sweep(alice)  # numjobs x bs, but write_bw only: no IOPS, no percentiles
    assert latency_sweep.matrix_context(matrix) == {}
    matrix.axes = [{"param": "bs", "values": ["64k", "1m"]}]
    assert latency_sweep.swept_param(matrix) is None
    html = alice_client.get(matrix.get_absolute_url()).content.decode()
    assert 'id="latency-sweep"' not in html


@pytest.mark.slow
@pytest.mark.django_db
@pytest.mark.skipif(shutil.which("fio") is None, reason="fio is not installed")
def test_a_real_iodepth_sweep_through_the_executor(alice, alice_client, executing_bench):
    """fio itself: 4k random reads with libaio (buffered: tmp file systems refuse O_DIRECT)
    at iodepth 1, 4 and 16, one second each; the matrix page shows one chart whose points
    are the runs' own IOPS and clat percentiles, as read from fio's JSON here."""
    matrix = make_matrix(
        alice,
        executing_bench,
        params={
            "rw": "randread",
            "bs": "4k",
            "size": "8m",
            "ioengine": "libaio",
            "runtime": 1,
            "time_based": True,
        },
        axes=[{"param": "iodepth", "values": [1, 4, 16]}],
    )
    expected = {}
    for run in matrix.runs.all():
        status = execute.execute(run.pk, queue(run), "w@test")
        run.refresh_from_db()
        assert status == Run.Status.SUCCEEDED, run.error
        doc = json.loads(run.raw_output[run.raw_output.index("{") :])
        read = doc["jobs"][0]["read"]
        pct = read["clat_ns"]["percentile"]
        expected[str(run.params["iodepth"])] = (
            read["iops"],
            pct["50.000000"] / 1e6,
            pct["99.000000"] / 1e6,
            pct["99.900000"] / 1e6,
        )
    html = alice_client.get(matrix.get_absolute_url())
    (fig,) = chart_data(html.content.decode())
    bars, *lines = fig["data"]
    assert bars["x"] == ["1", "4", "16"]
    assert [line["name"] for line in lines] == ["p50 latency", "p99 latency", "p99.9 latency"]
    for i, x in enumerate(bars["x"]):
        iops, p50, p99, p999 = expected[x]
        assert bars["y"][i] == round(iops)
        assert [line["y"][i] for line in lines] == [
            pytest.approx(p50, abs=1e-4),
            pytest.approx(p99, abs=1e-4),
            pytest.approx(p999, abs=1e-4),
        ]


@pytest.mark.django_db
def test_the_comparison_shows_the_chart_when_its_x_axis_is_iodepth(alice, alice_client):
    """Two testbeds' fio runs over iodepth 1 and 4: one chart per testbed (their runs are not
    alike), whatever the comparison's series; none when the x axis is another parameter."""
    from django.urls import reverse

    _two_testbeds_swept(alice)
    url = reverse("experiments:compare")
    html = alice_client.get(f"{url}?metric=read_iops&x=param:iodepth&series=").content.decode()
    figures = chart_data(html)
    assert [f["data"][0]["y"] for f in figures] == [[1000, 4000], [2000, 8000]]
    assert [f["data"][1]["y"] for f in figures] == [[0.1, 0.4], [0.1, 0.4]]
    assert "The charts differ in testbed" in html
    assert "the fio runs of this comparison" in html
    html = alice_client.get(f"{url}?metric=read_iops&x=param:bs").content.decode()
    assert 'id="latency-sweep"' not in html


def _two_testbeds_swept(alice) -> None:
    for name, scale in (("qd-a", 1), ("qd-b", 2)):
        tb = make_testbed(alice, name, "x86_64", "0")
        for depth in (1, 4):
            run = Run.objects.create(
                owner=alice,
                testbed=tb,
                tool="fio",
                status="succeeded",
                params={"rw": "randread", "bs": "4k", "iodepth": depth},
            )
            replace_metrics(
                run,
                [
                    {"name": "read_iops", "value": 1000.0 * depth * scale, "unit": "op/s"},
                    {"name": "read_lat", "value": 1e-4 * depth, "unit": "s", "stat": "p50"},
                ],
            )


def test_reports_share_links_print_pages_and_exports_carry_the_charts(alice, alice_client, client):
    """The latency charts travel with the comparison: the report page, its printable page,
    a share link (frozen as shared: a later run does not change them; live for a signed-in
    colleague), its printable page and JSON export, and the comparison's own JSON export
    and printable page. A link made before charts were frozen shows none."""
    from django.urls import reverse

    from experiments.comparison.reports import create_share_link
    from experiments.models import Report

    _two_testbeds_swept(alice)
    query = "metric=read_iops&x=param:iodepth&series="
    report = Report.objects.create(owner=alice, title="queue depth", query=query)
    link = create_share_link(report, alice)
    expected = [[1000, 4000], [2000, 8000]]

    def iops(html: str) -> list:
        return [f["data"][0]["y"] for f in chart_data(html)]

    assert iops(alice_client.get(report.get_absolute_url()).content.decode()) == expected
    printed = alice_client.get(reverse("experiments:report_print", args=[report.uuid]))
    assert iops(printed.content.decode()) == expected
    compare_print = alice_client.get(f"{reverse('experiments:compare_print')}?{query}")
    assert iops(compare_print.content.decode()) == expected

    # A later run at iodepth 16 joins qd-a's chart live, not in the frozen link.
    tb = Run.objects.filter(testbed__name="qd-a").first().testbed
    later = Run.objects.create(
        owner=alice,
        testbed=tb,
        tool="fio",
        status="succeeded",
        params={"rw": "randread", "bs": "4k", "iodepth": 16},
    )
    replace_metrics(later, [{"name": "read_iops", "value": 9000.0, "unit": "op/s"}])
    share = reverse("experiments:share", args=[link.key])
    frozen = client.get(share)
    assert frozen.status_code == 200 and iops(frozen.content.decode()) == expected
    assert "The charts differ in testbed" in frozen.content.decode()
    shared_print = client.get(reverse("experiments:share_print", args=[link.key]))
    assert iops(shared_print.content.decode()) == expected
    live = alice_client.get(f"{share}?live=1").content.decode()
    assert iops(live) == [[1000, 4000, 9000], [2000, 8000]]

    body = client.get(reverse("experiments:share_export", args=[link.key, "json"])).json()
    charts = body["latency_sweep"]["charts"]
    assert body["latency_sweep"]["swept"] == "iodepth"
    assert [c["label"] for c in charts] == ["testbed qd-a", "testbed qd-b"]
    assert charts[0]["points"] == [
        {"iodepth": 1.0, "runs": 1, "iops": 1000.0, "p50_s": 1e-4, "p99_s": None, "p99.9_s": None},
        {"iodepth": 4.0, "runs": 1, "iops": 4000.0, "p50_s": 4e-4, "p99_s": None, "p99.9_s": None},
    ]
    export = alice_client.get(f"{reverse('experiments:compare_export', args=['json'])}?{query}")
    assert [len(c["points"]) for c in export.json()["latency_sweep"]["charts"]] == [3, 2]
    csv = alice_client.get(f"{reverse('experiments:compare_export', args=['csv'])}?{query}")
    assert csv.status_code == 200  # the CSV is the comparison's table alone

    # A link frozen before the charts were: none, and no error.
    del link.snapshot["latency_sweep"]
    link.save(update_fields=["snapshot"])
    old = client.get(share).content.decode()
    assert (
        'id="latency-sweep"' not in old
        and "latency_sweep"
        not in client.get(reverse("experiments:share_export", args=[link.key, "json"])).json()
    )


def pooled_percentile(jobs: list[dict], direction: str, p: float) -> float:
    """p-th percentile (seconds) of the jobs' merged clat histograms, as fio's json+ gives
    them ("bins": {ns: count}): the value below which p % of all completions fall."""
    merged: dict[int, int] = {}
    for job in jobs:
        for ns, count in job[direction]["clat_ns"]["bins"].items():
            merged[int(ns)] = merged.get(int(ns), 0) + count
    total, running = sum(merged.values()), 0
    for ns in sorted(merged):
        running += merged[ns]
        if running >= total * p / 100:
            return ns * 1e-9
    raise AssertionError("empty histogram")


@pytest.mark.slow
@pytest.mark.django_db
@pytest.mark.skipif(shutil.which("fio") is None, reason="fio is not installed")
def test_a_real_numjobs_sweep_pools_percentiles_from_histograms(
    alice, alice_client, executing_bench
):
    """fio at numjobs 1 and 2 (psync, 4k random reads, one second): two jobs' percentiles
    pool only through their histograms, so the adapter asks for json+ there; the chart's
    numjobs=2 point is the percentile of both jobs' merged bins, computed here from fio's
    output."""
    matrix = make_matrix(
        alice,
        executing_bench,
        params={"rw": "randread", "bs": "4k", "size": "4m", "runtime": 1, "time_based": True},
        axes=[{"param": "numjobs", "values": [1, 2]}],
    )
    expected = {}
    for run in matrix.runs.all():
        status = execute.execute(run.pk, queue(run), "w@test")
        run.refresh_from_db()
        assert status == Run.Status.SUCCEEDED, run.error
        jobs = json.loads(run.raw_output[run.raw_output.index("{") :])["jobs"]
        n = run.params["numjobs"]
        assert len(jobs) == n and ("bins" in jobs[0]["read"]["clat_ns"]) == (n > 1)
        if n > 1:
            expected[str(n)] = [pooled_percentile(jobs, "read", p) for p in (50, 99, 99.9)]
        else:
            pct = jobs[0]["read"]["clat_ns"]["percentile"]
            expected[str(n)] = [pct[k] / 1e9 for k in ("50.000000", "99.000000", "99.900000")]
    html = alice_client.get(matrix.get_absolute_url()).content.decode()
    (fig,) = chart_data(html)
    bars, *lines = fig["data"]
    assert bars["x"] == ["1", "2"] and "latency-sweep-missing" not in html
    for i, x in enumerate(bars["x"]):
        assert [line["y"][i] for line in lines] == [
            pytest.approx(v * 1e3, abs=1e-4) for v in expected[x]
        ]
