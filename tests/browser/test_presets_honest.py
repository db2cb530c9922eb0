"""The published presets in Chromium, honest about what they hold (issue 12, items 3 and 4).

Own fio runs, executed for real on an x86_64 testbed through the worker's task, never join
the Arm vs x86 vs POWER presets (each pinned to its studies with ``f=source:…``), while the
same query without those filters does show them. The RAID0 vs RAID10 presets are grouped
bars from zero without error bars (n = 1), and an own RAID comparison with two runs per
point draws min–max error bars that stay at or above zero on screen.
"""

from __future__ import annotations

import html
import json
import math
import re
import shutil
from urllib.parse import parse_qsl, urlencode

import pytest
from django.core.management import call_command

from experiments.comparison.presets import PRESETS
from experiments.published import seed000, seed001, seed002
from tests.helpers.comparison import add_run, make_testbed
from tests.labs.browser import new_page, sign_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PRESET = dict(PRESETS)
WRITE = "Arm vs x86 vs POWER: IOzone write by threads"
READ = "Arm vs x86 vs POWER: IOzone read by threads"
RAID_DD = "RAID0 vs RAID10: dd write per device"
RAID_SB = "RAID0 vs RAID10: StorageBench per device"
ARCH_STUDIES = [seed000.SOURCE, seed001.SOURCE, seed002.SOURCE]
OWN_TESTBED = "alice fio box"
DD_SENTENCE = (
    "RAID0 writes about 50% faster than RAID10 with dd (single values, no significance test; "
    "n = 1 each; RAID0's value is approximate)"
)
MINMAX_NOTE = "n < 3: min–max shown"
SOURCE_LABEL = "Data source (published study or own runs)"

# What Plotly drew into each .chart-plot: its full traces (after defaults) and y axis.
DRAWN = """() => Array.from(document.querySelectorAll('.chart-plot')).map(gd => ({
  id: gd.id,
  rangemode: gd.layout.yaxis.rangemode,
  range: Array.from(gd._fullLayout.yaxis.range),
  traces: gd._fullData.map(t => ({
    name: t.name,
    type: t.type,
    x: Array.from(t.x).map(String),
    y: Array.from(t.y),
    errorVisible: !!(t.error_y && t.error_y.visible),
    minus: t.error_y && t.error_y.arrayminus ? Array.from(t.error_y.arrayminus) : [],
  })),
}))"""
# Screen pixels: where the y axis puts 0 and the lower ends of the drawn error bars of one
# chart.
ERROR_BAR_ENDS = """id => {
  const gd = document.getElementById(id);
  const svg = gd.querySelector('.main-svg').getBoundingClientRect();
  const yaxis = gd._fullLayout.yaxis;
  const ends = Array.from(gd.querySelectorAll('path.yerror'))
    .map(p => p.getBoundingClientRect().bottom);
  return {zero: svg.top + yaxis._offset + yaxis.l2p(0), ends: ends};
}"""


def chart_json(page) -> list[dict]:
    """The figures the page embeds (<script id="chart-data">), as the server sent them."""
    return [chart["figure"] for chart in json.loads(page.text_content("#chart-data"))]


def table_rows(page) -> list[dict[str, str]]:
    """The first table's rows as {column header: cell text}."""
    head = page.eval_on_selector_all(
        "#compare-table thead th", "ths => ths.map(th => th.innerText.trim())"
    )
    rows = page.eval_on_selector_all(
        "#compare-table tbody tr",
        "rows => rows.map(r => Array.from(r.cells).map(c => c.innerText.trim()))",
    )
    assert all(len(r) == len(head) for r in rows)
    return [dict(zip(head, r, strict=True)) for r in rows]


def points(figure: dict) -> dict[str, dict[str, tuple[int, float]]]:
    """{trace name: {x: (n, mean)}} of one figure."""
    return {
        t["name"]: {x: (cd[0], y) for x, y, cd in zip(t["x"], t["y"], t["customdata"], strict=True)}
        for t in figure["data"]
    }


def result_text(page) -> str:
    """All text of the result (closed <details> too), without the embedded chart JSON and
    without the data source attribute's name ("… (published study or own runs)")."""
    text = page.eval_on_selector(
        "#result",
        """el => { const c = el.cloneNode(true);
                   c.querySelectorAll('script').forEach(s => s.remove());
                   return c.textContent; }""",
    )
    return text.replace(SOURCE_LABEL, "")


def runs_sentence(page) -> int:
    match = re.search(r"(\d+) runs?; each contributes", page.inner_text("#result"))
    assert match, page.inner_text("#result")
    return int(match.group(1))


def without_tool(query: str) -> str:
    """The by-threads presets hold IOzone runs only (``tool=iozone``): without that filter
    they would show own fio runs but for the source filters."""
    return urlencode([(k, v) for k, v in parse_qsl(query) if k != "tool"])


def without_source_filters(query: str) -> str:
    return urlencode(
        [
            (k, v)
            for k, v in parse_qsl(without_tool(query))
            if not (k == "f" and v.startswith("source:"))
        ]
    )


def run_own_fio_matrix(owner, testbed):
    """A real fio matrix (rw write/read x numjobs 1, 4 x 2 repetitions, 4 MiB per job) on
    ``testbed``: launched as the launch button does (expand, dispatch), each run executed by
    the worker's Celery task (runners.execute_run, eagerly in this process: a worker process
    could not see the test database), running /usr/bin/fio and parsing its JSON."""
    from beeweb.celery import app
    from experiments.matrices.expansion import launch
    from experiments.models import Matrix, Run

    matrix = Matrix.objects.create(
        owner=owner,
        name="own fio sweep",
        tool="fio",
        repetitions=2,
        drop_caches=False,
        fixed_params={"size": "4m", "bs": "1m"},
        axes=[
            {"param": "rw", "values": ["write", "read"]},
            {"param": "numjobs", "values": [1, 4]},
        ],
    )
    matrix.testbeds.set([testbed])
    eager = app.conf.task_always_eager
    app.conf.task_always_eager = True
    try:
        counts = launch(matrix)
    finally:
        app.conf.task_always_eager = eager
    assert counts["queued"] == 8
    runs = list(matrix.runs.all())
    assert [r.status for r in runs] == [Run.Status.SUCCEEDED] * 8, [
        (r.status, r.error) for r in runs
    ]
    assert all(r.raw_output.lstrip().startswith("{") for r in runs)  # fio's JSON
    return matrix


def own_points(matrix, metric: str) -> dict[str, tuple[int, float]]:
    """{threads: (n, mean in GB/s)} of the own runs' headline ``metric``."""
    from experiments.models import Metric

    values: dict[str, list[float]] = {}
    for threads, value in Metric.objects.filter(
        run__matrix=matrix, name=metric, primary=True
    ).values_list("run__params__threads", "value"):
        values.setdefault(str(threads), []).append(value / 1e9)
    return {x: (len(v), sum(v) / len(v)) for x, v in values.items()}


def published_x86_points(metric: str) -> dict[str, tuple[int, float]]:
    """{threads: (n, mean in GB/s)} of the x86 study's runs of ``metric`` with a thread
    count, in thread order."""
    from experiments.models import Metric

    values: dict[int, list[float]] = {}
    for threads, value in Metric.objects.filter(
        name=metric, primary=True, run__published=True, run__source=seed002.SOURCE
    ).values_list("run__params__threads", "value"):
        if threads is not None:
            values.setdefault(int(threads), []).append(value / 1e9)
    return {str(x): (len(v), sum(v) / len(v)) for x, v in sorted(values.items())}


def close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-5, abs_tol=1e-6)


def assert_preset_holds_only_published_runs(page, metric, own, own_values, x86_expected):
    from experiments.models import Metric

    page.wait_for_selector(".chart-plot .main-svg")
    assert page.url.count("f=source%3A") == 3
    result = result_text(page)
    # No sentence, warning, note or difference mentions own runs or their testbed.
    assert "own runs" not in result, result
    assert OWN_TESTBED not in result and own.name not in result
    published = Metric.objects.filter(
        name=metric,
        primary=True,
        run__published=True,
        run__source__in=ARCH_STUDIES,
        run__tool="iozone",
    ).count()
    # Every run counted on the page is a published one: the table's n, and the sentence.
    rows = table_rows(page)
    assert sum(int(r["n"]) for r in rows) == published
    assert runs_sentence(page) == published
    (figure,) = chart_json(page)
    pts = points(figure)
    x86 = {name: p for name, p in pts.items() if name.startswith("x86_64")}
    assert list(x86.values()) == [x86_expected], pts  # one x86_64 series: the study's points
    assert sorted(x86_expected, key=int) == (
        ["1", "256"] if metric == "write_bw" else ["1", "1024"]
    )
    for series, by_x in pts.items():
        for x, (n, mean) in by_x.items():
            assert n == 1, (series, x, n)  # every published point is one run
            assert not any(close(mean, v) for v in own_values), (series, x, mean)
    # The drawn chart holds the same: Plotly's own traces.
    (drawn,) = page.evaluate(DRAWN)
    drawn_x86 = [t for t in drawn["traces"] if t["name"].startswith("x86_64")]
    assert len(drawn_x86) == 1
    assert drawn_x86[0]["x"] == list(x86_expected)
    assert all(
        close(y, mean)
        for y, (_, mean) in zip(drawn_x86[0]["y"], x86_expected.values(), strict=True)
    )
    assert sum(len(t["x"]) for t in drawn["traces"]) == sum(len(p) for p in pts.values())


@pytest.mark.skipif(shutil.which("fio") is None, reason="fio is not installed")
def test_arch_presets_leave_out_own_fio_runs(browser, live_server, alice, executing_bench):
    from experiments.models import Metric

    call_command("load_published", verbosity=0)
    executing_bench.name = OWN_TESTBED  # x86_64 (an R740xd like seed 002's servers)
    executing_bench.save(update_fields=["name"])
    matrix = run_own_fio_matrix(alice, executing_bench)
    own = {metric: own_points(matrix, metric) for metric in ("write_bw", "read_bw")}
    assert {m: sorted(p) for m, p in own.items()} == {"write_bw": ["1", "4"], "read_bw": ["1", "4"]}
    assert all(n == 2 for p in own.values() for n, _ in p.values())

    url = live_server.url
    page = new_page(browser)
    sign_in(page, url, "alice", "alice-pw")  # lands on the dashboard

    # The write preset from the dashboard's "Start here" links.
    page.get_by_role("link", name=WRITE, exact=True).click()
    page.wait_for_url(re.compile(r"/compare/\?"))
    assert_preset_holds_only_published_runs(
        page,
        "write_bw",
        matrix,
        [m for _, m in own["write_bw"].values()],
        published_x86_points("write_bw"),
    )

    # The read preset from the compare page's preset links.
    page.goto(f"{url}/compare/")
    page.locator("main p.muted").get_by_role("link", name=READ, exact=True).click()
    page.wait_for_url(re.compile(r"metric=read_bw"))
    assert_preset_holds_only_published_runs(
        page,
        "read_bw",
        matrix,
        [m for _, m in own["read_bw"].values()],
        published_x86_points("read_bw"),
    )

    # The same queries without the studies' filters do show the own runs: a series with
    # their points (two runs each at threads 1 and 4), counted among the page's runs.
    for title, metric in ((WRITE, "write_bw"), (READ, "read_bw")):
        page.goto(f"{url}/compare/?{without_tool(PRESET[title])}")
        page.wait_for_selector(".chart-plot .main-svg")
        filtered_runs = runs_sentence(page)
        page.goto(f"{url}/compare/?{without_source_filters(PRESET[title])}")
        page.wait_for_selector(".chart-plot .main-svg")
        assert "f=source" not in page.url
        (figure,) = chart_json(page)
        expected = own[metric]
        joined = [
            name
            for name, by_x in points(figure).items()
            if all(
                x in by_x and by_x[x][0] == n and close(by_x[x][1], mean)
                for x, (n, mean) in expected.items()
            )
        ]
        assert joined, points(figure)
        assert sum(int(r["n"]) for r in table_rows(page)) == runs_sentence(page)
        assert runs_sentence(page) == filtered_runs + 4, (
            "the own runs are what the filters left out",
            Metric.objects.filter(name=metric, primary=True).count(),
        )
        result = result_text(page)
        assert "own runs" in result and OWN_TESTBED in result
    page.context.close()


def assert_bars_from_zero(page, n_per_point: int) -> dict:
    """Every trace a bar (as sent and as drawn), the y axis from zero, no tick below zero;
    returns the drawn chart."""
    page.wait_for_selector(".chart-plot .main-svg")
    (figure,) = chart_json(page)
    assert figure["data"] and all(t["type"] == "bar" for t in figure["data"])
    assert figure["layout"]["yaxis"]["rangemode"] == "tozero"
    (drawn,) = page.evaluate(DRAWN)
    assert all(t["type"] == "bar" for t in drawn["traces"])
    assert drawn["rangemode"] == "tozero" and drawn["range"][0] == 0
    ticks = page.eval_on_selector_all(
        f"#{drawn['id']} .ytick text", "els => els.map(e => e.textContent)"
    )
    assert ticks[0] == "0" and not any(t.startswith(("-", "−")) for t in ticks), ticks
    assert page.locator(f"#{drawn['id']} .bars").count() >= 1
    rows = table_rows(page)
    assert rows and all(int(r["n"]) == n_per_point for r in rows)
    assert all(r["95% CI"] == "n < 3" for r in rows)  # the 95% CI column: none for n < 3
    return drawn


def test_raid_presets_are_bars_with_honest_error_bars(browser, live_server, alice):
    call_command("load_published", verbosity=0)
    raid0 = make_testbed(alice, "raid0-lab", "x86_64", "0")
    raid10 = make_testbed(alice, "raid10-lab", "x86_64", "10")
    # n = 2 per point: a t-based 95% CI of 3 and 121 GB/s would run to -687 GB/s.
    for value in (3e9, 121e9):
        add_run(raid0, value, threads=4)
    for value in (2e9, 40e9):
        add_run(raid10, value, threads=4)
    url = live_server.url
    page = new_page(browser)
    sign_in(page, url, "alice", "alice-pw")

    # The published presets (one value per RAID level): bars, no error bars at all.
    page.get_by_role("link", name=RAID_DD, exact=True).click()  # the dashboard's link
    page.wait_for_url(re.compile(r"tool=dd"))
    for title in (RAID_DD, RAID_SB):
        if title == RAID_SB:
            page.goto(f"{url}/compare/")
            page.locator("main p.muted").get_by_role("link", name=title, exact=True).click()
            page.wait_for_url(re.compile(r"tool=storagebench"))
        assert "f=source%3A002" in page.url
        drawn = assert_bars_from_zero(page, n_per_point=1)
        (figure,) = chart_json(page)
        assert [t["name"] for t in figure["data"]] == ["RAID0", "RAID10"]
        assert not any("error_y" in t for t in figure["data"])
        assert not any(t["errorVisible"] for t in drawn["traces"])
        assert page.locator(f"#{drawn['id']} path.yerror").count() == 0
        assert "annotations" not in figure["layout"]
        assert page.locator(f"#{drawn['id']} .annotation").count() == 0
        sentences = page.inner_text("#baseline-sentences")
        assert "(single values, no significance test; n = 1 each" in sentences
        assert "own runs" not in result_text(page)
        if title == RAID_DD:
            assert DD_SENTENCE in sentences

    # Own runs, two per point: bars whose error bars are min–max, never below zero.
    page.goto(
        f"{url}/compare/?metric=write_bw&x=tool&series=raid"
        f"&testbed={raid0.uuid}&testbed={raid10.uuid}"
    )
    drawn = assert_bars_from_zero(page, n_per_point=2)
    (figure,) = chart_json(page)
    assert figure["layout"]["annotations"][0]["text"].endswith(MINMAX_NOTE)
    assert "clipped" not in figure["layout"]["annotations"][0]["text"]
    assert MINMAX_NOTE in page.text_content(f"#{drawn['id']} .annotation")
    expected_min = {"RAID0": 3.0, "RAID10": 2.0}
    expected_mean = {"RAID0": 62.0, "RAID10": 21.0}
    hovers = {t["name"]: html.unescape(t["customdata"][0][5]) for t in figure["data"]}
    assert hovers == {
        "RAID0": "min–max (n = 2 < 3: no CI) 3–121",
        "RAID10": "min–max (n = 2 < 3: no CI) 2–40",
    }
    assert {t["name"] for t in drawn["traces"]} == set(expected_min)
    for t in drawn["traces"]:
        assert t["errorVisible"], t
        ((y,), (minus,)) = (t["y"], t["minus"])
        assert close(y, expected_mean[t["name"]])
        assert close(y - minus, expected_min[t["name"]])  # the lower end is the minimum
        assert y - minus >= 0
    # On screen: each error bar's lower end is at or above the y = 0 line.
    bars = page.evaluate(ERROR_BAR_ENDS, drawn["id"])
    assert len(bars["ends"]) == 2
    assert all(end <= bars["zero"] + 0.5 for end in bars["ends"]), bars
    page.context.close()
