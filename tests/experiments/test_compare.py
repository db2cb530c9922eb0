"""Comparison: aggregation in the database, display units, chart building, the page."""

from __future__ import annotations

import pytest
from django.urls import reverse

from experiments.comparison import charts
from experiments.models import HardwareProfile, Metric, Node, Run, Target, Testbed, TestbedNode
from experiments.results.store import mark_primary, replace_metrics


def make_testbed(owner, name, arch, raid):
    profile = HardwareProfile.objects.create(owner=owner, name=f"{name} hw", architecture=arch)
    node = Node.objects.create(owner=owner, hostname=f"{name}-1", profile=profile)
    tb = Testbed.objects.create(owner=owner, name=name)
    TestbedNode.objects.create(testbed=tb, node=node, storage=True)
    Target.objects.create(testbed=tb, node=node, raid_level=raid, disks=4)
    return tb


def add_run(tb, threads, write_bw):
    run = Run.objects.create(testbed=tb, tool="fio", status="imported", params={"threads": threads})
    replace_metrics(
        run,
        [
            {"name": "write_bw", "value": write_bw, "unit": "B/s"},
            {"name": "write_bw", "value": write_bw * 2, "unit": "B/s", "extra": {"job": "j1"}},
        ],
    )
    return run


@pytest.fixture
def two_archs(alice):
    arm = make_testbed(alice, "arm", "aarch64", "0")
    x86 = make_testbed(alice, "x86", "x86_64", "10")
    for value in (1e9, 2e9, 3e9):
        add_run(arm, 4, value)
    add_run(arm, 16, 5e9)
    add_run(x86, 4, 4e9)
    return arm, x86


def test_primary_prefers_value_then_mean_and_skips_details():
    ms = [
        Metric(name="read_bw", value=1, unit="B/s", stat="mean"),
        Metric(name="read_bw", value=2, unit="B/s", stat="value"),
        Metric(name="read_bw", value=3, unit="B/s", stat="value", iteration=0),
        Metric(name="write_bw", value=4, unit="B/s", stat="value", extra={"target": 1}),
        Metric(name="write_bw", value=5, unit="B/s", stat="max"),
    ]
    mark_primary(ms)
    assert [m.primary for m in ms] == [False, True, False, False, True]


def test_display_units_follow_design_md():
    assert charts.display_unit("B/s") == ("GB/s", 1e9)
    assert charts.display_unit("B/s", binary=True) == ("GiB/s", 2**30)
    assert charts.display_unit("op/s") == ("op/s", 1.0)


@pytest.mark.django_db
def test_compare_page_shows_chart_and_table(alice_client, two_archs):
    response = alice_client.get(
        reverse("experiments:compare"),
        {"metric": "write_bw", "x": "param:threads", "series": "arch"},
    )
    html = response.content.decode()
    assert 'id="chart-data"' in html
    assert "aarch64 (Arm)" in html and "x86_64" in html
    assert "2.00" in html or "2" in html


@pytest.mark.django_db
def test_compare_page_htmx_returns_the_fragment(alice_client, two_archs):
    response = alice_client.get(
        reverse("experiments:compare"),
        {"metric": "write_bw", "x": "", "series": "raid"},
        HTTP_HX_REQUEST="true",
    )
    html = response.content.decode()
    assert "<html" not in html
    assert "RAID10" in html and "RAID0" in html
