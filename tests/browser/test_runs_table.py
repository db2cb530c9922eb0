"""The runs table and parallel coordinates in Chromium (issue 16 item 3): clicking a result
column's header sorts the table in place (htmx) and the address follows; a filter narrows
it; the matrix page draws its sweep as a parcoords chart under the CSP."""

from __future__ import annotations

import pytest

from tests.helpers.sweeps import make_sweep
from tests.labs.browser import new_page, sign_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PASSWORD = "table-secret-pw"


def column(page, index: int) -> list[str]:
    return page.eval_on_selector_all(
        f"#runs tbody tr td:nth-child({index})", "els => els.map(e => e.textContent.trim())"
    )


def test_sort_and_filter_the_runs_table(browser, live_server, django_user_model):
    user = django_user_model.objects.create_user("dana", password=PASSWORD)
    matrix = make_sweep(user)
    url = live_server.url
    page = new_page(browser)
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    sign_in(page, url, "dana", PASSWORD)
    page.goto(f"{url}/runs/table/?matrix={matrix.uuid}&cols=param:numjobs,param:bs,metric:write_bw")
    assert page.locator("#runs tbody tr").count() == 16
    # Newest first by default; click the metric's header: descending, then ascending.
    page.click("th a[data-col='metric:write_bw']")
    page.wait_for_url("**sort=-metric%3Awrite_bw**")
    values = [float(v) for v in column(page, 4)]
    assert values == sorted(values, reverse=True) and values[0] == 3.25
    page.click("th a[data-col='metric:write_bw']")
    page.wait_for_url("**sort=metric%3Awrite_bw**")
    values = [float(v) for v in column(page, 4)]
    assert values == sorted(values) and values[0] == 0.1
    # Filter on a parameter column and a metric range (GB/s) with the form.
    page.fill("#rt-p\\.bs", "1m")
    page.fill("#rt-m\\.write_bw", "1..3")
    page.click("#rt-apply")
    page.wait_for_url("**bs=1m**")
    assert set(column(page, 3)) == {"1 MiB"}  # bs in units (runners.params.human)
    values = [float(v) for v in column(page, 4)]
    assert values == [1.6, 1.65]  # numjobs 4 with 1m blocks; 8 jobs (3.2 GB/s) are above 3
    # The address reproduces the view without JavaScript's help.
    page.goto(page.url)
    assert [float(v) for v in column(page, 4)] == values
    # A bad filter says what is wrong.
    page.fill("#rt-m\\.write_bw", "fast")
    page.click("#rt-apply")
    page.wait_for_selector("#runs-table-error")
    assert "m.write_bw" in page.text_content("#runs-table-error")
    assert errors == []


def test_matrix_page_draws_parallel_coordinates(browser, live_server, django_user_model):
    user = django_user_model.objects.create_user("erin", password=PASSWORD)
    matrix = make_sweep(user)
    url = live_server.url
    page = new_page(browser)
    problems: list[str] = []
    page.on("pageerror", lambda e: problems.append(str(e)))
    page.on(
        "console",
        lambda m: problems.append(m.text) if "Content Security Policy" in m.text else None,
    )
    sign_in(page, url, "erin", PASSWORD)
    page.goto(f"{url}{matrix.get_absolute_url()}")
    # Drawn (and plotly's parallel-coordinates bundle fetched) once the chart comes near the window.
    page.locator("#matrix-parcoords").scroll_into_view_if_needed()
    page.wait_for_selector("#matrix-parcoords[data-drawn='1']")
    labels = page.eval_on_selector_all(
        "#matrix-parcoords .axis-title", "els => els.map(e => e.textContent)"
    )
    assert labels == ["numjobs", "bs", "Write throughput (GB/s)"]
    assert "WebGL is not supported" not in page.text_content("#matrix-parcoords")
    assert problems == []
