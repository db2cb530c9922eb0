"""Adaptive repetitions (experiments/matrices/adaptive.py) and the order of a matrix's runs: the
pure
decision, validation by form/YAML/API, the order of expansion, the hook on the database, the
matrix page and the comparison. tests/test_adaptive_e2e.py runs them with a real worker."""

from __future__ import annotations

import statistics
import threading

import pytest
from django.db import connection
from django.urls import reverse
from django.utils import timezone

from experiments.comparison import ComparisonSpec, compute
from experiments.matrices import adaptive
from experiments.matrices.expansion import cancel_runs, expand, run_order
from experiments.matrices.files import from_yaml, to_yaml
from experiments.matrices.validation import MatrixInvalid, validate_matrix
from experiments.models import CellState, Matrix, Run
from experiments.results.store import replace_metrics

pytestmark = pytest.mark.django_db
SETTLED, MEASURING = CellState.State.SETTLED, CellState.State.MEASURING
UNSETTLED, SHORT = CellState.State.UNSETTLED, CellState.State.SHORT


# --- The decision (pure) --------------------------------------------------------------------


def test_cv_percent_is_the_sample_deviation_over_the_mean():
    values = [100.0, 110.0, 90.0]
    assert adaptive.cv_percent(values) == pytest.approx(
        100 * statistics.stdev(values) / statistics.mean(values)
    )
    assert adaptive.cv_percent([5.0]) is None
    assert adaptive.cv_percent([0.0, 0.0]) == 0.0
    assert adaptive.cv_percent([-1.0, 1.0]) is None


def test_settles_once_the_minimum_agrees():
    d = adaptive.decide([100, 101, 99], runs=3, pending=0, minimum=3, maximum=10, target_cv=3)
    assert (d.state, d.add, d.n) == (SETTLED, False, 3)
    assert d.reason == "n = 3: CV 1.0% ≤ 3% after 3 runs"


def test_waits_for_pending_runs_before_adding():
    d = adaptive.decide([100, 150], runs=3, pending=1, minimum=3, maximum=10, target_cv=3)
    assert (d.state, d.add) == (MEASURING, False)
    assert "1 more run to come" in d.reason
    # Two agreeing values are not enough below the minimum.
    d = adaptive.decide([100, 100], runs=3, pending=1, minimum=3, maximum=10, target_cv=3)
    assert d.state == MEASURING


def test_adds_one_run_while_noisy_and_below_the_maximum():
    d = adaptive.decide([100, 150, 80], runs=3, pending=0, minimum=3, maximum=10, target_cv=3)
    assert (d.state, d.add) == (MEASURING, True)
    assert d.reason.startswith("measuring: CV 32.8% > 3% after 3 runs")
    assert "run 4 of at most 10 added" in d.reason


def test_never_settled_at_the_maximum():
    values = [100, 150, 80, 120, 60, 140]
    d = adaptive.decide(values, runs=6, pending=0, minimum=3, maximum=6, target_cv=3)
    assert (d.state, d.add) == (UNSETTLED, False)
    assert (
        d.reason == f"never settled: CV {adaptive.cv_percent(values):.1f}% after the maximum 6 runs"
    )


def test_a_failure_below_the_minimum_adds_nothing_and_says_so():
    d = adaptive.decide([100, 150], runs=3, pending=0, minimum=3, maximum=10, target_cv=3)
    assert (d.state, d.add) == (SHORT, False)
    assert "1 failed or cancelled" in d.reason


def test_a_cancelled_run_never_adds_one():
    d = adaptive.decide(
        [100, 150, 80], runs=3, pending=0, minimum=3, maximum=10, target_cv=3, may_add=False
    )
    assert (d.state, d.add) == (UNSETTLED, False)
    assert "cancelled" in d.reason


# --- Order ----------------------------------------------------------------------------------


def test_orders_cell_by_cell_interleaved_and_random():
    keys = ["a", "b", "c"]
    assert run_order(keys, 2, "cells") == [
        ("a", 1), ("a", 2), ("b", 1), ("b", 2), ("c", 1), ("c", 2)
    ]  # fmt: skip
    assert run_order(keys, 2, "interleaved") == [
        ("a", 1), ("b", 1), ("c", 1), ("a", 2), ("b", 2), ("c", 2)
    ]  # fmt: skip
    shuffled = run_order(keys * 1, 4, "random", 42)
    assert shuffled == run_order(keys, 4, "random", 42)  # the same seed, the same order
    assert sorted(shuffled) == run_order(keys, 4, "cells")
    assert shuffled != run_order(keys, 4, "cells")
    orders = {tuple(run_order(keys, 4, "random", seed)) for seed in range(10)}
    assert len(orders) > 5
    with pytest.raises(ValueError):
        run_order(keys, 2, "random", None)


@pytest.fixture
def dd_matrix(alice, bench):
    matrix = Matrix.objects.create(
        owner=alice,
        name="dd sweep",
        tool="dd",
        repetitions=2,
        fixed_params={"bs": "1m"},
        axes=[{"param": "count", "values": [1, 2, 3]}],
    )
    matrix.testbeds.set([bench])
    return matrix


def _created_order(matrix) -> list[tuple[int, int]]:
    return [
        (r.params["count"], r.repetition) for r in Run.objects.filter(matrix=matrix).order_by("pk")
    ]


def test_expansion_creates_runs_in_the_matrix_order(dd_matrix):
    Matrix.objects.filter(pk=dd_matrix.pk).update(order="interleaved")
    dd_matrix.refresh_from_db()
    expand(dd_matrix)
    assert _created_order(dd_matrix) == [(1, 1), (2, 1), (3, 1), (1, 2), (2, 2), (3, 2)]


def test_random_order_draws_records_and_reuses_its_seed(dd_matrix, alice, bench):
    Matrix.objects.filter(pk=dd_matrix.pk).update(order="random")
    dd_matrix.refresh_from_db()
    expand(dd_matrix)
    dd_matrix.refresh_from_db()
    seed = dd_matrix.order_seed
    assert seed is not None
    first = _created_order(dd_matrix)
    assert sorted(first) == [(c, r) for c in (1, 2, 3) for r in (1, 2)]
    # Another matrix with the recorded seed (its YAML export) creates the same order.
    copy = from_yaml(to_yaml(dd_matrix).replace("name: dd sweep", "name: dd copy"), alice)
    assert copy.order_seed == seed
    expand(copy)
    assert _created_order(copy) == first


# --- Validation -----------------------------------------------------------------------------


def _definition(bench, **fields):
    return {"name": "m", "tool": "dd", "testbeds": [bench], "fixed_params": {"bs": "1m"}, **fields}


@pytest.mark.parametrize(
    ("fields", "field_name", "message"),
    [
        ({"max_repetitions": 10}, "target_cv", "need both"),
        ({"target_cv": 3}, "max_repetitions", "need both"),
        ({"repetitions": 5, "max_repetitions": 4, "target_cv": 3}, "max_repetitions", "5 to 100"),
        ({"max_repetitions": 101, "target_cv": 3}, "max_repetitions", "to 100"),
        ({"max_repetitions": 10, "target_cv": 0}, "target_cv", "above 0 and below 100"),
        ({"max_repetitions": 10, "target_cv": 100}, "target_cv", "above 0 and below 100"),
        ({"max_repetitions": 10, "target_cv": "3"}, "target_cv", "percentage"),
        ({"repetitions": 1, "max_repetitions": 10, "target_cv": 3}, "repetitions", "at least 2"),
        ({"order": "backwards"}, "order", "cells, interleaved, random"),
        ({"order": "random", "order_seed": -1}, "order_seed", "whole number"),
        ({"order": "random", "order_seed": 2**31}, "order_seed", "whole number"),
    ],
)
def test_validation_of_repetitions_and_order(bench, fields, field_name, message):
    with pytest.raises(MatrixInvalid) as exc:
        validate_matrix(_definition(bench, **fields))
    assert message in " ".join(exc.value.errors[field_name])


def test_the_run_limit_counts_the_maximum(bench, settings):
    settings.MATRIX_MAX_RUNS = 20
    definition = _definition(bench, axes=[{"param": "count", "values": [1, 2, 3, 4]}])
    validate_matrix({**definition, "repetitions": 3})
    with pytest.raises(MatrixInvalid, match="24 runs exceed"):
        validate_matrix({**definition, "repetitions": 3, "max_repetitions": 6, "target_cv": 5})


ADAPTIVE_YAML = """\
name: adaptive dd
tool: dd
testbeds: [bench]
repetitions: {min: 3, max: 10, cv: 2.5}
order: interleaved
params: {bs: 1m, count: 4}
"""


def test_yaml_takes_and_exports_adaptive_repetitions(alice, bench):
    matrix = from_yaml(ADAPTIVE_YAML.replace("[bench]", f"[{bench.name}]"), alice)
    assert (matrix.repetitions, matrix.max_repetitions, matrix.target_cv) == (3, 10, 2.5)
    assert matrix.order == "interleaved" and matrix.adaptive
    text = to_yaml(matrix)
    assert "repetitions:\n  min: 3\n  max: 10\n  cv: 2.5\n" in text
    again = from_yaml(text.replace("adaptive dd", "again"), alice)
    assert (again.repetitions, again.max_repetitions, again.target_cv) == (3, 10, 2.5)
    plain = from_yaml(ADAPTIVE_YAML.replace("{min: 3, max: 10, cv: 2.5}", "4"), alice)
    assert not plain.adaptive and "repetitions: 4\n" in to_yaml(plain)
    with pytest.raises(MatrixInvalid, match="repetitions: a number, or"):
        from_yaml(ADAPTIVE_YAML.replace("cv: 2.5", "cv: 2.5, most: 4"), alice)


def test_form_and_api_take_adaptive_repetitions(alice_client, alice, bench):
    from rest_framework.test import APIClient

    response = alice_client.post(
        reverse("experiments:matrix_new"),
        {
            "name": "form adaptive",
            "tool": "dd",
            "launch_mode": "single",
            "tasks_per_node": 1,
            "testbeds": [bench.pk],
            "repetitions": 3,
            "max_repetitions": 2,
            "target_cv": 3,
            "order": "random",
            "timeout_s": 60,
            "params_text": "bs = 1m\ncount = 2",
        },
    )
    assert response.status_code == 200 and "3 to 100" in response.content.decode()
    api = APIClient()
    api.force_authenticate(alice)
    body = {
        "name": "api adaptive",
        "tool": "dd",
        "testbeds": [str(bench.uuid)],
        "fixed_params": {"bs": "1m", "count": 2},
        "repetitions": 3,
        "max_repetitions": 8,
        "target_cv": 0,
    }
    bad = api.post("/api/matrices/", body, format="json")
    assert bad.status_code == 400 and "target_cv" in bad.json()
    good = api.post("/api/matrices/", {**body, "target_cv": 4.5, "order": "random"}, format="json")
    assert good.status_code == 201, good.content
    assert (good.json()["max_repetitions"], good.json()["target_cv"]) == (8, 4.5)
    assert good.json()["order_seed"] is None


# --- The hook on the database ---------------------------------------------------------------


@pytest.fixture
def adaptive_matrix(alice, bench):
    matrix = Matrix.objects.create(
        owner=alice,
        name="adaptive",
        tool="dd",
        repetitions=3,
        max_repetitions=5,
        target_cv=5,
        fixed_params={"bs": "1m"},
        axes=[{"param": "count", "values": [1, 2]}],
    )
    matrix.testbeds.set([bench])
    expand(matrix)
    return matrix


def _finish(run: Run, value: float | None) -> None:
    """Store an outcome as the executor does (status, then the primary metric)."""
    status = Run.Status.SUCCEEDED if value is not None else Run.Status.FAILED
    Run.objects.filter(pk=run.pk).update(status=status)
    if value is not None:
        replace_metrics(run, [{"name": "write_bw", "value": value, "unit": "B/s"}])


def _cell(matrix, count):
    return list(Run.objects.filter(matrix=matrix, params__count=count).order_by("repetition"))


def test_hook_adds_runs_until_settled_or_the_maximum(
    adaptive_matrix, django_capture_on_commit_callbacks
):
    stable, noisy = _cell(adaptive_matrix, 1), _cell(adaptive_matrix, 2)
    for run, value in zip(stable, (100, 101, 99), strict=True):
        _finish(run, value)
        adaptive.after_run(run.pk)
    state = CellState.objects.get(cell_key=stable[0].cell_key)
    assert (state.state, state.n, state.runs) == (SETTLED, 3, 3)
    assert state.reason == "n = 3: CV 1.0% ≤ 5% after 3 runs" and state.metric == "write_bw"

    # A run that ran holds what its output added to its parameters; the launch keeps the
    # cell's own (experiments.execution.execute), which the next repetition takes.
    planned = noisy[0].params
    Run.objects.filter(pk=noisy[0].pk).update(
        params={**planned, "threads": 1},
        launch={**noisy[0].launch, "params": planned, "parse_options": {}},
    )
    values = iter([100, 200, 50, 170, 30])
    with django_capture_on_commit_callbacks(execute=False) as sent:
        for run in noisy:
            _finish(run, next(values))
            adaptive.after_run(run.pk)
        for repetition in (4, 5):
            added = Run.objects.get(matrix=adaptive_matrix, params__count=2, repetition=repetition)
            assert added.status == Run.Status.QUEUED and added.argv == noisy[0].argv
            assert added.params == planned and added.launch == noisy[0].launch
            assert added.label.endswith(f"count=2 #{repetition}")
            _finish(added, next(values))
            adaptive.after_run(added.pk)
    assert len(sent) == 2  # one dispatch per added run
    state = CellState.objects.get(cell_key=noisy[0].cell_key)
    assert (state.state, state.n, state.runs) == (UNSETTLED, 5, 5)
    assert (
        state.reason.startswith("never settled: CV ") and "after the maximum 5 runs" in state.reason
    )
    assert Run.objects.filter(matrix=adaptive_matrix, params__count=2).count() == 5

    page = adaptive_matrix.get_absolute_url()
    from django.test import Client

    client = Client()
    client.force_login(adaptive_matrix.owner)
    text = client.get(page).content.decode()
    assert "3–5 per cell, until the coefficient of variation" in text
    assert "n = 3: CV 1.0% ≤ 5% after 3 runs" in text
    assert '<tr class="cell-unsettled">' in text and "never settled: CV" in text
    assert "<strong>6–10</strong> runs" in text  # the preview: 2 cells × 3–5


def test_failed_run_leaves_the_cell_short(adaptive_matrix):
    runs = _cell(adaptive_matrix, 1)
    for run, value in zip(runs, (100, None, 300), strict=True):
        _finish(run, value)
        adaptive.after_run(run.pk)
    state = CellState.objects.get(cell_key=runs[0].cell_key)
    assert state.state == SHORT and "re-run them" in state.reason
    assert Run.objects.filter(matrix=adaptive_matrix, params__count=1).count() == 3


def test_fixed_matrices_and_single_runs_are_left_alone(fio_matrix_fixed):
    run = fio_matrix_fixed.runs.first()
    _finish(run, 100)
    assert adaptive.after_run(run.pk) is None
    assert not CellState.objects.exists()


@pytest.fixture
def fio_matrix_fixed(alice, bench):
    matrix = Matrix.objects.create(
        owner=alice, name="fixed", tool="dd", repetitions=2, fixed_params={"bs": "1m"}
    )
    matrix.testbeds.set([bench])
    expand(matrix)
    return matrix


@pytest.mark.django_db(transaction=True)
def test_two_runs_ending_at_once_add_one_run(adaptive_matrix):
    """Two workers deciding the same cell at the same moment: the matrix row serialises them,
    so one extra run is created, not two (PostgreSQL; SQLite serialises writers anyway)."""
    runs = _cell(adaptive_matrix, 2)
    _finish(runs[0], 100)
    _finish(runs[1], 200)
    _finish(runs[2], 50)
    barrier = threading.Barrier(2)
    errors = []

    def decide(pk):
        try:
            barrier.wait(5)
            adaptive.after_run(pk)
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=decide, args=(r.pk,)) for r in runs[1:]]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not [e for e in errors if "locked" not in str(e)], errors
    assert Run.objects.filter(matrix=adaptive_matrix, params__count=2).count() == 4


# --- The comparison -------------------------------------------------------------------------


def test_comparison_says_why_n_and_flags_unsettled_points(adaptive_matrix):
    for count, values in ((1, (100, 101, 99)), (2, (100, 200, 50))):
        for run, value in zip(_cell(adaptive_matrix, count), values, strict=True):
            _finish(run, value)
    CellState.objects.create(
        matrix=adaptive_matrix,
        cell_key=_cell(adaptive_matrix, 1)[0].cell_key,
        state=SETTLED,
        n=3,
        runs=3,
        cv=1.0,
        reason="n = 3: CV 1.0% ≤ 5% after 3 runs",
    )
    CellState.objects.create(
        matrix=adaptive_matrix,
        cell_key=_cell(adaptive_matrix, 2)[0].cell_key,
        state=UNSETTLED,
        n=3,
        runs=5,
        cv=61.0,
        reason="never settled: CV 61.0% after the maximum 5 runs",
    )
    spec = ComparisonSpec.from_query(f"metric=write_bw&x=param:count&matrix={adaptive_matrix.uuid}")
    result = compute(spec)
    points = {p.x: p for p in result.points}
    assert points["1"].why_n == "adaptive: n = 3: CV 1.0% ≤ 5% after 3 runs"
    assert not any("never settled" in f for f in points["1"].flags)
    assert points["2"].why_n.startswith("adaptive: never settled")
    assert "never settled: CV 61.0% after the maximum 5 runs" in points["2"].flags


def test_a_cell_with_a_cancelled_run_gets_no_more(adaptive_matrix):
    runs = _cell(adaptive_matrix, 2)
    for run, value in zip(runs[:2], (100, 200), strict=True):
        _finish(run, value)
    Run.objects.filter(pk=runs[2].pk).update(status=Run.Status.CANCELLED)
    decision = adaptive.after_run(runs[2].pk)
    assert (decision.state, decision.add) == (SHORT, False)
    assert Run.objects.filter(matrix=adaptive_matrix, params__count=2).count() == 3


# --- Runs that end without their worker's hook ------------------------------------------------


def test_the_janitor_decides_the_cell_of_a_run_it_fails_for_good(
    adaptive_matrix, settings, django_capture_on_commit_callbacks
):
    """A noisy cell's added fourth run dies with its worker on its last attempt: the janitor
    fails it and decides the cell, which gets its fifth (it would otherwise have waited as
    'measuring: 1 more run to come' for ever)."""
    from experiments.execution.dispatch import janitor

    runs = _cell(adaptive_matrix, 2)
    with django_capture_on_commit_callbacks(execute=False):
        for run, value in zip(runs, (100, 200, 50), strict=True):
            _finish(run, value)
            adaptive.after_run(run.pk)
    fourth = Run.objects.get(matrix=adaptive_matrix, params__count=2, repetition=4)
    assert CellState.objects.get(cell_key=runs[0].cell_key).runs == 4
    Run.objects.filter(pk=fourth.pk).update(
        status=Run.Status.RUNNING,
        heartbeat_at=timezone.now() - timezone.timedelta(hours=1),
        attempts=settings.RUN_MAX_ATTEMPTS,
        worker="gone@node",
    )
    with django_capture_on_commit_callbacks(execute=False) as sent:
        counts = janitor(stale_seconds=60)
    assert counts["failed"] == 1
    state = CellState.objects.get(cell_key=runs[0].cell_key)
    assert (state.state, state.n, state.runs) == (MEASURING, 3, 5), state.reason
    assert "run 5 of at most 5 added" in state.reason
    fifth = Run.objects.get(matrix=adaptive_matrix, params__count=2, repetition=5)
    assert fifth.status == Run.Status.QUEUED and len(sent) == 1


def test_cancelling_queued_runs_decides_their_cells(adaptive_matrix):
    """Cancelling a matrix whose cells still had queued runs: each cell's state says it is
    short of runs, none stays 'measuring' and none gets a run added."""
    stable, noisy = _cell(adaptive_matrix, 1), _cell(adaptive_matrix, 2)
    pairs = [(stable[0], 100), (stable[1], 101), (noisy[0], 100), (noisy[1], 200)]
    for run, value in pairs:
        _finish(run, value)
        adaptive.after_run(run.pk)
    waiting = CellState.objects.filter(matrix=adaptive_matrix)
    assert {s.state for s in waiting} == {MEASURING}
    Run.objects.filter(pk__in=[stable[2].pk, noisy[2].pk]).update(status=Run.Status.QUEUED)
    counts = cancel_runs(adaptive_matrix.runs.all())
    assert counts == {"cancelled": 2, "stopping": 0}
    states = {s.cell_key: s for s in CellState.objects.filter(matrix=adaptive_matrix)}
    for cell in (stable, noisy):
        state = states[cell[0].cell_key]
        assert (state.state, state.n, state.runs) == (SHORT, 2, 3), state.reason
        assert "1 failed or cancelled; re-run them" in state.reason
    assert Run.objects.filter(matrix=adaptive_matrix).count() == 6
    # Deciding the cells again changes nothing.
    assert adaptive.after_ended([stable[2].pk, noisy[2].pk]) == 2
    assert CellState.objects.filter(matrix=adaptive_matrix).count() == 2
    assert {s.reason for s in CellState.objects.all()} == {s.reason for s in states.values()}
