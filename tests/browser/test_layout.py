"""Every page usable on a phone (390 px) and a wide screen (1920 px), issue 16 item 2.

One Chromium visits every top-level page (the navigation's and the forms behind the main
buttons), a comparison with its charts, a report, a share link (signed in and out), a dead
share link, a matrix, a run and the inventory's detail pages at both widths: the page itself
never scrolls sideways (wide tables scroll in their own box), the navigation's links are
reachable (behind the Menu button on the phone), charts fit their box with their download
buttons and a title that plotly's mode bar does not cover. Then the small things that need a
browser: Revoke asks first, and choosing "Add filter on" adds no history entry.
"""

from __future__ import annotations

import pytest
from django.core.management import call_command

from experiments.comparison.presets import PRESETS
from experiments.comparison.reports import create_share_link, revoke_share_link
from experiments.models import HardwareProfile, Node, Report, Run, Testbed, TuningSet
from tests.helpers.sweeps import local_fio_matrix
from tests.labs.browser import sign_in, swapped

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PHONE = {"width": 390, "height": 844}
WIDE = {"width": 1920, "height": 1080}
NAV = [
    "Hardware",
    "Nodes",
    "Testbeds",
    "Tuning sets",
    "Matrices",
    "Runs",
    "Runs table",
    "Compare",
    "Reports",
    "Alerts",
    "Changes",
]

# A function, not an expression: the Content-Security-Policy refuses eval().
OVERFLOW = """() => {
  const width = document.documentElement.clientWidth;
  const wide = [];
  for (const el of document.querySelectorAll("body *")) {
    const box = el.getBoundingClientRect();
    if (box.width && box.right > width + 1 && !el.closest(".table-scroll, pre")) {
      wide.push(el.tagName.toLowerCase() + (el.id ? "#" + el.id : "") + " " + box.right);
    }
  }
  return {scroll: document.documentElement.scrollWidth, inner: window.innerWidth,
          wide: wide.slice(0, 5)};
}"""
BOX = "el => { const b = el.getBoundingClientRect(); return [b.left, b.top, b.right, b.bottom]; }"


def no_overflow(page, what: str) -> None:
    m = page.evaluate(OVERFLOW)
    assert m["scroll"] <= m["inner"], f"{what}: page {m['scroll']} px wide in {m['inner']} px: {m}"


def overlap(a, b) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def check_nav(page, viewport: dict) -> None:
    """Every navigation link can be seen and lies inside the window (after opening the
    menu on the phone)."""
    links = page.locator("#site-menu nav a")
    if viewport is PHONE:
        assert not links.first.is_visible(), "the phone's menu starts closed"
        page.click("label.menu-button")
    else:
        assert not page.locator("label.menu-button").is_visible()
    assert links.all_inner_texts() == NAV
    for i in range(links.count()):
        link = links.nth(i)
        assert link.is_visible()
        box = link.bounding_box()
        assert box["x"] >= 0 and box["x"] + box["width"] <= viewport["width"], link.inner_text()
    logout = page.locator("#site-menu button:has-text('Log out')")
    assert logout.is_visible()
    assert logout.bounding_box()["x"] + logout.bounding_box()["width"] <= viewport["width"]


def check_charts(page, viewport: dict) -> None:
    page.wait_for_selector(".chart-plot .main-svg")
    boxes = page.locator(".chart-box")
    assert boxes.count() >= 1
    for i in range(boxes.count()):
        box = boxes.nth(i)
        frame = box.bounding_box()
        assert frame["x"] >= 0 and frame["x"] + frame["width"] <= viewport["width"] + 0.5
        # plotly drew the chart at the box's width (responsive), not at a fixed 542 px.
        plot = box.locator(".main-svg").first.bounding_box()
        assert plot["width"] <= frame["width"] + 0.5
        for fmt in ("PNG", "SVG"):
            button = box.locator(f"figcaption button:has-text('{fmt}')")
            assert button.is_visible()
            b = button.bounding_box()
            assert b["x"] + b["width"] <= viewport["width"], f"{fmt} button cut off"
        # The mode bar (shown on hover) does not cover the title.
        box.locator(".main-svg").first.hover()
        page.wait_for_timeout(100)
        title = box.locator(".gtitle").first.evaluate(BOX)
        modebar = box.locator(".modebar").first.evaluate(BOX)
        assert not overlap(title, modebar), f"mode bar {modebar} covers title {title}"


@pytest.fixture
def site(live_server, django_user_model):
    """A signed-in user's world: the published studies, a local fio matrix with results, a
    saved report with an active and a revoked share link."""
    user = django_user_model.objects.create_user("lena", password="lena-secret-pw")
    call_command("load_published", verbosity=0)
    matrix = local_fio_matrix(user)
    report = Report.objects.create(owner=user, title="Arm vs x86", query=PRESETS[0][1])
    link = create_share_link(report, user, None)
    dead = create_share_link(report, user, None)
    revoke_share_link(dead)
    run = Run.objects.filter(matrix=matrix).first()
    published = {
        "hardware": HardwareProfile.objects.filter(published=True).first(),
        "node": Node.objects.filter(published=True).first(),
        "testbed": Testbed.objects.filter(published=True).first(),
        "tuning": TuningSet.objects.filter(published=True).first(),
    }
    pages = [
        "/",
        "/hardware/",
        "/nodes/",
        "/testbeds/",
        "/tuning/",
        "/matrices/",
        "/runs/",
        "/runs/table/",
        "/compare/",
        "/reports/",
        "/alerts/",
        "/alerts/subscriptions/",
        "/changes/",
        "/api/token/",
        "/runs/import/",
        "/matrices/new/",
        "/matrices/new/?example=local",
        "/matrices/import/",
        "/hardware/new/",
        "/nodes/new/",
        "/testbeds/new/",
        "/tuning/new/",
        matrix.get_absolute_url(),
        run.get_absolute_url(),
        report.get_absolute_url(),
        *(obj.get_absolute_url() for obj in published.values()),
        f"/testbeds/{matrix.testbeds.first().uuid}/",
    ]
    charts = [
        "/compare/?" + PRESETS[0][1],
        "/compare/?" + PRESETS[3][1],
        report.get_absolute_url(),
        link.get_absolute_url(),
    ]
    return {
        "url": live_server.url,
        "pages": pages,
        "charts": charts,
        "share": link.get_absolute_url(),
        "dead": dead.get_absolute_url(),
        "report": report,
    }


@pytest.mark.parametrize("viewport", [PHONE, WIDE], ids=["390px", "1920px"])
def test_every_page_fits_the_window(browser, site, viewport):
    url = site["url"]
    context = browser.new_context(viewport=viewport)
    page = context.new_page()
    page.set_default_timeout(20_000)
    sign_in(page, url, "lena", "lena-secret-pw")
    check_nav(page, viewport)
    for path in site["pages"]:
        response = page.goto(url + path)
        assert response.status == 200, path
        no_overflow(page, path)
    for path in site["charts"]:
        assert page.goto(url + path).status == 200, path
        check_charts(page, viewport)
        no_overflow(page, path)
    # The charts follow their box when the window changes (plotly's responsive config).
    page.goto(url + site["charts"][0])
    page.wait_for_selector(".chart-plot .main-svg")
    other = WIDE if viewport is PHONE else PHONE
    page.set_viewport_size(other)
    page.wait_for_function(
        "w => [...document.querySelectorAll('.chart-box')].every(b =>"
        " b.querySelector('.main-svg').getBoundingClientRect().width <="
        " b.getBoundingClientRect().width + 0.5) && document.documentElement.scrollWidth <= w",
        arg=other["width"],
    )
    page.set_viewport_size(viewport)
    # A share link in a browser that is not signed in, and a dead one: the same rules.
    visitor = browser.new_context(viewport=viewport).new_page()
    assert visitor.goto(url + site["share"]).status == 200
    check_charts(visitor, viewport)
    no_overflow(visitor, "share link, signed out")
    assert visitor.goto(url + site["dead"]).status == 404
    assert "revoked, has expired or never existed" in visitor.inner_text("#share-gone")
    assert visitor.locator("link[rel=stylesheet]").count() == 1
    no_overflow(visitor, "dead share link")
    favicon = visitor.goto(url + "/favicon.ico")
    assert favicon.status == 200 and "svg" in favicon.headers["content-type"]
    visitor.context.close()
    context.close()


def test_revoke_asks_and_filter_attribute_adds_no_history_entry(browser, site):
    url = site["url"]
    context = browser.new_context(viewport=PHONE)
    page = context.new_page()
    page.set_default_timeout(20_000)
    sign_in(page, url, "lena", "lena-secret-pw")

    # Without JavaScript, Revoke is a link to a page that asks; its button revokes.
    report = site["report"]
    spare = create_share_link(report, report.owner, None)
    plain = browser.new_context(viewport=PHONE, java_script_enabled=False).new_page()
    sign_in(plain, url, "lena", "lena-secret-pw")
    plain.goto(url + report.get_absolute_url())
    assert plain.locator("#link-table form.js-only").first.is_hidden()
    plain.click(f"#link-table a.revoke[href*='{spare.key}']")
    assert plain.inner_text("h1") == "Revoke this share link?"
    spare.refresh_from_db()
    assert spare.revoked_at is None
    plain.click("#confirm-action button[type=submit]")
    plain.wait_for_url(url + report.get_absolute_url())
    spare.refresh_from_db()
    assert spare.revoked_at is not None
    plain.context.close()

    # Revoke: dismissing the question keeps the link; accepting revokes it.
    page.goto(url + report.get_absolute_url())
    active = page.locator("#link-table .revoke")
    assert active.count() == 1
    questions = []
    page.once("dialog", lambda d: (questions.append(d.message), d.dismiss()))
    active.click()
    page.wait_for_timeout(300)
    assert questions and questions[0].startswith("Revoke this share link?")
    assert report.share_links.filter(revoked_at__isnull=True).count() == 1
    page.once("dialog", lambda d: d.accept())
    active.click()
    page.wait_for_selector("#link-table .revoke", state="detached")
    assert report.share_links.filter(revoked_at__isnull=True).count() == 0

    # Adding a filter is one history step: its attribute, then its values.
    page.goto(url + "/compare/?" + PRESETS[0][1])
    page.wait_for_selector("#chart .main-svg")
    start_length = page.evaluate("() => history.length")
    swapped(page, lambda: page.select_option("#fk", "tool"))
    assert page.evaluate("() => history.length") == start_length
    swapped(page, lambda: page.select_option("#fv", ["ior"]))
    assert page.evaluate("() => history.length") == start_length + 1
    assert "f=tool%3Aior" in page.url or "f=tool:ior" in page.url
    page.go_back()
    page.wait_for_function("() => !location.search.includes('tool%3Aior')")
    assert "tool%3Aior" not in page.url and "tool:ior" not in page.url
    context.close()
