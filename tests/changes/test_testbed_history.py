"""A testbed's history chart at any history (issue 30): the lines it picks and the points it
draws are those the plain definitions give (``scan.series`` of each configuration's newest
runs; the configurations of the testbed's newest runs with the most runs), read in a fixed
number of queries."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from experiments.changes import history
from experiments.changes.scan import series
from experiments.models import ConfigSummary, Run
from experiments.results.store import replace_metrics
from tests.helpers.changes import T0, make_history

pytestmark = pytest.mark.django_db


def expected_choice(testbed, metric=None) -> dict[str, tuple[str, int]]:
    """The lines as the chart defines them, read the plain way."""
    recent = Run.objects.filter(testbed=testbed).exclude(config_key="")
    keys = set(recent.order_by("-created", "-id").values_list("config_key", flat=True)[:2000])
    rows = ConfigSummary.objects.filter(config_key__in=keys, pub_n=0)
    if metric:
        rows = rows.filter(name=metric)
    ranked = sorted(
        rows.values_list("config_key", "name", "n"),
        key=lambda r: (-r[2], r[0], history._headline(r[1]), r[1]),
    )
    chosen: dict[str, tuple[str, int]] = {}
    for key, name, n in ranked:
        if key not in chosen and len(chosen) < history.MAX_CONFIGS:
            chosen[key] = (name, n)
    return chosen


@pytest.fixture
def lab(testbed, alice):
    """Ten configurations of 1 to 10 runs (one with two metrics, whose read_bw has more
    runs), runs started before they were created (an import), and a run of the largest
    configuration without its metric and one with two rows of it (a mean)."""
    out = []
    for c in range(10):
        n = c + 1
        runs = make_history(
            testbed,
            alice,
            [1e9 + 1e7 * i for i in range(n)],
            [{}] * n,
            params={"rw": "write", "numjobs": c},
            start=T0 - timedelta(days=c),
            order=list(reversed(range(n))),
        )
        out.append(runs)
    two = out[3]
    for run in two:
        replace_metrics(
            run,
            [
                {"name": "write_bw", "value": 2e9, "unit": "B/s"},
                {"name": "read_bw", "value": 3e9, "unit": "B/s"},
            ],
        )
    extra = make_history(testbed, alice, [5e8], [{}], params={"rw": "write", "numjobs": 3})
    replace_metrics(extra[0], [{"name": "read_bw", "value": 1e9, "unit": "B/s"}])
    largest = out[-1]
    replace_metrics(largest[-1], [{"name": "read_iops", "value": 10.0, "unit": "op/s"}])
    replace_metrics(
        largest[-2],
        [
            {"name": "write_bw", "value": 1e9, "unit": "B/s"},
            {"name": "write_bw", "value": 2e9, "unit": "B/s", "stat": "max", "iteration": 1},
        ],
    )
    return out


@pytest.mark.parametrize("metric", [None, "read_bw", "write_bw", "nothing"])
@pytest.mark.parametrize("configs,points", [(8, 300), (3, 4), (20, 1)])
def test_the_lines_are_the_definitions(testbed, lab, monkeypatch, metric, configs, points):
    monkeypatch.setattr(history, "MAX_CONFIGS", configs)
    monkeypatch.setattr(history, "TESTBED_POINTS", points)
    lines = history.testbed_lines(testbed.pk, metric)
    want = expected_choice(testbed, metric)
    assert [(ln.config_key, ln.metric, ln.total) for ln in lines] == [
        (key, name, n) for key, (name, n) in want.items()
    ]
    for ln in lines:
        uuids: dict[int, str] = {}
        drawn = series(ln.config_key, ln.metric, newest=points, uuids=uuids)
        assert [(p.run_id, p.at) for p in ln.points] == [(p.run_id, p.at) for p in drawn]
        assert [p.value for p in ln.points] == pytest.approx([p.value for p in drawn])
        assert {p.run_id: ln.uuids[p.run_id] for p in drawn} == {
            p.run_id: uuids[p.run_id] for p in drawn
        }
        assert len(ln.points) <= points
    if metric == "nothing":
        assert lines == []


def test_the_page_takes_the_same_queries_for_one_line_and_eight(alice_client, testbed, alice):
    if connection.vendor != "postgresql":
        pytest.skip("SQLite (the embedded default) reads each line's points on its own")
    url = reverse("experiments:testbed_history", args=[testbed.uuid])
    make_history(testbed, alice, [1e9, 1.1e9], [{}] * 2, params={"numjobs": 0})
    with CaptureQueriesContext(connection) as one:
        assert alice_client.get(url).status_code == 200
    for c in range(1, 12):
        make_history(testbed, alice, [1e9] * (c + 2), [{}] * (c + 2), params={"numjobs": c})
    with CaptureQueriesContext(connection) as many:
        page = alice_client.get(url)
    assert len(page.context["lines"]) == history.MAX_CONFIGS
    assert len(many.captured_queries) == len(one.captured_queries)
