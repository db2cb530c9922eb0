"""Every trace type beeweb's charts use is in the plotly bundle the pages load
(static/vendor/plotly-beeweb.min.js, a partial bundle of scatter, bar and heatmap): a trace type
left out of it would not raise, the chart would just stay empty. Lines, grouped bars and a
heatmap of one comparison are drawn in Chromium, each with its traces, and the page logs no
error."""

from __future__ import annotations

import pytest

from tests.helpers.comparison import add_run, make_testbed
from tests.labs.browser import new_page, sign_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

BASE = "/compare/?metric=write_bw&x=param:threads&series=arch"


def test_lines_bars_and_heatmaps_are_drawn(browser, live_server, django_user_model):
    user = django_user_model.objects.create_user("dora", password="dora-secret-pw")
    arm = make_testbed(user, "arm-lab", "aarch64", "0")
    x86 = make_testbed(user, "x86-lab", "x86_64", "0")
    for threads in (1, 4, 16):
        for stripes in (1, 4):
            for rep in range(3):
                value = 1e9 * threads * stripes + rep * 1e7
                add_run(x86, value, threads=threads, stripe_count=stripes)
                add_run(arm, value / 2, threads=threads, stripe_count=stripes)
    url = live_server.url
    page = new_page(browser)
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    sign_in(page, url, "dora", "dora-secret-pw")

    page.goto(f"{url}{BASE}&chart=line")
    page.wait_for_selector("#chart-1 .main-svg .scatterlayer .trace")
    assert page.locator("#chart-1 .scatterlayer .trace .point").count() >= 6  # 3 x, 2 series

    page.goto(f"{url}{BASE}&chart=bar")
    page.wait_for_selector("#chart-1 .main-svg .barlayer .trace")
    assert page.locator("#chart-1 .barlayer .trace .point").count() >= 6

    page.goto(f"{url}{BASE}&y=param:stripe_count&chart=heatmap")
    page.wait_for_selector("#chart-1 .main-svg .hm image")
    assert page.locator(".main-svg .hm").count() == 2  # one heatmap per series
    assert errors == []
