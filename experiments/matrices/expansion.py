"""A matrix's runs: expanding the matrix into them (idempotently, in the matrix's order),
sending them (launch, re-run the failed ones, resume), cancelling them, deleting the matrix,
and its progress."""

from __future__ import annotations

import random
import secrets
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Count, Max, Q
from django.utils import timezone

from experiments.execution.dispatch import BrokerUnavailable, dispatch
from experiments.matrices.axes import MatrixError
from experiments.matrices.launching import check_nodes
from experiments.matrices.preview import plan
from experiments.models import Matrix, Run, RunOrder
from experiments.models.matrices import MAX_ORDER_SEED
from experiments.models.runs import runs_ended
from runners.launch import queue_for
from runners.params import normalise


def run_order(
    keys: list[str], repetitions: int, order: str, seed: int | None = None
) -> list[tuple[str, int]]:
    """The (cell key, repetition) pairs in the order their runs are created and so sent:
    cell by cell (every repetition of the first cell, then of the next), interleaved (every
    cell's first repetition, then every cell's second, …) or shuffled by ``seed`` (the same
    seed and cells give the same order)."""
    if order == RunOrder.INTERLEAVED:
        return [(key, r) for r in range(1, repetitions + 1) for key in keys]
    pairs = [(key, r) for key in keys for r in range(1, repetitions + 1)]
    if order == RunOrder.RANDOM:
        if seed is None:
            raise ValueError("a random order needs a seed")
        random.Random(seed).shuffle(pairs)
    return pairs


def order_seed(matrix: Matrix) -> int | None:
    """The matrix's seed of a random order, drawn and stored the first time it is needed
    (shown on the matrix page and exported, so the order can be had again)."""
    if matrix.order != RunOrder.RANDOM or matrix.order_seed is not None:
        return matrix.order_seed
    Matrix.objects.filter(pk=matrix.pk, order_seed__isnull=True).update(
        order_seed=secrets.randbelow(MAX_ORDER_SEED + 1)
    )
    matrix.order_seed = Matrix.objects.values_list("order_seed", flat=True).get(pk=matrix.pk)
    return matrix.order_seed


def expand(matrix: Matrix, offset: int = 0) -> dict[str, int]:
    """Create the planned runs of every non-excluded cell × repetition that does not exist
    yet, in the matrix's order (their primary keys are that order, which dispatch and the
    nodes' holding follow). An adaptive matrix starts with its minimum;
    experiments.matrices.adaptive
    adds the others one by one. Idempotent: a second call creates nothing. Raises
    MatrixError (nothing created) when any cell's parameters are invalid."""
    result = plan(matrix)
    if result.errors:
        first = result.errors[0]
        more = f" (and {len(result.errors) - 1} more cells)" if len(result.errors) > 1 else ""
        raise MatrixError("params", f"{first.cell.label}: {first.error}{more}")
    existing = set(Run.objects.filter(matrix=matrix).values_list("cell_key", "repetition"))
    items = {item.cell.key: item for item in result.active}
    new_runs = []
    pairs = run_order(list(items), matrix.repetitions, matrix.order, order_seed(matrix))
    for key, repetition in pairs:
        repetition += offset
        if (key, repetition) in existing:
            continue
        item = items[key]
        cell = item.cell
        new_runs.append(
            Run(
                owner=matrix.owner,
                matrix=matrix,
                testbed=cell.testbed,
                tuning_set=cell.tuning_set,
                target=cell.target,
                tool=matrix.tool,
                label=f"{matrix.name}: {cell.label} #{repetition}"[:200],
                status=Run.Status.PLANNED,
                cell_key=cell.key,
                repetition=repetition,
                # Normal forms (runners.params): the matrix keeps what was typed.
                params=normalise(cell.params),
                argv=item.argv,
                command=" ".join(item.argv),
                node=item.node,
                launch=item.launch,
                queue=queue_for(item.launcher),
            )
        )
    with transaction.atomic():
        Run.objects.bulk_create(new_runs, batch_size=500, ignore_conflicts=True)
    return {
        "created": len(new_runs),
        "existing": len(existing),
        "excluded": result.excluded * matrix.repetitions,
    }


def launch(matrix: Matrix) -> dict[str, int]:
    """Expand, then queue every planned run."""
    check_nodes(matrix)
    counts = expand(matrix)
    planned = list(matrix.runs.filter(status=Run.Status.PLANNED).values_list("pk", flat=True))
    counts["queued"] = dispatch(planned)
    if matrix.launched_at is None:
        Matrix.objects.filter(pk=matrix.pk).update(launched_at=timezone.now())
    return counts


# Run.repetition is a PositiveSmallIntegerField.
MAX_REPETITION = 32767


def launch_again(matrix: Matrix) -> dict[str, int]:
    """A new launch of the matrix's cells (a scheduled firing): every cell's repetitions
    once more, numbered after the matrix's last repetition, and queued. The counts with
    ``first`` and ``last``, the repetitions created. Raises MatrixError (a node the runs may
    not use, an invalid cell, no repetition numbers left) or BrokerUnavailable: the runs it
    created and could not send are deleted then, so nothing of the firing stays planned."""
    check_nodes(matrix)
    with transaction.atomic():
        # One firing at a time per matrix: the second waits and numbers after the first.
        Matrix.objects.select_for_update().filter(pk=matrix.pk).first()
        offset = matrix.runs.aggregate(last=Max("repetition"))["last"] or 0
        if offset + matrix.repetitions > MAX_REPETITION:
            raise MatrixError(
                "repetitions",
                f"the matrix has used its {MAX_REPETITION} repetition numbers: copy it to go on",
            )
        counts = expand(matrix, offset=offset)
    first, last = offset + 1, offset + matrix.repetitions
    created = matrix.runs.filter(
        status=Run.Status.PLANNED, repetition__gte=first, repetition__lte=last
    )
    try:
        counts["queued"] = dispatch(list(created.values_list("pk", flat=True)))
    except BrokerUnavailable:
        created.delete()
        raise
    if matrix.launched_at is None:
        Matrix.objects.filter(pk=matrix.pk).update(launched_at=timezone.now())
    counts.update(first=first, last=last)
    return counts


def rerun_runs(matrix: Matrix):
    """The runs "Re-run failed" sends again: the failed and cancelled ones."""
    return matrix.runs.filter(status__in=[Run.Status.FAILED, Run.Status.CANCELLED])


def resume_runs(matrix: Matrix):
    """The runs "Resume" sends again: the planned and queued ones."""
    return matrix.runs.filter(status__in=[Run.Status.PLANNED, Run.Status.QUEUED])


def rerun_failed(matrix: Matrix) -> int:
    """Queue again only the failed and cancelled runs (their old output moves to history)."""
    ids = list(rerun_runs(matrix).values_list("pk", flat=True))
    check_nodes(matrix, rerun_runs(matrix))
    return dispatch(ids)


def resume(matrix: Matrix) -> int:
    """After a restart of web, worker or broker: send planned and queued runs again. Stale
    messages still in the broker carry old tokens and do nothing."""
    ids = list(resume_runs(matrix).values_list("pk", flat=True))
    check_nodes(matrix, resume_runs(matrix))
    return dispatch(ids)


def cancel_runs(runs) -> dict[str, int]:
    """Cancel queued runs at once; ask running ones to stop (their worker kills the process
    group within a second or two). A running run whose worker stopped sending heartbeats
    (killed, or its node down) is cancelled at once too: no worker is left to do it, and
    the janitor never sends a run with a cancel request again. The adaptive cells of the
    runs cancelled at once are decided (experiments.matrices.adaptive.after_ended)."""
    now = timezone.now()
    stale = now - timezone.timedelta(seconds=settings.RUN_STALE_SECONDS)
    not_started = Q(status__in=[Run.Status.PLANNED, Run.Status.QUEUED])
    orphan = Q(status=Run.Status.RUNNING) & (
        Q(heartbeat_at__lt=stale) | Q(heartbeat_at__isnull=True)
    )
    with transaction.atomic():
        # Their adaptive cells are decided below (a worker's hook decides the others').
        ended = list(runs.filter(not_started | orphan).values_list("pk", flat=True))
        queued = runs.filter(not_started).update(
            status=Run.Status.CANCELLED,
            finished_at=now,
            error="cancelled before it started",
            dispatch_token=None,
            updated=now,
        )
        orphaned = runs.filter(orphan).update(
            status=Run.Status.CANCELLED,
            cancel_requested=True,
            finished_at=now,
            error=(
                "cancelled while its worker was gone (no heartbeat for more than "
                f"{settings.RUN_STALE_SECONDS} s); it is not run again"
            ),
            dispatch_token=None,
            updated=now,
        )
        running = runs.filter(status=Run.Status.RUNNING).update(cancel_requested=True, updated=now)
    runs_ended.send(sender=Run, run_ids=ended)
    return {"cancelled": queued + orphaned, "stopping": running}


class MatrixBusy(RuntimeError):
    """A matrix with queued or running runs cannot be deleted: cancel them first."""

    def __init__(self, active: int):
        self.active = active
        super().__init__(
            f"{active} runs of this matrix are queued or running: cancel them first, then "
            "delete the matrix once they have stopped."
        )


def delete_matrix(matrix: Matrix) -> None:
    """Delete a matrix and its runs, or raise MatrixBusy while any run is queued or running
    (its worker would go on writing to the disks and then to rows that no longer exist).
    The runs are locked while checking, so no dispatch or claim slips in between."""
    with transaction.atomic():
        statuses = list(
            Run.objects.select_for_update().filter(matrix=matrix).values_list("status", flat=True)
        )
        active = sum(1 for s in statuses if s in (Run.Status.QUEUED, Run.Status.RUNNING))
        if active:
            raise MatrixBusy(active)
        matrix.delete()


def progress(matrix: Matrix) -> dict[str, Any]:
    """Counts by status (one query) and the share done."""
    counts = dict(matrix.runs.values_list("status").annotate(n=Count("id")).order_by())
    total = sum(counts.values())
    finished = sum(n for status, n in counts.items() if status in Run.TERMINAL)
    return {
        "total": total,
        "counts": counts,
        "finished": finished,
        "percent": round(100 * finished / total) if total else 0,
        "active": bool(counts.get(Run.Status.QUEUED) or counts.get(Run.Status.RUNNING)),
    }
