"""Browser test of the import page (issue 25, finding 2): uploading a fio file of 15
stonewalled jobs previews what will be stored (15 runs, bs 1k to 16M, one row each with its
own headline), and saving stores those 15 runs. Debian's Chromium under Playwright."""

from __future__ import annotations

import pytest

from experiments.models import Metric, Run
from tests.helpers.samples import SAMPLES
from tests.labs.browser import new_page, sign_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

STONEWALL = SAMPLES / "fio" / "fio-3.28-json-15jobs-stonewall-seqwrite-direct-beegfs-thesis.json"


def test_import_preview_of_stonewalled_jobs_then_save(browser, live_server, alice, testbed):
    if not STONEWALL.exists():
        pytest.skip(f"no sample {STONEWALL}")
    page = new_page(browser)
    sign_in(page, live_server.url, "alice", "alice-pw")
    page.goto(f"{live_server.url}/runs/import/")
    page.select_option("#id_testbed", str(testbed.uuid))
    page.set_input_files("#id_files", str(STONEWALL))
    page.click("button[value=preview]")
    summary = page.locator(".parts-summary")
    assert summary.inner_text() == (
        "This file holds 15 independent jobs: 15 runs will be stored (bs 1k … 16M)."
    )
    rows = page.locator("tr.part-row")
    assert rows.count() == 15
    # bs_1k: 137252864 bytes in 16001 ms = 0.0086 GB/s; bs_16M: 11727273984 in 16003 ms.
    assert "bs_1k" in rows.nth(0).inner_text() and "0.008578" in rows.nth(0).inner_text()
    assert "bs_16M" in rows.nth(14).inner_text() and "0.7328" in rows.nth(14).inner_text()
    assert not Run.objects.exists()
    page.click("text=Save 15 runs")
    page.wait_for_url(f"{live_server.url}/runs/")
    assert Run.objects.count() == 15
    peak = Metric.objects.filter(name="write_bw", primary=True).order_by("-value").first()
    assert peak.value == pytest.approx(11727273984 / 16.003)
    assert peak.run.params["transfer_size"] == 16 * 1024**2
