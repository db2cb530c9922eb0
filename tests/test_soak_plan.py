"""The chaos soak's fault plan (tests/soak/faults.py) and kind selection: a seed names one
plan, every kind asked for is in it (as often as asked), some faults come with the one
before, and the plan's points are spread over the runs."""

from __future__ import annotations

import pytest

from tests.soak.faults import KINDS, NODE_KINDS, plan
from tests.soak.harness import parse_kinds


def test_a_seed_names_one_plan():
    assert plan(7, 300, 40) == plan(7, 300, 40)
    assert plan(7, 300, 40) != plan(8, 300, 40)


def test_every_kind_asked_for_is_planned_as_often_as_asked():
    faults = plan(3, 300, 140, per_kind=20)
    assert len(faults) == 140
    for kind in KINDS:
        assert sum(f.kind == kind for f in faults) >= 20, kind
    assert {f.kind for f in plan(3, 40, 8)} == set(KINDS)
    assert {f.kind for f in plan(3, 40, 8, kinds=("redis", "link"))} == {"redis", "link"}


def test_faults_hit_nodes_where_they_should_and_pairs_come_within_a_minute():
    faults = plan(11, 300, 60)
    for fault in faults:
        assert bool(fault.node) == (fault.kind in NODE_KINDS), fault
        assert 0 < fault.hold < 60, fault
    pairs = [f for f in faults if f.with_previous]
    assert pairs
    for fault in pairs:
        before = faults[fault.index - 1]
        assert fault.after == before.after
        assert not (fault.node and fault.node == before.node)
        assert not before.with_previous, "two at a time at most"
        assert (fault.kind, fault.node) != (before.kind, before.node)
    points = [f.after for f in faults]
    assert points == sorted(points) and points[0] >= 1 and points[-1] <= 300 * 85 // 100


def test_kinds_by_name_or_left_out():
    assert parse_kinds("all") == KINDS
    assert parse_kinds("redis,postgres") == ("postgres", "redis")
    assert parse_kinds("-clock,-fill") == tuple(k for k in KINDS if k not in ("clock", "fill"))
    with pytest.raises(ValueError, match="unknown fault kinds"):
        parse_kinds("earthquake")
    with pytest.raises(ValueError, match="unknown fault kinds"):
        plan(1, 10, 2, kinds=("earthquake",))
