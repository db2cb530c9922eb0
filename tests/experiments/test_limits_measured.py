"""Measured ceilings (issue 26, item 5): a testbed's limits use what its own succeeded
StorageBench runs measured per target, beside the datasheet figure, and say which run and
date; a run on one target is bounded by that target's measured ceiling."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from experiments.inventory.limits import (
    MEASURED_WINDOW_DAYS,
    Scope,
    compute_limits,
    compute_scope_limits,
    measured_targets,
)
from experiments.models import Run, Target
from experiments.results.store import replace_metrics

pytestmark = pytest.mark.django_db

GB = 1e9


@pytest.fixture
def two_targets(testbed, node):
    """The testbed's datasheet row replaced by two RAID0 targets of 4 drives (BeeGFS ids 1, 2):
    datasheet 12.8 GB/s read and 5.2 GB/s write each."""
    testbed.targets.all().delete()
    return [
        Target.objects.create(
            testbed=testbed, node=node, name=f"t{i}", target_id=i, raid_level="0", disks=4
        )
        for i in (1, 2)
    ]


def bench(owner, testbed, op, per_target, status=Run.Status.SUCCEEDED, age_days=0, target=None):
    """A StorageBench run of ``testbed`` as the parser stores it: the aggregate and one line
    per target (BeeGFS id -> bytes/s); on ``target``, only its headline value."""
    finished = timezone.now() - timedelta(days=age_days)
    run = Run.objects.create(
        owner=owner,
        testbed=testbed,
        tool="storagebench",
        status=status,
        target=target,
        params={"direction": op, "targets": len(per_target)},
        finished_at=finished,
    )
    name = f"{op}_bw"
    rows = [{"name": name, "value": sum(per_target.values()), "unit": "B/s"}]
    if target is None:
        rows += [
            {"name": name, "value": v, "unit": "B/s", "extra": {"target": t, "node": "stor1"}}
            for t, v in per_target.items()
        ]
    replace_metrics(run, rows)
    return run


def by_name(limits):
    return {lim.name: lim for lim in limits.limits}


def test_without_storagebench_runs_the_datasheet_alone(testbed, two_targets):
    limits = compute_limits(testbed)
    assert "storage targets (StorageBench)" not in by_name(limits)
    assert by_name(limits)["drives"].write == pytest.approx(2 * 5.2e9)
    assert "datasheet" in by_name(limits)["drives"].detail


def test_measured_per_target_beside_the_datasheet(alice, testbed, two_targets):
    w = bench(alice, testbed, "write", {1: 2 * GB, 2: 3 * GB})
    r = bench(alice, testbed, "read", {1: 4 * GB, 2: 5 * GB})
    limits = compute_limits(testbed)
    found = by_name(limits)
    measured = found["storage targets (StorageBench)"]
    assert measured.write == pytest.approx(5 * GB) and measured.read == pytest.approx(9 * GB)
    day = f"{timezone.now():%Y-%m-%d}"
    assert measured.detail == (
        f"2 storage targets, read: 2 targets measured by StorageBench run {r.pk} on {day} | "
        f"write: 2 targets measured by StorageBench run {w.pk} on {day}"
    )
    assert found["drives"].write == pytest.approx(2 * 5.2e9)  # the datasheet, beside it
    assert limits.write_bottleneck is measured and limits.read_bottleneck is measured


def test_best_recent_figure_per_target_from_succeeded_runs_only(alice, testbed, two_targets):
    bench(alice, testbed, "write", {1: 2 * GB, 2: 2 * GB})
    best = bench(alice, testbed, "write", {1: 3 * GB, 2: 1 * GB})
    bench(alice, testbed, "write", {1: 9 * GB, 2: 9 * GB}, status=Run.Status.FAILED)
    bench(alice, testbed, "write", {1: 8 * GB, 2: 8 * GB}, age_days=MEASURED_WINDOW_DAYS + 1)
    got = measured_targets([testbed])[testbed.pk]
    t1, t2 = two_targets
    assert got[t1.pk]["write"].bytes_per_s == 3 * GB and got[t1.pk]["write"].run_id == best.pk
    assert got[t2.pk]["write"].bytes_per_s == 2 * GB
    assert "read" not in got[t1.pk]
    # No read measured: reads keep their datasheet limit only.
    measured = by_name(compute_limits(testbed))["storage targets (StorageBench)"]
    assert measured.read is None and measured.write == pytest.approx(5 * GB)


def test_an_unmeasured_target_counts_by_its_datasheet(alice, testbed, two_targets):
    bench(alice, testbed, "write", {1: 2 * GB})
    measured = by_name(compute_limits(testbed))["storage targets (StorageBench)"]
    assert measured.write == pytest.approx(2 * GB + 5.2e9)
    assert measured.detail.endswith("; 1 target by datasheet")


def test_a_run_on_one_target_is_bounded_by_its_measured_ceiling(alice, testbed, two_targets):
    t1, t2 = two_targets
    run = bench(alice, testbed, "write", {1: 2.5 * GB}, target=t1)
    got = measured_targets([testbed])[testbed.pk]
    assert list(got) == [t1.pk] and got[t1.pk]["write"].run_id == run.pk
    limits = compute_scope_limits(Scope("target", testbed.pk, t1.pk, network=False), testbed,
                                  target=t1)  # fmt: skip
    found = by_name(limits)
    assert found["target (StorageBench)"].write == pytest.approx(2.5 * GB)
    said = found["target (StorageBench)"].detail
    assert said.startswith(f"t1: write measured by StorageBench run {run.pk} on ")
    assert found["drives"].write == pytest.approx(5.2e9)
    assert limits.write_bottleneck.name == "target (StorageBench)"
    other = compute_scope_limits(Scope("target", testbed.pk, t2.pk, network=False), testbed,
                                 target=t2)  # fmt: skip
    assert "target (StorageBench)" not in by_name(other)


def test_the_testbed_page_says_which(alice_client, alice, testbed, two_targets):
    from django.urls import reverse

    run = bench(alice, testbed, "write", {1: 2 * GB, 2: 3 * GB})
    url = reverse("experiments:testbed", args=[testbed.uuid])
    page = alice_client.get(url).content.decode()
    assert "storage targets (StorageBench)" in page
    assert f"measured by StorageBench run {run.pk} on" in page
    assert "datasheet sequential bandwidth" in page
