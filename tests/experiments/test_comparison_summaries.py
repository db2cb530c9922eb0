"""A comparison computed from the configuration summaries (experiments.results.summaries) is the one
the metric rows give (issue 17): same points, statistics, flags, sentences and charts, for
specs over every dimension of the configuration, normalisations, peaks, repetitions drawn
and pooled configurations; specs over single runs' attributes read the metric rows."""

from __future__ import annotations

import pytest
from django.db import transaction

from experiments.comparison import ComparisonSpec, compute
from experiments.comparison.computation import summarisable
from experiments.models import Run
from experiments.results.store import replace_metrics
from tests.helpers.comparison import SUMMARISABLE_SPECS, assert_same, comparable

pytestmark = pytest.mark.django_db


def test_summaries_give_the_metric_rows_result(summaries_lab):
    for query in SUMMARISABLE_SPECS:
        spec = ComparisonSpec.from_query(query)
        assert summarisable(spec), query
        from_summaries = compute(spec)
        from_rows = compute(spec, summaries=False)
        assert from_rows.points and not from_rows.errors, query
        assert_same(comparable(from_summaries), comparable(from_rows), query)


def test_single_run_attributes_read_the_metric_rows(summaries_lab):
    for query in [
        "metric=write_bw&x=param:threads&series=matrix",
        "metric=write_bw&x=param:threads&f=matrix:sweep",
        "metric=write_bw&x=param:threads&bottleneck=disk",
        "metric=write_bw&x=param:threads&from=2020-01-01",
        f"metric=write_bw&x=param:threads&matrix={summaries_lab.uuid}",
    ]:
        assert not summarisable(ComparisonSpec.from_query(query)), query
    assert not summarisable(ComparisonSpec.from_query("metric=write_bw"), Run.objects.filter(pk=1))
    spec = ComparisonSpec.from_query(f"metric=write_bw&x=param:threads&matrix={summaries_lab.uuid}")
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
def test_a_pending_median_is_computed_from_the_values(summaries_lab, monkeypatch, few_values):
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
        assert_same(comparable(pending), comparable(exact), query)


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
def test_too_many_points_name_what_varies_across_them(summaries_lab, monkeypatch, summaries):
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


def test_the_page_lists_the_stored_metrics_from_the_summaries(summaries_lab):
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


def test_too_many_points_read_no_figures_and_a_summary_gone_meanwhile_is_left_out(
    summaries_lab, monkeypatch
):
    """The summaries are read in two steps (issue 30): what places and pools them, then the
    figures of a comparison that is drawn. A selection of too many points reads no figures;
    a configuration whose summary went between the two reads (its last run deleted) is left
    out, and the rest is the comparison without it."""
    from experiments.comparison import computation
    from experiments.models import ConfigSummary

    spec = ComparisonSpec.from_query("metric=write_bw&x=param:threads&series=arch")
    filled = []
    fill = computation._fill
    monkeypatch.setattr(computation, "_fill", lambda *a: filled.append(a) or fill(*a))
    monkeypatch.setattr(computation, "MAX_POINTS", 1)
    assert compute(spec).errors and not filled
    monkeypatch.undo()

    whole = compute(spec)
    gone = ConfigSummary.objects.filter(name="write_bw").order_by("config_key").first()

    def first_then_delete(*args):
        rows = summary_rows(*args)
        ConfigSummary.objects.filter(pk=gone.pk).delete()
        return rows

    summary_rows = computation._summary_rows
    monkeypatch.setattr(computation, "_summary_rows", first_then_delete)
    without = compute(spec)
    assert not without.errors
    assert sum(p.n for p in without.points) == sum(p.n for p in whole.points) - gone.n
