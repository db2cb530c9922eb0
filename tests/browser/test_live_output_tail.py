"""Issue 25, finding 9: a running run's live output box showed its oldest lines and stayed
there while the tool printed on. It now shows the newest lines after each poll, unless the
reader scrolled up in it, whose place it then keeps."""

from __future__ import annotations

import pytest

from experiments.models import Run
from tests.helpers.comparison import make_testbed
from tests.labs.browser import new_page, sign_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

AT_BOTTOM = """() => { const p = document.querySelector('#run-live pre.tail');
  const last = p.textContent.trim().split('\\n').pop();
  return [p.scrollTop, p.clientHeight, p.scrollHeight, last]; }"""


def lines(upto: int) -> str:
    return "".join(f"fio line {i}\n" for i in range(1, upto + 1))


def test_the_live_output_follows_the_newest_lines(browser, live_server, alice):
    tb = make_testbed(alice, "tail-lab", "x86_64", "0")
    run = Run.objects.create(
        owner=alice,
        testbed=tb,
        tool="fio",
        status=Run.Status.RUNNING,
        params={"rw": "write"},
        raw_output=lines(150),
    )
    page = new_page(browser)
    sign_in(page, live_server.url, "alice", "alice-pw")
    page.goto(f"{live_server.url}{run.get_absolute_url()}")
    page.wait_for_selector("#run-live pre.tail")
    top, height, total, last = page.evaluate(AT_BOTTOM)
    assert total > height  # the box scrolls
    assert top + height >= total - 2 and last == "fio line 150", (top, height, total, last)

    # The tool prints on: the next poll (every 2 s) shows the new last line, at the bottom.
    Run.objects.filter(pk=run.pk).update(raw_output=lines(180))
    page.wait_for_function(
        "() => document.querySelector('#run-live pre.tail').textContent.includes('line 180')"
    )
    page.wait_for_timeout(300)
    top, height, total, last = page.evaluate(AT_BOTTOM)
    assert top + height >= total - 2 and last == "fio line 180", (top, height, total)
    page.locator("#run-live").screenshot(path="/tmp/beeweb-issue25-live-tail.png")

    # The reader scrolls up to read: the next poll leaves them there.
    page.eval_on_selector("#run-live pre.tail", "p => { p.scrollTop = 40; }")
    Run.objects.filter(pk=run.pk).update(raw_output=lines(200))
    page.wait_for_function(
        "() => document.querySelector('#run-live pre.tail').textContent.includes('line 200')"
    )
    page.wait_for_timeout(300)
    assert page.eval_on_selector("#run-live pre.tail", "p => p.scrollTop") == 40
    page.context.close()
