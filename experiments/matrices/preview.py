"""The preview of a matrix before it runs: every cell with its exact command line, data
volume and estimated duration (:func:`plan`), and what is wrong with a definition before it is
saved (:func:`cell_problems`)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Any

from django.conf import settings
from django.db import connection
from django.db.models import F, Window
from django.db.models.functions import RowNumber

from experiments.matrices.axes import NODES, SLURM_NODES, MatrixError
from experiments.matrices.cells import Cell, cells
from experiments.matrices.launching import (
    as_host,
    beegfs_target_ids,
    launch_spec,
    launcher_and_hosts,
    tasks_per_node,
    workdir_for,
)
from experiments.models import LaunchMode, Matrix, Node, Run, Testbed, TuningSet
from runners import slurm
from runners.launch import LaunchSpec
from runners.tools import get_adapter
from runners.tools.base import Host, ParamError

# Stands for a run's own directory (experiments.execution.nodepolicy.run_dir_name) in the preview.
PREVIEW_RUN_DIR = "beeweb-run-UUID-N"
PREVIEW_JOB = "1"  # stands for the Slurm job id in a preview; shown as <job>


@dataclass
class PlannedCell:
    cell: Cell
    argv: list[str] = field(default_factory=list)
    data_bytes: int | None = None
    estimate_s: float | None = None
    launch: dict[str, Any] = field(default_factory=dict)
    node: Node | None = None
    error: str = ""

    @property
    def launcher(self) -> str:
        return self.launch.get("launcher", "")


@dataclass
class Plan:
    matrix: Matrix
    cells: list[PlannedCell]

    @property
    def active(self) -> list[PlannedCell]:
        return [c for c in self.cells if not c.cell.excluded_by]

    @property
    def runs(self) -> int:
        """Runs created at launch (an adaptive matrix's minimum)."""
        return len(self.active) * self.matrix.repetitions

    @property
    def max_runs(self) -> int | None:
        """An adaptive matrix's most runs (every cell at its maximum); None when fixed."""
        if not self.matrix.adaptive:
            return None
        return len(self.active) * self.matrix.max_repetitions

    @property
    def excluded(self) -> int:
        return len(self.cells) - len(self.active)

    @property
    def errors(self) -> list[PlannedCell]:
        return [c for c in self.active if c.error]

    def _total(self, attribute: str, repetitions: int | None) -> float | None:
        known = [getattr(c, attribute) for c in self.active]
        known = [v for v in known if v is not None]
        if not known or repetitions is None:
            return None
        return sum(known) * repetitions

    @property
    def data_bytes(self) -> int | None:
        return self._total("data_bytes", self.matrix.repetitions)

    @property
    def estimate_s(self) -> float | None:
        return self._total("estimate_s", self.matrix.repetitions)

    @property
    def max_data_bytes(self) -> int | None:
        return self._total("data_bytes", self.matrix.max_repetitions if self.max_runs else None)

    @property
    def max_estimate_s(self) -> float | None:
        return self._total("estimate_s", self.matrix.max_repetitions if self.max_runs else None)

    @property
    def estimate_complete(self) -> bool:
        return all(c.estimate_s is not None for c in self.active)


# A cell's (or a testbed's) estimated duration is the mean of at most this many of its latest
# succeeded runs of the tool: an equal cell of every matrix shares its key, so its history
# grows with every launch, and a testbed's with everything run on it.
DURATION_SAMPLE = 20

_CELL_DURATIONS = """
SELECT k.key, AVG(EXTRACT(EPOCH FROM (r.finished_at - r.started_at)))
FROM unnest(%s::varchar[]) AS k(key)
CROSS JOIN LATERAL (
    SELECT started_at, finished_at FROM experiments_run
    WHERE tool = %s AND cell_key = k.key AND status = 'succeeded'
      AND started_at IS NOT NULL AND finished_at IS NOT NULL
    ORDER BY finished_at DESC LIMIT %s
) AS r
GROUP BY k.key
"""


def _succeeded(tool: str):
    return Run.objects.filter(
        status=Run.Status.SUCCEEDED, started_at__isnull=False, finished_at__isnull=False, tool=tool
    )


def _cell_durations(keys: list[str], tool: str) -> dict[str, float]:
    """Mean duration (s) of each cell's latest DURATION_SAMPLE succeeded runs of ``tool``, in
    one query: on PostgreSQL a lateral LIMIT per key over exp_run_succeeded_cell (as many
    index entries as the sample, whatever the cells' history); elsewhere (SQLite, a single
    user's database) the same runs numbered by a window over the cells' runs."""
    if not keys:
        return {}
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(_CELL_DURATIONS, [keys, tool, DURATION_SAMPLE])
            return {key: float(d) for key, d in cursor.fetchall() if d is not None}
    latest = (
        _succeeded(tool)
        .filter(cell_key__in=keys)
        .annotate(
            nth=Window(RowNumber(), partition_by=F("cell_key"), order_by=F("finished_at").desc())
        )
        .filter(nth__lte=DURATION_SAMPLE)
        .values_list("cell_key", "started_at", "finished_at")
    )
    spans: dict[str, list[float]] = {}
    for key, start, end in latest:
        spans.setdefault(key, []).append((end - start).total_seconds())
    return {key: sum(s) / len(s) for key, s in spans.items()}


def _testbed_duration(testbed_id: int, tool: str) -> float | None:
    """Mean duration (s) of the latest DURATION_SAMPLE succeeded runs of ``tool`` on the
    testbed (exp_run_succeeded_testbed: a bounded index range)."""
    spans = (
        _succeeded(tool)
        .filter(testbed_id=testbed_id)
        .order_by("-finished_at")
        .values_list("started_at", "finished_at")[:DURATION_SAMPLE]
    )
    seconds = [(end - start).total_seconds() for start, end in spans]
    return sum(seconds) / len(seconds) if seconds else None


def preview_command(adapter, launch: dict[str, Any], tool_params: dict[str, Any]):
    """The command as the worker will build it: inside the run's own fresh directory, whose
    name (uuid, attempt) is only known when the run starts. ParamError or LaunchError."""
    spec = LaunchSpec.read(launch)
    spec = replace(spec, workdir=f"{spec.workdir}/{PREVIEW_RUN_DIR}")
    if spec.mode == LaunchMode.SLURM:
        return _slurm_preview(spec, adapter, tool_params)
    ctx = spec.context(settings.RUN_DIR / PREVIEW_RUN_DIR)
    return adapter.build(tool_params, ctx)


def plan(matrix: Matrix) -> Plan:
    """Every cell with its exact command line, data volume and estimated duration.
    MatrixError for a definition that cannot expand; per-cell parameter errors are kept on
    the cell so the page lists them all at once."""
    try:
        adapter = get_adapter(matrix.tool)
    except ParamError as exc:
        raise MatrixError("tool", exc.message) from None
    all_cells = cells(matrix)
    by_cell = _cell_durations([c.key for c in all_cells if not c.excluded_by], matrix.tool)
    by_testbed: dict[int, float | None] = {}
    planned = []
    for cell in all_cells:
        item = PlannedCell(cell)
        planned.append(item)
        if cell.excluded_by:
            continue
        try:
            item.launch, item.node = launch_spec(matrix, cell)
            command = preview_command(adapter, item.launch, cell.tool_params)
        except (MatrixError, ParamError) as exc:
            item.error = str(exc)
            continue
        item.argv = command.argv
        item.data_bytes = command.data_bytes
        item.estimate_s = by_cell.get(cell.key) or _tool_estimate(cell.tool_params)
        if not item.estimate_s:
            # The testbed's recent runs of the tool, asked only for cells without an
            # estimate of their own (once per testbed).
            if cell.testbed.pk not in by_testbed:
                by_testbed[cell.testbed.pk] = _testbed_duration(cell.testbed.pk, matrix.tool)
            item.estimate_s = by_testbed[cell.testbed.pk]
    return Plan(matrix, planned)


# Parameters of the launch context rather than of the tool: a testbed without clients or
# benchmark directory is the testbed's to fix (the preview says so and Launch waits), not a
# reason to refuse the matrix.
CONTEXT_PARAMS = frozenset(
    {"context", "workdir", "scratch", "hosts", "mode", "tasks_per_node", "mpirun"}
)
MAX_LISTED_PROBLEMS = 20
CHECK_WORKDIR = "/beeweb-check"  # stands for a testbed's missing benchmark directory


def cell_problems(
    matrix: Matrix, testbeds: list[Testbed], tuning_sets: list[TuningSet]
) -> dict[str, list[str]]:
    """What :func:`plan` would find wrong with a definition, before it is saved: cells that
    cannot be formed (a target axis naming no target of a testbed, too many runs after the
    rules) and every cell whose command the tool adapter refuses (``bs`` larger than
    ``size``, ``time_based`` without ``runtime``, ...). Errors by field ("axes", "cells"),
    each cell's problem named with the cell; the same problem of several cells is said once
    with the cells it concerns, and the list stops at MAX_LISTED_PROBLEMS ("and N more")."""
    try:
        adapter = get_adapter(matrix.tool)
    except ParamError as exc:
        return {"tool": [exc.message]}
    try:
        all_cells = cells(matrix, testbeds, tuning_sets)
    except MatrixError as exc:
        return {exc.field if exc.field != "params" else "fixed_params": [exc.message]}
    several = len(testbeds) > 1 or len(tuning_sets) > 1
    slurm_mode = matrix.launch_mode == LaunchMode.SLURM
    by_problem: dict[str, list[str]] = {}
    contexts: dict[tuple[int, int | None], Any] = {}  # one per testbed and target
    built: dict[tuple[Any, str], str | None] = {}  # each distinct command's problem
    for cell in all_cells:
        if cell.excluded_by:
            continue
        # Slurm mode: the nodes to allocate (default 1); else the first N clients (0: all;
        # more than the testbed has is validate_matrix's to say).
        nodes = int(cell.params.get(SLURM_NODES, 1) if slurm_mode else cell.params.get(NODES, 0))
        tasks = tasks_per_node(matrix, cell.params)
        where_key = (cell.testbed.pk, cell.target.pk if cell.target else None, nodes, tasks)
        ctx = contexts.get(where_key)
        if ctx is None:
            launcher, clients = launcher_and_hosts(cell.testbed, cell.target)
            try:
                workdir = workdir_for(cell.testbed, cell.target)
            except MatrixError:
                workdir = CHECK_WORKDIR
            mode = matrix.launch_mode
            hosts = tuple(map(as_host, clients[:nodes] if nodes else clients))
            if slurm_mode:
                # As the Slurm steps will run it: the tool's own mode over stand-in nodes.
                mode = slurm.inner_mode(adapter.modes) or mode
                hosts = tuple(
                    Host(f"slurm-node-{i}", f"slurm-node-{i}") for i in range(1, nodes + 1)
                )
            spec = LaunchSpec(
                workdir=f"{workdir}/{PREVIEW_RUN_DIR}",
                launcher=launcher.hostname if launcher else "",
                mode=mode,
                hosts=hosts,
                tasks_per_node=tasks,
                target_ids=beegfs_target_ids(cell.target),
            )
            ctx = contexts[where_key] = spec.context(settings.RUN_DIR / PREVIEW_RUN_DIR)
        # Cells that differ only in tuning set or tuning axes build the same command.
        built_key = (where_key, json.dumps(cell.tool_params, sort_keys=True, default=str))
        if built_key in built:
            problem = built[built_key]
        else:
            try:
                adapter.build(cell.tool_params, ctx)
                problem = None
            except ParamError as exc:
                problem = None if exc.param in CONTEXT_PARAMS else str(exc)
            built[built_key] = problem
        if problem:
            where = cell.label
            if several:
                tuning = f", tuning {cell.tuning_set}" if cell.tuning_set else ""
                where = f"{where} (testbed {cell.testbed.name}{tuning})"
            by_problem.setdefault(problem, []).append(where)
    problems = []
    for problem, where in by_problem.items():
        shown = "; ".join(where[:3]) + (f" and {len(where) - 3} more" if len(where) > 3 else "")
        problems.append(f"{'cell' if len(where) == 1 else 'cells'} {shown}: {problem}")
    if len(problems) > MAX_LISTED_PROBLEMS:
        rest = len(problems) - MAX_LISTED_PROBLEMS
        problems = problems[:MAX_LISTED_PROBLEMS] + [f"and {rest} more problems"]
    return {"cells": problems} if problems else {}


def _slurm_preview(spec: LaunchSpec, adapter, tool_params: dict[str, Any]):
    """The command of a Slurm-mode cell as its steps will run it, with a stand-in job id and
    stand-in node names (Slurm chooses both when the job starts)."""
    mode = slurm.inner_mode(adapter.modes)
    if mode is None:
        raise MatrixError("launch_mode", f"{adapter.tool} cannot run in Slurm mode")
    hosts = tuple(Host(f"slurm-node-{i}", f"slurm-node-{i}") for i in range(1, spec.nodes + 1))
    ctx = replace(spec, mode=mode, hosts=hosts).context(
        settings.RUN_DIR / PREVIEW_RUN_DIR, slurm_job=PREVIEW_JOB
    )
    command = slurm.as_steps(adapter.build(tool_params, ctx), PREVIEW_JOB, mode)
    shown = f"--jobid={PREVIEW_JOB}"
    return replace(command, argv=[a if a != shown else "--jobid=<job>" for a in command.argv])


def _tool_estimate(params: dict[str, Any]) -> float | None:
    """A time-based fio run lasts its runtime (plus ramp)."""
    if params.get("time_based") in (True, 1, "1", "true") and params.get("runtime"):
        try:
            return float(params["runtime"]) + float(params.get("ramp_time") or 0)
        except (TypeError, ValueError):
            return None
    return None
