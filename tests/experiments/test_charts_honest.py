"""Honest charts (issue 12, items 4 and 6): the plotly figure JSON the comparison builds.

No confidence interval for n < 3 (min-max, said so), no error bar below zero, y axes from
zero, integer ticks for integer parameters, bars for categories, human metric names with
units, and exported images that name what is compared, the filters and the testbeds.
"""

from __future__ import annotations

import pytest
from django.urls import reverse

from experiments.comparison import MINMAX_NOTE, ComparisonSpec, compute
from experiments.comparison.charts import metric_label, metric_title
from tests.helpers.comparison import add_run, make_testbed

pytestmark = pytest.mark.django_db


@pytest.fixture
def arm(alice):
    return make_testbed(alice, "arm-lab", "aarch64", "0")


@pytest.fixture
def x86(alice):
    return make_testbed(alice, "x86-lab", "x86_64", "10")


def chart_of(query: str):
    result = compute(ComparisonSpec.from_query(query))
    assert result.errors == []
    (chart,) = result.charts
    return result, chart


def traces(chart, name=None):
    data = [t for t in chart.figure["data"] if not t["name"].endswith("(runs)")]
    return [t for t in data if name is None or t["name"] == name]


def lower_ends(trace) -> list[float]:
    error = trace.get("error_y")
    if not error:
        return list(trace["y"])
    return [y - (m or 0) for y, m in zip(trace["y"], error["arrayminus"], strict=True)]


def notes(chart) -> str:
    return " ".join(a["text"] for a in chart.figure["layout"].get("annotations", []))


def test_two_runs_show_min_max_not_a_confidence_interval(arm):
    # The case: 3 and 121 GB/s averaged; a 95% CI of two values is -687 to 811 GB/s.
    for value in (3e9, 121e9):
        add_run(arm, value, threads=4)
    add_run(arm, 5e9, threads=8)
    result, chart = chart_of("metric=write_bw&x=param:threads&series=arch")
    point = next(p for p in result.points if p.x == "4")
    # The API keeps the interval, its lower end clipped at zero (issue 25: a throughput
    # has no interval below zero); the upper end is the t interval's.
    assert point.n == 2 and point.ci_low == 0.0 and point.ci_high > 800
    (trace,) = traces(chart)
    error = trace["error_y"]
    assert error["arrayminus"][0] == pytest.approx(59.0)  # 62 - min 3
    assert error["array"][0] == pytest.approx(59.0)  # max 121 - 62
    assert lower_ends(trace)[0] == pytest.approx(3.0)
    assert "min–max" in trace["customdata"][0][5] and "no CI" in trace["customdata"][0][5]
    assert "%{customdata[5]}" in trace["hovertemplate"]
    assert MINMAX_NOTE in notes(chart)
    assert "95% confidence interval" in notes(chart)


def test_three_runs_get_the_confidence_interval(arm):
    for value in (4e9, 5e9, 6e9):
        add_run(arm, value, threads=4)
    add_run(arm, 5e9, threads=8)
    result, chart = chart_of("metric=write_bw&x=param:threads&series=arch")
    point = next(p for p in result.points if p.x == "4")
    (trace,) = traces(chart)
    assert lower_ends(trace)[0] == pytest.approx(point.ci_low)
    assert trace["customdata"][0][5].startswith("95% CI")
    assert MINMAX_NOTE not in notes(chart)


@pytest.mark.parametrize("err", ["ci", "sd", "minmax"])
def test_no_error_bar_goes_below_zero(arm, x86, err):
    for value in (1e9, 1e9, 40e9):  # a CI and a standard deviation reaching below zero
        add_run(arm, value, threads=1)
        add_run(x86, value / 2, threads=1)
    for value in (1e9, 30e9):
        add_run(arm, value, threads=2)
    _, chart = chart_of(f"metric=write_bw&x=param:threads&series=arch&err={err}&chart=bar")
    for trace in traces(chart):
        assert trace["type"] == "bar"
        assert trace["error_y"]["visible"]
        assert min(lower_ends(trace)) >= 0
        assert min(v for v in trace["error_y"]["arrayminus"] if v is not None) >= 0
    if err != "minmax":
        assert "clipped at 0" in notes(chart)
        assert any("drawn from 0" in c[5] for t in traces(chart) for c in t["customdata"])


def test_single_runs_have_no_error_bars(arm):
    add_run(arm, 2e9, threads=1)
    add_run(arm, 3e9, threads=2)
    _, chart = chart_of("metric=write_bw&x=param:threads&series=arch")
    (trace,) = traces(chart)
    assert "error_y" not in trace and notes(chart) == ""


@pytest.mark.parametrize(
    "query",
    [
        "metric=write_bw&x=param:threads&series=arch",
        "metric=write_bw&x=tool&series=arch&norm=server",
        "metric=write_iops&x=param:threads&series=arch&chart=bar",
        "metric=write_bw&x=&series=arch",
    ],
)
def test_y_axes_start_at_zero(arm, query):
    for threads in (1, 2):
        for value in (1e9, 90e9):
            add_run(arm, value, threads=threads)
            add_run(arm, value / 1e4, metric="write_iops", threads=threads)
    _, chart = chart_of(query)
    yaxis = chart.figure["layout"]["yaxis"]
    assert yaxis["rangemode"] == "tozero"
    assert yaxis["autorangeoptions"] == {"minallowed": 0}
    assert all(min(lower_ends(t)) >= 0 for t in traces(chart))


def test_integer_parameters_get_integer_ticks(arm):
    for numjobs in (1, 2, 3):
        add_run(arm, numjobs * 1e9, numjobs=numjobs)
    _, chart = chart_of("metric=write_bw&x=param:numjobs&series=arch")
    xaxis = chart.figure["layout"]["xaxis"]
    assert chart.kind == "line" and xaxis["type"] == "linear"
    assert xaxis["tickmode"] == "array"
    assert xaxis["tickvals"] == [1.0, 2.0, 3.0] and xaxis["ticktext"] == ["1", "2", "3"]


def test_long_integer_sweeps_get_whole_steps(arm):
    for nodes in range(10, 50, 3):  # 14 values over less than 16x: linear
        add_run(arm, nodes * 1e9, nodes=nodes)
    _, chart = chart_of("metric=write_bw&x=param:nodes&series=arch")
    xaxis = chart.figure["layout"]["xaxis"]
    assert xaxis["tickmode"] == "linear" and xaxis["tickformat"] == "d"
    assert isinstance(xaxis["dtick"], int) and xaxis["dtick"] >= 1 and xaxis["tick0"] == 0


def test_power_of_two_sweeps_use_a_log_axis_with_integer_labels(arm):
    for threads in (1, 2, 4, 8, 16, 32, 64, 128, 256):
        add_run(arm, threads * 1e8, threads=float(threads))  # stored as 1.0, 2.0 …
    _, chart = chart_of("metric=write_bw&x=param:threads&series=arch")
    xaxis = chart.figure["layout"]["xaxis"]
    assert xaxis["type"] == "log"
    assert xaxis["ticktext"] == ["1", "2", "4", "8", "16", "32", "64", "128", "256"]
    assert xaxis["tickvals"] == [1, 2, 4, 8, 16, 32, 64, 128, 256]


def test_categorical_x_is_drawn_as_grouped_bars(arm, x86):
    for tb in (arm, x86):
        add_run(tb, 3e9, threads=1, rw="write")
        add_run(tb, 4e9, threads=1, rw="randwrite")
    _, chart = chart_of("metric=write_bw&x=param:rw&series=arch")
    assert chart.kind == "bar"
    assert {t["type"] for t in traces(chart)} == {"bar"}
    xaxis = chart.figure["layout"]["xaxis"]
    assert xaxis["type"] == "category" and xaxis["categoryarray"] == ["randwrite", "write"]
    assert chart.figure["layout"]["barmode"] == "group"


def test_a_single_x_value_is_drawn_as_bars_not_floating_dots(arm, x86):
    # The RAID0 vs RAID10 presets: x = tool with only dd.
    for tb in (arm, x86):
        for value in (5e9, 5.2e9):
            add_run(tb, value, threads=4)
    _, chart = chart_of("metric=write_bw&x=param:threads&series=raid&baseline=10")
    assert chart.kind == "bar"
    assert [t["type"] for t in traces(chart)] == ["bar", "bar"]
    assert chart.figure["layout"]["xaxis"]["type"] == "category"


def test_runs_drawn_over_bars_sit_on_their_own_bar(arm, x86):
    for tb in (arm, x86):
        for value in (5e9, 5.2e9):
            add_run(tb, value, threads=4)
    _, chart = chart_of("metric=write_bw&x=param:threads&series=arch&reps=1")
    runs = [t for t in chart.figure["data"] if t["name"].endswith("(runs)")]
    assert len(runs) == 2 and chart.figure["layout"]["scattermode"] == "group"
    for trace in runs:
        bar = traces(chart, trace["name"].removesuffix(" (runs)"))[0]
        assert trace["offsetgroup"] == bar["offsetgroup"]


def test_titles_use_human_metric_names_with_units(arm):
    add_run(arm, 2e9, threads=1)
    add_run(arm, 3e9, threads=2)
    add_run(arm, 5e3, metric="file_create", threads=1)
    result = compute(
        ComparisonSpec.from_query(
            "metric=write_bw&metric=file_create&x=param:threads&series=arch&norm=server"
        )
    )
    write, creates = result.charts
    assert write.title == "Write throughput (GB/s per storage server)"
    assert write.figure["layout"]["title"]["text"] == write.title
    assert write.figure["layout"]["yaxis"]["title"]["text"] == write.title
    assert creates.figure["layout"]["yaxis"]["title"]["text"].startswith("File creates (op/s")
    assert "write_bw" not in str(write.figure["layout"])
    assert [m.name for m in result.metrics] == ["write_bw", "file_create"]  # API names stay
    assert result.metrics[0].title == "Write throughput"


def test_metric_labels():
    assert metric_title("write_bw", "GB/s") == "Write throughput (GB/s)"
    assert metric_label("read_iops") == "Read IOPS"
    assert metric_label("write_lat") == "Write latency"
    assert metric_label("rc_rdma_write_bw") == "RC RDMA write bandwidth"
    assert metric_label("ib_write_msg_rate") == "InfiniBand write message rate"


def test_heatmap_titles_are_human(arm):
    for stripe in (1, 4):
        add_run(arm, stripe * 1e9, threads=1, stripe_count=stripe)
    result = compute(
        ComparisonSpec.from_query(
            "metric=write_bw&x=param:threads&y=param:stripe_count&series=arch&chart=heatmap"
        )
    )
    assert result.charts[0].title == "Write throughput (GB/s): aarch64 (Arm)"


def test_exported_images_name_title_filters_and_testbeds(arm, x86, alice_client):
    for tb in (arm, x86):
        for threads in (1, 2):
            add_run(tb, threads * 1e9, threads=threads)
    query = (
        "metric=write_bw&x=param:threads&series=arch&f=arch:aarch64&f=arch:x86_64"
        "&f=raid:0&f=raid:10&tool=fio"
    )
    _, chart = chart_of(query)
    export = chart.figure["export"]
    title = export["title"]["text"]
    assert title == "Write throughput (GB/s) by threads, series: Architecture (storage servers)"
    subtitle = export["title"]["subtitle"]["text"]
    filters, testbeds = subtitle.split("<br>")
    assert filters.startswith("Filters: ")
    assert "aarch64 (Arm) or x86_64" in filters and "RAID0 or RAID10" in filters
    assert "tool: fio" in filters
    assert testbeds == "Testbeds: arm-lab, x86-lab"
    assert export["margin"]["t"] > chart.figure["layout"]["margin"]["t"]

    # The page hands the export layout to comparison.js, which draws downloads with it.
    response = alice_client.get(reverse("experiments:compare") + "?" + query)
    payload = response.context["charts_json"]
    assert payload[0]["figure"]["export"]["title"]["text"] == title
    script = (
        __import__("pathlib").Path(__file__).parents[2] / "static" / "comparison.js"
    ).read_text()
    assert 'figure["export"]' in script and "Plotly.downloadImage" in script
    assert '"toImage"' in script  # the mode bar's own camera is replaced by the export one


def test_exported_filters_name_testbeds_and_escape_markup(alice):
    tb = make_testbed(alice, "<b>lab</b>", "aarch64", "0")
    add_run(tb, 1e9, threads=1)
    add_run(tb, 2e9, threads=2)
    _, chart = chart_of(f"metric=write_bw&x=param:threads&series=arch&testbed={tb.uuid}")
    subtitle = chart.figure["export"]["title"]["subtitle"]["text"]
    assert "testbed: &lt;b&gt;lab&lt;/b&gt;" in subtitle
    assert "Testbeds: &lt;b&gt;lab&lt;/b&gt;" in subtitle
    _, chart = chart_of("metric=write_bw&x=param:threads&series=arch")
    assert chart.figure["export"]["title"]["subtitle"]["text"].startswith("Filters: none<br>")
