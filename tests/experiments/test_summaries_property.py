"""Property (issue 17): whatever sequence of stores (one run, a bulk-ingested batch, a run
repeating an existing configuration: appends, merged into the stored rows), reparses, metric
edits, verdict refreshes, configuration changes, deletes (a run, a matrix, a target), batches
mixing an append with a recomputation, and settles of pending medians the runs go through,
the configuration summaries equal a recomputation from the runs
(experiments.results.summaries.differences, what ``rebuild_summaries --check`` runs: a median is
either pending, NULL, or exact), and once settled every median is exact. The suite runs it on
PostgreSQL and, without DATABASE_URL, on SQLite."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.db import transaction
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from experiments.models import ConfigSummary, Matrix, Metric, Run, Target, TuningSet
from experiments.results import summaries
from experiments.results.ingest import ingest
from experiments.results.store import replace_metrics
from tests.helpers.comparison import add_alike, make_testbed

# Few distinct values: repetitions tie, configurations recur.
VALUES = st.sampled_from([1e9, 1.5e9, 2e9, 2e9, 3.25e9, 0.5])
PARAMS = [{}, {"threads": 4}, {"threads": 4.0, "bs": "1m"}, {"threads": 16, "nodes": 2}]
NAMES = ["write_bw", "read_bw"]

store = st.fixed_dictionaries(
    {
        "op": st.just("store"),
        "params": st.integers(0, len(PARAMS) - 1),
        "tool": st.sampled_from(["fio", "ior"]),
        "matrix": st.sampled_from([None, 0, 1]),
        "target": st.booleans(),
        "tuning": st.booleans(),
        "published": st.booleans(),
        "values": st.lists(VALUES, min_size=1, max_size=2),
        "approx": st.booleans(),
        "late": st.booleans(),
    }
)
bulk = st.fixed_dictionaries(
    {
        "op": st.just("ingest"),
        "runs": st.lists(
            st.tuples(
                st.integers(0, len(PARAMS) - 1),
                VALUES,
                st.one_of(st.none(), VALUES),  # read_bw, or none
                st.booleans(),  # write_bw approximate
            ),
            min_size=1,
            max_size=4,
        ),
    }
)
pick = st.integers(0, 50)
operation = st.one_of(
    store,
    store,
    bulk,
    st.fixed_dictionaries({"op": st.just("reparse"), "run": pick, "value": VALUES}),
    st.fixed_dictionaries({"op": st.just("metric"), "run": pick, "value": VALUES}),
    st.fixed_dictionaries(
        {
            "op": st.just("verdict"),
            "run": pick,
            "kind": st.sampled_from(["disk", "cpu", "network", "none", "unknown", ""]),
            "collapsed": st.booleans(),
            "steady": st.sampled_from([None, 1e9, 2e9]),
        }
    ),
    st.fixed_dictionaries(
        {"op": st.just("params"), "run": pick, "params": st.integers(0, len(PARAMS) - 1)}
    ),
    st.fixed_dictionaries({"op": st.just("repeat"), "run": pick, "value": VALUES}),
    st.fixed_dictionaries({"op": st.just("repeat"), "run": pick, "value": VALUES}),
    st.fixed_dictionaries({"op": st.just("mixed"), "run": pick, "other": pick, "value": VALUES}),
    st.fixed_dictionaries(
        {"op": st.just("settle"), "limit": st.sampled_from([None, 1, 2]), "values": pick}
    ),
    st.fixed_dictionaries({"op": st.just("delete"), "run": pick}),
    st.fixed_dictionaries({"op": st.just("delete matrix"), "matrix": st.integers(0, 1)}),
    st.fixed_dictionaries({"op": st.just("delete target")}),
)


def _repeat(run: Run, value: float) -> None:
    copy = add_alike(run, "imported")
    replace_metrics(
        copy,
        [
            {"name": "write_bw", "value": value, "unit": "B/s"},
            {"name": "read_bw", "value": value * 2, "unit": "B/s", "extra": {"approx": True}},
        ],
    )


def _apply(step: dict, lab: dict) -> None:
    runs = list(Run.objects.order_by("pk"))
    run = runs[step["run"] % len(runs)] if runs and "run" in step else None
    op = step["op"]
    if op == "store":
        matrix = lab["matrices"][step["matrix"]] if step["matrix"] is not None else None
        if matrix is not None and not Matrix.objects.filter(pk=matrix.pk).exists():
            matrix = None
        target = Target.objects.filter(testbed=lab["testbed"]).first() if step["target"] else None
        new = Run.objects.create(
            testbed=lab["testbed"],
            tool=step["tool"],
            status="imported",
            params=PARAMS[step["params"]],
            matrix=matrix,
            target=target,
            published=step["published"],
            source="A study" if step["published"] else "",
        )
        if step["tuning"]:  # changed after it was created: the instance's save
            new.tuning_set = lab["tuning"]
            new.save()
        rows = [
            {"name": NAMES[i], "value": v, "unit": "B/s", "extra": {"approx": step["approx"]}}
            for i, v in enumerate(step["values"])
        ]
        rows.append({"name": "write_bw", "value": 7.0, "unit": "B/s", "iteration": 1})
        replace_metrics(new, rows)
        if step["late"]:  # an instance created, given metrics, then changed and saved
            new.tuning_set = None if step["tuning"] else lab["tuning"]
            new.save()
    elif op == "ingest":
        # (The bulk ingest stores runs without verdict or publication: those come later.)
        items = [
            {
                "testbed": lab["testbed"].name,
                "tool": "fio",
                "params": PARAMS[p],
                "metrics": [
                    {"name": "write_bw", "value": v, "unit": "B/s", "extra": {"approx": approx}},
                    {"name": "write_bw", "value": 7.0, "unit": "B/s", "iteration": 1},
                    *(
                        [
                            {"name": "read_bw", "value": r, "unit": "B/s", "stat": "max"},
                            {"name": "read_bw", "value": r / 2, "unit": "B/s"},
                        ]
                        if r is not None
                        else []
                    ),
                ],
            }
            for p, v, r, approx in step["runs"]
        ]
        assert {r["status"] for r in ingest(items, lab["owner"])} == {"created"}
    elif op == "settle":
        summaries.settle(limit=step["limit"], values=step["values"])
    elif run is None:
        return
    elif op == "repeat":  # a new run of an existing run's configuration: an append
        _repeat(run, step["value"])
    elif op == "mixed":  # one batch: a new run appended, another's metrics recomputed
        other = runs[step["other"] % len(runs)]
        with transaction.atomic(), summaries.batch():
            _repeat(run, step["value"])
            replace_metrics(other, [{"name": "read_bw", "value": step["value"], "unit": "B/s"}])
    elif op == "reparse":
        replace_metrics(run, [{"name": "write_bw", "value": step["value"], "unit": "B/s"}])
    elif op == "metric":
        Metric.objects.filter(run=run, primary=True).update(value=step["value"])
    elif op == "verdict":
        # What experiments.results.telemetry.refresh_verdict writes.
        Run.objects.filter(pk=run.pk).update(
            bottleneck=step["kind"],
            collapsed=step["collapsed"],
            write_steady=step["steady"],
            write_whole=None if step["steady"] is None else step["steady"] * 1.1,
        )
    elif op == "params":
        run.params = PARAMS[step["params"]]
        run.save()
    elif op == "delete":
        run.delete()
    elif op == "delete matrix":
        Matrix.objects.filter(pk=lab["matrices"][step["matrix"]].pk).delete()
    elif op == "delete target":
        target = Target.objects.filter(testbed=lab["testbed"]).first()
        if target is not None:
            target.delete()


@pytest.mark.django_db
@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(steps=st.lists(operation, min_size=1, max_size=12))
def test_summaries_equal_a_recomputation(alice, steps):
    with transaction.atomic():
        lab = {
            "owner": alice,
            "testbed": make_testbed(alice, "lab", "x86_64", "0"),
            "tuning": TuningSet.objects.create(owner=alice, name="tuned"),
        }
        lab["matrices"] = [
            Matrix.objects.create(owner=alice, name=f"m{i}", tool="fio") for i in range(2)
        ]
        for step in steps:
            _apply(step, lab)
        assert summaries.differences(limit=0) == []
        # And the rows hold exactly what the runs give: n per metric equals the primary rows.
        for name in NAMES:
            stored = sum(ConfigSummary.objects.filter(name=name).values_list("n", flat=True))
            assert stored == Metric.objects.filter(name=name, primary=True).count()
        # Settled, every median is exact (differences compares every non-NULL one).
        summaries.settle()
        assert not ConfigSummary.objects.filter(median__isnull=True).exists()
        assert summaries.differences(limit=0) == []
        transaction.set_rollback(True)


@pytest.mark.django_db
def test_rebuild_command_checks_and_repairs(alice):
    lab = make_testbed(alice, "lab", "x86_64", "0")
    run = Run.objects.create(testbed=lab, tool="fio", status="imported", params={"threads": 4})
    replace_metrics(run, [{"name": "write_bw", "value": 2e9, "unit": "B/s"}])
    call_command("rebuild_summaries", "--check")
    # A change behind the ORM's back (raw SQL) is found, and the rebuild repairs it.
    ConfigSummary.objects.filter(config_key=Run.objects.get().config_key).update(n=5)
    with pytest.raises(Exception, match="1 differences"):
        call_command("rebuild_summaries", "--check")
    call_command("rebuild_summaries")
    call_command("rebuild_summaries", "--check")
    assert ConfigSummary.objects.get().n == 1
