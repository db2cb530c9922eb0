"""Charts in Chromium (issue 12, items 4 and 6): two runs per point draw min-max, stated, the
y axis starts at zero, and a downloaded SVG names the comparison, its filters and testbeds."""

from __future__ import annotations

import html

import pytest

from tests.helpers.comparison import add_run, make_testbed
from tests.labs.browser import new_page, sign_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_two_runs_draw_min_max_and_the_svg_names_its_context(
    browser, live_server, django_user_model, tmp_path
):
    user = django_user_model.objects.create_user("carol", password="carol-secret-pw")
    arm = make_testbed(user, "arm-lab", "aarch64", "0")
    x86 = make_testbed(user, "x86-lab", "x86_64", "10")
    for value in (3e9, 121e9):  # n = 2: a 95% CI would run to -687 GB/s
        add_run(x86, value, threads=4)
        add_run(arm, value / 4, threads=4)
    url = live_server.url
    page = new_page(browser)
    sign_in(page, url, "carol", "carol-secret-pw")

    page.goto(f"{url}/compare/?metric=write_bw&x=param:threads&series=arch&f=raid:0&f=raid:10")
    page.wait_for_selector("#chart-1 .main-svg")
    y_ticks = page.eval_on_selector_all(
        "#chart-1 .ytick text", "els => els.map(e => e.textContent)"
    )
    assert y_ticks[0] == "0" and not any(t.startswith(("-", "−")) for t in y_ticks)
    assert page.locator("#chart-1 .bars").count() >= 1  # one x value: bars, not dots
    assert "n < 3: min–max shown" in page.locator("#chart-1 .annotation").text_content()

    with page.expect_download() as download:
        page.click("[data-download=svg][data-chart=chart-1]")
    path = tmp_path / "chart.svg"
    download.value.save_as(path)
    svg = html.unescape(path.read_text())
    assert "Write throughput (GB/s) by threads, series: Architecture" in svg
    assert "Filters: RAID level (storage targets): RAID0 or RAID10" in svg
    assert "Testbeds: arm-lab, x86-lab" in svg
    assert "n < 3: min–max shown" in svg
