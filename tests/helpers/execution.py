"""Matrices to execute in the executor, agent, attempt, holding and telemetry tests."""

from __future__ import annotations

import uuid

from experiments.matrices.expansion import expand
from experiments.models import Matrix, Run


def make_matrix(owner, testbed, tool="fio", params=None, axes=None, **fields):
    """A matrix of ``owner``'s on ``testbed``, expanded into its runs (one repetition, caches
    kept unless ``fields`` say otherwise)."""
    matrix = Matrix.objects.create(
        owner=owner,
        name=f"{tool} test",
        tool=tool,
        fixed_params=params or {},
        axes=axes or [],
        repetitions=fields.pop("repetitions", 1),
        drop_caches=fields.pop("drop_caches", False),
        **fields,
    )
    matrix.testbeds.set([testbed])
    expand(matrix)
    return matrix


def queue(run: Run) -> str:
    """Mark ``run`` queued with a fresh dispatch token, as a dispatch does; the token."""
    token = uuid.uuid4()
    Run.objects.filter(pk=run.pk).update(status=Run.Status.QUEUED, dispatch_token=token)
    return str(token)
