"""A colleague opens a share link with an empty browser cache: the chart is drawn within 1 s,
or, on a machine where plotly alone cannot draw the same chart within 1 s, within 30% more
than plotly alone needs there (the page's own cost stays bounded; the 1 s is then out of the
page's reach and the test says so).

Served as production serves it (collectstatic, then gunicorn with WhiteNoise: hashed names,
gzip), measured in Debian's Chromium by bench/first_chart.py's probe, in the page: from
navigation start (performance.now()) to every chart's traces in its SVG. The floor
(``bench.first_chart.floor``) is a bare page with the same plotly bundle and figures, cold.
"""

from __future__ import annotations

import os

import pytest

from bench.first_chart import floor, measure, site
from tests.browser.conftest import require_chromium

pytestmark = [pytest.mark.browser, pytest.mark.slow]

BOUND_MS = 1000
FLOOR_FACTOR = 1.3  # the page may cost this much more than plotly alone


def test_cold_cache_share_link_is_drawn_within_a_second():
    require_chromium()
    pytest.importorskip("playwright.sync_api")
    with site() as (browser, base, _session, share):
        tries = [measure(browser, base, share, None, 1)["cold"][0]]
        # Once more if over the bound, and a third time if the machine is busy with something
        # else (load average above its core count: most of the time is plotly.js's script
        # evaluation, which a test suite running beside slows down twice).
        while tries[-1]["drawn_ms"] >= BOUND_MS and (
            len(tries) < 2 or (len(tries) < 3 and os.getloadavg()[0] > (os.cpu_count() or 1))
        ):
            tries.append(measure(browser, base, share, None, 1)["cold"][0])
        cold = tries[-1]
        # Static files arrive compressed: plotly's partial bundle is ~0.5 MB gzipped.
        assert cold["bytes"] < 800 * 1024, tries
        if cold["drawn_ms"] >= BOUND_MS:
            bare = min(r["drawn_ms"] for r in floor(browser, base, share, 2))
            print(f"\nshare link {cold['drawn_ms']:.0f} ms; plotly alone {bare:.0f} ms here")
            assert bare >= BOUND_MS and cold["drawn_ms"] < FLOOR_FACTOR * bare, (tries, bare)

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
        static.close()
