"""Browser test of the change points' pages in Debian's Chromium: the configuration's history
draws its runs with the change point marked (under the page's Content-Security-Policy), a
click on a point opens its run, and the inbox's htmx form marks a change expected."""

from __future__ import annotations

import pytest

from experiments.changes import scan
from experiments.models import ChangePoint
from tests.helpers.changes import make_history, node_config, noisy
from tests.labs.browser import new_page, sign_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_history_draws_and_the_inbox_marks_expected(browser, live_server, alice, testbed):
    values = noisy(11, (2.0e9, 20), (1.4e9, 12))
    configs = [node_config()] * 20 + [node_config("6.8.0-31-generic")] * 12
    runs = make_history(testbed, alice, values, configs)
    scan.analyse_pending()
    cp = ChangePoint.objects.get()
    page = new_page(browser)
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    sign_in(page, live_server.url, "alice", "alice-pw")

    page.goto(f"{live_server.url}{cp.history_url()}")
    page.wait_for_selector("#history-plot[data-drawn='1']")
    drawn = page.evaluate(
        "() => { const el = document.getElementById('history-plot');"
        " return {points: el.querySelectorAll('.scatterlayer .point').length,"
        " shapes: el._fullLayout.shapes.length} }"
    )
    assert drawn == {"points": 32, "shapes": 1}
    # A click on a point opens its run's page (customdata: the run's UUID).
    box = page.locator("#history-plot .scatterlayer .point").nth(20).bounding_box()
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    page.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    page.wait_for_url("**/runs/*/")
    assert page.url.endswith(f"/runs/{runs[20].uuid}/"), page.url

    page.goto(f"{live_server.url}/changes/")
    row = page.locator(f"#change-{cp.uuid}")
    row.locator("select[name=state]").select_option("expected")
    row.locator("input[name=note]").fill("kernel 6.8 rollout")
    row.locator("button[type=submit]").click()
    page.wait_for_selector(f"#change-{cp.uuid}.state-expected")
    cp.refresh_from_db()
    assert (cp.state, cp.state_note) == ("expected", "kernel 6.8 rollout")
    assert errors == []
