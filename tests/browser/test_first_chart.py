"""A colleague opens a share link with an empty browser cache: the chart is drawn within 1 s.

Served as production serves it (collectstatic, then gunicorn with WhiteNoise: hashed names,
gzip), measured in Debian's Chromium by bench/first_chart.py's probe, in the page: from
navigation start (performance.now()) to every chart's traces in its SVG.

Wall time on a machine that runs other work beside the test is that work's as much as the
page's: the 1 s is asserted whenever the machine has a core to spare (load average below its
core count). On an oversubscribed machine (helpers' test suites sharing two cores, load average
8-17) no page can be judged in wall time; the page is then judged beside plotly alone
(``bench.first_chart.floor``: a bare page with the same plotly bundle and figures, loaded
alternately with the share link, best of each) and the test says so in its output.
"""

from __future__ import annotations

import os

import pytest

from bench.first_chart import floor, measure, site
from tests.browser.conftest import require_chromium

pytestmark = [pytest.mark.browser, pytest.mark.slow]

BOUND_MS = 1000
TRIES = 3
FLOOR_FACTOR = 1.3  # on a busy machine, the page may cost this much more than plotly alone


def busy() -> bool:
    return os.getloadavg()[0] >= (os.cpu_count() or 1)


def test_cold_cache_share_link_is_drawn_within_a_second():
    require_chromium()
    pytest.importorskip("playwright.sync_api")
    with site() as (browser, base, _session, share):
        tries, bare, was_busy = [], [], False
        while len(tries) < TRIES:
            was_busy = was_busy or busy()
            tries.append(measure(browser, base, share, None, 1)["cold"][0])
            if tries[-1]["drawn_ms"] < BOUND_MS:
                break
            if was_busy:
                bare.append(floor(browser, base, share, 1)[0]["drawn_ms"])
        best = min(tries, key=lambda r: r["drawn_ms"])
        # Static files arrive compressed: plotly's partial bundle is ~0.37 MB gzipped.
        assert best["bytes"] < 600 * 1024, tries
        if best["drawn_ms"] >= BOUND_MS:
            assert was_busy, f"share link drawn in {best['drawn_ms']:.0f} ms cold: {tries}"
            print(
                f"\nmachine busy (load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} "
                f"cores): share link {best['drawn_ms']:.0f} ms, plotly alone {min(bare):.0f} ms;"
                " the 1 s bound is not judged"
            )
            assert best["drawn_ms"] < FLOOR_FACTOR * min(bare), (tries, bare)

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
