"""Keyset pagination of runs and metrics (experiments.shared.keyset), through the API and the run
list page: ties of ``created`` (a bulk request's runs share it), stability while runs are
added, paging back, cursors that were not issued, and totals that are not counted."""

from __future__ import annotations

import html
import re

import pytest
from django.db import connection
from django.utils import timezone

from experiments.models import Metric, Run
from experiments.shared import keyset


def bulk(api, n: int, tag: str, testbed) -> list[str]:
    """``n`` runs in one request (so one ``created``); their uuids in id order."""
    items = [
        {
            "key": f"{tag}-{i}",
            "testbed": str(testbed.uuid),
            "tool": "fio",
            "params": {"threads": i},
            "metrics": [
                {"name": "write_bw", "value": float(i + 1)},
                {"name": "read_bw", "value": float(i + 2)},
            ],
        }
        for i in range(n)
    ]
    data = api.post("/api/runs/bulk/", items).json()
    assert data["created"] == n
    return [r["uuid"] for r in data["results"]]


def newest_first() -> list[str]:
    return [str(u) for u in Run.objects.order_by("-created", "-id").values_list("uuid", flat=True)]


def walk(api, url: str, params: dict | None = None, link: str = "next") -> list[list[str]]:
    """Every page from ``url`` on, following ``link``; the uuids of each page."""
    pages = []
    response = api.get(url, params or {})
    while True:
        assert response.status_code == 200, response.content[:300]
        data = response.json()
        pages.append([r.get("uuid") or r.get("run") for r in data["results"]])
        if not data[link]:
            return pages
        response = api.get(data[link])


def test_runs_of_one_batch_share_created_and_page_by_id(api, testbed):
    first = bulk(api, 7, "a", testbed)
    second = bulk(api, 5, "b", testbed)
    # On PostgreSQL a batch's runs share ``created`` already; make it so everywhere.
    for tag in "ab":
        batch = Run.objects.filter(client_key__startswith=f"{tag}-")
        batch.update(created=batch.order_by("created").values_list("created", flat=True)[0])
    pages = walk(api, "/api/runs/", {"page_size": 3})
    assert [len(p) for p in pages] == [3, 3, 3, 3]
    # Newest batch first; within a batch the later id first.
    assert sum(pages, []) == second[::-1] + first[::-1] == newest_first()


def test_every_run_with_one_created_pages_through(api, testbed):
    """A tie longer than any page (and than DRF's offset cap would allow in proportion)."""
    bulk(api, 11, "a", testbed)
    bulk(api, 6, "b", testbed)
    Run.objects.update(created=timezone.now())
    pages = walk(api, "/api/runs/", {"page_size": 4})
    assert [len(p) for p in pages] == [4, 4, 4, 4, 1]
    order = list(Run.objects.order_by("-id").values_list("uuid", flat=True))
    assert sum(pages, []) == [str(u) for u in order]


def test_pages_go_back_to_the_same_pages(api, testbed):
    bulk(api, 5, "a", testbed)
    bulk(api, 5, "b", testbed)
    forward = walk(api, "/api/runs/", {"page_size": 3})
    last = api.get("/api/runs/", {"page_size": 3})
    while last.json()["next"]:
        last = api.get(last.json()["next"])
    assert last.json()["previous"]
    backward = walk(api, last.json()["previous"], link="previous")
    assert backward[::-1] == forward[:-1]
    first = api.get("/api/runs/", {"page_size": 3}).json()
    assert first["previous"] is None


def test_a_cursor_is_stable_while_runs_are_added(api, testbed):
    bulk(api, 6, "old", testbed)
    before = newest_first()
    page = api.get("/api/runs/", {"page_size": 2}).json()
    assert [r["uuid"] for r in page["results"]] == before[:2]
    added = bulk(api, 4, "new", testbed)  # newer than everything paged so far
    rest = walk(api, page["next"])
    # Going on from a cursor neither repeats nor skips a run; the new ones are on page one.
    assert sum(rest, []) == before[2:]
    back = api.get(api.get(page["next"]).json()["previous"]).json()
    assert [r["uuid"] for r in back["results"]] == before[:2]
    assert [r["uuid"] for r in api.get("/api/runs/").json()["results"]][:4] == added[::-1]


def test_a_cursor_survives_its_run_being_deleted(api, testbed):
    bulk(api, 6, "a", testbed)
    order = newest_first()
    page = api.get("/api/runs/", {"page_size": 2}).json()
    Run.objects.filter(uuid=order[1]).delete()  # the run the next cursor names
    assert sum(walk(api, page["next"]), []) == order[2:]


def test_filters_keep_their_cursor(api, testbed):
    bulk(api, 5, "a", testbed)
    Run.objects.filter(client_key__in=["a-1", "a-3"]).update(tool="ior")
    pages = walk(api, "/api/runs/", {"page_size": 2, "tool": "fio"})
    assert sum(pages, []) == [
        str(u)
        for u in Run.objects.filter(tool="fio").order_by("-id").values_list("uuid", flat=True)
    ]


@pytest.mark.parametrize("cursor", ["garbage", "W1siMjAyNiJdLGZhbHNlXQ", "bnVsbA", "W10", "%00"])
def test_a_cursor_that_was_not_issued_is_404_not_500(api, testbed, cursor):
    bulk(api, 3, "a", testbed)
    response = api.get(f"/api/runs/?cursor={cursor}")
    assert response.status_code in (400, 404)
    assert response.status_code == 400 or "Invalid cursor" in response.json()["detail"]


def test_metrics_page_by_id(api, testbed):
    bulk(api, 4, "a", testbed)
    pages = walk(api, "/api/metrics/", {"page_size": 3})
    assert [len(p) for p in pages] == [3, 3, 2]
    runs = dict(Run.objects.values_list("id", "uuid"))
    assert sum(pages, []) == [
        str(runs[r]) for r in Metric.objects.order_by("id").values_list("run_id", flat=True)
    ]


# --- the run list page ----------------------------------------------------------------------


def _page(client, url: str) -> tuple[list[str], dict[str, str], str]:
    response = client.get(url)
    assert response.status_code == 200, response.content[:500]
    text = response.content.decode()
    uuids = re.findall(r'<a href="/runs/([0-9a-f-]{36})/">', text)
    links = {
        rel: html.unescape(href)
        for href, rel in re.findall(r'<a href="([^"]+)" rel="(\w+)">', text)
    }
    total = re.search(r'id="run-list-total">(.*?)</span>', text, re.S)
    return uuids, links, re.sub("<[^>]+>", "", total.group(1)) if total else ""


def test_run_list_pages_older_and_newer(alice_client, api, testbed, monkeypatch):
    import experiments.views.runs as views

    monkeypatch.setattr(views, "RUN_LIST_PAGE", 4)
    bulk(api, 7, "a", testbed)
    bulk(api, 3, "b", testbed)
    order = newest_first()
    url, pages, totals = "/runs/", [], set()
    while url:
        uuids, links, total = _page(alice_client, url)
        pages.append((url, uuids))
        totals.add(total)
        url = "/runs/" + links["next"] if "next" in links else ""
    assert [u for _, p in pages for u in p] == order
    assert totals == {"10 runs"}
    # Back from the last page: the same pages again.
    _, links, _ = _page(alice_client, pages[-1][0])
    uuids, links, _ = _page(alice_client, "/runs/" + links["prev"])
    assert uuids == pages[-2][1]


def test_run_list_is_stable_while_runs_are_added(alice_client, api, testbed, monkeypatch):
    import experiments.views.runs as views

    monkeypatch.setattr(views, "RUN_LIST_PAGE", 3)
    bulk(api, 6, "old", testbed)
    order = newest_first()
    first, links, _ = _page(alice_client, "/runs/")
    bulk(api, 2, "new", testbed)
    second, _, _ = _page(alice_client, "/runs/" + links["next"])
    assert first + second == order


def test_run_list_filter_and_cursor_together(alice_client, api, testbed, monkeypatch):
    import experiments.views.runs as views

    monkeypatch.setattr(views, "RUN_LIST_PAGE", 2)
    bulk(api, 6, "a", testbed)
    Run.objects.filter(client_key__in=["a-0", "a-4"]).update(tool="ior")
    fio = [
        str(u)
        for u in Run.objects.filter(tool="fio").order_by("-id").values_list("uuid", flat=True)
    ]
    url, seen = "/runs/?tool=fio", []
    while url:
        uuids, links, total = _page(alice_client, url)
        assert total == "4 runs"
        seen += uuids
        url = "/runs/" + links["next"] if "next" in links else ""
        assert not url or "tool=fio" in url
    assert seen == fio


def test_run_list_refuses_a_cursor_it_did_not_issue(alice_client, api, testbed):
    bulk(api, 2, "a", testbed)
    response = alice_client.get("/runs/?cursor=not-a-cursor")
    assert response.status_code == 400
    assert "cursor" in response.content.decode()


def test_totals_beyond_the_bound_are_estimated_on_postgresql(
    alice_client, api, testbed, monkeypatch
):
    monkeypatch.setattr(keyset, "EXACT_BELOW", 5)
    bulk(api, 12, "a", testbed)
    total = keyset.total(Run.objects.all())
    if connection.vendor == "postgresql":
        # The planner's estimate, never below what was counted before giving up.
        assert not total.exact and total.n >= 6
        assert _page(alice_client, "/runs/")[2].startswith("about ")
    else:
        assert total == keyset.Total(12, True)
        assert _page(alice_client, "/runs/")[2] == "12 runs"
    assert keyset.total(Run.objects.filter(tool="ior")) == keyset.Total(0, True)
    assert keyset.total(Run.objects.filter(client_key="a-3")) == keyset.Total(1, True)


def test_estimates_are_rounded_to_their_precision():
    assert keyset.Total(998_732, False).rounded == 1_000_000
    assert keyset.Total(12_345, False).rounded == 12_000
    assert keyset.Total(12_345, True).rounded == 12_345
    assert keyset.Total(57, False).rounded == 57
