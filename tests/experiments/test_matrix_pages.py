"""The matrix list, a matrix's page and the dashboard at any size (issue 30): the list is paged
and every matrix stays reachable with true run counts; a matrix's page and its progress cost
the same queries however many runs it holds, and every run stays one link away."""

from __future__ import annotations

import json
import re
from datetime import timedelta

import pytest
from django.db import connection
from django.db.models import Count, Q
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from experiments.matrices import sampling
from experiments.matrices.expansion import expand
from experiments.matrices.preview import DURATION_SAMPLE, plan
from experiments.models import Matrix, Metric, Run
from experiments.shared import keyset
from experiments.views import matrices as views

pytestmark = pytest.mark.django_db

NEXT = re.compile(r'<a href="([^"]+)" rel="next">')
PREV = re.compile(r'<a href="([^"]+)" rel="prev">')


def _names(text: str) -> list[str]:
    return re.findall(r'<tr><td><a href="/matrices/[^"]+/">([^<]+)</a>', text)


def _run(matrix: Matrix, testbed, status: str, n: int) -> Run:
    return Run.objects.create(
        testbed=testbed,
        tool="dd",
        matrix=matrix,
        status=status,
        cell_key=f"cell{n}",
        repetition=1,
        label=f"{matrix.name} #{n}",
    )


@pytest.fixture
def many(alice, bench):
    """12 matrices, created one after the other, the odd ones with runs of every status."""
    statuses = ["succeeded", "succeeded", "failed", "queued", "running", "cancelled", "planned"]
    matrices = []
    for i in range(12):
        matrix = Matrix.objects.create(owner=alice, name=f"m{i:02d}", tool="dd")
        for n, status in enumerate(statuses[: i % 8] if i % 2 else []):
            _run(matrix, bench, status, n)
        matrices.append(matrix)
    return matrices


def test_matrix_list_pages_reach_every_matrix_newest_first(alice_client, many, monkeypatch):
    monkeypatch.setattr(views, "MATRIX_LIST_PAGE", 5)
    url = reverse("experiments:matrix_list")
    seen, pages, href = [], [], url
    while href:
        text = alice_client.get(href if href.startswith("/") else url + href).content.decode()
        pages.append(text)
        seen += _names(text)
        found = NEXT.search(text)
        href = found.group(1).replace("&amp;", "&") if found else ""
    assert seen == [f"m{i:02d}" for i in reversed(range(12))]  # each once, newest first
    assert [len(_names(p)) for p in pages] == [5, 5, 2]
    assert 'id="matrix-list-total">12 matrices<' in pages[0]
    # Back from the last page: the page before it, then the first (no link further back).
    back = PREV.search(pages[-1]).group(1).replace("&amp;", "&")
    previous = alice_client.get(url + back).content.decode()
    assert _names(previous) == _names(pages[1])
    assert "« newest" in previous and "« newest" not in pages[0]


def test_matrix_list_counts_are_true(alice_client, many):
    text = alice_client.get(reverse("experiments:matrix_list")).content.decode()
    truth = Matrix.objects.annotate(
        runs_n=Count("runs"),
        done=Count("runs", filter=Q(runs__status="succeeded")),
        failed=Count("runs", filter=Q(runs__status="failed")),
        active=Count("runs", filter=Q(runs__status__in=["queued", "running"])),
    )
    for m in truth:
        row = re.search(rf">{m.name}</a>.*?</tr>", text, re.S).group(0)
        cells = re.findall(r'<td class="num">(\d+)</td>', row)
        assert cells == [str(m.runs_n), str(m.done), str(m.failed), str(m.active)], m.name
    assert any(m.runs_n == 7 and m.active == 2 for m in truth)  # every status is counted


def test_matrix_list_refuses_a_cursor_it_did_not_make(alice_client, many):
    response = alice_client.get(reverse("experiments:matrix_list"), {"cursor": "bm90IGEgY3Vyc29y"})
    assert response.status_code == 400
    assert "follow the newer and older links" in response.content.decode()


def test_matrix_list_query_count_does_not_grow(alice_client, alice, bench):
    def grow(n: int, tag: str) -> None:
        for i in range(n):
            matrix = Matrix.objects.create(owner=alice, name=f"{tag}{i}", tool="dd")
            _run(matrix, bench, "succeeded", 0)
            _run(matrix, bench, "failed", 1)

    grow(2, "a")
    url = reverse("experiments:matrix_list")
    with CaptureQueriesContext(connection) as few:
        alice_client.get(url)
    grow(60, "b")  # more matrices than a page
    with CaptureQueriesContext(connection) as more:
        text = alice_client.get(url).content.decode()
    assert len(more.captured_queries) == len(few.captured_queries)
    assert len(_names(text)) == views.MATRIX_LIST_PAGE and NEXT.search(text)


@pytest.fixture
def sweep(fio_matrix):
    """A fio sweep of 8 cells (rw × numjobs) on ``bench`` (tests/experiments/conftest.py)."""
    return fio_matrix


def _finish(matrix: Matrix, repetitions: int) -> None:
    """Expand ``matrix`` to ``repetitions`` per cell; every run succeeded with its
    throughput and IOPS (headline metrics), the first failed."""
    matrix.repetitions = repetitions
    matrix.save()
    expand(matrix)
    now = timezone.now()
    fresh = list(matrix.runs.filter(status__in=["planned", "queued"]).order_by("pk"))
    Run.objects.filter(pk__in=[r.pk for r in fresh]).update(
        status="succeeded", started_at=now - timedelta(seconds=60), finished_at=now
    )
    metrics = []
    for run in fresh:
        direction = run.params["rw"]
        metrics += [
            Metric(run=run, name=f"{direction}_bw", value=1e9, unit="B/s", primary=True),
            Metric(run=run, name=f"{direction}_iops", value=1e3, unit="op/s", primary=True),
        ]
    Metric.objects.bulk_create(metrics)
    first = matrix.runs.order_by("pk").first()
    Run.objects.filter(pk=first.pk).update(status="failed", error="fio exited with 1")


def _queries(client, url: str) -> tuple[int, str]:
    with CaptureQueriesContext(connection) as captured:
        response = client.get(url)
    assert response.status_code == 200
    return len(captured.captured_queries), response.content.decode()


def test_matrix_page_and_progress_cost_the_same_whatever_the_runs(alice_client, sweep, monkeypatch):
    monkeypatch.setattr(views, "TABLE_LIMIT", 5)
    monkeypatch.setattr(sampling, "SAMPLE_RUNS", 12)
    page = sweep.get_absolute_url()
    part = reverse("experiments:matrix_progress", args=[sweep.uuid])
    _finish(sweep, 3)  # 24 runs: above both limits
    alice_client.get(page)
    few_page, _ = _queries(alice_client, page)
    few_part, _ = _queries(alice_client, part)
    _finish(sweep, 9)  # 72 runs
    many_page, text = _queries(alice_client, page)
    many_part, fragment = _queries(alice_client, part)
    assert (many_page, many_part) == (few_page, few_part)

    # The table: the failed run first, 5 runs in all; every run one link away.
    assert fragment.count('<tr id="run-') == 5
    assert fragment.index("fio exited with 1") < fragment.index("succeeded</span>")
    assert "67 more runs are not listed here" in fragment
    assert f'href="/runs/table/?matrix={sweep.uuid}"' in fragment
    # The sweep chart draws the first repetition of each of the 8 cells (12 // 8 = 1), said
    # on the page, with the runs table of every run.
    assert "the chart draws the first repetition of every cell" in text
    figure = json.loads(
        re.search(r'id="matrix-parcoords-data"[^>]*>(.*?)</script>', text, re.S).group(1)
    )
    lines = figure["data"][0]["dimensions"][0]["values"]
    # The chart draws the last metric the comparison link opens on (QueryDict.get); both
    # directions the cells measure are in that link.
    link = re.search(r'href="/compare/\?([^"]+)" id="compare-link"', text).group(1)
    metrics = re.findall(r"metric=(\w+)", link)
    assert sorted(metrics) == ["read_bw", "write_bw"]
    drawn = Metric.objects.filter(
        run__matrix=sweep, run__repetition=1, name=metrics[-1], primary=True
    ).count()
    assert len(lines) == drawn and 3 <= drawn <= 4  # a failed run has no headline value


def test_small_matrix_page_draws_every_run(alice_client, sweep):
    _finish(sweep, 1)  # 8 runs, under every limit
    text = alice_client.get(sweep.get_absolute_url()).content.decode()
    assert 'id="sweep-sample"' not in text and "runs-hidden" not in text
    assert text.count('<tr id="run-') == 8


def test_preview_estimates_from_the_latest_runs_of_a_cell_and_testbed(alice, bench):
    matrix = Matrix.objects.create(
        owner=alice, name="dd", tool="dd", repetitions=DURATION_SAMPLE + 5, fixed_params={}
    )
    matrix.testbeds.set([bench])
    expand(matrix)
    now = timezone.now()
    for n, run in enumerate(matrix.runs.order_by("repetition")):
        # The 5 oldest took 100 s; the latest DURATION_SAMPLE 10 s.
        seconds = 100 if n < 5 else 10
        end = now - timedelta(hours=100 - n)
        Run.objects.filter(pk=run.pk).update(
            status="succeeded", started_at=end - timedelta(seconds=seconds), finished_at=end
        )
    assert plan(matrix).cells[0].estimate_s == pytest.approx(10.0)
    # A new cell on the same testbed: the testbed's latest runs of the tool.
    other = Matrix.objects.create(
        owner=alice, name="dd 2", tool="dd", repetitions=1, fixed_params={"bs": "4k"}
    )
    other.testbeds.set([bench])
    assert plan(other).cells[0].estimate_s == pytest.approx(10.0)


def test_dashboard_counts_runs_exactly_or_says_about(alice_client, bench, monkeypatch):
    for n in range(3):
        Run.objects.create(testbed=bench, tool="dd", status="imported", label=f"r{n}")
    text = alice_client.get("/").content.decode()
    assert re.search(r'id="run-count">3</div>', text)
    monkeypatch.setattr(keyset, "EXACT_BELOW", 1)
    text = alice_client.get("/").content.decode()
    if connection.vendor == "postgresql":  # beyond the bound: the planner's estimate
        assert re.search(r'id="run-count"><span title="PostgreSQL[^"]*">about \d', text)
    else:  # SQLite keeps no estimates: counted
        assert re.search(r'id="run-count">3</div>', text)
    assert text.count('<a href="/runs/') >= 3  # the recent runs, newest first
    assert text.index(">r2<") < text.index(">r0<")
