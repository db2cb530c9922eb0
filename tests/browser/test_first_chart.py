"""A colleague opens a share link with an empty browser cache: the chart is drawn within 1 s.

Served as production serves it (collectstatic, then gunicorn with WhiteNoise: hashed names,
gzip), measured in Debian's Chromium by bench/first_chart.py's probe, in the page: from
navigation start (performance.now()) to every chart's traces in its SVG; best of three cold
loads.

Wall time on a machine that runs other work beside the test is that work's as much as the
page's: the 1 s is judged whenever the machine has a core to spare (load average below its core
count during the loads). On an oversubscribed machine (helpers' test suites sharing two cores,
load average 8-17) the same page took 1.4-2.5 s and plotly alone on a bare page 0.8-1.8 s, in
no steady ratio: the test then skips the bound, saying so with the figures, rather than judge
it beside another noisy figure.
"""

from __future__ import annotations

import os

import pytest

from bench.first_chart import measure, site
from tests.labs.browser import require_chromium

pytestmark = [pytest.mark.browser, pytest.mark.slow]

BOUND_MS = 1000
TRIES = 3


def busy() -> bool:
    return os.getloadavg()[0] >= (os.cpu_count() or 1)


def test_cold_cache_share_link_is_drawn_within_a_second():
    require_chromium()
    pytest.importorskip("playwright.sync_api")
    with site() as (browser, base, _session, share):
        # Hashed names, gzipped when asked, cached for ten years (immutable): a later visit
        # fetches no static file again.
        static = browser.new_context()
        page = static.new_page()
        responses = []
        page.on("response", lambda r: responses.append(r))
        page.goto(base + share)
        plotly = [r for r in responses if "/static/vendor/plotly-beeweb.min." in r.url]
        assert plotly and plotly[0].headers.get("content-encoding") == "gzip"
        assert "immutable" in plotly[0].headers.get("cache-control", "")
        assert "max-age=315360000" in plotly[0].headers.get("cache-control", "")
        # The share page never fetches the parallel-coordinates bundle.
        assert not [r for r in responses if "plotly-parcoords" in r.url]
        static.close()

        tries, was_busy = [], False
        while len(tries) < TRIES:
            was_busy = was_busy or busy()
            tries.append(measure(browser, base, share, None, 1)["cold"][0])
            if tries[-1]["drawn_ms"] < BOUND_MS:
                break
        was_busy = was_busy or busy()
    best = min(tries, key=lambda r: r["drawn_ms"])
    # Static files arrive compressed: plotly's partial bundle is ~0.37 MB gzipped.
    assert best["bytes"] < 600 * 1024, tries
    if best["drawn_ms"] >= BOUND_MS and was_busy:
        pytest.skip(
            f"machine oversubscribed (load average {os.getloadavg()[0]:.1f} on "
            f"{os.cpu_count()} cores): share link drawn in {best['drawn_ms']:.0f} ms at best, "
            "the 1 s bound is not judged"
        )
    assert best["drawn_ms"] < BOUND_MS, f"share link drawn in {best['drawn_ms']:.0f} ms: {tries}"
