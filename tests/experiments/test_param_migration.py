"""Migration 0023 (issue 25, finding 3) on a copy of the published data: back to 0022, the
studies loaded, their parameters and some own runs' put back as they were spelled before
(8e12 as a float, IOR's '1m', fio's '4k', 'true'), forward again: every parameter in its
normal form, runs of '1m' and 1048576 alike (one configuration key, one summary), and the
stored keys and summaries what a recomputation gives."""

from __future__ import annotations

import json

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from experiments.published import SEEDS
from runners.params import normalise

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("experiments", "0022_runs_that_are_data")]
AFTER = [("experiments", "0023_param_normal_forms")]


def migrate(target=None):
    """To ``target``, or to the latest migrations (what the tests after this one expect)."""
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(target or executor.loader.graph.leaf_nodes())


def later_summary_columns(add: bool) -> None:
    """The columns later migrations add to tables 0022 already has (0024's ``bn_beegfs`` on the
    summaries, 0026's live node of a testbed, …), added to 0022's tables and removed again:
    the published data loads through today's models and summaries module, which use them."""
    from django.apps import apps

    if not add:
        # By SQL: SQLite's schema editor would remake the table from today's model, columns
        # and all. An added column's indexes go first (SQLite drops no indexed column).
        for model, field in reversed(ADDED):
            table = model._meta.db_table
            with connection.cursor() as cursor:
                have = {
                    c.name for c in connection.introspection.get_table_description(cursor, table)
                }
                if field.column not in have:
                    continue
                constraints = connection.introspection.get_constraints(cursor, table)
                quote = connection.ops.quote_name
                for name, info in constraints.items():
                    if (
                        info["columns"] == [field.column]
                        and info["index"]
                        and not info["primary_key"]
                    ):
                        cursor.execute(f"DROP INDEX {quote(name)}")
                cursor.execute(f"ALTER TABLE {quote(table)} DROP COLUMN {quote(field.column)}")
        ADDED.clear()
        return
    tables = set(connection.introspection.table_names())
    for model in apps.get_app_config("experiments").get_models():
        table = model._meta.db_table
        if table not in tables:
            continue
        for field in model._meta.local_concrete_fields:
            # Read again for each field: SQLite adds a foreign key by remaking the table from
            # today's model, with every column.
            with connection.cursor() as cursor:
                have = {
                    c.name for c in connection.introspection.get_table_description(cursor, table)
                }
            if field.column not in have:
                with connection.schema_editor() as editor:
                    editor.add_field(model, field)
                ADDED.append((model, field))


ADDED: list = []


def text(params) -> str:
    return json.dumps(params, sort_keys=True)


def test_params_are_normalised_and_summaries_rebuilt_on_the_published_data(alice):
    from experiments.management.commands.load_published import load_published
    from experiments.models import ConfigSummary, Run, Testbed
    from experiments.results import summaries
    from experiments.results.store import replace_metrics

    migrate(BEFORE)
    later_summary_columns(add=True)
    try:
        load_published()
        # The published runs' parameters as the studies spell them (before this change the
        # loader stored them so: 8e12 for 8 TB), by key.
        spelled = {
            f"{seed.KEY}/run/{data['key']}": data["params"] for seed in SEEDS for data in seed.RUNS
        }
        published = list(Run.objects.filter(published=True))
        assert published
        for run in published:
            Run.objects.filter(pk=run.pk).update(params=spelled[run.published_key])
        # Own runs as the matrices, imports and pushes stored them.
        testbed = Testbed.objects.create(owner=alice, name="own")
        own = {}
        for name, tool, params in (
            ("ior-1m", "ior", {"transfer_size": "1m", "block_size": "4m", "direct": "true"}),
            ("ior-bytes", "ior", {"transfer_size": 1048576, "block_size": 4194304, "direct": True}),
            ("fio-4k", "fio", {"bs": "4k", "runtime": "1m", "numjobs": "4", "direct": 1}),
            ("fio-text", "fio", {"rw": "randread", "ioengine": "libaio"}),
        ):
            run = Run.objects.create(
                owner=alice, testbed=testbed, tool=tool, status="succeeded", label=name
            )
            Run.objects.filter(pk=run.pk).update(params=params)
            run.refresh_from_db()
            replace_metrics(run, [{"name": "write_bw", "value": 1e9, "unit": "B/s"}])
            own[name] = run
        summaries.rebuild()  # the keys of the old spellings, as the old code computed them
        keys = dict(
            Run.objects.filter(pk__in=[r.pk for r in own.values()]).values_list(
                "label", "config_key"
            )
        )
        assert keys["ior-1m"] != keys["ior-bytes"]
        floats = Run.objects.filter(published=True, params__has_key="aggregate_size")
        assert any(type(r.params["aggregate_size"]) is float for r in floats)
    finally:
        later_summary_columns(add=False)
        migrate(AFTER)
        migrate()  # and on: 0024 rebuilds the summaries once its column exists

    for run in Run.objects.all():
        assert text(run.params) == text(normalise(run.params)), run.label
    for run in Run.objects.filter(published=True):
        assert run.params == normalise(spelled[run.published_key])
    assert all(
        type(r.params["aggregate_size"]) is int
        for r in Run.objects.filter(published=True, params__has_key="aggregate_size")
    )
    runs = {r.label: r for r in Run.objects.filter(testbed__name="own")}
    assert runs["ior-1m"].params == {
        "transfer_size": 1048576,
        "block_size": 4194304,
        "direct": True,
    }
    assert runs["fio-4k"].params == {"bs": 4096, "runtime": 60, "numjobs": 4, "direct": True}
    assert runs["fio-text"].params == {"rw": "randread", "ioengine": "libaio"}
    assert runs["ior-1m"].config_key == runs["ior-bytes"].config_key
    summary = ConfigSummary.objects.get(config_key=runs["ior-1m"].config_key, name="write_bw")
    assert summary.n == 2
    assert summaries.differences() == []
    # The published data loads onto the migrated rows without a change.
    assert load_published().stats["updated"] == 0
