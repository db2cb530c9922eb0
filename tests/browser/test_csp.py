"""The Content-Security-Policy in Chromium: beeweb's pages work under it and break none of it.

A signed-in engineer opens the dashboard, a comparison (the chart draws, a PNG download
works), a matrix page, a report with its share link (also logged out, and its printable
page), the API token page, the browsable API, Swagger UI and the admin; Chromium
reports no CSP violation and no console error on any of them.
"""

from __future__ import annotations

import pytest
from django.core.management import call_command

from tests.helpers.sweeps import local_fio_matrix
from tests.labs.browser import new_page, sign_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# Counts securitypolicyviolation events from the first script on (init script).
WATCH = """
window.__csp = [];
document.addEventListener("securitypolicyviolation", function (e) {
  window.__csp.push(e.violatedDirective + " " + e.blockedURI);
});
"""


def watched_page(browser, errors: list[str]):
    page = new_page(browser)
    page.add_init_script(WATCH)

    def console(msg) -> None:
        # Chromium asks for /favicon.ico on its own; beeweb has none (a 404, no CSP matter).
        if msg.type == "error" and not msg.location.get("url", "").endswith("/favicon.ico"):
            errors.append(f"{page.url}: {msg.text}")

    page.on("console", console)
    page.on("pageerror", lambda exc: errors.append(f"{page.url}: {exc}"))
    return page


def visit(page, url: str, ready: str, violations: dict[str, list]) -> None:
    response = page.goto(url)
    assert response.status == 200, url
    assert "script-src 'self'" in response.headers["content-security-policy"]
    page.wait_for_selector(ready)
    page.wait_for_timeout(300)  # late violations (styles injected after load)
    violations[url] = page.evaluate("window.__csp")


def test_pages_run_under_the_csp(browser, live_server, django_user_model):
    from experiments.comparison.reports import create_share_link
    from experiments.models import Report

    user = django_user_model.objects.create_superuser("erin", password="erin-secret-pw")
    call_command("load_published", verbosity=0)
    matrix = local_fio_matrix(user)
    report = Report.objects.create(
        owner=user, title="arch", query="metric=write_bw&x=param:threads&series=arch"
    )
    link = create_share_link(report, user)
    url = live_server.url
    errors: list[str] = []
    violations: dict[str, list] = {}

    page = watched_page(browser, errors)
    sign_in(page, url, "erin", "erin-secret-pw")

    visit(page, f"{url}/", "main", violations)
    visit(
        page,
        f"{url}/compare/?metric=write_bw&x=param:threads&series=arch",
        "#chart .main-svg",
        violations,
    )
    with page.expect_download() as download:
        page.click("[data-download=png]")
    assert download.value.suggested_filename.endswith(".png")
    visit(page, f"{url}{matrix.get_absolute_url()}", "main", violations)
    visit(page, f"{url}{report.get_absolute_url()}", "#chart .main-svg", violations)
    visit(page, f"{url}/api/token/", "main", violations)
    visit(page, f"{url}/api/runs/", ".response-info", violations)
    visit(page, f"{url}/api/docs/", ".swagger-ui .info", violations)
    visit(page, f"{url}/admin/", "#content", violations)

    anonymous = watched_page(browser, errors)
    visit(anonymous, f"{url}{link.get_absolute_url()}", "#chart .main-svg", violations)
    visit(anonymous, f"{url}/s/{link.key}/print/", "#chart .main-svg", violations)

    assert {u: v for u, v in violations.items() if v} == {}
    assert errors == []
