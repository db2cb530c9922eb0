"""Reports and share links through the API: the report pages' rules (everyone signed in
reads reports; owner and staff write them and alone see share keys), snapshots frozen as the
page freezes them, revocation, filters and constant query counts."""

from __future__ import annotations

import datetime as dt

import pytest
from django.db import connection, reset_queries
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from rest_framework.test import APIClient

from experiments.comparison.reports import full_query
from experiments.models import Report, ShareLink
from tests.helpers.comparison import RAID_QUERY as QUERY
from tests.helpers.comparison import add_run

pytestmark = pytest.mark.django_db


@pytest.fixture
def report(api, raid) -> dict:
    response = api.post(
        "/api/reports/",
        {
            "title": "RAID0 vs RAID10",
            "description": "dd per device",
            "query": QUERY + "&chart=bar&unit=GiB",
        },
    )
    assert response.status_code == 201, response.json()
    return response.json()


def links_url(report: dict) -> str:
    return f"/api/reports/{report['uuid']}/share-links/"


def test_create_report_splits_query_and_chart_like_the_page(api, alice, report):
    assert report["owner"] == "alice" and report["can_edit"] is True
    assert report["query"].startswith("metric=write_bw&x=param%3Athreads&series=raid")
    assert "chart=" not in report["query"]
    assert report["chart"] == {"chart": "bar", "err": "ci", "unit": "GiB"}
    assert report["url"] == f"http://testserver/reports/{report['uuid']}/"
    stored = Report.objects.get(uuid=report["uuid"])
    assert stored.owner == alice and stored.chart == report["chart"]
    assert report["full_query"] == full_query(stored)
    # The full query is the one /api/compare/ takes.
    data = api.get(f"/api/compare/?{report['full_query']}").json()
    assert {p["series"] for p in data["points"]} == {"RAID0", "RAID10"}
    # Chart settings given apart win over those in the query; chart alone keeps the query.
    updated = api.patch(f"/api/reports/{report['uuid']}/", {"chart": {"chart": "line"}})
    assert updated.status_code == 200, updated.json()
    assert updated.json()["chart"] == {"chart": "line", "err": "ci"}
    assert updated.json()["query"] == report["query"]


def test_report_validation(api, raid):
    for body, field in [
        ({"title": "", "query": QUERY}, "title"),
        ({"title": "  ", "query": QUERY}, "title"),
        ({"title": "t"}, "query"),
        ({"title": "t", "query": "metric=speed"}, "query"),
        ({"title": "t", "query": "x=param:threads"}, "query"),
        ({"title": "t", "query": "metric=write_bw&x=nope"}, "query"),
        ({"title": "t", "query": QUERY, "chart": {"colour": "red"}}, "chart"),
    ]:
        response = api.post("/api/reports/", body)
        assert response.status_code == 400, body
        assert field in response.json(), (body, response.json())
    assert not Report.objects.exists()


def test_permissions_owner_other_anonymous_staff(api, bob_api, staff_api, report):
    url = f"/api/reports/{report['uuid']}/"
    # Anonymous: a JSON 401, not a login redirect.
    for path in ("/api/reports/", url, links_url(report)):
        response = APIClient().get(path)
        assert response.status_code == 401, path
        assert response["Content-Type"].startswith("application/json")
    assert APIClient().post("/api/reports/", {"title": "t", "query": QUERY}).status_code == 401
    # Another user reads (as on the pages) but neither changes nor deletes.
    assert bob_api.get("/api/reports/").json()["count"] == 1
    other = bob_api.get(url).json()
    assert other["title"] == "RAID0 vs RAID10" and other["can_edit"] is False
    assert bob_api.patch(url, {"title": "mine"}).status_code == 403
    assert bob_api.put(url, {"title": "mine", "query": QUERY}).status_code == 403
    assert bob_api.delete(url).status_code == 403
    # ... but creates reports of their own.
    own = bob_api.post("/api/reports/", {"title": "bob's", "query": QUERY})
    assert own.status_code == 201 and own.json()["owner"] == "bob"
    # The owner edits; staff edit and delete anything.
    assert api.patch(url, {"title": "Renamed"}).json()["title"] == "Renamed"
    response = staff_api.patch(url, {"description": "by staff"})
    assert response.status_code == 200 and response.json()["can_edit"] is True
    assert staff_api.delete(f"/api/reports/{own.json()['uuid']}/").status_code == 204
    assert api.delete(url).status_code == 204
    assert not Report.objects.exists()


def test_reports_are_addressed_by_uuid(api, report):
    pk = Report.objects.get(uuid=report["uuid"]).pk
    assert api.get(f"/api/reports/{pk}/").status_code == 404
    assert "id" not in api.get(f"/api/reports/{report['uuid']}/").json()


def test_share_link_freezes_the_snapshot_like_the_page(api, report, raid):
    response = api.post(links_url(report), {})
    assert response.status_code == 201, response.json()
    link = response.json()
    stored = ShareLink.objects.get(pk=link["id"])
    assert link["key"] == stored.key and len(link["key"]) >= 43
    assert link["url"] == f"http://testserver/s/{stored.key}/"
    assert link["export_url"] == f"http://testserver/s/{stored.key}/export.json"
    assert link["state"] == "active" and link["created_by"] == "alice"
    assert link["expires_at"] is None and link["revoked_at"] is None
    # The snapshot is the one the page's share view would have made.
    from experiments.comparison.reports import snapshot

    now = snapshot(stored.report)
    assert stored.snapshot["result"].pop("generated_at") and now["result"].pop("generated_at")
    assert stored.snapshot == now
    # Anonymous visitors open the share URL; later runs do not change what it shows.
    anonymous = Client()
    page = anonymous.get(link["url"])
    assert page.status_code == 200
    html = page.content.decode()
    assert "RAID0 vs RAID10" in html and "RAID0 writes 50% faster than RAID10" in html
    r0, _ = raid
    for _ in range(3):
        add_run(r0, 20e9, threads=4, direct=True)
    frozen = anonymous.get(link["export_url"]).json()
    assert frozen["data"] == "frozen"
    assert {p["series"]: p["n"] for p in frozen["result"]["points"]} == {"RAID0": 3, "RAID10": 3}


def test_share_link_expiry(api, report):
    soon = timezone.now() + dt.timedelta(days=2)
    response = api.post(links_url(report), {"expires_at": soon.isoformat()})
    assert response.status_code == 201, response.json()
    assert response.json()["state"] == "active"
    for bad in (timezone.now() - dt.timedelta(minutes=1), timezone.now() + dt.timedelta(days=3651)):
        response = api.post(links_url(report), {"expires_at": bad.isoformat()})
        assert response.status_code == 400 and "expires_at" in response.json()
    assert api.post(links_url(report), {"expires_at": "tomorrow"}).status_code == 400
    assert ShareLink.objects.count() == 1


def test_revoke_makes_the_link_answer_404(api, report):
    first = api.post(links_url(report), {}).json()
    second = api.post(links_url(report), {}).json()
    anonymous = Client()
    assert anonymous.get(first["url"]).status_code == 200
    revoked = api.post(f"{links_url(report)}{first['id']}/revoke/")
    assert revoked.status_code == 200
    assert revoked.json()["state"] == "revoked" and revoked.json()["revoked_at"]
    assert anonymous.get(first["url"]).status_code == 404
    assert anonymous.get(first["export_url"]).status_code == 404
    # Revoking again changes nothing; the time of the first revocation stays.
    again = api.post(f"{links_url(report)}{first['id']}/revoke/").json()
    assert again["revoked_at"] == revoked.json()["revoked_at"]
    # DELETE revokes too: the link stays listed, revoked.
    assert api.delete(f"{links_url(report)}{second['id']}/").status_code == 204
    assert anonymous.get(second["url"]).status_code == 404
    states = {item["id"]: item["state"] for item in api.get(links_url(report)).json()["results"]}
    assert states == {first["id"]: "revoked", second["id"]: "revoked"}
    assert api.get(f"{links_url(report)}{second['id']}/").json()["state"] == "revoked"
    # Links are addressed under their own report only.
    other = api.post("/api/reports/", {"title": "other", "query": QUERY}).json()
    assert api.post(f"{links_url(other)}{first['id']}/revoke/").status_code == 404
    assert api.get(f"{links_url(report)}999999/").status_code == 404


def test_other_users_never_see_share_keys(api, bob_api, staff_api, report):
    link = api.post(links_url(report), {}).json()
    detail = f"{links_url(report)}{link['id']}/"
    # The report itself carries no key.
    assert link["key"] not in bob_api.get(f"/api/reports/{report['uuid']}/").content.decode()
    assert link["key"] not in bob_api.get("/api/reports/").content.decode()
    for response in (
        bob_api.get(links_url(report)),
        bob_api.get(detail),
        bob_api.post(links_url(report), {}),
        bob_api.post(f"{detail}revoke/"),
        bob_api.delete(detail),
    ):
        assert response.status_code == 403
        assert link["key"] not in response.content.decode()
    assert ShareLink.objects.get().is_active and ShareLink.objects.count() == 1
    # Staff see and manage them.
    listed = staff_api.get(links_url(report)).json()
    assert [item["key"] for item in listed["results"]] == [link["key"]]
    assert staff_api.post(f"{detail}revoke/").json()["state"] == "revoked"
    # Anonymous: 401; unknown report: 404.
    assert APIClient().post(links_url(report), {}).status_code == 401
    assert (
        api.get("/api/reports/00000000-0000-0000-0000-000000000000/share-links/").status_code == 404
    )


def test_report_filters_ordering_and_pagination(api, bob_api, alice, bob):
    for i in range(3):
        Report.objects.create(owner=alice, title=f"alice RAID {i}", query="metric=write_bw")
    Report.objects.create(owner=bob, title="bob NUMA", query="metric=write_bw")
    old = Report.objects.create(owner=bob, title="bob old", query="metric=write_bw")
    Report.objects.filter(pk=old.pk).update(created=timezone.now() - dt.timedelta(days=30))

    def titles(**params):
        response = api.get("/api/reports/", params)
        assert response.status_code == 200, response.json()
        return sorted(r["title"] for r in response.json()["results"])

    assert titles(owner="bob") == ["bob NUMA", "bob old"]
    assert titles(title="raid") == ["alice RAID 0", "alice RAID 1", "alice RAID 2"]
    week_ago = (timezone.now() - dt.timedelta(days=7)).isoformat()
    assert "bob old" not in titles(created_after=week_ago)
    assert titles(created_before=week_ago) == ["bob old"]
    assert api.get("/api/reports/", {"created_after": "last week"}).status_code == 400
    ordered = api.get("/api/reports/", {"ordering": "title"}).json()["results"]
    assert [r["title"] for r in ordered][:2] == ["alice RAID 0", "alice RAID 1"]
    page = api.get("/api/reports/", {"page_size": 2}).json()
    assert page["count"] == 5 and len(page["results"]) == 2 and page["next"]


@pytest.mark.parametrize("kind", ["reports", "share-links"])
def test_lists_have_a_constant_query_count(api, alice, kind, django_assert_max_num_queries):
    report = Report.objects.create(owner=alice, title="r", query="metric=write_bw")
    url = "/api/reports/" if kind == "reports" else f"/api/reports/{report.uuid}/share-links/"

    def grow(n: int):
        for i in range(n):
            Report.objects.create(owner=alice, title=f"r{i}", query="metric=write_bw")
            ShareLink.objects.create(
                report=report, created_by=alice, snapshot={"result": {"points": []}}
            )

    grow(2)
    reset_queries()  # the request resets the log; count from an empty one
    with CaptureQueriesContext(connection) as few:
        assert api.get(url, {"page_size": 500}).status_code == 200
    baseline = len(few.captured_queries)
    grow(10)
    with django_assert_max_num_queries(baseline):
        response = api.get(url, {"page_size": 500})
    assert response.status_code == 200
    assert len(response.json()["results"]) >= 10
    assert 0 < baseline <= 6
