"""Browser test of live output (issue 16): a real Celery worker runs a real time-based fio
run that lasts until it is cancelled (300 s); the run page shows its current throughput while
it is running, and its Cancel button stops it; the matrix's next run (1 s) then succeeds and
the matrix page's Result column shows its primary throughput.

The running run is cancelled after the check, not left to end on its own: a fixed runtime
that the page must beat made the test depend on how fast the machine loads the page
(issue 24)."""

from __future__ import annotations

import re
import shutil
import socket
import time

import pytest

from tests.labs import runs
from tests.labs.browser import ENGINEER, new_fio_matrix

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("fio") is None, reason="fio is not installed"),
]

RATE = re.compile(r"write [\d.]+ [MG]B/s")


def test_live_throughput_of_a_running_fio_run(served_stack, served_page):
    url, stack = served_stack
    page = served_page
    new_fio_matrix(
        page,
        url,
        ENGINEER,
        "live fio",
        1,
        600,
        "size = 8m\nbs = 1m\nrw = write\ntime_based = true",
        "runtime = 300, 1",
    )
    matrix_url = page.url
    page.click("#launch")
    page.wait_for_selector("#runs tbody tr a")
    uuids = {r["params"]["runtime"]: r["uuid"] for r in runs(stack)}
    long, short = uuids[300], uuids[1]
    page.click(f"#run-{long} a")
    page.wait_for_url(re.compile(rf"/runs/{long}/$"))

    # The live part polls every 2 s; fio prints its ETA line every second.
    started = time.monotonic()
    page.wait_for_selector("#live-throughput", timeout=60_000)
    seen_after = time.monotonic() - started
    # One snapshot of the live part: its figure and the run's status shown beside it.
    status, text = page.evaluate(
        """() => [document.querySelector("#run-live .status").className,
                  document.querySelector("#live-throughput").innerText]"""
    )
    assert status == "status running", status  # shown while the run runs
    assert RATE.search(text), text
    assert text.startswith("Now: write ") and "(at " in text
    print(f"\nbrowser: live throughput '{text}' seen {seen_after:.1f} s after the run page")

    # Cancel (it asks first); the live part follows the run's end and the figure goes away.
    page.once("dialog", lambda d: d.accept())
    page.click("#run-live button:text('Cancel')")
    page.wait_for_selector("#run-live .status:not(.running):not(.queued)", timeout=60_000)
    log = stack.worker_log(f"node@{socket.gethostname()}")
    assert page.locator("#run-live .status.cancelled").count() == 1, log[-2000:]
    assert page.locator("#live-throughput").count() == 0

    # The next run goes and succeeds: the matrix page shows its primary throughput.
    page.goto(matrix_url)
    result = page.wait_for_selector(f"#run-{short} .result", timeout=120_000).inner_text()
    assert re.fullmatch(r"write_bw [\d.,]+ GB/s", result), result
    assert page.locator(f"#run-{long} .status.cancelled").count() == 1
