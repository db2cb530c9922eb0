"""One parameter, several spellings, in Chromium (issue 25, finding 3): runs pushed with
'1m', '256k', 4096 and 1048576 show their sizes in units, sort as numbers when the header is
clicked, and the filter field finds every run of a size typed any way ('4 KiB', '1m')."""

from __future__ import annotations

import pytest

from experiments.results.ingest import ingest
from tests.labs.browser import new_page, sign_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PASSWORD = "units-secret-pw"


def column(page, index: int) -> list[str]:
    return page.eval_on_selector_all(
        f"#runs tbody tr td:nth-child({index})", "els => els.map(e => e.textContent.trim())"
    )


def test_sizes_in_units_sorted_as_numbers_and_filtered_by_any_spelling(
    browser, live_server, django_user_model
):
    from experiments.models import Testbed

    user = django_user_model.objects.create_user("fay", password=PASSWORD)
    Testbed.objects.create(owner=user, name="units")
    spelled = [
        ("ior", {"transfer_size": "1m", "direct": "true"}),
        ("ior", {"transfer_size": "256k", "direct": "false"}),
        ("fio", {"bs": "4k", "transfer_size": 4096, "direct": 1}),
        ("fio", {"bs": "1m", "transfer_size": 1048576, "direct": True}),
    ]
    answer = ingest(
        [
            {
                "testbed": "units",
                "tool": tool,
                "key": f"r{i}",
                "params": params,
                "metrics": [{"name": "write_bw", "value": 1e9 * (i + 1)}],
            }
            for i, (tool, params) in enumerate(spelled)
        ],
        user,
    )
    assert [a["status"] for a in answer] == ["created"] * 4
    url = live_server.url
    page = new_page(browser)
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    sign_in(page, url, "fay", PASSWORD)
    page.goto(f"{url}/runs/table/?cols=tool,param:transfer_size,param:direct")
    assert page.locator("#runs tbody tr").count() == 4
    page.click("th a[data-col='param:transfer_size']")  # descending first
    page.wait_for_url("**sort=-param%3Atransfer_size**")
    assert column(page, 3) == ["1 MiB", "1 MiB", "256 KiB", "4 KiB"]
    page.click("th a[data-col='param:transfer_size']")
    page.wait_for_url("**sort=param%3Atransfer_size**")
    assert column(page, 3) == ["4 KiB", "256 KiB", "1 MiB", "1 MiB"]
    assert sorted(column(page, 4)) == ["no", "yes", "yes", "yes"]
    # The filter reads what a person types: '1m' finds the IOR and the fio run alike.
    page.fill("#rt-p\\.transfer_size", "1m")
    page.click("#rt-apply")
    page.wait_for_url("**transfer_size=1m**")
    assert sorted(column(page, 2)) == ["fio", "ior"]
    page.fill("#rt-p\\.transfer_size", "4 KiB")
    page.fill("#rt-p\\.direct", "yes")
    page.click("#rt-apply")
    page.wait_for_url("**direct=yes**")
    assert column(page, 2) == ["fio"] and column(page, 3) == ["4 KiB"]
    assert errors == []
