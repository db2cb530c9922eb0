"""Runs' typed parameters (experiments.models.params, issue 30): the rows the triggers keep
equal what ``typed`` makes of ``Run.params`` after every writer (the ORM, updates, plain SQL,
the bulk ingest's COPY, the executor's parse, the importer, the published data loader, the
migration's backfill, deletes); and the runs table's sorts and filters that read them and
the testbed sort: numbers in numeric order before texts, missing values last, keyset pages
that reach every run once, the same on SQLite and PostgreSQL, in a constant number of
queries."""

from __future__ import annotations

import base64
import json
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from experiments.comparison import runs_table
from experiments.models import Metric, Run, RunParam
from experiments.models import params as typed_params
from experiments.models.params import typed
from experiments.results.store import parse_stored
from tests.helpers.api import token_client
from tests.helpers.comparison import make_testbed
from tests.helpers.samples import sample

pytestmark = pytest.mark.django_db


def canonical(text):
    """A list's or an object's JSON text as one spelling (each database spaces its own)."""
    if text and text[0] in "[{":
        try:
            return json.dumps(json.loads(text), sort_keys=True)
        except ValueError:
            return text
    return text


def expected() -> set[tuple]:
    """The typed rows of every run as ``typed`` makes them."""
    out = set()
    for run_id, params, created in Run.objects.values_list("id", "params", "created"):
        for name, value in (params if isinstance(params, dict) else {}).items():
            row = typed(value)
            if row is not None and len(name) <= typed_params.NAME_MAX:
                out.add((run_id, name, row[0], row[1], canonical(row[2]), created))
    return out


def stored() -> set[tuple]:
    rows = RunParam.objects.values_list("run_id", "name", "kind", "num", "text", "created")
    return {(r, n, k, num, canonical(text), c) for r, n, k, num, text, c in rows}


def assert_true() -> None:
    assert stored() == expected()


VALUES = {
    "threads": 16,
    "f": 2.5,
    "neg": -3,
    "zero": 0,
    "big": 2**62,
    "bs": "4k",
    "rw": "write",
    "direct": True,
    "sync": False,
    "ops": ["write", "read"],
    "nested": {"a": 1},
    "none": None,
    "long": "x" * 400,
    "k" * 65: 1,
}


def test_every_orm_write_keeps_the_rows_true(testbed):
    run = Run.objects.create(testbed=testbed, tool="fio", params=VALUES)
    rows = {r.name: (r.kind, r.num, r.text) for r in RunParam.objects.filter(run=run)}
    number, text = typed_params.NUMBER, typed_params.TEXT
    assert rows["threads"] == (number, 16.0, "") and rows["bs"] == (text, 0, "4k")
    assert rows["direct"] == (text, 0, "true") and rows["sync"] == (text, 0, "false")
    assert rows["zero"] == (number, 0, "")
    assert rows["long"] == (text, 0, "x" * typed_params.TEXT_PREFIX)
    assert "none" not in rows and "k" * 65 not in rows  # missing, as without the key
    assert rows["ops"][2] in ('["write","read"]', '["write", "read"]')  # SQLite, PostgreSQL
    other = Run.objects.create(testbed=testbed, tool="ior", params={"threads": 2})
    assert_true()
    run.params = {"threads": 32, "extra": "new"}
    run.save()
    assert_true()
    Run.objects.filter(pk=other.pk).update(params={"threads": "many"})
    assert_true()
    Run.objects.filter(pk=other.pk).update(created=timezone.now() - timedelta(days=1))
    assert_true()
    Run.objects.filter(pk=run.pk).update(status="succeeded")  # no parameter change
    assert_true()
    Run.objects.bulk_create(
        [Run(testbed=testbed, tool="fio", params={"threads": i}) for i in range(3)]
    )
    assert_true()
    run.delete()
    assert_true()
    Run.objects.all().delete()
    assert RunParam.objects.count() == 0


def test_plain_sql_writes_keep_the_rows_true(testbed):
    run = Run.objects.create(testbed=testbed, tool="fio", params={"threads": 4})
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE experiments_run SET params = %s WHERE id = %s",
            [json.dumps({"threads": 8, "bs": "1m"}), run.pk],
        )
        # Not an object: no rows, and no failed write.
        cursor.execute("UPDATE experiments_run SET params = %s WHERE id = %s", ["[1, 2]", run.pk])
        assert RunParam.objects.filter(run=run).count() == 0
        cursor.execute(
            "UPDATE experiments_run SET params = %s WHERE id = %s",
            [json.dumps({"threads": 8, "bs": "1m"}), run.pk],
        )
    assert_true()
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM experiments_run WHERE id = %s", [run.pk])
    assert RunParam.objects.count() == 0


@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's numeric range")
def test_a_number_beyond_floats_is_text_and_fails_no_write(testbed):
    run = Run.objects.create(testbed=testbed, tool="fio")
    with connection.cursor() as cursor:
        cursor.execute(
            'UPDATE experiments_run SET params = \'{"huge": 1e400, "tiny": 1e-400}\' WHERE id = %s',
            [run.pk],
        )
    rows = {r.name: (r.kind, r.text) for r in RunParam.objects.filter(run=run)}
    assert rows["huge"][0] == typed_params.TEXT and rows["huge"][1].startswith("1000")
    assert rows["tiny"][0] == typed_params.TEXT


def test_bulk_ingest_keeps_the_rows_true(alice, testbed):
    items = [
        {
            "testbed": testbed.name,
            "tool": "fio",
            "key": f"job-{i}",
            "params": {"threads": i, "bs": "4k", "direct": i % 2 == 0},
            "metrics": [{"name": "write_bw", "value": 1e9 + i}],
        }
        for i in range(20)
    ]
    response = token_client(alice).post("/api/runs/bulk/", items, format="json")
    assert response.status_code == 200, response.content
    assert RunParam.objects.filter(name="threads").count() == 20
    assert_true()


def test_the_executors_parse_keeps_the_rows_true(testbed):
    run = Run.objects.create(
        testbed=testbed,
        tool="ior",
        params={"threads": "stale"},
        raw_output=sample("ior/ior-3.2.1-posix-fpp-64tasks-wr-beegfs-aws.txt"),
    )
    assert parse_stored(run) is None
    run.refresh_from_db()
    assert RunParam.objects.get(run=run, name="threads").num == 64
    assert_true()


def test_import_keeps_the_rows_true(alice_client, testbed):
    save = {
        "action": "save",
        "testbed": testbed.uuid,
        "item_name": "aws run",
        "item_text": sample("ior/ior-3.2.1-posix-fpp-64tasks-wr-beegfs-aws.txt"),
    }
    alice_client.post(reverse("experiments:run_import"), save)
    assert Run.objects.get().params["threads"] == 64
    assert RunParam.objects.get(name="threads").num == 64
    assert_true()


def test_the_published_loader_keeps_the_rows_true(db):
    call_command("load_published", stdout=open("/dev/null", "w"))  # noqa: SIM115
    assert RunParam.objects.exists()
    assert_true()


def test_the_backfill_makes_the_rows_the_triggers_make(testbed):
    for i, params in enumerate((VALUES, {"threads": 2}, {}, {"rw": "read"})):
        Run.objects.create(testbed=testbed, tool="fio", params=params, label=str(i))
    before = stored()
    typed_params.backfill(connection)
    assert stored() == before == expected()


def test_the_triggers_are_installed_again_after_migrate(db):
    typed_params.uninstall(connection)
    assert typed_params.installed(connection) == set()
    from experiments.apps import _install_param_triggers

    _install_param_triggers(using="default")
    names = {"added", "changed", "gone"} | (
        {"truncated"} if connection.vendor == "postgresql" else set()
    )
    assert typed_params.installed(connection) == {f"experiments_run_params_{n}" for n in names}


# -- the runs table ---------------------------------------------------------------------------


@pytest.fixture
def mixed(alice):
    """Runs whose ``threads`` are numbers (ties included), texts, true, or missing, on three
    testbeds, created a minute apart (two pairs at the same instant)."""
    beds = [make_testbed(alice, name, "x86_64", "0") for name in ("beta", "alpha", "gamma")]
    values = [2, 16, 4, 16, 1.5, "8", "many", True, None, "absent", 64, 2, -1, 0, "Zeta"]
    now = timezone.now()
    runs = []
    for i, value in enumerate(values):
        params = {"bs": 4096}  # a size in its normal form (bytes)
        if value != "absent":  # ``level`` has no kind (runners.params), ``threads`` is a count
            params.update(threads=value, level=value)
        run = Run.objects.create(
            testbed=beds[i % 3], tool="fio", status="succeeded", params=params, label=f"r{i}"
        )
        runs.append(run)
    for i, run in enumerate(runs):
        # Ties of the creation time too (a bulk request's runs share theirs).
        Run.objects.filter(pk=run.pk).update(created=now - timedelta(minutes=i - i % 2))
    return runs


def walk(user, query: dict, size: int) -> tuple[list[Run], int]:
    """Every run of the view, following its cursors; and the most queries a page took."""
    out, most, after = [], 0, None
    while True:
        q = {**query, **({"after": after} if after else {})}
        with CaptureQueriesContext(connection) as ctx:
            spec, runs = runs_table.TableSpec.parse(q, user)
            rows, after = runs_table.fetch_page(spec, runs, size=size)
        most = max(most, len(ctx.captured_queries))
        out += [row["run"] for row in rows]
        if after is None:
            return out, most


def key_of(run: Run):
    """The parameter sort's order: numbers, then texts (true as "true"), then missing."""
    value = (run.params or {}).get("threads")
    if value is None:
        return (2, 0, "")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return (0, value, "")
    return (1, 0, "true" if value is True else value)


@pytest.mark.parametrize("filtered", [False, True])
@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("size", [1, 2, 3, 50])
def test_a_parameter_sort_orders_numbers_then_texts_then_missing(
    alice, mixed, descending, size, filtered
):
    """Alike through the parameter's index and, filtered to few runs (on PostgreSQL), by
    sorting those runs (runs_table.FEW)."""
    sort = ("-" if descending else "") + "param:threads"
    query = {"cols": "param:threads", "sort": sort}
    if filtered:
        query["status"] = "succeeded"  # every run of ``mixed``
    got, _ = walk(alice, query, size)
    assert len(got) == len(mixed) and len({r.pk for r in got}) == len(mixed)
    runs = {r.pk: r for r in Run.objects.all()}
    got = [runs[r.pk] for r in got]
    # Within a kind, by value in the sort's direction, ties by (created, id) alike.
    for block in (0, 1, 2):
        part = [r for r in got if key_of(r)[0] == block]
        keys = [(key_of(r)[1:], r.created, r.pk) for r in part]
        assert keys == sorted(keys, reverse=descending)
    assert [key_of(r)[0] for r in got] == sorted(key_of(r)[0] for r in got)
    numbers = [r.params["threads"] for r in got if key_of(r)[0] == 0]
    assert numbers[:3] == ([64, 16, 16] if descending else [-1, 0, 1.5])


@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("size", [1, 4, 50])
def test_a_testbed_sort_reaches_every_run_once(alice, mixed, descending, size):
    sort = ("-" if descending else "") + "testbed"
    got, _ = walk(alice, {"cols": "testbed", "sort": sort}, size)
    assert len(got) == len(mixed) and len({r.pk for r in got}) == len(mixed)
    runs = {r.pk: r for r in Run.objects.select_related("testbed")}
    keys = [(runs[r.pk].testbed.name, runs[r.pk].testbed_id, runs[r.pk].created, r.pk) for r in got]
    assert keys == sorted(keys, reverse=descending)
    assert keys[0][0] == ("gamma" if descending else "alpha")


def test_filters_on_a_parameter_match_its_spellings(alice, mixed):
    def found(name, **filters):
        got, _ = walk(alice, {"cols": f"param:{name}", **filters}, 50)
        return sorted(str(Run.objects.get(pk=r.pk).params.get(name)) for r in got)

    # Without a kind: the number 8 and the text "8" alike (a URL cannot say which).
    assert found("level", **{"p.level": "16"}) == ["16", "16"]
    assert found("level", **{"p.level": "8"}) == ["8"]
    assert found("level", **{"p.level": "1.5"}) == ["1.5"]
    assert found("level", **{"p.level": "many"}) == ["many"]
    assert found("level", **{"p.level": "true"}) == ["True"]
    assert found("level", **{"p.level": "NaN"}) == []
    # A count: its spellings; a text that is no count matches the text only.
    assert found("threads", **{"p.threads": "16", "sort": "param:threads"}) == ["16", "16"]
    assert found("threads", **{"p.threads": "many"}) == ["many"]
    assert found("threads", **{"p.threads": "1.5"}) == []
    # A size: 4k, 4096 and 4 KiB alike.
    assert len(found("bs", **{"p.bs": "4k"})) == len(mixed)
    assert len(found("bs", **{"p.bs": "4 KiB", "sort": "-param:level"})) == len(mixed)


def test_a_parameter_sort_and_filter_need_the_same_queries_for_more_runs(alice, mixed):
    tb = mixed[0].testbed
    views = [
        {"cols": "param:threads,metric:write_bw", "sort": "-param:threads"},
        {"cols": "param:threads,metric:write_bw", "sort": "param:threads"},
        {"cols": "param:threads,testbed", "sort": "testbed"},
        {"cols": "param:threads", "p.threads": "16"},
    ]
    before = [walk(alice, v, 2)[1] for v in views]
    for i in range(30):
        Run.objects.create(testbed=tb, tool="fio", params={"threads": i % 5})
    after = [walk(alice, v, 2)[1] for v in views]
    assert before == after


def test_cursors_of_another_view_are_refused(alice_client, mixed):
    def cursor(key):
        return base64.urlsafe_b64encode(json.dumps(key).encode()).decode().rstrip("=")

    bad = [
        ("param:threads", [16, 1]),  # no creation time
        ("param:threads", [True, 1, "2026-01-01T00:00:00+00:00"]),
        ("param:threads", [16, 1, "yesterday"]),
        ("testbed", ["alpha", 1]),
        ("testbed", [3, 1, 1, "2026-01-01T00:00:00+00:00"]),
        ("metric:write_bw", ["x", 1]),
    ]
    for sort, key in bad:
        r = alice_client.get("/runs/table/", {"sort": sort, "after": cursor(key)})
        assert r.status_code == 400, (sort, key)
        assert "after: not a cursor" in r.content.decode()


# -- a parameter filter newest first: read from its typed rows -------------------------------

LONG = "y" * 300


@pytest.fixture
def spelled(alice):
    """Runs whose ``level`` (no kind) and ``direct`` (a boolean) are spelled every way the
    typed rows make alike: the number 16 and the text "16", true and "true", two long texts
    sharing the rows' prefix; on two testbeds, with ties of the creation time."""
    beds = [make_testbed(alice, name, "x86_64", "0") for name in ("one", "two")]
    values = [16, "16", 16.0, True, "true", LONG, LONG + "z", 4, "4", False, "false", 16, "x"]
    now = timezone.now()
    runs = []
    for i, value in enumerate(values * 3):
        run = Run.objects.create(
            testbed=beds[i % 2],
            tool="fio",
            status="succeeded",
            params={"level": value, "direct": value, "copy": i % 3},
            label=f"s{i}",
        )
        runs.append(run)
    for i, run in enumerate(runs):
        Run.objects.filter(pk=run.pk).update(created=now - timedelta(minutes=i - i % 3))
    return runs


@pytest.mark.parametrize("size", [1, 2, 5, 50])
@pytest.mark.parametrize("descending", [True, False])
@pytest.mark.parametrize(
    "filters",
    [
        {"p.level": "16"},  # the number and the text
        {"p.level": "true"},  # true and "true": one row, both match
        {"p.direct": "yes"},  # a boolean: true only, not "true" (the same row)
        {"p.direct": "false"},  # false and "false"
        {"p.level": LONG},  # past the rows' prefix: the comparison decides
        {"p.level": "4", "p.copy": "1"},  # two parameter filters
        {"p.level": "16", "testbed": None},  # and a testbed
        {"p.level": "x"},
        {"p.level": "absent"},
    ],
)
def test_a_parameter_filter_newest_first_reads_its_rows_and_keeps_the_comparison(
    alice, spelled, size, descending, filters
):
    filters = dict(filters)
    conditions = {}
    if "testbed" in filters:
        filters["testbed"] = str(spelled[0].testbed.uuid)
        conditions["testbed"] = spelled[0].testbed
    for key, value in filters.items():
        if key.startswith("p."):
            name = key[2:]
            exact = runs_table._param_equals(name, value).exact
            conditions.setdefault("_q", []).append(exact)
    q = conditions.pop("_q")
    want = []
    for run in Run.objects.filter(*q, **conditions):
        want.append((run.created, run.pk))
    want = [pk for _, pk in sorted(want, reverse=descending)]
    sort = "-created" if descending else "created"
    got, _ = walk(alice, {"cols": "param:level", "sort": sort, **filters}, size)
    assert [r.pk for r in got] == want
    if filters == {"p.direct": "yes"} and connection.vendor == "postgresql":
        # (SQLite's JSON comparison finds the text "true" equal to true)
        assert {Run.objects.get(pk=pk).params["direct"] for pk in want} == {True}
    if filters == {"p.level": "16"}:
        assert len(want) == 12  # 16, "16", 16.0 and 16, three times


def test_which_candidates_the_typed_rows_decide_alone():
    decide = runs_table._rows_decide
    assert decide(["16", 16])
    assert decide(["4k", 4096])
    assert decide(["true", True])  # the row "true" is both, and both are asked for
    assert not decide(["yes", True])  # the row "true" is also the text "true"
    assert not decide(["true"])
    assert not decide(["x" * 256])  # a text the rows hold the first 256 characters of
    assert not decide(["[1, 2]"])  # a list's row
    assert not decide(["9007199254740993", 9007199254740993])  # past a double's integers
    assert decide(["-3.5", -3.5])


def test_default_columns_come_from_the_newest_runs_of_a_parameter_filter(alice, spelled):
    spec, runs = runs_table.TableSpec.parse({"p.level": "16"}, alice)
    keys = [c.key for c in spec.columns]
    assert "param:copy" in keys  # varies among the matching runs
    assert "param:level" in keys  # 16 and "16"


def test_a_parameter_filter_newest_first_takes_the_same_queries_for_more_runs(alice, spelled):
    views = [
        {"cols": "param:level", "p.level": "16"},
        {"cols": "param:level", "p.level": "16", "sort": "created"},
        {"p.level": "16"},  # default columns too
        {"cols": "param:level", "p.level": LONG},
    ]
    before = [walk(alice, v, 2)[1] for v in views]
    tb = spelled[0].testbed
    for i in range(30):
        Run.objects.create(testbed=tb, tool="fio", params={"level": [16, "16", LONG][i % 3]})
    after = [walk(alice, v, 2)[1] for v in views]
    assert before == after


def level_key(run: Run):
    """The parameter sort's order of ``level``: numbers, then texts (true as "true")."""
    value = run.params["level"]
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return (0, value, "")
    return (1, 0, "true" if value is True else value)


@pytest.mark.parametrize("size", [1, 2, 50])
@pytest.mark.parametrize("descending", [True, False])
@pytest.mark.parametrize("value", ["16", "true", LONG, "4", "x", "absent"])
def test_a_parameter_sort_filtered_by_that_parameter_reads_its_values_only(
    alice, spelled, size, descending, value
):
    exact = runs_table._param_equals("level", value).exact
    want = sorted(
        Run.objects.filter(exact),
        key=lambda r: (level_key(r), r.created, r.pk),
        reverse=descending,
    )
    # Numbers before texts in both directions (then the runs without it, here none).
    want = [r for r in want if level_key(r)[0] == 0] + [r for r in want if level_key(r)[0] == 1]
    sort = ("-" if descending else "") + "param:level"
    got, _ = walk(alice, {"cols": "param:level", "sort": sort, "p.level": value}, size)
    assert [r.pk for r in got] == [r.pk for r in want]


@pytest.mark.parametrize("window", [1, 2000])
@pytest.mark.parametrize("size", [1, 3, 50])
@pytest.mark.parametrize("descending", [True, False])
@pytest.mark.parametrize(
    "filters",
    [
        {"p.level": "16"},
        {"p.level": "4", "p.copy": "1"},
        {"p.level": "16", "testbed": None},
        {"p.direct": "false"},
        {"p.level": "absent"},
    ],
)
def test_a_metric_sort_under_parameter_filters_is_the_definitions(
    alice, spelled, monkeypatch, window, size, descending, filters
):
    """Sorted by a metric under parameter filters: the runs among the metric's first values
    (``window``: FIRST_ENTRIES), or, when they are further down (a window of 1), read
    configuration by configuration, best bound first: either way the runs with the metric
    in (value, id) order, ties included, then the others by id, across every page."""
    import random

    from experiments.results import summaries
    from experiments.results.store import replace_metrics

    rng = random.Random(5)
    for i, run in enumerate(spelled):
        if i % 4:  # every fourth run has no write_bw
            value = float(rng.randint(1, 6))  # ties within and across configurations
            replace_metrics(run, [{"name": "write_bw", "value": value, "unit": "B/s"}])
    assert summaries.differences() == []
    monkeypatch.setattr(runs_table, "FIRST_ENTRIES", window)
    filters = dict(filters)
    conditions: dict = {}
    if "testbed" in filters:
        filters["testbed"] = str(spelled[0].testbed.uuid)
        conditions["testbed"] = spelled[0].testbed
    exact = [runs_table._param_equals(k[2:], v).exact for k, v in filters.items() if k[:2] == "p."]
    chosen = Run.objects.filter(*exact, **conditions)
    values = dict(
        Metric.objects.filter(run__in=chosen, name="write_bw", primary=True).values_list(
            "run_id", "value"
        )
    )
    with_metric = sorted(
        ((values[r.pk], r.pk) for r in chosen if r.pk in values), reverse=descending
    )
    without = sorted((r.pk for r in chosen if r.pk not in values), reverse=descending)
    want = [pk for _, pk in with_metric] + without
    sort = ("-" if descending else "") + "metric:write_bw"
    got, _ = walk(alice, {"cols": "param:level,metric:write_bw", "sort": sort, **filters}, size)
    assert [r.pk for r in got] == want


@pytest.mark.parametrize("window", [1, 2000])
@pytest.mark.parametrize("descending", [True, False])
def test_a_metric_sort_under_a_parameter_filter_keeps_to_the_run_filters(
    alice, spelled, monkeypatch, window, descending
):
    """A run-level filter (status) beside a parameter filter, sorted by a metric: read by
    configuration (a window of 1: the window is skipped or does not fill the page) or from
    the metric's first values, the runs the status filter drops are left out, among them
    each configuration's best, whose value is the configuration's bound, and the page is
    the definition's across every page."""
    from experiments.results import summaries
    from experiments.results.store import replace_metrics

    written = {run.pk: float(i % 7) for i, run in enumerate(spelled)}
    for run in spelled:
        replace_metrics(run, [{"name": "write_bw", "value": written[run.pk], "unit": "B/s"}])
    # The best run of every configuration fails: the bounds are its values.
    best: dict[str, tuple[float, int]] = {}
    for pk, key in Run.objects.filter(pk__in=written).values_list("pk", "config_key"):
        best[key] = max(best.get(key, (written[pk], pk)), (written[pk], pk))
    Run.objects.filter(pk__in=[pk for _, pk in best.values()]).update(status="failed")
    assert summaries.differences() == []
    monkeypatch.setattr(runs_table, "FIRST_ENTRIES", window)
    exact = runs_table._param_equals("level", "16").exact
    chosen = Run.objects.filter(exact, status="succeeded")
    values = dict(
        Metric.objects.filter(run__in=chosen, name="write_bw", primary=True).values_list(
            "run_id", "value"
        )
    )
    want = [pk for _, pk in sorted(((values[r.pk], r.pk) for r in chosen), reverse=descending)]
    assert want and len(want) < len(Run.objects.filter(exact))
    sort = ("-" if descending else "") + "metric:write_bw"
    query = {"cols": "metric:write_bw", "sort": sort, "p.level": "16", "status": "succeeded"}
    for size in (1, 3, 50):
        got, _ = walk(alice, query, size)
        assert [r.pk for r in got] == want
