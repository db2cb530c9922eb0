"""Property (issue 12): in labs of random runs where two compared series also differ in a
second attribute (tool, a parameter, the target, the tuning set, the data source), no
difference is ever claimed in a sentence that does not name that attribute. Without
``ignore=`` no difference is claimed at all; with it, the sentence says what it ignores."""

from __future__ import annotations

import pytest
from django.db import transaction
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from experiments.comparison import ComparisonSpec, compute
from experiments.comparison.comparability import attribute_name
from experiments.models import Run, Target, TuningSet
from experiments.results.store import replace_metrics
from tests.helpers.comparison import make_testbed

# Second attributes and the value each of the two series has: (attribute, for numjobs 1,
# for numjobs 2). None: the run does not state it.
SECOND = {
    "tool": ("fio", "dd"),
    "param:direct": (True, False),
    "param:bs": ("1m", "4k"),
    "param:nodes": (1, 2),
    "param:size": ("64g", None),
    "target": (None, "t0"),
    "tuning": (None, "tuned"),
    "source": ("own", "study"),
}

lab = st.fixed_dictionaries(
    {
        "second": st.lists(st.sampled_from(sorted(SECOND)), min_size=1, max_size=3, unique=True),
        "ignored": st.sets(st.sampled_from(sorted(SECOND))),
        "reps": st.tuples(st.integers(1, 4), st.integers(1, 4)),
        "values": st.lists(st.floats(1e8, 1e10), min_size=8, max_size=8),
        "threads": st.sampled_from([None, (4,), (4, 16)]),
        # Runs of numjobs 1 that also have numjobs 2's values (a like-for-like partner may
        # exist beside the confounded one).
        "decoy": st.booleans(),
    }
)


def _run(testbed, value, numjobs, second, side, threads, targets, tunings):
    params = {"numjobs": numjobs}
    if threads is not None:
        params["threads"] = threads
    tool, target, tuning, published = "fio", None, None, False
    for attr in second:
        chosen = SECOND[attr][side]
        if attr == "tool":
            tool = chosen
        elif attr == "target":
            target = targets.get(chosen)
        elif attr == "tuning":
            tuning = tunings.get(chosen)
        elif attr == "source":
            published = chosen == "study"
        elif chosen is not None:
            params[attr.removeprefix("param:")] = chosen
    run = Run.objects.create(
        testbed=testbed,
        tool=tool,
        status="imported",
        params=params,
        target=target,
        tuning_set=tuning,
        published=published,
        source="A study" if published else "",
    )
    replace_metrics(run, [{"name": "write_bw", "value": value, "unit": "B/s"}])


@pytest.mark.django_db
@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(case=lab)
def test_no_difference_sentence_hides_a_second_attribute(alice, case):
    with transaction.atomic():
        testbed = make_testbed(alice, "lab", "x86_64", "0")
        targets = {"t0": Target.objects.filter(testbed=testbed).first()}
        tunings = {"tuned": TuningSet.objects.create(owner=alice, name="tuned")}
        values = iter(case["values"] * 4)
        for threads in case["threads"] or (None,):
            for side, numjobs in ((0, 1), (1, 2)):
                for _ in range(case["reps"][side]):
                    _run(testbed, next(values), numjobs, case["second"], side, threads,
                         targets, tunings)  # fmt: skip
            if case["decoy"]:
                _run(testbed, next(values), 1, case["second"], 1, threads, targets, tunings)
        x = "param:threads" if case["threads"] else ""
        query = f"metric=write_bw&x={x}&series=param:numjobs&baseline=1"
        query += "".join(f"&ignore={a}" for a in sorted(case["ignored"]))
        result = compute(ComparisonSpec.from_query(query))
        assert result.errors == []
        confounded = {a for a in case["second"] if a not in case["ignored"]}
        names = {attribute_name(a) for a in case["second"]} | {attribute_name("memory")}
        for c in result.comparisons:
            if not c.claimed:
                # Nothing claimed: what else differs is named, and it is what differs.
                assert c.diff_pct is None and c.p_value is None and c.confounders
                assert {row[0] for row in c.confounders} <= names, c.confounders
                assert all(f"{row[0]} " in c.sentence for row in c.confounders[:6]), c.sentence
                continue
            # A claimed difference: the two points are alike in every second attribute, or
            # the user ignores it and the sentence says so.
            # (Each series variant is one point per x: labels tell variants apart.)
            (p,) = [q for q in result.points if q.series == c.series and q.x == c.x]
            (base,) = [q for q in result.points if q.series == c.baseline and q.x == c.x]
            for attr in case["second"]:
                if p.attributes.get(attr) == base.attributes.get(attr):
                    continue
                assert attr in case["ignored"], (attr, c.sentence)
                assert f"ignoring {attribute_name(attr)} " in c.sentence or (
                    f"; {attribute_name(attr)} " in c.sentence.split("ignoring", 1)[-1]
                ), c.sentence
        if not case["decoy"] and confounded:
            assert result.comparisons, "a confounded pair is still named"
            assert all(not c.claimed for c in result.comparisons)
        transaction.set_rollback(True)
