"""The small things of issue 16 (item 6) that make pages feel finished: the favicon, a styled
page for dead share links and other 404s, counts that agree with their nouns, the token
page's wording, parameters shown as people read them, a matrix's comparison link with every
series it produced, and the first-run dashboard's three ways in."""

from __future__ import annotations

import re
from urllib.parse import parse_qs, urlsplit

import pytest
from django.core.management import call_command
from django.test import Client
from django.urls import reverse

from experiments.comparison.presets import DASHBOARD_PRESETS
from experiments.comparison.reports import create_share_link, revoke_share_link
from experiments.matrices.comparing import compare_query
from experiments.matrices.expansion import expand
from experiments.matrices.forms import MatrixForm
from experiments.models import Matrix, Report, Run
from experiments.results.store import replace_metrics
from experiments.views.common import counted, verb
from runners import registry

pytestmark = pytest.mark.django_db


def messages_of(response) -> list[str]:
    """The messages shown on the page a POST redirected to (``follow=True``)."""
    return [str(m) for m in response.context["messages"]]


# --- Favicon -------------------------------------------------------------------------------


def test_favicon_is_linked_and_favicon_ico_is_no_404(alice_client):
    anonymous = Client()
    response = anonymous.get("/favicon.ico")
    assert response.status_code == 302
    assert urlsplit(response["Location"]).path.endswith(".svg")
    assert "favicon" in response["Location"]
    page = alice_client.get("/").content.decode()
    assert re.search(r'<link rel="icon" href="[^"]*favicon[^"]*\.svg" type="image/svg\+xml">', page)
    login = anonymous.get("/login/").content.decode()
    assert 'rel="icon"' in login


# --- Dead share links and other 404s -------------------------------------------------------


def test_a_dead_share_link_answers_a_styled_404_that_does_not_say_which(alice, raid):
    report = Report.objects.create(owner=alice, title="Secret plans", query="metric=write_bw")
    revoked = create_share_link(report, alice, None)
    revoke_share_link(revoked)
    anonymous = Client()
    pages = []
    for key in (revoked.key, "x" * 43, "not a key"):
        for url in (
            f"/s/{key}/",
            f"/s/{key}/print/",
            f"/s/{key}/export.csv",
        ):
            response = anonymous.get(url)
            assert response.status_code == 404, url
            text = response.content.decode()
            assert 'id="share-gone"' in text
            assert "revoked, has expired or never existed" in text
            assert "beeweb.css" in text  # the site's style, not a bare "Not Found"
            assert "Secret plans" not in text
            assert response["Cache-Control"] == "private, no-store"
            pages.append(re.sub(r"csrfmiddlewaretoken[^>]*|X-CSRFToken[^}]*", "", text))
    # Revoked, unknown and malformed keys get the same page: nothing tells them apart.
    assert len(set(pages)) == 1


def test_other_404s_use_the_site_style(alice_client):
    response = alice_client.get("/runs/00000000-0000-0000-0000-000000000000/")
    assert response.status_code == 404
    text = response.content.decode()
    assert 'id="not-found"' in text and "beeweb.css" in text and 'id="site-menu"' in text


# --- Counts agree with their nouns ---------------------------------------------------------


def test_counted_and_verb():
    assert counted(1, "run") == "1 run"
    assert counted(0, "run") == "0 runs"
    assert counted(2, "queued run") == "2 queued runs"
    assert counted(3, "child", "children") == "3 children"
    assert f"{counted(1, 'run')} {verb(1, 'is', 'are')}" == "1 run is"


def test_matrix_cancel_message_counts_in_words(alice_client, alice, bench):
    matrix = Matrix.objects.create(owner=alice, name="m", tool="fio", fixed_params={})
    matrix.testbeds.set([bench])
    url = reverse("experiments:matrix_cancel", args=[matrix.uuid])
    response = alice_client.post(url, follow=True)
    assert messages_of(response) == [
        "Nothing to cancel: no run of this matrix is queued or running."
    ]
    Run.objects.create(owner=alice, testbed=bench, tool="fio", matrix=matrix, status="queued")
    response = alice_client.post(url, follow=True)
    assert messages_of(response) == ["Cancelled 1 queued run."]
    for _ in range(2):
        Run.objects.create(owner=alice, testbed=bench, tool="fio", matrix=matrix, status="queued")
    response = alice_client.post(url, follow=True)
    assert messages_of(response) == ["Cancelled 2 queued runs."]


def test_matrix_confirmations_are_in_the_page(alice_client, alice, bench):
    matrix = Matrix.objects.create(owner=alice, name="m", tool="fio", fixed_params={})
    matrix.testbeds.set([bench])
    run = Run.objects.create(
        owner=alice, testbed=bench, tool="fio", matrix=matrix, status="queued", label="m rw=x"
    )
    page = alice_client.get(matrix.get_absolute_url()).content.decode()
    cancel_all = reverse("experiments:matrix_cancel", args=[matrix.uuid])
    cancel_one = reverse("experiments:run_cancel", args=[run.uuid])
    assert re.search(rf'action="{cancel_all}" [^>]*data-confirm="Cancel every queued run', page)
    assert re.search(rf'action="{cancel_one}" [^>]*data-confirm="Cancel run ', page)
    run_page = alice_client.get(run.get_absolute_url()).content.decode()
    assert re.search(rf'action="{cancel_one}" [^>]*data-confirm="Cancel this run\?"', run_page)
    # Without JavaScript the buttons give way to links to a page that asks the same.
    assert f'<noscript><a class="button secondary" href="{cancel_all}">' in page
    assert f'<noscript><a class="link" href="{cancel_one}?next=' in page
    assert f'<noscript><a class="button secondary" href="{cancel_one}">' in run_page


def test_cancel_and_revoke_ask_first_without_javascript(alice_client, bob_client, alice, bench):
    matrix = Matrix.objects.create(owner=alice, name="m", tool="fio", fixed_params={})
    matrix.testbeds.set([bench])
    run = Run.objects.create(owner=alice, testbed=bench, tool="fio", matrix=matrix, status="queued")
    cancel_all = reverse("experiments:matrix_cancel", args=[matrix.uuid])
    cancel_one = reverse("experiments:run_cancel", args=[run.uuid])
    page = alice_client.get(cancel_all)
    assert page.status_code == 200
    text = page.content.decode()
    assert "<h1>Cancel the runs of m?</h1>" in text
    assert "1 queued or planned run is cancelled; 0 running runs are stopped." in text
    assert f'<form method="post" action="{cancel_all}" id="confirm-action">' in text
    page = alice_client.get(cancel_one + "?next=" + matrix.get_absolute_url())
    text = page.content.decode()
    assert f'<input type="hidden" name="next" value="{matrix.get_absolute_url()}">' in text
    assert (
        alice_client.get(cancel_one + "?next=https://evil.example/")
        .content.decode()
        .count("evil.example")
        == 0
    )
    # Asking changes nothing; only the owner is asked.
    run.refresh_from_db()
    assert run.status == "queued"
    assert bob_client.get(cancel_all).status_code == 403
    assert bob_client.get(cancel_one).status_code == 403
    # The page's button posts: the run is cancelled and the user is back on the matrix.
    response = alice_client.post(cancel_one, {"next": matrix.get_absolute_url()})
    assert response["Location"] == matrix.get_absolute_url()
    run.refresh_from_db()
    assert run.status == "cancelled"

    report = Report.objects.create(owner=alice, title="r", query="metric=write_bw")
    link = create_share_link(report, alice, None)
    revoke = reverse("experiments:share_revoke", args=[report.uuid, link.key])
    text = alice_client.get(report.get_absolute_url()).content.decode()
    assert f'<noscript><a class="revoke" href="{revoke}">Revoke</a></noscript>' in text
    text = alice_client.get(revoke).content.decode()
    assert "<h1>Revoke this share link?</h1>" in text
    link.refresh_from_db()
    assert link.revoked_at is None
    assert bob_client.get(revoke).status_code == 403
    alice_client.post(revoke)
    link.refresh_from_db()
    assert link.revoked_at is not None


# --- API token page ------------------------------------------------------------------------


def test_token_messages_name_an_old_token_only_when_there_was_one(alice_client):
    first = alice_client.post("/api/token/", {"action": "create"}, follow=True)
    assert messages_of(first) == ["Your API token was created."]
    second = alice_client.post("/api/token/", {"action": "create"}, follow=True)
    assert messages_of(second) == ["A new API token was created; the old one no longer works."]
    page = alice_client.get("/api/token/").content.decode()
    assert 'value="revoke" data-confirm="Revoke your API token?' in page
    assert 'value="create" data-confirm="Replace your API token?' in page
    revoked = alice_client.post("/api/token/", {"action": "revoke"}, follow=True)
    assert messages_of(revoked) == ["Your API token was revoked."]
    again = alice_client.post("/api/token/", {"action": "revoke"}, follow=True)
    assert messages_of(again) == ["You had no API token: nothing was revoked."]
    # No token yet: "Create a token" asks nothing.
    page = alice_client.get("/api/token/").content.decode()
    assert "data-confirm" not in page


# --- Parameters as people read them --------------------------------------------------------


def test_parameters_are_shown_human_readably(alice_client, alice, bench):
    run = Run.objects.create(
        owner=alice,
        testbed=bench,
        tool="iozone",
        status="succeeded",
        params={
            "aggregate_size": 8e12,
            "file_size": 10 * 2**30,
            "file_per_process": True,
            "threads": 4.0,
            "bs": "1m",
        },
    )
    replace_metrics(
        run,
        [
            {"name": "write_bw", "value": 1e9, "unit": "B/s"},
            {"name": "write_bw", "value": 2e8, "unit": "B/s", "extra": {"per_process": True}},
        ],
    )
    for url in (run.get_absolute_url(), reverse("experiments:run_list")):
        text = alice_client.get(url).content.decode()
        assert "aggregate_size=8 TB" in text
        assert "file_size=10 GiB" in text
        assert "file_per_process=yes" in text
        assert "threads=4" in text and "threads=4.0" not in text
        assert "bs=1 MiB" in text
        assert "8000000000000" not in text and "True" not in text
    detail = alice_client.get(run.get_absolute_url()).content.decode()
    assert "per_process: yes" in detail
    assert "{&#x27;per_process&#x27;" not in detail and "{'per_process'" not in detail


def test_matrix_fixed_parameters_are_shown_human_readably(alice_client, alice, bench):
    matrix = Matrix.objects.create(
        owner=alice,
        name="m",
        tool="fio",
        fixed_params={"size": 2**30, "direct": True},
        axes=[{"param": "numjobs", "values": [1, 2]}],
    )
    matrix.testbeds.set([bench])
    text = alice_client.get(matrix.get_absolute_url()).content.decode()
    assert "size=1 GiB" in text and "direct=yes" in text


# --- The matrix's comparison link ----------------------------------------------------------


def _metrics_of(query: str) -> list[str]:
    return parse_qs(query)["metric"]


def test_compare_link_shows_every_series_the_matrix_produced(alice, bench):
    matrix = Matrix.objects.create(
        owner=alice,
        name="fio sweep",
        tool="fio",
        repetitions=1,
        fixed_params={"size": "8m", "bs": "1m"},
        axes=[
            {"param": "rw", "values": ["write", "read"]},
            {"param": "numjobs", "values": [1, 2]},
        ],
    )
    matrix.testbeds.set([bench])
    # Before any result: what the rw axis will measure, write and read (the matrix page's
    # link is drawn before its runs finish and is not redrawn when they do).
    assert _metrics_of(compare_query(matrix)) == ["write_bw", "read_bw"]
    expand(matrix)
    for run in Run.objects.filter(matrix=matrix):
        rw = run.params["rw"]
        replace_metrics(
            run,
            [
                {"name": f"{rw}_bw", "value": 1e9, "unit": "B/s"},
                {"name": f"{rw}_iops", "value": 1e3, "unit": "op/s"},
                {"name": f"{rw}_lat", "value": 1e-3, "unit": "s"},
            ],
        )
    query = parse_qs(compare_query(matrix))
    # Both series, write and read, of the same unit; not the IOPS and latencies.
    assert query["metric"] == ["write_bw", "read_bw"]
    assert query["x"] == ["param:numjobs"] and query["series"] == ["param:rw"]
    assert query["matrix"] == [str(matrix.uuid)]


def test_compare_link_of_a_read_only_matrix_before_results(alice, bench):
    matrix = Matrix.objects.create(
        owner=alice, name="r", tool="fio", fixed_params={"rw": "read"}, axes=[]
    )
    matrix.testbeds.set([bench])
    assert _metrics_of(compare_query(matrix)) == ["read_bw"]


def test_compare_link_of_a_matrix_without_direction_is_the_tools_default(alice, bench):
    matrix = Matrix.objects.create(owner=alice, name="d", tool="dd", fixed_params={}, axes=[])
    matrix.testbeds.set([bench])
    assert _metrics_of(compare_query(matrix)) == [registry.default_metric("dd")]


# --- First-run dashboard -------------------------------------------------------------------


def _links(html: str, section: str) -> list[str]:
    block = re.search(rf'<li id="{section}">(.*?)</li>', html, re.S).group(1)
    return [h.replace("&amp;", "&") for h in re.findall(r'href="([^"]+)"', block)]


def test_first_run_dashboard_leads_to_the_three_things(alice_client, alice):
    call_command("load_published", verbosity=0)
    html = alice_client.get("/").content.decode()
    assert 'id="get-started"' in html
    compare = _links(html, "start-compare")[0]
    assert compare == reverse("experiments:compare") + "?" + DASHBOARD_PRESETS[0][1]
    response = alice_client.get(compare)
    assert response.status_code == 200 and 'id="compare-table"' in response.content.decode()
    # No localhost testbed of hers yet: the blank form and how to get one.
    matrix_links = _links(html, "start-matrix")
    assert matrix_links == [reverse("experiments:matrix_new")]
    assert "manage.py ensure_localhost --owner alice" in html
    assert alice_client.get(matrix_links[0]).status_code == 200
    imports = _links(html, "start-import")
    assert imports == [reverse("experiments:run_import")]
    assert alice_client.get(imports[0]).status_code == 200


def test_first_run_dashboard_without_published_studies_says_how_to_load_them(alice_client):
    html = alice_client.get("/").content.decode()
    assert "manage.py load_published" in html
    assert _links(html, "start-compare") == []


def test_first_matrix_form_is_prefilled_and_saves(alice_client, alice, bench):
    bench.name = "localhost"
    bench.save()
    html = alice_client.get("/").content.decode()
    link = _links(html, "start-matrix")[0]
    assert link == reverse("experiments:matrix_new") + "?example=local"
    page = alice_client.get(link)
    assert page.status_code == 200
    text = page.content.decode()
    assert 'value="First fio matrix on this machine"' in text
    assert "size = 16m" in text and "rw = write, read" in text and "numjobs = 1, 2, 4" in text
    # What the form shows is what a click on Save posts, and it makes a valid matrix.
    form = page.context["form"]
    data = {}
    for name in form.fields:
        value = form[name].value()
        if value is None or value is False:
            continue
        data[name] = value
    assert data["testbeds"] == [bench.pk]
    response = alice_client.post(reverse("experiments:matrix_new"), data)
    assert response.status_code == 302, MatrixForm(data, user=alice).errors
    matrix = Matrix.objects.get(owner=alice)
    assert matrix.tool == "fio" and list(matrix.testbeds.all()) == [bench]
    assert matrix.fixed_params == {"size": "16m", "bs": "1m", "direct": False}
    assert [a["param"] for a in matrix.axes] == ["rw", "numjobs"]
    plan = alice_client.get(matrix.get_absolute_url()).content.decode()
    assert "<strong>18</strong> runs (6 cells × 3 repetitions)" in plan
    # Now she has a matrix: the dashboard is the usual one.
    assert 'id="get-started"' not in alice_client.get("/").content.decode()


def test_no_first_run_section_once_the_user_has_runs(alice_client, alice, bench):
    Run.objects.create(owner=alice, testbed=bench, tool="fio", status="succeeded")
    assert 'id="get-started"' not in alice_client.get("/").content.decode()


def test_a_size_parameter_on_the_x_axis_is_shown_in_units(alice_client):
    call_command("load_published", verbosity=0)
    response = alice_client.get(
        reverse("experiments:compare") + "?metric=write_bw&x=param:file_size&series=arch"
        "&f=tool:iozone"
    )
    text = response.content.decode()
    cells = re.findall(r'<td><span class="swatch"[^>]*></span>[^<]*</td><td>([^<]*)</td>', text)
    assert "10 GiB" in cells and "640 GiB" in cells
    assert "10737418240" not in cells
    charts = response.context["charts_json"]
    axis = charts[0]["figure"]["layout"]["xaxis"]
    assert axis["ticktext"][0] == "10 GiB" and axis["tickvals"][0] == 10 * 2**30
    # The numbers stay numbers in the API and the CSV (x_key, x): only the page shows units.
    assert response.context["result"].x_dim == "param:file_size"
