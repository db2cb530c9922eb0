"""Adaptive repetitions: a cell gets runs until its results agree, within bounds.

A matrix with ``max_repetitions`` and ``target_cv`` starts every cell with ``repetitions``
runs (the minimum). Each time runs of the matrix end (the signal ``runs_ended``, which
every path that ends a run sends once the outcome is stored and the nodes are free: the
worker's task, the janitor, a cancel), the cell's primary metric over its succeeded runs
decides (:func:`decide`):

- at least the minimum (and two) values and a coefficient of variation (sample standard
  deviation / |mean|) at most the target: *settled*, nothing is added;
- runs of the cell still planned, queued or running: *measuring*, wait for them;
- fewer succeeded runs than the minimum (some failed or were cancelled): *short*; nothing is
  added for a failure (a tool that fails would only fail again up to the maximum): re-run
  the failed runs and the cell goes on from there;
- fewer runs than the maximum: the next repetition is created and dispatched at once;
- otherwise: *never settled*, flagged on the matrix page and in comparisons.

The maximum bounds the cell's Run rows of any status (failed ones hold their repetition
number, and "re-run failed" sends the same rows again), so no cell ever exceeds it. Two
runs of one cell ending at once on two workers are decided one after the other: the
decision holds the matrix row (select_for_update), and the repetition number is unique per
matrix and cell, so at most one extra run is created for one missing result.

A cell with a cancelled run gets no repetition added (whoever cancelled it wants the cell
to stop; "re-run failed" sends the cancelled runs again, and the cell goes on from there).
One run ended on its worker is decided by :func:`after_run` (one query); many at once
(failed or cancelled by the janitor because their worker died, cancelled before they
started) by :func:`after_ended`: one decision per cell, as if its last run had ended.

Each decision is stored as the cell's :class:`~experiments.models.CellState` (state, n, CV
and a sentence saying why), which the matrix page and the comparison read.
"""

from __future__ import annotations

import logging
import math
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from experiments.execution.dispatch import BrokerUnavailable, dispatch
from experiments.matrices.preview import preview_command
from experiments.models import CellState, Matrix, Metric, Run
from experiments.models.runs import taken_outside_adaptive
from experiments.shared import prepared
from runners import registry
from runners.launch import LaunchError, tool_params
from runners.params import normalise
from runners.tools import get_adapter
from runners.tools.base import ParamError

log = logging.getLogger(__name__)

PENDING = (Run.Status.PLANNED, Run.Status.QUEUED, Run.Status.RUNNING)


def cv_percent(values: list[float]) -> float | None:
    """Sample standard deviation / |mean| in percent; None for fewer than two values or a
    zero mean with spread (all zeros: 0)."""
    if len(values) < 2:
        return None
    mean = sum(values) / len(values)
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))
    if mean == 0:
        return 0.0 if sd == 0 else None
    return 100 * sd / abs(mean)


@dataclass(frozen=True)
class Decision:
    state: str
    add: bool  # create and dispatch the next repetition
    n: int  # succeeded runs
    cv: float | None  # percent
    reason: str


def _pct(value: float | None) -> str:
    return "undefined (mean 0)" if value is None else f"{value:.1f}%"


def decide(
    values: list[float],
    runs: int,
    pending: int,
    minimum: int,
    maximum: int,
    target_cv: float,
    *,
    may_add: bool = True,
) -> Decision:
    """The cell's state from its succeeded runs' ``values``, its Run rows of any status
    (``runs``) and those not finished (``pending``). Pure: no database."""
    n = len(values)
    cv = cv_percent(values)
    target = f"{target_cv:g}%"
    if n >= max(minimum, 2) and cv is not None and cv <= target_cv:
        return Decision(
            CellState.State.SETTLED,
            False,
            n,
            cv,
            f"n = {n}: CV {cv:.1f}% ≤ {target} after {n} runs",
        )
    if pending:
        so_far = f"CV {_pct(cv)} after {n}" if n >= 2 else f"{n} of at least {minimum} done"
        return Decision(
            CellState.State.MEASURING,
            False,
            n,
            cv,
            f"measuring: {so_far}; {pending} more run{'s' if pending > 1 else ''} to come",
        )
    lost = runs - n
    if n < max(minimum, 2):
        return Decision(
            CellState.State.SHORT,
            False,
            n,
            cv,
            f"short: {n} of at least {minimum} runs succeeded ({lost} failed or cancelled; "
            "re-run them to go on)",
        )
    if runs < maximum and may_add:
        return Decision(
            CellState.State.MEASURING,
            True,
            n,
            cv,
            f"measuring: CV {_pct(cv)} > {target} after {n} runs; run {runs + 1} of at most "
            f"{maximum} added",
        )
    if runs < maximum:
        return Decision(
            CellState.State.UNSETTLED,
            False,
            n,
            cv,
            f"stopped unsettled: CV {_pct(cv)} > {target} after {n} runs (a run was cancelled)",
        )
    failed = f" ({lost} failed or cancelled)" if lost else ""
    return Decision(
        CellState.State.UNSETTLED,
        False,
        n,
        cv,
        f"never settled: CV {_pct(cv)} after the maximum {maximum} runs{failed}",
    )


def _judged(tool: str, by_name: dict[str, list[float]]) -> tuple[str, list[float]]:
    """The metric a cell is judged on and its values, from the cell's primary metrics of its
    succeeded runs (name: values): the metric most of the runs have, ties broken by the
    tool's own order of metrics (the one a comparison opens on first: write_bw before
    read_bw), then by name."""
    if not by_name:
        return "", []
    spec = registry.BY_NAME.get(tool)
    preferred = list(spec.metrics) if spec else []
    counts = Counter({name: len(values) for name, values in by_name.items()})
    name = min(
        counts,
        key=lambda m: (-counts[m], preferred.index(m) if m in preferred else len(preferred), m),
    )
    return name, by_name[name]


def after_run(run_id: int) -> Decision | None:
    """Decide the cell of a run that just ended (nothing for a run outside an adaptive
    matrix); store the cell's state and, when needed, create and dispatch its next
    repetition. Returns the decision."""
    if taken_outside_adaptive(run_id):
        # The executor's outcome, just stored by this process, found the run in no adaptive
        # matrix (``store_row``): nothing to decide, nothing to read.
        return None
    # One plain SELECT: it runs after every run of every matrix, and the ORM's compilation
    # of the join cost more than the database spends on it.
    ops = connection.ops
    with prepared.cursor() as cursor:
        cursor.execute(
            f"SELECT r.matrix_id, r.cell_key, r.status, r.tool, m.max_repetitions, "
            f"m.target_cv FROM {ops.quote_name(Run._meta.db_table)} r LEFT JOIN "
            f"{ops.quote_name(Matrix._meta.db_table)} m ON m.id = r.matrix_id WHERE r.id = %s",
            [run_id],
        )
        row = cursor.fetchone()
    if row is None or row[0] is None or not row[1]:
        return None
    matrix_id, cell_key, status, tool, max_repetitions, target_cv = row
    if max_repetitions is None or target_cv is None:
        return None  # not adaptive: nothing to decide (checked again under the matrix lock)
    if status not in Run.TERMINAL:
        return None
    try:
        return _decide_cells(matrix_id, {cell_key: tool}).get(cell_key)
    except BrokerUnavailable as exc:
        # The added run stays queued without a message; the janitor sends it again.
        log.warning("run %s: the next repetition of its cell was not sent: %s", run_id, exc)
        return None


def after_ended(run_ids: Iterable[int]) -> int:
    """Decide the cells of runs that ended without their worker's hook: failed or cancelled
    by the janitor (their worker died), cancelled before they started or while their worker
    was gone (experiments.matrices.expansion.cancel_runs). One decision per cell, from the state of
    all its runs; the number of cells decided. A cell whose runs were cancelled gets no
    run added; one whose last pending run the janitor failed is short, or gets its next
    repetition when enough runs succeeded and they disagree."""
    ids = sorted(set(run_ids))
    cells: dict[int, dict[str, str]] = defaultdict(dict)
    for start in range(0, len(ids), _CHUNK):
        for matrix_id, cell_key, tool in (
            Run.objects.filter(
                pk__in=ids[start : start + _CHUNK],
                matrix__max_repetitions__isnull=False,
                matrix__target_cv__isnull=False,
                status__in=Run.TERMINAL,
            )
            .exclude(cell_key="")
            .order_by()
            .values_list("matrix_id", "cell_key", "tool")
        ):
            cells[matrix_id][cell_key] = tool
    decided = 0
    for matrix_id, tools in sorted(cells.items()):
        try:
            decided += len(_decide_cells(matrix_id, tools))
        except BrokerUnavailable as exc:
            log.warning(
                "matrix %s: the next repetitions of its cells were not sent: %s", matrix_id, exc
            )
    return decided


def on_runs_ended(sender, run_ids, **kwargs) -> None:
    """Receiver of experiments.models.runs.runs_ended (connected in the app's ready), which
    every path that ends runs sends: the task after each run (one run: :func:`after_run`'s
    single query), the janitor and a cancel (many: :func:`after_ended`)."""
    if len(run_ids) == 1:
        after_run(next(iter(run_ids)))
    else:
        after_ended(run_ids)


# Cells per statement when many are decided at once (a whole matrix cancelled).
_CHUNK = 500


def _decide_cells(matrix_id: int, tools: dict[str, str]) -> dict[str, Decision]:
    """Decide the cells ``tools`` (cell key: tool) of an adaptive matrix under its lock:
    store each one's state and create and dispatch the repetitions the decisions add."""
    with transaction.atomic():
        matrix = Matrix.objects.select_for_update().filter(pk=matrix_id).first()
        if matrix is None or not matrix.adaptive:
            return {}
        keys = sorted(tools)
        rows: dict[str, list[tuple[int, str, int]]] = defaultdict(list)
        for start in range(0, len(keys), _CHUNK):
            for pk, key, status, repetition in Run.objects.filter(
                matrix=matrix, cell_key__in=keys[start : start + _CHUNK]
            ).values_list("pk", "cell_key", "status", "repetition"):
                rows[key].append((pk, status, repetition))
        cell_of = {
            pk: key
            for key, cell in rows.items()
            for pk, status, _ in cell
            if status == Run.Status.SUCCEEDED
        }
        values: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
        succeeded = sorted(cell_of)
        for start in range(0, len(succeeded), _CHUNK):
            for pk, name, value in Metric.objects.filter(
                run_id__in=succeeded[start : start + _CHUNK], primary=True
            ).values_list("run_id", "name", "value"):
                values[cell_of[pk]][name].append(value)
        decisions: dict[str, Decision] = {}
        states: dict[str, CellState] = {}
        added: list[int] = []
        for key in keys:
            cell = rows.get(key)
            if not cell:
                continue
            metric, judged = _judged(tools[key], values.get(key, {}))
            decision = decide(
                judged,
                runs=len(cell),
                pending=sum(1 for _, status, _ in cell if status in PENDING),
                minimum=matrix.repetitions,
                maximum=matrix.max_repetitions,
                target_cv=matrix.target_cv,
                may_add=not any(status == Run.Status.CANCELLED for _, status, _ in cell),
            )
            runs = len(cell)
            if decision.add:
                repetition = max((r or 0) for _, _, r in cell) + 1
                pk = _next_repetition(matrix, key, repetition)
                if pk is not None:
                    runs += 1
                    added.append(pk)
            decisions[key] = decision
            states[key] = CellState(
                matrix=matrix,
                cell_key=key,
                state=decision.state,
                n=decision.n,
                runs=runs,
                cv=decision.cv,
                metric=metric,
                reason=decision.reason[:300],
            )
        _store_states(matrix, states)
        if added:
            dispatch(added, revert=False)
    return decisions


def _store_states(matrix: Matrix, states: dict[str, CellState]) -> None:
    """Write the cells' states: the existing rows updated, the others created."""
    fields = ["state", "n", "runs", "cv", "metric", "reason", "updated"]
    now = timezone.now()
    keys = sorted(states)
    existing: dict[str, int] = {}
    for start in range(0, len(keys), _CHUNK):
        existing.update(
            CellState.objects.filter(
                matrix=matrix, cell_key__in=keys[start : start + _CHUNK]
            ).values_list("cell_key", "pk")
        )
    for state in states.values():
        state.updated = now
        state.pk = existing.get(state.cell_key)
    CellState.objects.bulk_update(
        [s for s in states.values() if s.pk is not None], fields, batch_size=_CHUNK
    )
    CellState.objects.bulk_create([s for s in states.values() if s.pk is None], batch_size=_CHUNK)


def _next_repetition(matrix: Matrix, cell_key: str, repetition: int) -> int | None:
    """Create repetition ``repetition`` of the cell as a copy of its first run (same
    command, node and launch), planned; its primary key, or None when it exists already."""
    first = Run.objects.filter(matrix=matrix, cell_key=cell_key).order_by("repetition").first()
    if first is None:
        return None
    # The cell's parameters and launch as planned: a run that ran holds what its output
    # added (experiments.execution.execute records the launch; the parser adds what the tool
    # reported).
    params = normalise(first.launch.get("params", first.params))
    launch = {k: v for k, v in first.launch.items() if k not in ("params", "parse_options")}
    try:
        argv = preview_command(get_adapter(first.tool), launch, tool_params(params)).argv
    except (ParamError, LaunchError) as exc:  # the worker fails the run saying why
        log.warning("run %s: no preview of its next repetition: %s", first.pk, exc)
        argv = []
    label = first.label.rsplit(" #", 1)[0] if " #" in first.label else first.label
    suffix = f" #{repetition}"
    try:
        with transaction.atomic():  # a savepoint: the caller's transaction goes on
            return Run.objects.create(
                owner=matrix.owner,
                matrix=matrix,
                testbed_id=first.testbed_id,
                tuning_set_id=first.tuning_set_id,
                target_id=first.target_id,
                tool=first.tool,
                label=label[: 200 - len(suffix)] + suffix,
                status=Run.Status.PLANNED,
                cell_key=cell_key,
                repetition=repetition,
                params=params,
                argv=argv,
                command=" ".join(argv),
                node_id=first.node_id,
                launch=launch,
                queue=first.queue,
            ).pk
    except IntegrityError:  # the repetition exists (unique per matrix and cell)
        return None


def cell_summary(matrix: Matrix, limit: int) -> dict:
    """The matrix page's view of its cells' states: counts per state, and up to ``limit``
    cells (never settled, short and measuring first) with their label and reason."""
    if not matrix.adaptive:
        return {}
    states = list(matrix.cell_states.all())
    order = {
        CellState.State.UNSETTLED: 0,
        CellState.State.SHORT: 1,
        CellState.State.MEASURING: 2,
        CellState.State.SETTLED: 3,
    }
    states.sort(key=lambda s: (order.get(s.state, 9), s.cell_key))
    shown = states[:limit]
    labels = dict(
        Run.objects.filter(
            matrix=matrix, cell_key__in=[s.cell_key for s in shown], repetition=1
        ).values_list("cell_key", "label")
    )
    prefix = f"{matrix.name}: "
    for state in shown:
        label = labels.get(state.cell_key, state.cell_key[:12]).rsplit(" #", 1)[0]
        state.label = label.removeprefix(prefix)
    return {
        "counts": sorted(Counter(s.get_state_display() for s in states).items()),
        "cells": shown,
        "hidden": len(states) - len(shown),
    }
