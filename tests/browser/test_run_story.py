"""Browser test of the run page's story: zooming the time axis of one telemetry panel moves
every panel (their x axes match the first), in Debian's Chromium under Playwright."""

from __future__ import annotations

import pytest

from experiments.results import telemetry as stored
from tests.helpers.comparison import add_run
from tests.helpers.telemetry import telemetry_doc as doc
from tests.labs.browser import new_page, sign_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

AXES = """(id) => {
  const layout = document.getElementById(id)._fullLayout;
  const number = (k) => Number(k.slice(5) || 1);
  return Object.keys(layout).filter((k) => /^xaxis\\d*$/.test(k))
    .sort((a, b) => number(a) - number(b))
    .map((k) => ({name: k, range: layout[k].range, offset: layout[k]._offset,
                  length: layout[k]._length,
                  top: layout[k.replace("x", "y")]._offset,
                  height: layout[k.replace("x", "y")]._length}));
}"""


def test_zooming_one_panel_zooms_all(browser, live_server, alice, bench):
    run = add_run(bench, 1e9)
    client = doc("stor1", "2026-01-01T10:00:00+00:00", n=60, tool_cpu_top=[0.5] * 60)
    client["tool"] = {"t": [float(i) for i in range(1, 61)], "series": {"write_bw": [1e9] * 60}}
    stored.save(run, client)
    stored.save(
        run, doc("storage02", "2026-01-01T10:00:01+00:00", n=60, **{"disk_util:sdb": [0.5] * 60})
    )
    page = new_page(browser)
    sign_in(page, live_server.url, "alice", "alice-pw")
    page.goto(f"{live_server.url}{run.get_absolute_url()}")
    page.wait_for_selector("#telemetry-plot[data-drawn='1']")
    before = page.evaluate(AXES, "telemetry-plot")
    assert len(before) >= 8
    full = before[0]["range"]
    assert all(a["range"] == full for a in before)
    # Drag across the middle of the third panel (the CPU of stor1), horizontally: an x zoom.
    panel = before[2]
    # The panel into the window first (notes above the plot may push it below the fold;
    # the mouse does not scroll): bounding boxes are relative to the window.
    page.evaluate(
        "([id, top]) => window.scrollTo(0, document.getElementById(id)"
        ".getBoundingClientRect().top + window.scrollY + top - 100)",
        ["telemetry-plot", panel["top"]],
    )
    box = page.locator("#telemetry-plot").bounding_box()
    y = box["y"] + panel["top"] + panel["height"] / 2
    x0 = box["x"] + panel["offset"] + panel["length"] * 0.25
    x1 = box["x"] + panel["offset"] + panel["length"] * 0.5
    page.mouse.move(x0, y)
    page.mouse.down()
    page.mouse.move((x0 + x1) / 2, y, steps=5)
    page.mouse.move(x1, y, steps=5)
    page.mouse.up()
    page.wait_for_function(
        """([id, lo]) => document.getElementById(id)._fullLayout.xaxis.range[0] > lo""",
        arg=["telemetry-plot", full[0] + 1],
    )
    after = page.evaluate(AXES, "telemetry-plot")
    zoomed = after[2]["range"]
    assert full[0] < zoomed[0] < zoomed[1] < full[1]
    assert zoomed[1] - zoomed[0] < (full[1] - full[0]) / 2
    for axis in after:  # every panel shows the same seconds
        assert axis["range"] == pytest.approx(zoomed, abs=1e-6), axis["name"]
    assert page.locator(".verdict-headline").first.inner_text()
