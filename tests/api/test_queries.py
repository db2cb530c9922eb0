"""No N+1: API lists and the run list page cost the same number of queries whatever the
page size."""

from __future__ import annotations

import pytest
from django.db import connection, reset_queries
from django.test.utils import CaptureQueriesContext

from experiments.models import (
    Drive,
    HardwareProfile,
    Matrix,
    MirrorGroup,
    Nic,
    Node,
    Run,
    StoragePool,
    Target,
    Testbed,
    TestbedNode,
    TuningSet,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def world(alice, api):
    """A few of everything, then as many again: list costs must not change."""

    def grow(n: int, tag: str):
        for i in range(n):
            profile = HardwareProfile.objects.create(
                owner=alice, name=f"{tag}{i}", architecture="x86_64"
            )
            Drive.objects.create(profile=profile, kind="nvme")
            Nic.objects.create(profile=profile, kind="ethernet", rate_gbps=10)
            node = Node.objects.create(owner=alice, hostname=f"{tag}{i}", profile=profile)
            tb = Testbed.objects.create(owner=alice, name=f"{tag}{i}")
            TestbedNode.objects.create(testbed=tb, node=node, storage=True)
            pool = StoragePool.objects.create(testbed=tb, pool_id=1, name="p")
            t1 = Target.objects.create(testbed=tb, node=node, raid_level="0", pool=pool)
            t2 = Target.objects.create(testbed=tb, node=node, raid_level="0")
            MirrorGroup.objects.create(testbed=tb, group_id=1, primary=t1, secondary=t2)
            ts = TuningSet.objects.create(owner=alice, name=f"{tag}{i}")
            ts.replace_params([("os", "vm.dirty_ratio", "10")])
            matrix = Matrix.objects.create(owner=alice, name=f"{tag}{i}", tool="dd")
            matrix.testbeds.add(tb)
            matrix.tuning_sets.add(ts)
            items = [
                {
                    "testbed": str(tb.uuid),
                    "tuning_set": str(ts.uuid),
                    "tool": "dd",
                    "metrics": [
                        {"name": "write_bw", "value": 1.0},
                        {"name": "elapsed", "value": 2.0},
                    ],
                }
                for _ in range(3)
            ]
            assert api.post("/api/runs/bulk/", items).json()["created"] == 3

    return grow


LISTS = [
    "/api/hardware/",
    "/api/nodes/",
    "/api/testbeds/",
    "/api/tuning-sets/",
    "/api/matrices/",
    "/api/runs/",
    "/api/metrics/",
    "/api/workers/",
]


@pytest.mark.parametrize("url", LISTS)
def test_api_lists_have_a_constant_query_count(api, world, url, django_assert_max_num_queries):
    world(2, "a")
    reset_queries()  # the request resets the log; count from an empty one
    with CaptureQueriesContext(connection) as few:
        assert api.get(url, {"page_size": 500}).status_code == 200
    baseline = len(few.captured_queries)  # now: the property reads the live log
    world(8, "b")
    with django_assert_max_num_queries(baseline):
        response = api.get(url, {"page_size": 500})
    assert response.status_code == 200
    # Testbeds also prefetch their operators and operator groups.
    assert 0 < baseline <= (12 if url == "/api/testbeds/" else 10)


def test_run_list_page_has_a_constant_query_count(
    alice_client, api, world, django_assert_max_num_queries
):
    world(2, "a")
    reset_queries()  # the request resets the log; count from an empty one
    with CaptureQueriesContext(connection) as few:
        assert alice_client.get("/runs/").status_code == 200
    baseline = len(few.captured_queries)
    world(20, "b")
    with django_assert_max_num_queries(baseline):
        response = alice_client.get("/runs/")
    assert response.status_code == 200
    assert response.content.decode().count("<tr>") >= 50


@pytest.mark.parametrize("url", ["/", "/matrices/"])
def test_dashboard_and_matrix_list_have_a_constant_query_count(
    alice_client, world, url, django_assert_max_num_queries
):
    """Neither grows with the runs or the matrices (issue 30): the dashboard counts runs
    by a bounded count, the matrix list counts the runs of its page's matrices only."""
    world(2, "a")
    reset_queries()
    with CaptureQueriesContext(connection) as few:
        assert alice_client.get(url).status_code == 200
    baseline = len(few.captured_queries)
    world(8, "b")
    with django_assert_max_num_queries(baseline):
        response = alice_client.get(url)
    assert response.status_code == 200


TABLE_VIEWS = [
    {},
    {"cols": "param:threads,metric:write_bw", "sort": "-param:threads"},
    {"cols": "param:threads,metric:write_bw", "sort": "param:threads"},
    {"cols": "testbed,metric:write_bw", "sort": "testbed"},
    {"cols": "testbed,metric:write_bw", "sort": "-metric:write_bw"},
    {"cols": "param:threads,metric:write_bw", "p.threads": "4"},
    {"cols": "param:threads,metric:write_bw", "m.write_bw": "0..10"},
]


@pytest.mark.parametrize("query", TABLE_VIEWS)
def test_runs_table_has_a_constant_query_count(
    alice_client, api, world, query, django_assert_max_num_queries
):
    """Whatever the sort or filter, more runs and testbeds cost no more queries (a testbed
    sort walks the testbeds in one statement; a parameter sort reads its typed rows)."""
    world(2, "a")
    # More runs than a page from the start: a list that goes on shows its estimated length.
    run = Run.objects.first()
    Run.objects.bulk_create(
        [Run(testbed_id=run.testbed_id, tool="dd", status="succeeded") for _ in range(60)]
    )
    for run_id in Run.objects.values_list("pk", flat=True):
        Run.objects.filter(pk=run_id).update(params={"threads": run_id % 3 + 2})
    reset_queries()
    with CaptureQueriesContext(connection) as few:
        assert alice_client.get("/runs/table/", query).status_code == 200
    baseline = len(few.captured_queries)
    world(20, "b")
    Run.objects.filter(params={}).update(params={"threads": 4})
    with django_assert_max_num_queries(baseline):
        response = alice_client.get("/runs/table/", query)
    assert response.status_code == 200
