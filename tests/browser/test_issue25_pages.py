"""Issue 25, findings 7 and 9 in Chromium: the dashboard's featured comparison (a sentence, no
line across an unmeasured gap, the rows left off the chart named), read and write on one
chart when they are the series, "lines" that cannot be lines, the latency chart's log axis,
the runs table's column picker, and the matrix preview and comparison on a phone (390 px)."""

from __future__ import annotations

import re

import pytest
from django.core.management import call_command

from experiments.comparison.presets import DASHBOARD_PRESETS
from tests.helpers.comparison import add_run, make_testbed
from tests.helpers.sweeps import qd_matrix
from tests.labs.browser import sign_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SHOTS = "/tmp/beeweb-issue25-{}.png"  # screenshots, to look at the pages as a reader does

# What Plotly drew: per chart, its traces' names, modes, x and y (after Plotly's defaults).
DRAWN = """() => Array.from(document.querySelectorAll('.chart-plot')).map(gd => ({
  id: gd.id,
  traces: gd._fullData.map(t => ({name: t.name, type: t.type, mode: t.mode,
                                  x: Array.from(t.x).map(String), y: Array.from(t.y)})),
}))"""


def page_at(browser, width: int, height: int = 900):
    page = browser.new_context(viewport={"width": width, "height": height}).new_page()
    page.set_default_timeout(20_000)
    return page


def test_the_featured_comparison_says_what_the_studies_show(browser, live_server, alice):
    """Finding 7: "Arm vs x86 vs POWER by threads" had no sentence, joined x86's 1 and 256
    threads with a straight line, and left 8 of its 15 rows off the chart unsaid."""
    call_command("load_published", verbosity=0)
    page = page_at(browser, 1366)
    sign_in(page, live_server.url, "alice", "alice-pw")
    title = DASHBOARD_PRESETS[0][0]
    assert title == "Arm vs x86 vs POWER: IOzone write by threads"
    page.get_by_role("link", name=title, exact=True).first.click()
    page.wait_for_url(re.compile(r"/compare/\?"))
    page.wait_for_selector(".chart-plot .main-svg")
    page.screenshot(path=SHOTS.format("featured"), full_page=True)

    # The sentences: no two studies share a thread count; each is said.
    sentences = page.inner_text("#baseline-sentences")
    assert (
        "Nothing compared between ppc64le (POWER) and x86_64 in Write throughput: they were "
        "measured at no common threads (ppc64le (POWER) at 4, 8, 16, 32, 64; x86_64 at 1, 256)"
    ) in sentences
    assert "aarch64 (Arm)'s runs state no threads" in sentences

    # x86's two points stand alone; POWER's sweep is a line.
    ((chart),) = page.evaluate(DRAWN)
    modes = {t["name"]: (t["mode"], t["x"]) for t in chart["traces"]}
    assert modes["x86_64"] == ("markers", ["1", "256"]), modes
    assert modes["ppc64le (POWER)"] == ("lines+markers", ["4", "8", "16", "32", "64"])
    notes = page.inner_text(".chart-box .chart-notes")
    assert "x86_64: 1 and 256 threads not joined by a line" in notes

    # What is off the chart is said: the table's rows without a thread count.
    rows = page.eval_on_selector_all(
        "#compare-table tbody tr", "rows => rows.map(r => r.cells[1].innerText.trim())"
    )
    unknown = rows.count("(unknown)")
    assert unknown >= 1
    verb = "states" if unknown == 1 else "state"
    assert (
        f"Not on the chart: {unknown} of the {len(rows)} rows of the table {verb} no threads"
        in (notes)
    )
    # Only the studies' one common test: IOzone N-N (no fio, IOR, dd or StorageBench rows).
    labels = page.eval_on_selector_all(
        "#compare-table tbody tr", "rows => rows.map(r => r.cells[0].innerText.trim())"
    )
    assert not any(tool in label for label in labels for tool in ("fio", "ior", "dd", "storage"))
    page.context.close()


def rw_testbed(owner):
    tb = make_testbed(owner, "rw-lab", "x86_64", "0")
    for rw, metric, scale in (("write", "write_bw", 1.0), ("read", "read_bw", 1.3)):
        for numjobs in (1, 2, 4, 8):
            for rep in range(3):
                value = scale * (1 + numjobs) * 1e9 * (1 + 0.02 * rep)
                add_run(tb, value, metric=metric, rw=rw, numjobs=numjobs, bs="1m")
    return tb


def test_read_and_write_share_a_chart_when_they_are_the_series(browser, live_server, alice):
    tb = rw_testbed(alice)
    page = page_at(browser, 1366)
    sign_in(page, live_server.url, "alice", "alice-pw")
    page.goto(
        f"{live_server.url}/compare/?metric=write_bw&metric=read_bw&x=param:numjobs"
        f"&series=param:rw&testbed={tb.uuid}"
    )
    page.wait_for_selector(".chart-plot .main-svg")
    page.screenshot(path=SHOTS.format("rw"), full_page=True)
    charts = page.evaluate(DRAWN)
    assert len(charts) == 1, [c["traces"] for c in charts]
    traces = {t["name"]: t for t in charts[0]["traces"]}
    assert set(traces) == {"write", "read"}
    assert traces["write"]["x"] == traces["read"]["x"] == ["1", "2", "4", "8"]
    assert traces["read"]["y"][0] > traces["write"]["y"][0]
    assert page.text_content(".chart-plot .gtitle") == "Write and read throughput (GB/s)"
    # The tables stay one per metric.
    assert page.locator(".compare-table").count() == 2
    page.context.close()


def test_lines_that_cannot_be_lines_say_so(browser, live_server, alice):
    """Categories on x (the tool) are bars: the chart select says what is drawn, and why."""
    from experiments.models import Run

    tb = rw_testbed(alice)
    other = add_run(tb, 2e9, rw="write", numjobs=1, bs="1m")
    Run.objects.filter(pk=other.pk).update(tool="ior")
    page = page_at(browser, 1366)
    sign_in(page, live_server.url, "alice", "alice-pw")
    page.goto(f"{live_server.url}/compare/?metric=write_bw&x=tool&chart=line&testbed={tb.uuid}")
    page.wait_for_selector(".chart-plot .main-svg")
    (chart,) = page.evaluate(DRAWN)
    assert {t["type"] for t in chart["traces"]} == {"bar"}
    assert page.eval_on_selector("#chart-kind", "s => s.value") == "bar"
    assert "Drawn as bars, not lines: Tool holds categories" in page.inner_text(".chart-notes")
    page.context.close()


def axis_labels(page, selector: str) -> list[float]:
    labels = page.eval_on_selector_all(selector, "ts => ts.map(t => t.textContent)")
    assert len(labels) >= 3, labels
    values = [float(label.replace("\u2212", "-")) for label in labels]
    assert values == sorted(values) and len(set(values)) == len(values), labels
    return values


def test_the_latency_axes_read_in_order(browser, live_server, alice):
    """The run page's latency chart read "5 2 1 5 2 0.1 5" (plotly labels a short log axis's
    minor ticks with their digit): each label is now its whole value, ascending. The matrix
    page's IOPS-and-latency chart too, with its tail over three decades."""
    from experiments.models import Metric, Run
    from experiments.results.store import replace_metrics

    tb = make_testbed(alice, "lat-lab", "x86_64", "0")
    run = Run.objects.create(
        owner=alice, testbed=tb, tool="fio", status="succeeded", params={"rw": "randread"}
    )
    replace_metrics(
        run,
        [
            {"name": "read_iops", "value": 20000.0, "unit": "op/s"},
            {"name": "read_lat", "value": 0.00008, "unit": "s", "stat": "p50"},
            {"name": "read_lat", "value": 0.0006, "unit": "s", "stat": "p99"},
            {"name": "read_lat", "value": 0.0031, "unit": "s", "stat": "p99.9"},
        ],
    )
    page = page_at(browser, 1366)
    sign_in(page, live_server.url, "alice", "alice-pw")
    page.goto(f"{live_server.url}{run.get_absolute_url()}")
    page.wait_for_selector("#latency-plot .main-svg")
    page.locator("#latency-plot").screenshot(path=SHOTS.format("run-latency"))
    values = axis_labels(page, "#latency-plot .ytick text")
    assert values[0] <= 0.1 and values[-1] >= 2, values

    matrix = qd_matrix(alice)
    tail = Metric.objects.filter(
        run__matrix=matrix, run__params__iodepth=64, run__params__bs="4k", stat="p99.9"
    )
    assert tail.count() == 1
    tail.update(value=0.05)
    page.goto(f"{live_server.url}{matrix.get_absolute_url()}")
    page.wait_for_selector('#latency-sweep-1[data-drawn="1"]')
    page.locator("#latency-sweep-1").screenshot(path=SHOTS.format("latency"))
    axis_labels(page, "#latency-sweep-1 .y2tick text")
    page.context.close()


def test_the_runs_table_has_a_column_picker(browser, live_server, alice):
    tb = rw_testbed(alice)
    add_run(tb, 5000.0, metric="file_create", numjobs=1)
    page = page_at(browser, 1366)
    sign_in(page, live_server.url, "alice", "alice-pw")
    page.goto(f"{live_server.url}/runs/table/?cols=param:numjobs")
    assert page.locator('th a[data-col="metric:read_bw"]').count() == 0
    # A result column, picked by its name in words.
    picker = page.locator("#rt-add-metric")
    assert "Read throughput (read_bw)" in picker.inner_text()
    picker.select_option(label="Read throughput (read_bw)")
    page.wait_for_selector('th a[data-col="metric:read_bw"]')
    assert "cols=param%3Anumjobs%2Cmetric%3Aread_bw" in page.url and "add=" not in page.url
    # A parameter column and a run field.
    page.select_option("#rt-add-param", "param:rw")
    page.wait_for_selector('th a[data-col="param:rw"]')
    page.select_option("#rt-add-field", "testbed")
    page.wait_for_selector('th a[data-col="testbed"]')
    heads = page.eval_on_selector_all("#runs thead a[data-col]", "as => as.map(a => a.dataset.col)")
    assert heads == ["param:numjobs", "metric:read_bw", "param:rw", "testbed"]
    cells = page.eval_on_selector_all(
        "#runs tbody tr", "rows => rows.map(r => r.cells[4].innerText.trim())"
    )
    assert set(cells) == {"rw-lab"}
    page.screenshot(path=SHOTS.format("runs-table"), full_page=False)
    # Taken out again with its ×.
    page.click('a.col-remove[aria-label="Remove column rw"]')
    page.wait_for_function("() => !document.querySelector('th a[data-col=\"param:rw\"]')")
    assert "param%3Arw" not in page.url
    page.context.close()


def test_phone_matrix_preview_and_comparison(browser, live_server, alice):
    """At 390 px the preview's command column was 4 characters wide and the comparison's
    chart began 1,800 px down, below its form."""
    from experiments.models import Matrix

    tb = rw_testbed(alice)
    tb.benchmark_dir = "/mnt/beegfs/bench"
    tb.save(update_fields=["benchmark_dir"])
    matrix = Matrix.objects.create(
        owner=alice,
        name="phone fio",
        tool="fio",
        fixed_params={"size": "16m", "bs": "1m"},
        axes=[{"param": "numjobs", "values": [1, 2]}],
    )
    matrix.testbeds.set([tb])
    page = page_at(browser, 390, 844)
    sign_in(page, live_server.url, "alice", "alice-pw")
    page.goto(f"{live_server.url}{matrix.get_absolute_url()}")
    page.wait_for_selector("#plan code.argv")
    widths = page.eval_on_selector_all(
        "#plan code.argv", "cs => cs.map(c => c.getBoundingClientRect().width)"
    )
    assert min(widths) >= 250, widths  # most of the phone's width (it was 77 px)
    # The table scrolls in its own box, not the page.
    assert page.evaluate("() => document.documentElement.scrollWidth") <= 390
    page.locator("#plan").screenshot(path=SHOTS.format("plan-390"))

    page.goto(
        f"{live_server.url}/compare/?metric=write_bw&metric=read_bw&x=param:numjobs"
        f"&series=param:rw&testbed={tb.uuid}"
    )
    page.wait_for_selector(".chart-plot .main-svg")
    top = page.evaluate(
        "() => document.querySelector('.chart-plot').getBoundingClientRect().top + scrollY"
    )
    form = page.evaluate(
        "() => document.querySelector('#compare-form').getBoundingClientRect().top + scrollY"
    )
    assert top < 600 and top < form, (top, form)
    assert page.locator("a.to-form").is_visible()
    page.screenshot(path=SHOTS.format("compare-390"))
    # On a wide screen the form stays first.
    wide = page_at(browser, 1366)
    sign_in(wide, live_server.url, "alice", "alice-pw")
    wide.goto(page.url)
    wide.wait_for_selector(".chart-plot .main-svg")
    assert wide.evaluate(
        "() => document.querySelector('#compare-form').getBoundingClientRect().top"
        " < document.querySelector('.chart-plot').getBoundingClientRect().top"
    )
    assert not wide.locator("a.to-form").is_visible()
    page.context.close()
    wide.context.close()
