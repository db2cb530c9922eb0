"""Reports and share links: saving, access, frozen snapshots, live switch, revocation, expiry,
CSV/JSON export and the printable page."""

from __future__ import annotations

import csv
import datetime as dt
import io
import json

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from experiments.comparison.reports import report_spec
from experiments.models import Report, ShareLink
from tests.helpers.comparison import RAID_QUERY as QUERY
from tests.helpers.comparison import add_run


@pytest.fixture
def report(alice_client, raid):
    response = alice_client.post(
        reverse("experiments:report_new"),
        {
            "title": "RAID0 vs RAID10",
            "description": "dd per device",
            "query": QUERY + "&chart=bar&unit=GiB",
        },
    )
    assert response.status_code == 302
    return Report.objects.get()


def make_link(client, report, **data) -> ShareLink:
    response = client.post(reverse("experiments:share_create", args=[report.uuid]), data)
    assert response.status_code == 302
    return report.share_links.order_by("-pk").first()


@pytest.mark.django_db
def test_saving_a_report_keeps_filters_and_chart_settings(report, alice):
    assert report.owner == alice
    assert report.query.startswith("metric=write_bw&x=param%3Athreads&series=raid")
    assert report.chart == {"chart": "bar", "err": "ci", "unit": "GiB"}
    spec = report_spec(report)
    assert (spec.chart, spec.binary, spec.baseline) == ("bar", True, "10")


@pytest.mark.django_db
def test_report_page_shows_the_comparison(alice_client, bob_client, report):
    html = alice_client.get(report.get_absolute_url()).content.decode()
    assert "RAID0 vs RAID10" in html and 'id="chart-data"' in html
    assert "RAID0 writes 50% faster than RAID10 at threads 4" in html
    assert "Create share link" in html
    # Others read, but neither share nor edit.
    html = bob_client.get(report.get_absolute_url()).content.decode()
    assert "RAID0 writes 50% faster" in html and "Create share link" not in html
    assert (
        bob_client.post(reverse("experiments:share_create", args=[report.uuid])).status_code == 403
    )
    assert (
        bob_client.post(reverse("experiments:report_delete", args=[report.uuid])).status_code == 403
    )
    assert bob_client.get(reverse("experiments:report_list")).status_code == 200


@pytest.mark.django_db
def test_share_key_is_long_and_unguessable(alice_client, report):
    a, b = make_link(alice_client, report), make_link(alice_client, report)
    assert len(a.key) >= 43 and a.key != b.key
    assert a.get_absolute_url() == f"/s/{a.key}/"


@pytest.mark.django_db
def test_share_link_opens_without_login_read_only(alice_client, report):
    link = make_link(alice_client, report)
    anonymous = Client()
    response = anonymous.get(link.get_absolute_url())
    assert response.status_code == 200
    html = response.content.decode()
    assert "RAID0 vs RAID10" in html and 'id="chart-data"' in html
    assert "RAID0 writes 50% faster than RAID10 at threads 4" in html
    assert "Switch to live data" not in html  # anonymous: frozen only
    assert response["X-Robots-Tag"].startswith("noindex")
    # Read-only: no method but GET/HEAD.
    assert anonymous.post(link.get_absolute_url()).status_code == 405
    assert anonymous.put(link.get_absolute_url()).status_code == 405
    assert anonymous.delete(link.get_absolute_url()).status_code == 405
    # Only share views are public.
    for name, args in [
        ("experiments:report", [report.uuid]),
        ("experiments:report_list", []),
        ("experiments:compare", []),
        ("experiments:compare_export", ["csv"]),
    ]:
        response = anonymous.get(reverse(name, args=args))
        assert response.status_code == 302 and "/login/" in response["Location"]
    assert (
        anonymous.post(reverse("experiments:share_create", args=[report.uuid])).status_code == 302
    )
    assert (
        anonymous.get(link.get_absolute_url() + "?live=1").content.decode().count("Live data") == 0
    )


@pytest.mark.django_db
def test_unknown_revoked_and_expired_links_answer_404(alice_client, report):
    anonymous = Client()
    assert anonymous.get("/s/" + "x" * 43 + "/").status_code == 404
    link = make_link(alice_client, report)
    alice_client.post(reverse("experiments:share_revoke", args=[report.uuid, link.key]))
    link.refresh_from_db()
    assert link.state == "revoked"
    for url in (
        link.get_absolute_url(),
        reverse("experiments:share_print", args=[link.key]),
        reverse("experiments:share_export", args=[link.key, "csv"]),
    ):
        assert anonymous.get(url).status_code == 404
    assert alice_client.get(link.get_absolute_url()).status_code == 404

    expiring = make_link(alice_client, report, expires_days="2")
    assert expiring.expires_at > timezone.now() + dt.timedelta(days=1)
    assert anonymous.get(expiring.get_absolute_url()).status_code == 200
    ShareLink.objects.filter(pk=expiring.pk).update(
        expires_at=timezone.now() - dt.timedelta(seconds=1)
    )
    assert anonymous.get(expiring.get_absolute_url()).status_code == 404
    assert make_link(alice_client, report, expires_days="0") is not None
    assert report.share_links.count() == 2  # the invalid expiry created nothing


@pytest.mark.django_db
def test_snapshot_is_frozen_and_live_switch_recomputes(alice_client, bob_client, report, raid):
    link = make_link(alice_client, report)
    anonymous = Client()
    before = anonymous.get(link.get_absolute_url()).content.decode()
    r0, _ = raid
    for _ in range(3):
        add_run(r0, 20e9, threads=4, direct=True)  # new runs after sharing
    after = anonymous.get(link.get_absolute_url()).content.decode()
    strip = lambda html: html.split('id="report-title"')[1]  # noqa: E731
    assert strip(before) == strip(after)
    frozen = json.loads(
        anonymous.get(reverse("experiments:share_export", args=[link.key, "json"])).content
    )
    assert frozen["data"] == "frozen"
    n0 = {p["series"]: p["n"] for p in frozen["result"]["points"]}
    assert n0 == {"RAID0": 3, "RAID10": 3}
    # Signed-in users may switch to live data (another user too: reports are readable).
    live_html = bob_client.get(link.get_absolute_url()).content.decode()
    assert "Switch to live data" in live_html
    live = json.loads(
        bob_client.get(
            reverse("experiments:share_export", args=[link.key, "json"]) + "?live=1"
        ).content
    )
    assert live["data"] == "live"
    assert {p["series"]: p["n"] for p in live["result"]["points"]} == {"RAID0": 6, "RAID10": 3}
    html = bob_client.get(link.get_absolute_url() + "?live=1").content.decode()
    assert "Live data" in html and "Show the data as shared" in html
    # Anonymous visitors asking for live data still get the snapshot.
    anon_live = json.loads(
        anonymous.get(
            reverse("experiments:share_export", args=[link.key, "json"]) + "?live=1"
        ).content
    )
    assert anon_live["data"] == "frozen"


@pytest.mark.django_db
def test_csv_and_json_export(alice_client, report):
    response = alice_client.get(reverse("experiments:compare_export", args=["csv"]) + "?" + QUERY)
    assert response["Content-Type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert [(r["series"], r["x"], r["n"]) for r in rows] == [
        ("RAID0", "4", "3"),
        ("RAID10", "4", "3"),
    ]
    assert float(rows[0]["mean"]) == pytest.approx(5.1)
    assert float(rows[0]["diff_vs_baseline_percent"]) == pytest.approx(50.0)
    assert float(rows[0]["p_value"]) < 0.01
    data = json.loads(
        alice_client.get(reverse("experiments:compare_export", args=["json"]) + "?" + QUERY).content
    )
    assert data["query"].startswith("metric=write_bw")
    assert {p["series"] for p in data["result"]["points"]} == {"RAID0", "RAID10"}
    link = make_link(alice_client, report)
    shared = Client().get(reverse("experiments:share_export", args=[link.key, "csv"]))
    assert shared.status_code == 200 and "RAID0" in shared.content.decode()
    assert alice_client.get(reverse("experiments:compare_export", args=["xml"])).status_code == 404


@pytest.mark.django_db
def test_printable_pages(alice_client, report):
    html = alice_client.get(reverse("experiments:compare_print") + "?" + QUERY).content.decode()
    assert 'class="print"' in html and "compare-table" in html and "<nav>" not in html
    html = alice_client.get(
        reverse("experiments:report_print", args=[report.uuid])
    ).content.decode()
    assert "RAID0 vs RAID10" in html
    link = make_link(alice_client, report)
    html = Client().get(reverse("experiments:share_print", args=[link.key])).content.decode()
    assert "data as shared" in html and "compare-table" in html


@pytest.mark.django_db
def test_report_edit_and_delete(alice_client, report):
    make_link(alice_client, report)
    alice_client.post(
        reverse("experiments:report_edit", args=[report.uuid]),
        {"title": "Renamed", "description": "new"},
    )
    report.refresh_from_db()
    assert (report.title, report.description) == ("Renamed", "new")
    alice_client.post(reverse("experiments:report_delete", args=[report.uuid]))
    assert not Report.objects.exists() and not ShareLink.objects.exists()


@pytest.mark.django_db
def test_a_report_needs_a_title(alice_client, raid):
    response = alice_client.post(reverse("experiments:report_new"), {"query": QUERY})
    assert response.status_code == 302 and "/compare/" in response["Location"]
    assert not Report.objects.exists()


@pytest.mark.django_db
def test_builder_url_holds_the_whole_state(alice_client, raid):
    url = reverse("experiments:compare")
    response = alice_client.get(
        url,
        {
            "metric": "write_bw",
            "x": "param:threads",
            "series": "raid",
            "fk": "raid",
            "fv": ["0", "10"],
        },
        HTTP_HX_REQUEST="true",
    )
    pushed = response["HX-Push-Url"]
    assert "f=raid%3A0" in pushed and "f=raid%3A10" in pushed and "fk=" not in pushed
    # The pushed URL, opened directly, gives the same page.
    html = alice_client.get(pushed).content.decode()
    assert "RAID level (storage targets) = RAID0" in html
    # A history restore is answered with the whole page, not the fragment.
    restored = alice_client.get(
        pushed, HTTP_HX_REQUEST="true", HTTP_HX_HISTORY_RESTORE_REQUEST="true"
    ).content.decode()
    assert "<html" in restored
    # The matrix page's link keeps working.
    response = alice_client.get(
        url + "?matrix=00000000-0000-0000-0000-000000000000"
        "&metric=write_bw&series=param:rw&x=param:numjobs"
    )
    assert response.status_code == 200 and "No runs match" in response.content.decode()
