"""A comparison computed from the configuration summaries (experiments.results.summaries) is the one
the metric rows give (issue 17): same points, statistics, flags, sentences and charts, for
specs over every dimension of the configuration, normalisations, peaks, repetitions drawn
and pooled configurations; specs over single runs' attributes read the metric rows."""

from __future__ import annotations

import math
import re

import pytest
from django.db import transaction

from experiments.comparison import ComparisonSpec, compute
from experiments.comparison.computation import summarisable
from experiments.models import Matrix, Run, Target, TuningSet
from experiments.results.store import replace_metrics
from tests.lab import make_testbed

pytestmark = pytest.mark.django_db

SPECS = [
    "metric=write_bw&x=param:threads&series=arch",
    "metric=write_bw&metric=read_bw&x=param:threads&series=raid&baseline=10&ignore=hardware",
    "metric=write_bw&x=tool&series=testbed",
    "metric=write_bw&x=param:threads&series=tuning&reps=1",
    "metric=write_bw&x=param:threads&series=source",
    "metric=write_bw&x=param:threads&series=arch&norm=server",
    "metric=write_bw&x=param:threads&series=arch&norm=client",
    "metric=write_bw&x=param:threads&series=arch&norm=core",
    "metric=write_bw&x=param:threads&series=arch&norm=target",
    "metric=write_bw&x=param:threads&series=arch&stat=peak",
    "metric=write_bw&x=param:threads&y=arch&chart=heatmap",
    "metric=write_bw&x=param:bs&series=hw:cores&f=param:threads:4",
    "metric=write_bw&x=param:threads&series=arch&tool=fio&ignore=param:bs",
    "metric=write_bw&x=param:threads&series=fs&f=arch:aarch64&f=arch:x86_64",
    "metric=read_bw&x=&series=arch&error=minmax",
    "metric=write_bw&x=param:threads&series=tuning:storage.tuneNumWorkers",
]


@pytest.fixture
def lab(alice):
    arm = make_testbed(alice, "arm-lab", "aarch64", "10")
    x86 = make_testbed(alice, "x86-lab", "x86_64", "0", cores=(1, 16))
    tuned = TuningSet.objects.create(owner=alice, name="tuned")
    tuned.replace_params([("storage", "tuneNumWorkers", "16")])
    matrix = Matrix.objects.create(owner=alice, name="sweep", tool="fio")
    values = iter([1.0e9, 1.1e9, 1.05e9, 2.0e9, 2.2e9, 1.9e9, 2.1e9, 3.3e9] * 40)
    for tb in (arm, x86):
        target = Target.objects.filter(testbed=tb).first()
        for threads in (1, 4, 16):
            for bs in ("4k", "1m"):
                for rep in range(3):
                    run = Run.objects.create(
                        testbed=tb,
                        tool="fio" if rep < 2 else "ior",
                        status="succeeded",
                        params={"threads": threads, "bs": bs, "nodes": 1 + rep % 2},
                        tuning_set=tuned if bs == "1m" else None,
                        target=target if threads == 16 and rep == 0 else None,
                        matrix=matrix if rep == 1 else None,
                        published=threads == 1 and rep == 2,
                        source="A study" if threads == 1 and rep == 2 else "",
                    )
                    replace_metrics(
                        run,
                        [
                            {"name": "write_bw", "value": next(values), "unit": "B/s"},
                            {"name": "read_bw", "value": next(values), "unit": "B/s"},
                        ],
                    )
                    if rep == 0:
                        Run.objects.filter(pk=run.pk).update(
                            bottleneck="disk", collapsed=threads == 4, write_steady=9e8,
                            write_whole=1e9,
                        )  # fmt: skip
    return matrix


def _same(a, b, where="") -> None:
    if isinstance(a, float) and isinstance(b, float):
        assert math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12) or (a != a and b != b), where
    elif isinstance(a, dict) and isinstance(b, dict):
        assert set(a) == set(b), where
        for key in a:
            _same(a[key], b[key], f"{where}.{key}")
    elif isinstance(a, list) and isinstance(b, list):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _same(x, y, f"{where}[{i}]")
    elif isinstance(a, str) and isinstance(b, str) and a != b:
        # Sentences print statistics to a few digits: equal once the numbers are.
        numbers = re.compile(r"-?\d+(?:\.\d+)?(?:e[-+]?\d+)?")
        assert numbers.sub("#", a) == numbers.sub("#", b), where
        for x, y in zip(numbers.findall(a), numbers.findall(b), strict=True):
            assert math.isclose(float(x), float(y), rel_tol=1e-3), where
    else:
        assert a == b, where


def _comparable(result) -> dict:
    out = result.to_json()
    out.pop("generated_at", None)
    out["points"] = sorted(out["points"], key=lambda p: repr(sorted(p.items())))
    return out


def test_summaries_give_the_metric_rows_result(lab):
    for query in SPECS:
        spec = ComparisonSpec.from_query(query)
        assert summarisable(spec), query
        from_summaries = compute(spec)
        from_rows = compute(spec, summaries=False)
        assert from_rows.points and not from_rows.errors, query
        _same(_comparable(from_summaries), _comparable(from_rows), query)


def test_single_run_attributes_read_the_metric_rows(lab):
    for query in [
        "metric=write_bw&x=param:threads&series=matrix",
        "metric=write_bw&x=param:threads&f=matrix:sweep",
        "metric=write_bw&x=param:threads&bottleneck=disk",
        "metric=write_bw&x=param:threads&from=2020-01-01",
        f"metric=write_bw&x=param:threads&matrix={lab.uuid}",
    ]:
        assert not summarisable(ComparisonSpec.from_query(query)), query
    assert not summarisable(ComparisonSpec.from_query("metric=write_bw"), Run.objects.filter(pk=1))
    spec = ComparisonSpec.from_query(f"metric=write_bw&x=param:threads&matrix={lab.uuid}")
    assert sum(p.n for p in compute(spec).points) == 12


def _repeat(run: Run, values: list[float]) -> None:
    """More runs of ``run``'s configuration, with these write_bw values."""
    for value in values:
        again = Run.objects.create(
            testbed=run.testbed,
            tool=run.tool,
            status="succeeded",
            params=run.params,
            tuning_set=run.tuning_set,
            target=run.target,
            published=run.published,
            source=run.source,
        )
        replace_metrics(again, [{"name": "write_bw", "value": value, "unit": "B/s"}])


PENDING_SPECS = [
    "metric=write_bw&x=param:threads&series=arch",
    "metric=write_bw&x=param:threads&series=arch&reps=1",
    "metric=write_bw&x=param:threads&series=arch&norm=server",
    "metric=write_bw&x=param:threads&series=arch&ignore=param:bs&ignore=tuning",
    "metric=write_bw&x=param:threads&series=arch&stat=peak",
]


@pytest.mark.parametrize("few_values", [False, True])
def test_a_pending_median_is_computed_from_the_values(lab, monkeypatch, few_values):
    """A summary whose median is pending (NULL: experiments.results.summaries appends a run without
    it) gives the point of its one configuration the exact median, from the configuration's
    values: in the query that reads the values shown, or, when there are too many of those
    (``few_values``), in one reading only the pending configurations' values."""
    from experiments.comparison import computation
    from experiments.models import ConfigSummary

    if few_values:
        monkeypatch.setattr(computation, "MAX_REPETITION_POINTS", 3)
    run = Run.objects.filter(tool="fio", params__threads=4, params__bs="4k").first()
    _repeat(run, [5.0e9, 1.0e9, 7.0e9])  # four runs: the median is between the middle two
    for query in PENDING_SPECS:
        spec = ComparisonSpec.from_query(query)
        exact = compute(spec, summaries=False)
        # The configuration is a point of its own, but where its bs and tuning set are ignored.
        alone = [p for p in exact.points if p.n == 4 and p.median is not None]
        assert alone or "ignore" in query, query
        with transaction.atomic():
            assert ConfigSummary.objects.update(median=None)
            pending = compute(spec)
            transaction.set_rollback(True)
        _same(_comparable(pending), _comparable(exact), query)


def _old_message(points: list[dict], exempt: set[str]) -> str:
    """The "too many configurations" message from every would-be point's attributes (as
    computed before the comparison cached each setup's and parameter set's attributes),
    what is on an axis, the series or a filter, or ignored, left out."""
    from collections import defaultdict

    from experiments.comparison import comparability

    values: dict[str, set] = defaultdict(set)
    for attributes in points:
        for key, value in attributes.items():
            values[key].add(value)
    for key in list(values):
        if any(key not in attributes for attributes in points):
            values[key].add(None)
    varying = sorted(
        ((len(v), k) for k, v in values.items() if len(v) > 1 and k not in {"memory", *exempt}),
        key=lambda t: (-t[0], t[1]),
    )
    named = ", ".join(f"{comparability.attribute_name(k)} ({n} values)" for n, k in varying[:8])
    return (
        f"The runs selected are {len(points):,} different configurations at the places of this "
        f"comparison (at most {len(points) - 1} are shown): runs are pooled only when alike. "
        f"What varies: {named or 'nothing named'}. Filter on these (f=param:…) or put one on "
        "an axis or the series, or let compared runs differ in them (ignore=…)."
    )


@pytest.mark.parametrize("summaries", [True, False])
def test_too_many_points_name_what_varies_across_them(lab, monkeypatch, summaries):
    """Beyond MAX_POINTS the comparison names what varies between its would-be points,
    attributes of pooled configurations ("a | b") and unstated parameters included: the
    same message as from each point's attributes."""
    from experiments.comparison import comparability, computation

    run = Run.objects.filter(tool="fio", params__threads=4).first()
    run.params = {**run.params, "direct": 1}
    run.save()  # one configuration states a parameter the others do not
    for query in [
        "metric=write_bw&x=param:threads&series=arch",
        "metric=write_bw&x=param:threads&series=arch&ignore=param:bs&ignore=tuning",
        "metric=write_bw&metric=read_bw&x=tool&ignore=param:nodes",
    ]:
        spec = ComparisonSpec.from_query(query)
        shown = compute(spec, summaries=summaries)
        assert not shown.errors, query
        points = [p.attributes for p in shown.points]
        assert any(" | " in v for a in points for v in a.values()) or "ignore" not in query
        monkeypatch.setattr(computation, "MAX_POINTS", len(points) - 1)
        message = _old_message(points, comparability.exempt_within(spec))
        assert compute(spec, summaries=summaries).errors == [message], query
        if query.endswith("series=arch"):  # threads on the x axis: not named
            assert "threads (" not in message and "bs (" in message, message
        monkeypatch.undo()


def test_the_page_lists_the_stored_metrics_from_the_summaries(lab):
    """The comparison page's metric choices are the headline metrics stored, read from the
    configuration summaries, not from every metric row."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from experiments.models import Metric
    from experiments.views.compare import available_metrics

    run = Run.objects.filter(tool="fio").first()
    Metric.objects.create(run=run, name="read_iops", value=5.0, unit="op/s", primary=True)
    Metric.objects.create(run=run, name="mdtest_rate", value=5.0, unit="op/s", primary=False)
    stored = set(Metric.objects.filter(primary=True).values_list("name", flat=True))
    with CaptureQueriesContext(connection) as queries:
        assert available_metrics() == sorted(stored) == ["read_bw", "read_iops", "write_bw"]
    assert not any("experiments_metric" in q["sql"] for q in queries.captured_queries)
