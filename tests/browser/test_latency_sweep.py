"""The matrix page's IOPS-and-latency chart in Chromium: a fio sweep of iodepth over two block
sizes draws two charts, each with IOPS bars on the left axis and p50/p99/p99.9 lines on a
logarithmic right axis, under the page's CSP and without console errors."""

from __future__ import annotations

import os

import pytest

from tests.helpers.sweeps import qd_matrix
from tests.labs.browser import new_page, sign_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_matrix_page_draws_iops_and_latency_against_iodepth(browser, live_server, alice):
    matrix = qd_matrix(alice)
    errors: list[str] = []
    page = new_page(browser)
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on(
        "console",
        lambda m: (
            m.type == "error"
            and not m.location.get("url", "").endswith("/favicon.ico")
            and errors.append(m.text)
        ),
    )
    sign_in(page, live_server.url, "alice", "alice-pw")
    page.goto(f"{live_server.url}{matrix.get_absolute_url()}")
    page.wait_for_selector('#latency-sweep-1[data-drawn="1"]')
    page.wait_for_selector('#latency-sweep-2[data-drawn="1"]')
    chart = page.locator("#latency-sweep-1")
    assert chart.locator("g.bars path").count() == 4  # one IOPS bar per iodepth
    assert chart.locator(".scatterlayer .trace").count() == 3  # p50, p99, p99.9
    assert "completion latency (ms)" in chart.inner_text()
    assert "bs 4 KiB" in chart.inner_text() and "bs 64 KiB" in page.inner_text("#latency-sweep-2")
    assert "The charts differ in bs" in page.inner_text("#latency-sweep")
    shot = os.environ.get("BEEWEB_SCREENSHOT")
    if shot:
        page.locator("#latency-sweep").screenshot(path=shot)
    assert errors == []


def test_the_comparison_draws_the_chart_after_its_x_axis_becomes_iodepth(
    browser, live_server, alice
):
    """The compare page swaps its body in with htmx: choosing iodepth as the x axis brings the
    latency charts in, drawn."""
    matrix = qd_matrix(alice)
    errors: list[str] = []
    page = new_page(browser)
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    sign_in(page, live_server.url, "alice", "alice-pw")
    page.goto(f"{live_server.url}/compare/?metric=read_iops&x=param:bs&matrix={matrix.uuid}")
    page.wait_for_selector("#result")
    assert page.locator("#latency-sweep").count() == 0
    page.select_option("#x", "param:iodepth")
    page.wait_for_selector('#latency-sweep-2[data-drawn="1"]')
    assert page.locator("#latency-sweep-1 g.bars path").count() == 4
    assert errors == []
