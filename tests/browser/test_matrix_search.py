"""The comparison builder's matrix search in Chromium: with more matrices than the select
lists, typing in the search box swaps in the matches (htmx, under the site's CSP) without
reloading the comparison, and choosing one compares it."""

from __future__ import annotations

import pytest

from experiments.models import Matrix
from experiments.views import compare
from tests.labs.browser import new_page, sign_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_the_search_box_finds_an_old_matrix_and_choosing_it_compares_it(
    browser, live_server, alice, monkeypatch
):
    monkeypatch.setattr(compare, "MATRIX_CHOICES", 3)
    for i in range(6):
        Matrix.objects.create(owner=alice, name=f"sweep {i:02d}", tool="dd")
    oldest = Matrix.objects.get(name="sweep 00")
    url = live_server.url
    page = new_page(browser)
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    sign_in(page, url, "alice", "alice-pw")
    page.goto(f"{url}/compare/")
    listed = page.eval_on_selector_all("#matrix option", "os => os.map(o => o.textContent)")
    assert listed == ["sweep 05", "sweep 04", "sweep 03"]
    page.fill("#matrix-find", "sweep 00")
    page.wait_for_function(
        "() => Array.from(document.querySelectorAll('#matrix option'))"
        ".map(o => o.textContent).join() === 'sweep 00'"
    )
    assert page.url == f"{url}/compare/"  # the comparison did not reload
    page.select_option("#matrix", label="sweep 00")
    page.wait_for_url(f"**/compare/?*matrix={oldest.uuid}*")
    chosen = page.eval_on_selector_all("#matrix option:checked", "os => os.map(o => o.textContent)")
    assert chosen == ["sweep 00"]
    assert not [e for e in errors if "Content Security Policy" in e], errors
