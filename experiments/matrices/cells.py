"""Cells: every combination of a matrix's axes × testbeds × tuning sets, each repetition of
which is a :class:`~experiments.models.Run`. Cells are keyed by a hash of what defines them,
so expanding the same matrix twice creates nothing new, and runs keep their identity when the
matrix is launched again (re-run failed cells, resume). Exclusion rules mark cells here."""

from __future__ import annotations

import hashlib
import itertools
import json
import math
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db.models import Prefetch

from experiments.matrices.axes import (
    TARGET_AXIS,
    MatrixError,
    axis_values,
    check_cell_count,
    normalise_axes,
)
from experiments.matrices.rules import compile_rules, rule_identifier, rule_names, testbed_facts
from experiments.models import Matrix, Target, Testbed, TestbedNode, TuningSet
from runners.launch import tool_params


@dataclass
class Cell:
    testbed: Testbed
    tuning_set: TuningSet | None
    target: Target | None
    params: dict[str, Any]  # fixed parameters overlaid with this cell's axis values
    key: str
    excluded_by: str | None = None
    axis_names: tuple[str, ...] = ()

    @property
    def tool_params(self) -> dict[str, Any]:
        """The cell's parameters without the launch's (target, nodes, tuning axes, ...)."""
        return tool_params(self.params)

    @property
    def label(self) -> str:
        axes = ", ".join(f"{k}={v}" for k, v in self.params.items() if k in self.axis_names)
        return axes or "all fixed"


def cell_key(
    testbed: Testbed, tuning_set: TuningSet | None, target: Target | None, params: dict[str, Any]
) -> str:
    """A stable hash of what defines a cell (not of the matrix, so equal cells of two
    matrices can be compared)."""
    payload = json.dumps(
        {
            "testbed": str(testbed.uuid),
            "tuning": str(tuning_set.uuid) if tuning_set else None,
            "target": str(target.uuid) if target else None,
            "params": params,
        },
        sort_keys=True,
        default=str,
    )
    return hashlib.sha256(payload.encode()).hexdigest()[:32]


def cells(
    matrix: Matrix,
    testbeds: list[Testbed] | None = None,
    tuning_sets: list[TuningSet] | None = None,
) -> list[Cell]:
    """Every cell of the matrix in a stable order, excluded ones marked. ``testbeds`` and
    ``tuning_sets`` stand for the matrix's own when it is not saved yet (the check on save,
    :func:`cell_problems`)."""
    axes = normalise_axes(matrix.axes)
    if not isinstance(matrix.fixed_params, dict):
        raise MatrixError("params", "must be a mapping of parameter to value")
    if testbeds is None:
        testbed_rows = matrix.testbeds.all()
    else:
        testbed_rows = Testbed.objects.filter(pk__in=[t.pk for t in testbeds])
    # Members (ordered by hostname: the first client launches) and targets are read once per
    # testbed here; facts, launcher and hosts of every cell use them.
    testbeds = list(
        testbed_rows.order_by("name", "id").prefetch_related(
            Prefetch(
                "members",
                queryset=TestbedNode.objects.select_related("node__profile").order_by(
                    "node__hostname", "pk"
                ),
            ),
            Prefetch("targets", queryset=Target.objects.select_related("node")),
        )
    )
    if not testbeds:
        raise MatrixError("testbeds", "choose at least one testbed")
    if tuning_sets is None:
        tuning_rows = matrix.tuning_sets.all()
    else:
        tuning_rows = TuningSet.objects.filter(pk__in=[t.pk for t in tuning_sets])
    tunings: list[TuningSet | None] = list(tuning_rows.order_by("name", "id")) or [None]
    names = [axis["param"] for axis in axes]
    value_lists = [axis_values(axis) for axis in axes]
    check_cell_count(len(testbeds) * len(tunings) * math.prod(map(len, value_lists)))
    rules = compile_rules(matrix.exclusions or [], rule_names(matrix.fixed_params, axes))
    result: list[Cell] = []
    for testbed in testbeds:
        facts = testbed_facts(testbed)
        targets = {t.name: t for t in testbed.targets.all() if t.name}
        for tuning in tunings:
            for combo in itertools.product(*value_lists):
                params = dict(matrix.fixed_params)
                params.update(zip(names, combo, strict=True))
                target = None
                if TARGET_AXIS in params:
                    target = targets.get(str(params[TARGET_AXIS]))
                    if target is None:
                        known = ", ".join(sorted(targets)) or "none"
                        raise MatrixError(
                            "axes",
                            f"testbed {testbed.name} has no target named "
                            f"{params[TARGET_AXIS]!r} (targets: {known})",
                        )
                cell = Cell(
                    testbed,
                    tuning,
                    target,
                    params,
                    cell_key(testbed, tuning, target, params),
                    axis_names=tuple(names),
                )
                values = {**facts, **{rule_identifier(k): v for k, v in params.items()}}
                for rule in rules:
                    if rule(values):
                        cell.excluded_by = rule.text
                        break
                result.append(cell)
    total = sum(1 for c in result if not c.excluded_by) * matrix.repetitions
    if total > settings.MATRIX_MAX_RUNS:
        raise MatrixError(
            "axes",
            f"{total} runs exceed the limit of {settings.MATRIX_MAX_RUNS} (BEEWEB_MATRIX_MAX_RUNS)",
        )
    return result
