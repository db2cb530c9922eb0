"""Shared by the browser tests: Debian's Chromium under Playwright, and pages in it."""

from __future__ import annotations

import os
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
# Playwright's sync API runs an event loop in the test's thread; the ORM calls are safe.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")


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


@pytest.fixture
def browser(live_server):
    """Chromium against the live server. Playwright's sync API runs the test inside its own
    context, where Django may hold other connections than outside it: start from fresh ones
    (another browser test's teardown may have terminated the live server's PostgreSQL
    sessions) and close them before leaving."""
    from django.db import connections

    connections.close_all()
    with chromium(on_start=connections.close_all) as browser:
        yield browser
    close_server_connections()


def sign_in(page, url: str, username: str, password: str, goto: bool = True) -> None:
    """Sign in through the login form (already open when ``goto`` is false)."""
    if goto:
        page.goto(f"{url}/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", password)
    page.click("button[type=submit]")
    page.wait_for_url(f"{url}/")
