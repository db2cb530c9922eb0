"""Appends to the configuration summaries (issue 17, experiments.results.summaries.append/add): a
new
run's metrics are merged into its configuration's row (no recomputation from the runs), the
merged median is pending until ``settle`` fills it, readers compute pending medians from the
values, and concurrent appends to one configuration lose nothing."""

from __future__ import annotations

import statistics
import threading
import time

import pytest
from django.core.management import call_command
from django.db import connection, connections, transaction
from django.test.utils import CaptureQueriesContext

from experiments.comparison import ComparisonSpec, compute
from experiments.models import ConfigSummary, Metric, Run
from experiments.results import summaries
from experiments.results.ingest import ingest
from experiments.results.store import replace_metrics
from tests.helpers.comparison import (
    SUMMARISABLE_SPECS,
    add_alike,
    assert_same,
    comparable,
    make_testbed,
)

VALUES = [1.0e9, 3.0e9, 2.0e9, 2.5e9, 0.5e9, 2.0e9, 7.0e9]


def _store(testbed, value: float, params=None, **fields) -> Run:
    run = Run.objects.create(
        testbed=testbed, tool="fio", status="imported", params=params or {"threads": 4}, **fields
    )
    replace_metrics(
        run,
        [
            {"name": "write_bw", "value": value, "unit": "B/s"},
            {"name": "read_bw", "value": value / 2, "unit": "B/s"},
        ],
    )
    return run


@pytest.mark.django_db
def test_a_new_run_is_merged_not_recomputed(alice):
    testbed = make_testbed(alice, "lab", "x86_64", "0")
    first = _store(testbed, VALUES[0])
    row = ConfigSummary.objects.get(name="write_bw")
    assert (row.n, row.median) == (1, VALUES[0]), "a new row: the value is its median"
    for value in VALUES[1:]:
        with CaptureQueriesContext(connection) as queries:
            _store(testbed, value, bottleneck="disk", write_steady=1e9, write_whole=2e9)
        # Merged into the stored row (a recomputation deletes and inserts it): one upsert,
        # which reads no other run's metrics.
        sql = [q["sql"] for q in queries.captured_queries if "configsummary" in q["sql"]]
        assert len(sql) == 1 and "ON CONFLICT" in sql[0], sql
    row = ConfigSummary.objects.get(name="write_bw")
    assert row.pk == ConfigSummary.objects.get(name="write_bw").pk
    mean = statistics.fmean(VALUES)
    assert row.n == len(VALUES) and row.run_id == first.pk
    assert row.total == pytest.approx(sum(VALUES), rel=1e-12)
    assert row.m2 == pytest.approx(sum((v - mean) ** 2 for v in VALUES), rel=1e-9)
    assert (row.min, row.max) == (min(VALUES), max(VALUES))
    assert (row.bn_disk, row.steady_n, row.whole_n) == (len(VALUES) - 1,) * 3
    assert row.steady_sum == pytest.approx(1e9 * (len(VALUES) - 1))
    assert row.median is None, "merged: pending"
    assert summaries.differences(limit=0) == [], "pending medians are not differences"
    assert ConfigSummary.objects.filter(median__isnull=True).count() == 2
    assert summaries.settle() == 2
    row.refresh_from_db()
    assert row.median == statistics.median(VALUES)
    assert summaries.differences(limit=0) == []
    assert summaries.settle() == 0


@pytest.mark.django_db
def test_a_reparse_recomputes_exactly(alice):
    testbed = make_testbed(alice, "lab", "x86_64", "0")
    runs = [_store(testbed, v) for v in VALUES[:4]]
    assert ConfigSummary.objects.get(name="write_bw").median is None
    # A run that had metrics: its configuration is recomputed, median exact.
    replace_metrics(runs[1], [{"name": "write_bw", "value": 9e9, "unit": "B/s"}])
    row = ConfigSummary.objects.get(name="write_bw")
    assert row.median == statistics.median([VALUES[0], 9e9, *VALUES[2:4]])
    assert summaries.differences(limit=0) == []


@pytest.mark.django_db
def test_a_first_store_after_a_failed_parse_appends(alice):
    testbed = make_testbed(alice, "lab", "x86_64", "0")
    _store(testbed, VALUES[0])
    run = Run.objects.create(testbed=testbed, tool="fio", status="imported", params={})
    replace_metrics(run, [])  # a parse that yielded nothing
    run.params = {"threads": 4}  # the parser's parameters: the first run's configuration
    Run.objects.filter(pk=run.pk).update(params=run.params)
    replace_metrics(run, [{"name": "write_bw", "value": VALUES[1], "unit": "B/s"}])
    row = ConfigSummary.objects.get(name="write_bw")
    assert (row.n, row.median) == (2, None)
    assert Run.objects.get(pk=run.pk).config_key == row.config_key
    assert summaries.differences(limit=0) == []


@pytest.mark.django_db
def test_bulk_ingest_merges_and_new_rows_are_exact(alice):
    make_testbed(alice, "lab", "x86_64", "0")

    def items(values, threads=4):
        return [
            {
                "testbed": "lab",
                "tool": "fio",
                "params": {"threads": threads},
                "metrics": [{"name": "write_bw", "value": v, "unit": "B/s"}],
            }
            for v in values
        ]

    assert {r["status"] for r in ingest(items(VALUES[:3]), alice)} == {"created"}
    row = ConfigSummary.objects.get()
    assert (row.n, row.median) == (3, statistics.median(VALUES[:3])), "new: the batch's median"
    ingest(items(VALUES[3:]) + items([5.0], threads=8), alice)
    row.refresh_from_db()
    assert (row.n, row.median) == (len(VALUES), None)
    assert ConfigSummary.objects.get(n=1).median == 5.0
    assert summaries.differences(limit=0) == []
    summaries.settle()
    assert summaries.differences(limit=0) == []
    assert ConfigSummary.objects.get(pk=row.pk).median == statistics.median(VALUES)


def _plan_nodes(plan: dict):
    yield plan
    for child in plan.get("Plans", ()):
        yield from _plan_nodes(child)


@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's plan")
@pytest.mark.django_db
def test_bulk_append_reads_only_the_batchs_runs(alice):
    """The upsert of a batch (``_append``: here a bulk ingest inside ``summaries.batch()``,
    which defers its append) restricts the runs it joins to the batch's ids (issue 17: with
    the ids on the metric rows alone, PostgreSQL hash-joined them to a scan of every run, 34
    of 75 ms at 100,000 runs). The run side must carry the restriction itself: with
    sequential scans and nested loops off (what the planner did not choose on a table this
    small), a run scan without it reads every run's index entry. The bulk ingest's own
    upsert (rows computed in Python, ``summaries.batch_rows``) reads neither table."""
    make_testbed(alice, "lab", "x86_64", "0")

    def items(n: int, start: int) -> list[dict]:
        return [
            {
                "testbed": "lab",
                "tool": "fio",
                "params": {"threads": 4 + i % 3},
                "metrics": [{"name": "write_bw", "value": 1e9 + start + i, "unit": "B/s"}],
            }
            for i in range(n)
        ]

    ingest(items(60, 0), alice)
    with CaptureQueriesContext(connection) as captured:
        ingest(items(2, 100), alice)
    upserts = [q["sql"] for q in captured.captured_queries if "ON CONFLICT" in q["sql"]]
    assert len(upserts) == 1
    assert Run._meta.db_table not in upserts[0] and Metric._meta.db_table not in upserts[0]
    with CaptureQueriesContext(connection) as captured, summaries.batch():
        ingest(items(2, 200), alice)
    upserts = [q["sql"] for q in captured.captured_queries if "ON CONFLICT" in q["sql"]]
    assert len(upserts) == 1
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute("SET LOCAL enable_nestloop = off")
        cursor.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + upserts[0])
        plan = cursor.fetchone()[0][0]["Plan"]
        cursor.execute("RESET enable_seqscan")
        cursor.execute("RESET enable_nestloop")
    runs = [n for n in _plan_nodes(plan) if n.get("Relation Name") == Run._meta.db_table]
    assert runs and all(n["Actual Rows"] + n.get("Rows Removed by Filter", 0) <= 2 for n in runs)


@pytest.mark.django_db
def test_settle_is_bounded_and_leaves_rows_whose_count_changed(alice):
    testbed = make_testbed(alice, "lab", "x86_64", "0")
    for threads in (1, 2, 4):
        for v in VALUES[:3]:
            _store(testbed, v, params={"threads": threads})
    assert ConfigSummary.objects.filter(median__isnull=True).count() == 6
    assert summaries.settle(limit=2) == 2
    assert summaries.settle(values=4) == 1, "3 values per row: the second would exceed 4"
    assert summaries.settle(values=1) == 1, "at least one row per call"
    # A row whose n no longer matches its values (an append committed after the values were
    # read) is left pending.
    pending = ConfigSummary.objects.filter(median__isnull=True)
    ConfigSummary.objects.filter(pk=pending.first().pk).update(n=99)
    assert summaries.settle() == 1
    assert pending.count() == 1


@pytest.mark.django_db
def test_check_accepts_pending_medians_but_not_wrong_ones(alice):
    testbed = make_testbed(alice, "lab", "x86_64", "0")
    for v in VALUES[:3]:
        _store(testbed, v)
    call_command("rebuild_summaries", "--check")
    ConfigSummary.objects.filter(name="write_bw").update(median=123.0)
    with pytest.raises(Exception, match="1 differences"):
        call_command("rebuild_summaries", "--check")
    ConfigSummary.objects.filter(name="write_bw").update(median=None)
    call_command("rebuild_summaries", "--settle")
    assert not ConfigSummary.objects.filter(median__isnull=True).exists()
    call_command("rebuild_summaries", "--check")
    ConfigSummary.objects.update(median=None)
    call_command("rebuild_summaries")
    assert not ConfigSummary.objects.filter(median__isnull=True).exists()


@pytest.mark.django_db
def test_the_janitor_settles_pending_medians(alice):
    from experiments.execution.tasks import janitor

    testbed = make_testbed(alice, "lab", "x86_64", "0")
    for v in VALUES[:3]:
        _store(testbed, v)
    assert janitor()["medians"] == 2
    assert summaries.differences(limit=0) == []
    assert not ConfigSummary.objects.filter(median__isnull=True).exists()


@pytest.mark.django_db
def test_comparison_with_pending_medians_gives_the_metric_rows_result(summaries_lab):
    # Every configuration of the comparison suite's lab (summaries_lab) gets two more runs:
    # merged rows, medians pending.
    for run in list(Run.objects.order_by("pk")):
        values = list(Metric.objects.filter(run=run, primary=True).values("name", "value"))
        for factor in (1.25, 0.5):
            copy = add_alike(run, run.status)
            replace_metrics(
                copy, [{**v, "value": v["value"] * factor, "unit": "B/s"} for v in values]
            )
    assert (
        ConfigSummary.objects.filter(median__isnull=True).count() == ConfigSummary.objects.count()
    )
    for _settled in (False, True):
        for query in SUMMARISABLE_SPECS:
            spec = ComparisonSpec.from_query(query)
            from_summaries = compute(spec)
            from_rows = compute(spec, summaries=False)
            assert from_rows.points and not from_rows.errors, query
            assert all(p.median is not None for p in from_summaries.points if p.n == 3), query
            assert_same(comparable(from_summaries), comparable(from_rows), query)
        summaries.settle()


@pytest.mark.skipif(connection.vendor != "postgresql", reason="concurrent writers: PostgreSQL")
@pytest.mark.django_db(transaction=True)
def test_concurrent_appends_lose_nothing(alice):
    """Threads, each with its own connection, append to the same configurations at once
    (single runs as the executor stores them, and bulk batches in different orders): the
    rows end exact, with no lost update and no deadlock."""
    make_testbed(alice, "lab", "x86_64", "0")
    threads_n, rounds = 4, 6
    barrier = threading.Barrier(threads_n)
    errors: list[BaseException] = []

    def items(t: int, r: int) -> list[dict]:
        rows = [
            {
                "testbed": "lab",
                "tool": "fio",
                "params": {"threads": 2**k},
                "metrics": [
                    {
                        "name": "write_bw",
                        "value": float(1 + (t * 7 + r * 3 + k) % 11),
                        "unit": "B/s",
                    },
                    {"name": "read_bw", "value": float(t + r + k), "unit": "B/s"},
                ],
            }
            for k in range(8)
        ]
        return rows if t % 2 else rows[::-1]  # half the threads in reverse key order

    def work(t: int) -> None:
        try:
            testbed = Run._meta.get_field("testbed").related_model.objects.get(name="lab")
            barrier.wait()
            for r in range(rounds):
                assert {x["status"] for x in ingest(items(t, r), alice)} == {"created"}
                with transaction.atomic():
                    _store(testbed, float(t * 100 + r), params={"threads": 2 ** (r % 3)})
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
        finally:
            connections.close_all()

    workers = [threading.Thread(target=work, args=(t,)) for t in range(threads_n)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert errors == []
    assert Run.objects.count() == threads_n * rounds * 9
    assert summaries.differences(limit=0) == []
    for name in ("write_bw", "read_bw"):
        stored = sum(ConfigSummary.objects.filter(name=name).values_list("n", flat=True))
        assert stored == threads_n * rounds * 9
    summaries.settle()
    assert summaries.differences(limit=0) == []
    assert not ConfigSummary.objects.filter(median__isnull=True).exists()


@pytest.mark.skipif(connection.vendor != "postgresql", reason="concurrent writers: PostgreSQL")
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("first", ["append", "recompute"])
def test_a_recompute_meeting_a_new_row_of_another_transaction(alice, first):
    """A configuration with no summary row yet: one transaction creates its row (an append of
    its first run, or a recomputation) and commits only after another has started to
    recompute the same configuration (a metric stored and reparsed in one batch). The
    second one's DELETE could not see the first one's row and its INSERT meets it: it waits,
    takes the row and recomputes it again (a unique violation before); the row ends exact."""
    testbed = make_testbed(alice, "lab", "x86_64", "0")
    created = threading.Event()
    errors: list[BaseException] = []

    def recomputed(run: Run, value: float) -> None:
        with summaries.batch():
            replace_metrics(run, [{"name": "write_bw", "value": value / 3, "unit": "B/s"}])
            replace_metrics(run, [{"name": "write_bw", "value": value, "unit": "B/s"}])

    def one() -> None:
        try:
            with transaction.atomic():
                if first == "append":
                    _store(testbed, 1.0e9)
                else:
                    run = Run.objects.create(
                        testbed=testbed, tool="fio", status="imported", params={"threads": 4}
                    )
                    recomputed(run, 1.0e9)
                created.set()
                time.sleep(1.0)  # the other transaction's INSERT is waiting by now
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
            created.set()
        finally:
            connections.close_all()

    def two() -> None:
        try:
            assert created.wait(30)
            with transaction.atomic():
                run = Run.objects.create(
                    testbed=testbed, tool="fio", status="imported", params={"threads": 4}
                )
                recomputed(run, 3.0e9)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
        finally:
            connections.close_all()

    workers = [threading.Thread(target=one), threading.Thread(target=two)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert errors == []
    row = ConfigSummary.objects.get(name="write_bw")
    assert (row.n, row.total, row.min, row.max) == (2, 4.0e9, 1.0e9, 3.0e9)
    assert summaries.differences(limit=0) == []


@pytest.mark.django_db
def test_batch_rows_equal_the_sql_select(alice):
    """``summaries.batch_rows`` (the bulk ingest's aggregation in Python) is the twin of
    ``_select``: for a varied batch (published runs, every bottleneck kind and none,
    collapsed runs, steadiness values on some directions, approximate values and extras
    that are not JSON true, non-primary rows, a run without a key, ties, negative values,
    a configuration of one run) every column equals what the SQL gives, the median
    exactly, sums to ``_close``'s tolerance."""
    testbed = make_testbed(alice, "lab", "x86_64", "0")
    kinds = ["disk", "cpu", "network", "none", "unknown", ""]
    approx = [{"approx": True}, {"approx": False}, {}, None, {"other": True}]
    if connection.vendor == "postgresql":  # (SQLite's JSON reads 1 as true)
        approx += [{"approx": 1}, {"approx": "true"}]
    values = [3e9, -2.5, 0.0, 1e12 + 0.5, 7.25, 7.25, 1e-3, 4e9 / 3]
    runs = []
    for i in range(23):
        published = i % 4 == 0
        run = Run.objects.create(
            testbed=testbed,
            tool="fio" if i % 5 else "ior",
            status="imported",
            params={"threads": i % 3} if i != 22 else {"threads": 99},
            published=published,
            source="A study" if published and i % 8 else "",
            bottleneck=kinds[i % len(kinds)],
            collapsed=i % 3 == 1,
            write_steady=None if i % 2 else 1e9 + i,
            write_whole=None if i % 3 else 0.9e9 + i,
            read_steady=None if i % 4 else 2e9 - i,
            read_whole=2.1e9 + i if i % 5 else None,
        )
        rows = [
            Metric(
                run=run,
                name=name,
                value=values[(i + j) % len(values)] * (j + 1),
                unit="B/s",
                primary=not (i % 7 == 3 and name == "iops"),
                extra=approx[(i + j) % len(approx)] or {},
            )
            for j, name in enumerate(["write_bw", "read_bw", "iops"])
        ]
        rows.append(Metric(run=run, name="write_bw", value=1.0, unit="B/s", iteration=1))
        Metric.objects.bulk_create(rows)
        runs.append(run)
    Run.objects.filter(pk=runs[5].pk).update(config_key="")  # not summarised
    runs = list(Run.objects.filter(pk__in=[r.pk for r in runs]).order_by("pk"))
    metrics = Metric.objects.filter(run__in=runs)
    primaries = [
        [(m.name, m.value, m.extra) for m in metrics.filter(run=run, primary=True)] for run in runs
    ]
    stored = summaries.batch_rows(runs, primaries)
    computed = [tuple(row[column] for column in summaries.COLUMNS) for row in stored]
    select, params = summaries._select(metrics)
    with connection.cursor() as cursor:
        cursor.execute(select, params)
        expected = {(r[0], r[1]): r for r in cursor.fetchall()}
    assert len(expected) > 10
    assert {(r[0], r[1]) for r in computed} == set(expected)
    for row in computed:
        want = expected[row[0], row[1]]
        for column, w, h in zip(summaries.COLUMNS, want, row, strict=True):
            assert summaries._close(w, h), (row[0], row[1], column, w, h)
            if column not in ("total", "m2", "steady_sum", "whole_sum"):
                assert w == h, (row[0], row[1], column, w, h)  # exact
    if connection.vendor == "postgresql":  # stored as the bulk ingest stores them
        ConfigSummary.objects.all().delete()
        summaries._upsert_rows(stored)
        # Stored exactly as computed (numbers through their JSON text).
        assert sorted(ConfigSummary.objects.values_list(*summaries.COLUMNS)) == sorted(computed)
        unkeyed = f"run {runs[5].pk}: has metrics but no configuration key (not summarised)"
        assert summaries.differences(limit=0) == [unkeyed]


@pytest.mark.django_db
def test_batch_rows_decline_values_sql_would_overflow(alice):
    """A batch holding a value beyond ±1e150 is left to the SQL (``_append``), whose float
    errors (an overflowing square or sum) are PostgreSQL's; the rows equal a recomputation."""
    make_testbed(alice, "lab", "x86_64", "0")
    run = Run(id=1, config_key="k", published=False, collapsed=False, bottleneck="")
    assert summaries.batch_rows([run], [[("write_bw", 1e200, {})]]) is None
    assert summaries.batch_rows([run], [[("write_bw", float("nan"), {})]]) is None
    run.write_steady = float("inf")
    assert summaries.batch_rows([run], [[("write_bw", 1.0, {})]]) is None
    run.write_steady = 1e9
    assert summaries.batch_rows([run], [[("write_bw", 1.0, {})]]) is not None
    item = {"testbed": "lab", "tool": "fio", "params": {"threads": 4}}
    ingest([{**item, "metrics": [{"name": "write_bw", "value": 1e200, "unit": "B/s"}]}], alice)
    ingest([{**item, "metrics": [{"name": "read_bw", "value": 2.0, "unit": "B/s"}]}], alice)
    assert sorted(ConfigSummary.objects.values_list("name", "total")) == [
        ("read_bw", 2.0),
        ("write_bw", 1e200),
    ]
    assert summaries.differences(limit=0) == []
