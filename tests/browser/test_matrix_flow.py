"""Browser test of the whole execution path, as a newcomer meets it after `make run`: a real
web server and a real Celery worker (own database and broker, see tests/e2e.py); Chromium
defines the issue's fio matrix (rw = write, read × numjobs 1, 2, 4, 8 × 3 repetitions) on the
localhost testbed, launches it, watches the live progress to the end, and opens the
comparison of its results."""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

from tests.browser.conftest import chromium, new_page, require_chromium, sign_in
from tests.e2e import ROOT, Stack, wait_for

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("fio") is None, reason="fio is not installed"),
]

PASSWORD = "matrix-flow-pw"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def server(tmp_path):
    require_chromium()
    os.environ.setdefault("BEEWEB_ADMIN_PASSWORD", "")
    stack = Stack(tmp_path)
    stack.env.update(
        {"BEEWEB_ADMIN_USER": "engineer", "BEEWEB_ADMIN_PASSWORD": PASSWORD, "DEBUG": "true"}
    )
    stack.manage("ensure_admin")
    stack.manage("ensure_localhost", "--owner", "engineer")
    host = socket.gethostname()
    stack.worker(f"node.{host}", f"node@{host}")
    port = free_port()
    web = subprocess.Popen(
        [sys.executable, "manage.py", "runserver", f"127.0.0.1:{port}", "--noreload"],
        cwd=ROOT,
        env=stack.env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    stack.procs.append(web)
    url = f"http://127.0.0.1:{port}"

    def up() -> bool:
        try:
            return urllib.request.urlopen(f"{url}/login/", timeout=2).status == 200
        except OSError:
            return False

    assert wait_for(up, 60), "the web server did not start"
    yield url, stack
    stack.close()


@pytest.fixture
def page(server):
    with chromium() as browser:
        yield new_page(browser, timeout_ms=30_000)


def new_fio_matrix(
    page, url: str, name: str, repetitions: int, timeout_s: int, params: str, axes: str
) -> None:
    """Sign in as the engineer and save a fio matrix on localhost through the form; the
    page is the new matrix's afterwards."""
    sign_in(page, url, "engineer", PASSWORD)
    page.goto(f"{url}/matrices/new/")
    page.fill("#id_name", name)
    page.select_option("#id_tool", "fio")
    page.get_by_label("localhost").check()
    page.fill("#id_repetitions", str(repetitions))
    page.fill("#id_timeout_s", str(timeout_s))
    page.fill("#id_params_text", params)
    page.fill("#id_axes_text", axes)
    page.click("#object-form button[type=submit]")
    page.wait_for_url(re.compile(r"/matrices/[0-9a-f-]+/$"))


def test_fio_matrix_from_the_browser(server, page):
    url, stack = server
    new_fio_matrix(
        page,
        url,
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
