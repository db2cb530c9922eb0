"""Browser test of live output (issue 16): a real Celery worker runs a real time-based fio
run of 8 s; the run page shows its current throughput while it is still running, and the
matrix page's Result column its primary throughput once it succeeded."""

from __future__ import annotations

import re
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
        120,
        "size = 8m\nbs = 1m\nruntime = 8\ntime_based = true",
        "rw = write",
    )
    matrix_url = page.url
    page.click("#launch")
    page.wait_for_selector("#runs tbody tr a")
    page.click("#runs tbody tr a")
    page.wait_for_url(re.compile(r"/runs/[0-9a-f-]+/$"))

    # The live part polls every 2 s; fio prints its ETA line every second.
    started = time.monotonic()
    page.wait_for_selector("#live-throughput", timeout=60_000)
    seen_after = time.monotonic() - started
    # One snapshot of the live part: its figure and the run's status shown beside it.
    status, text = page.evaluate(
        """() => [document.querySelector("#run-live .status").className,
                  document.querySelector("#live-throughput").innerText]"""
    )
    assert status == "status running", status  # the run had not finished
    assert RATE.search(text), text
    assert text.startswith("Now: write ") and "(at " in text
    print(f"\nbrowser: live throughput '{text}' seen {seen_after:.1f} s after the run page")

    # When the run ends the page reloads to its metrics; the live figure goes away.
    page.wait_for_selector("#run-live .status:not(.running):not(.queued)", timeout=60_000)
    assert page.locator("#run-live .status.succeeded").count() == 1, stack.worker_log(
        f"node@{socket.gethostname()}"
    )[-2000:]
    page.wait_for_selector("#metrics strong:text('write_bw')")  # the reload after the end
    assert page.locator("#live-throughput").count() == 0
    page.goto(matrix_url)
    result = page.inner_text("#runs tbody tr .result")
    assert re.fullmatch(r"write_bw [\d.,]+ GB/s", result), result
