"""Debian's Chromium under Playwright, and what the browser tests do in its pages (the
fixtures are in tests/browser/conftest.py)."""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--headless",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
# The administrator of the browser tests' served stack (tests/browser/conftest.py).
ENGINEER = ("engineer", "matrix-flow-pw")


def require_chromium() -> None:
    if not os.path.exists(CHROMIUM):
        pytest.skip("Debian's chromium is not installed (apt-get install chromium)")


@contextmanager
def chromium(on_start=None) -> Iterator:
    """A headless Chromium browser (Playwright never downloads one); ``on_start`` runs inside
    Playwright's context before the launch and again before leaving it."""
    require_chromium()
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as p:
        if on_start:
            on_start()
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()
            if on_start:
                on_start()


def new_page(browser, timeout_ms: int = 20_000):
    """A page in a fresh context (own cookies: a separate, logged-out visitor)."""
    page = browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()
    page.set_default_timeout(timeout_ms)
    return page


def close_server_connections() -> None:
    """The live server's request threads may still hold PostgreSQL sessions, which would stop
    the test database from being dropped at the end of the run."""
    from django.db import connection

    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )


def sign_in(page, url: str, username: str, password: str, goto: bool = True) -> None:
    """Sign in through the login form (already open when ``goto`` is false)."""
    if goto:
        page.goto(f"{url}/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", password)
    page.click("button[type=submit]")
    page.wait_for_url(f"{url}/")


def swapped(page, action) -> None:
    """Do ``action`` on the comparison builder and wait until htmx has swapped the new result
    in."""
    before = page.evaluate("+document.body.dataset.swaps || 0")
    action()
    # A function, not an expression: Playwright polls an expression with eval(), which the
    # Content-Security-Policy (no 'unsafe-eval') refuses.
    page.wait_for_function(f"() => (+document.body.dataset.swaps || 0) > {before}")


def new_fio_matrix(
    page,
    url: str,
    user: tuple[str, str],
    name: str,
    repetitions: int,
    timeout_s: int,
    params: str,
    axes: str,
) -> None:
    """Sign in as ``user`` (name, password) and save a fio matrix on localhost through the
    form; the page is the new matrix's afterwards."""
    sign_in(page, url, *user)
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
