"""Browser test of comparisons and shared reports: Playwright drives Debian's Chromium.

An engineer builds Arm vs x86 (published studies) and RAID0 vs RAID10 comparisons with the
builder's controls, checks that the URL holds the state (back button), compares the runs of
a local fio matrix, saves a report, shares it, opens the link in a logged-out browser (same
chart and table), revokes it and sees 404.
"""

from __future__ import annotations

import re

import pytest
from django.core.management import call_command

from experiments.inventory.localhost import architecture
from experiments.published import seed000, seed002
from tests.helpers.sweeps import local_fio_matrix
from tests.labs.browser import new_page, sign_in, swapped

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def table_text(page) -> str:
    return page.inner_text("#compare-table")


def test_build_save_share_and_revoke(browser, live_server, django_user_model):
    user = django_user_model.objects.create_user("erin", password="erin-secret-pw")
    call_command("load_published", verbosity=0)
    matrix = local_fio_matrix(user)
    url = live_server.url

    page = new_page(browser)
    sign_in(page, url, "erin", "erin-secret-pw")

    # Arm vs x86, built with the controls: metric, x axis, series, a filter, a baseline.
    page.goto(f"{url}/compare/")
    page.wait_for_selector("#chart .main-svg")
    swapped(page, lambda: page.select_option("#metric", ["write_bw"]))
    swapped(page, lambda: page.select_option("#x", "param:threads"))
    swapped(page, lambda: page.select_option("#series", "arch"))
    assert "ppc64le (POWER)" in table_text(page)
    swapped(page, lambda: page.select_option("#fk", "arch"))
    swapped(page, lambda: page.select_option("#fv", ["aarch64", "x86_64"]))
    assert "ppc64le" not in table_text(page)
    assert "f=arch%3Aaarch64" in page.url and "f=arch%3Ax86_64" in page.url
    if architecture() in ("aarch64", "x86_64"):
        # The local fio runs never join a published series: they are a variant of their own.
        assert f"{architecture()} · fio" in table_text(page)
    # Published studies apart from own runs: filter by data source (the Arm and x86 studies).
    swapped(page, lambda: page.select_option("#fk", "source"))
    swapped(page, lambda: page.select_option("#fv", [seed000.SOURCE, seed002.SOURCE]))
    assert "f=source%3A000" in page.url and "f=source%3A002" in page.url
    assert " · fio" not in table_text(page).replace("aarch64 (Arm) · fio", "")
    filtered_url = page.url
    # Peak against peak: the studies' IOzone peaks differ in what the studies state (file
    # size, aggregate size, targets), so the page names that and claims nothing.
    swapped(page, lambda: page.select_option("#baseline", "x86_64"))
    # Means at the same x: no thread count where both studies measured; the sentence says
    # so and claims nothing.
    means = page.inner_text("#baseline-sentences")
    assert "Nothing compared between" in means and "threads" in means
    assert "faster" not in means and "slower" not in means
    filtered_url = page.url
    swapped(page, lambda: page.select_option("#stat", "peak"))
    page.wait_for_selector("#chart .main-svg")
    assert "baseline=x86_64" in page.url and "metric=write_bw" in page.url
    assert "x=param%3Athreads" in page.url and "series=arch" in page.url
    assert "stat=peak" in page.url
    table = table_text(page)
    assert "aarch64 (Arm)" in table and "x86_64" in table and "ppc64le" not in table
    sentences = page.inner_text("#baseline-sentences")
    assert "No difference claimed between aarch64 (Arm) · iozone and x86_64 · iozone" in (sentences)
    assert "also differ in aggregate size not stated vs 8 TB" in sentences
    assert "faster" not in sentences and "slower" not in sentences
    assert "hardware" in page.inner_text("#differences summary")
    page.click("#differences summary")
    assert "architecture" in page.inner_text("#differences")
    # The URL holds the state: back returns to the page of means, and a copied
    # URL opens the same comparison.
    page.go_back()
    page.wait_for_function(f"() => location.href === {filtered_url!r}")
    page.wait_for_selector("#compare-table")
    assert page.inner_text("#baseline-sentences") == means
    page.go_forward()
    page.wait_for_selector("#baseline-sentences")
    # Remove the Arm filter through its chip: only x86 stays.
    chip = "#filter-chips .chip[data-filter='arch:aarch64 (Arm)'] a"
    swapped(page, lambda: page.click(chip))
    assert "aarch64" not in table_text(page)
    assert "f=arch%3Aaarch64" not in page.url

    # The local fio matrix: its compare link, every run as a point, a bar chart.
    page.goto(
        f"{url}/compare/?matrix={matrix.uuid}&metric=write_bw&series=param:rw&x=param:numjobs"
    )
    page.wait_for_selector("#chart .main-svg")
    table = table_text(page)
    assert re.search(r"write\s+1\s+3\s+1\.02", table), table
    swapped(page, lambda: page.check("#reps"))
    swapped(page, lambda: page.select_option("#chart-kind", "bar"))
    assert "reps=1" in page.url and "chart=bar" in page.url
    page.wait_for_selector("#chart .main-svg")

    # RAID0 vs RAID10 on the published device trial, saved as a report.
    page.goto(f"{url}/compare/?metric=write_bw&x=tool&series=raid&tool=dd")
    page.wait_for_selector("#chart .main-svg")
    swapped(page, lambda: page.select_option("#baseline", "10"))
    assert "RAID0 writes about 50% faster than RAID10" in page.inner_text("#baseline-sentences")
    assert "98%" in table_text(page)  # 5.1 of 5.2 GB/s: drives in RAID0 are the limit
    page.fill("#report-title", "RAID0 vs RAID10 (dd per device)")
    page.fill("#report-description", "Seed 002's device trial.")
    page.click("#save-report button[type=submit]")
    page.wait_for_selector("h1#report-title")
    page.wait_for_selector("#chart .main-svg")
    report_table = table_text(page)
    assert "RAID0" in report_table and "RAID10" in report_table
    page.click("#create-share")
    page.wait_for_selector("#link-table .open-share")
    share_url = page.inner_text("#link-table code.share-url").strip()
    assert re.search(r"/s/[A-Za-z0-9_-]{43}/$", share_url)

    # A colleague without an account opens the link: same chart and table.
    colleague = new_page(browser)
    response = colleague.goto(share_url)
    assert response.status == 200
    colleague.wait_for_selector("#chart .main-svg")
    assert table_text(colleague) == report_table
    assert colleague.locator("#live-switch").count() == 0
    assert "RAID0 writes about 50% faster than RAID10" in colleague.inner_text(
        "#baseline-sentences"
    )
    assert colleague.locator("header nav").count() == 0

    # The owner sees the live switch on the shared page, then revokes the link.
    page.goto(share_url)
    page.wait_for_selector("#live-switch")
    page.go_back()
    page.wait_for_selector("#link-table .revoke")
    # Revoke asks first (Playwright dismisses dialogs unless told otherwise).
    questions = []
    page.once("dialog", lambda d: (questions.append(d.message), d.accept()))
    page.click("#link-table .revoke")
    page.wait_for_selector("#link-table td.state:has-text('revoked')")
    assert questions and questions[0].startswith("Revoke this share link?")
    response = colleague.goto(share_url)
    assert response.status == 404
    assert "revoked, has expired or never existed" in colleague.inner_text("#share-gone")
    colleague.context.close()
    page.context.close()
