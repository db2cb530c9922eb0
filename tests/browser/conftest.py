"""Fixtures of the browser tests; what they do in pages is in tests/labs/browser.py."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import urllib.request

import pytest

from tests.labs import ROOT, Stack, wait_for
from tests.labs.browser import (
    ENGINEER,
    chromium,
    close_server_connections,
    new_page,
    require_chromium,
)

# Playwright's sync API runs an event loop in the test's thread; the ORM calls are safe.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")


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


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def served_stack(tmp_path):
    """A whole installation as after `make run` (tests/labs/stack.py): a real web server
    (runserver) and a real Celery worker on this host's node queue, the localhost testbed
    owned by the administrator ENGINEER; ``(url, stack)``."""
    require_chromium()
    os.environ.setdefault("BEEWEB_ADMIN_PASSWORD", "")
    stack = Stack(tmp_path)
    stack.env.update(
        {"BEEWEB_ADMIN_USER": ENGINEER[0], "BEEWEB_ADMIN_PASSWORD": ENGINEER[1], "DEBUG": "true"}
    )
    stack.manage("ensure_admin")
    stack.manage("ensure_localhost", "--owner", ENGINEER[0])
    host = socket.gethostname()
    stack.worker(f"node.{host}", f"node@{host}")
    port = _free_port()
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
def served_page(served_stack):
    """A Chromium page for ``served_stack``."""
    with chromium() as browser:
        yield new_page(browser, timeout_ms=30_000)
