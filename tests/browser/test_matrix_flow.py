"""Browser test of the whole execution path, as a newcomer meets it after `make run`: a real
web server and a real Celery worker (own database and broker, see tests/labs/stack.py); Chromium
defines the issue's fio matrix (rw = write, read × numjobs 1, 2, 4, 8 × 3 repetitions) on the
localhost testbed, launches it, watches the live progress to the end, and opens the
comparison of its results."""

from __future__ import annotations

import shutil
import socket
import time

import pytest

from tests.labs.browser import ENGINEER, new_fio_matrix

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("fio") is None, reason="fio is not installed"),
]


def test_fio_matrix_from_the_browser(served_stack, served_page):
    url, stack = served_stack
    page = served_page
    new_fio_matrix(
        page,
        url,
        ENGINEER,
        "fio write/read x numjobs",
        3,
        300,
        "size = 16m\nbs = 1m\ndirect = false",
        "rw = write, read\nnumjobs = 1, 2, 4, 8",
    )
    assert "24</strong> runs" in page.inner_html("#plan-summary")
    assert page.locator("#plan tbody tr").count() == 8
    assert "--numjobs=8" in page.inner_text("#plan") or "numjobs" in page.inner_text("#plan")

    started = time.monotonic()
    page.click("#launch")
    page.wait_for_selector("#progress-text")
    seen_running = False
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        text = page.inner_text("#matrix-progress")
        seen_running |= "running" in text and "24 of 24" not in text
        if "24 of 24 finished" in text:
            break
        time.sleep(0.5)
    else:
        pytest.fail(
            f"the matrix did not finish: {page.inner_text('#matrix-progress')[:500]}\n"
            + stack.worker_log(f"node@{socket.gethostname()}")[-2000:]
        )
    elapsed = time.monotonic() - started
    assert seen_running, "the page never showed a run in progress"
    assert "succeeded 24" in page.inner_text("#matrix-progress")
    # Polling stops once nothing is queued or running.
    assert page.get_attribute("#matrix-progress", "hx-trigger") is None
    print(f"\nbrowser: 24-run fio matrix finished in {elapsed:.1f} s after Launch")

    page.click("#compare-link")
    page.wait_for_selector("#compare-table")
    rows = page.locator("#compare-table tbody tr")
    assert rows.count() == 4  # numjobs 1, 2, 4, 8 of the write series
    cells = [rows.nth(i).locator("td").all_inner_texts() for i in range(4)]
    assert [c[1] for c in cells] == ["1", "2", "4", "8"]
    assert all(c[0] == "write" and c[2] == "3" for c in cells)
    # The link shows every series the matrix produced: the read runs' read_bw as well.
    read_rows = page.locator("#compare-table-2 tbody tr")
    assert read_rows.count() == 4
    assert all(read_rows.nth(i).locator("td").first.inner_text() == "read" for i in range(4))
    page.wait_for_selector("#chart .main-svg")  # plotly drew the chart
