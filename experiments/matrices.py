"""Matrices: validating their definition, expanding them into runs, and dispatching the runs.

A matrix crosses parameter axes × testbeds × tuning sets; each combination is a *cell* and
each repetition of a cell a :class:`~experiments.models.Run`. Cells are keyed by a hash of
what defines them, so expanding the same matrix twice creates nothing new, and runs keep
their identity when the matrix is launched again (re-run failed cells, resume).
"""

from __future__ import annotations

import ast
import hashlib
import itertools
import json
import operator
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Avg, DurationField, ExpressionWrapper, F, Prefetch
from django.utils import timezone

from experiments.models import Matrix, Node, Run, Target, Testbed, TestbedNode, TuningSet
from runners.tools import get_adapter
from runners.tools.base import Host, LaunchContext, ParamError

TUNING_PREFIX = "tuning:"
TARGET_AXIS = "target"
RANGE_SCALES = ("pow2", "linear")
MAX_AXIS_VALUES = 1000


class MatrixError(ValueError):
    """A matrix definition that cannot be expanded; the message names the field."""

    def __init__(self, field_name: str, message: str):
        super().__init__(f"{field_name}: {message}")
        self.field = field_name
        self.message = message


# --- Axes ---------------------------------------------------------------------------------


def axis_values(axis: dict[str, Any]) -> list[Any]:
    """The values of one axis: an explicit list, or a range ``{"start", "stop", "scale",
    "step"}`` (``pow2``: start, 2·start, … ≤ stop; ``linear``: start, start+step, … ≤ stop)."""
    name = str(axis.get("param") or "")
    label = f"axis {name or '?'}"
    if "values" in axis:
        values = axis["values"]
        if not isinstance(values, list) or not values:
            raise MatrixError(label, "values must be a non-empty list")
        for value in values:
            if not isinstance(value, str | int | float | bool):
                raise MatrixError(label, f"value {value!r} is not a number or a word")
        if len(values) != len({json.dumps(v) for v in values}):
            raise MatrixError(label, "values repeat")
        return list(values)
    spec = axis.get("range")
    if not isinstance(spec, dict):
        raise MatrixError(label, "give either values: [...] or range: {start, stop, scale}")
    try:
        start, stop = int(spec["start"]), int(spec["stop"])
        step = int(spec.get("step", 1))
    except (KeyError, TypeError, ValueError):
        raise MatrixError(label, "range needs integer start and stop") from None
    scale = spec.get("scale", "pow2")
    if scale not in RANGE_SCALES:
        raise MatrixError(label, f"scale must be one of {', '.join(RANGE_SCALES)}")
    if start < 1 and scale == "pow2" or start < 0 or stop < start or step < 1:
        raise MatrixError(label, "range needs 0 < start <= stop (and step >= 1)")
    values: list[Any] = []
    value = start
    while value <= stop:
        values.append(value)
        if len(values) > MAX_AXIS_VALUES:
            raise MatrixError(label, f"more than {MAX_AXIS_VALUES} values")
        value = value * 2 if scale == "pow2" else value + step
    return values


def normalise_axes(axes: Any) -> list[dict[str, Any]]:
    """Check the axes' shape and names; the same list with each axis's name validated."""
    if not isinstance(axes, list):
        raise MatrixError("axes", "must be a list of {param, values|range}")
    seen: set[str] = set()
    for axis in axes:
        if not isinstance(axis, dict) or not isinstance(axis.get("param"), str):
            raise MatrixError("axes", "each axis needs a param name")
        name = axis["param"].strip()
        if not name or name in seen:
            raise MatrixError("axes", f"axis {name!r} is empty or repeated")
        seen.add(name)
        axis_values(axis)
    return axes


# --- Exclusion rules ----------------------------------------------------------------------

_BINARY = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_COMPARE = {
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
}
# Facts of the testbed an exclusion rule may use besides the cell's parameters.
FACT_NAMES = {
    "clients": "client nodes of the testbed",
    "servers": "storage server nodes",
    "nodes": "nodes of the testbed",
    "targets": "storage targets (counting each row's count)",
    "cores": "physical cores per client node",
    "client_memory_gib": "memory per client node (GiB)",
}


def _identifier(name: str) -> str:
    return name.replace(".", "_").replace("-", "_").replace(":", "_")


def rule_names(params, axes) -> set[str]:
    """Names an exclusion rule may use: the testbed facts, the fixed parameters and the
    axes (dots, dashes and colons read as underscores: ``tuning:os.vm.dirty_ratio`` is
    ``tuning_os_vm_dirty_ratio``)."""
    return (
        set(FACT_NAMES)
        | {_identifier(k) for k in params}
        | {_identifier(a["param"]) for a in axes if isinstance(a, dict) and "param" in a}
    )


def compile_rule(rule: str, names: set[str]) -> ast.Expression:
    """Parse an exclusion rule; only arithmetic, comparisons, and/or/not, numbers, strings
    and the given names. Never evaluated by Python's ``eval``."""
    try:
        tree = ast.parse(rule, mode="eval")
    except SyntaxError as exc:
        raise MatrixError("exclusions", f"{rule!r} is not an expression ({exc.msg})") from None
    allowed = (
        ast.Expression,
        ast.BoolOp,
        ast.And,
        ast.Or,
        ast.UnaryOp,
        ast.Not,
        ast.USub,
        ast.BinOp,
        ast.Compare,
        ast.Name,
        ast.Load,
        ast.Constant,
        ast.In,
        ast.NotIn,
        ast.Tuple,
        ast.List,
        *_BINARY,
        *_COMPARE,
    )
    for node in ast.walk(tree):
        if not isinstance(node, allowed):
            raise MatrixError("exclusions", f"{rule!r}: {type(node).__name__} is not allowed")
        if isinstance(node, ast.Name) and node.id not in names:
            known = ", ".join(sorted(names))
            raise MatrixError("exclusions", f"{rule!r}: unknown name {node.id!r} (known: {known})")
        if isinstance(node, ast.Constant) and not isinstance(node.value, int | float | str):
            raise MatrixError("exclusions", f"{rule!r}: constant {node.value!r}")
    return tree


def evaluate_rule(tree: ast.Expression, values: dict[str, Any]) -> bool:
    """True when the rule holds for these values; a rule over an unknown fact (None) or
    mismatched types is false, so it never hides a cell by accident."""

    def ev(node: ast.AST) -> Any:
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Name):
            value = values.get(node.id)
            if value is None:
                raise _Unknown
            return value
        if isinstance(node, ast.Tuple | ast.List):
            return [ev(item) for item in node.elts]
        if isinstance(node, ast.BoolOp):
            results = (ev(v) for v in node.values)
            return all(results) if isinstance(node.op, ast.And) else any(results)
        if isinstance(node, ast.UnaryOp):
            operand = ev(node.operand)
            return (not operand) if isinstance(node.op, ast.Not) else -operand
        if isinstance(node, ast.BinOp):
            return _BINARY[type(node.op)](ev(node.left), ev(node.right))
        if isinstance(node, ast.Compare):
            left = ev(node.left)
            for op, comparator in zip(node.ops, node.comparators, strict=True):
                right = ev(comparator)
                if isinstance(op, ast.In):
                    ok = left in right
                elif isinstance(op, ast.NotIn):
                    ok = left not in right
                else:
                    ok = _COMPARE[type(op)](left, right)
                if not ok:
                    return False
                left = right
            return True
        raise _Unknown

    try:
        return bool(ev(tree))
    except (_Unknown, TypeError, ValueError, ZeroDivisionError, OverflowError):
        return False


class _Unknown(Exception):
    pass


def testbed_facts(testbed: Testbed) -> dict[str, Any]:
    members = list(testbed.members.all())
    clients = [m for m in members if m.client]
    first = clients[0].node.profile if clients else None
    return {
        "clients": len(clients),
        "servers": sum(1 for m in members if m.storage),
        "nodes": len(members),
        "targets": sum(t.count for t in testbed.targets.all() if t.kind == "storage"),
        "cores": first.total_cores if first else None,
        "client_memory_gib": first.memory_gib if first else None,
    }


# --- Cells --------------------------------------------------------------------------------


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
        return {
            k: v
            for k, v in self.params.items()
            if not k.startswith(TUNING_PREFIX) and k != TARGET_AXIS
        }

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


def cells(matrix: Matrix) -> list[Cell]:
    """Every cell of the matrix in a stable order, excluded ones marked."""
    axes = normalise_axes(matrix.axes)
    if not isinstance(matrix.fixed_params, dict):
        raise MatrixError("params", "must be a mapping of parameter to value")
    # Members (ordered by hostname: the first client launches) and targets are read once per
    # testbed here; facts, launcher and hosts of every cell use them.
    testbeds = list(
        matrix.testbeds.order_by("name", "id").prefetch_related(
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
    tunings: list[TuningSet | None] = list(matrix.tuning_sets.order_by("name", "id")) or [None]
    names = [axis["param"] for axis in axes]
    value_lists = [axis_values(axis) for axis in axes]
    allowed = rule_names(matrix.fixed_params, axes)
    rules = [(rule, compile_rule(rule, allowed)) for rule in matrix.exclusions or []]
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
                values = {**facts, **{_identifier(k): v for k, v in params.items()}}
                for rule, tree in rules:
                    if evaluate_rule(tree, values):
                        cell.excluded_by = rule
                        break
                result.append(cell)
    total = sum(1 for c in result if not c.excluded_by) * matrix.repetitions
    if total > settings.MATRIX_MAX_RUNS:
        raise MatrixError(
            "axes",
            f"{total} runs exceed the limit of {settings.MATRIX_MAX_RUNS} (BEEWEB_MATRIX_MAX_RUNS)",
        )
    return result


# --- Launch context -----------------------------------------------------------------------


def _host(node: Node) -> Host:
    return Host(name=node.hostname, address=node.address or node.hostname)


def launcher_and_hosts(testbed: Testbed, target: Target | None) -> tuple[Node | None, list[Node]]:
    """The node whose worker starts the tool, and the client nodes (MPI/multi-host)."""
    members = list(testbed.members.all())  # prefetched by cells(), ordered by hostname
    clients = [m.node for m in members if m.client]
    if target is not None and target.node_id:
        return target.node, clients
    if clients:
        return clients[0], clients
    return (members[0].node if members else None), clients


def workdir_for(testbed: Testbed, target: Target | None) -> str:
    if target is not None and target.path:
        return target.path
    if testbed.benchmark_dir:
        return testbed.benchmark_dir
    raise MatrixError(
        "testbeds",
        f"testbed {testbed.name!r} has no benchmark directory "
        "(set it on the testbed, or sweep over targets with a "
        "mount point)",
    )


def launch_spec(matrix: Matrix, cell: Cell) -> tuple[dict[str, Any], Node]:
    """What the worker needs besides the parameters (stored on the run as ``launch``), and
    the launcher node."""
    launcher, clients = launcher_and_hosts(cell.testbed, cell.target)
    if launcher is None:
        raise MatrixError("testbeds", f"testbed {cell.testbed.name!r} has no nodes")
    return {
        "mode": matrix.launch_mode,
        "workdir": workdir_for(cell.testbed, cell.target),
        "hosts": [[h.name, h.address] for h in map(_host, clients)],
        "tasks_per_node": matrix.tasks_per_node,
        "timeout_s": matrix.timeout_s,
        "drop_caches": matrix.drop_caches,
        "apply_tuning": matrix.apply_tuning,
        "tuning": {
            k[len(TUNING_PREFIX) :]: v
            for k, v in cell.params.items()
            if k.startswith(TUNING_PREFIX)
        },
        "launcher": launcher.hostname,
    }, launcher


def context_from_launch(
    launch: dict[str, Any], scratch: Path, run_as_root: bool = False
) -> LaunchContext:
    return LaunchContext(
        workdir=Path(launch["workdir"]),
        scratch=scratch,
        mode=launch.get("mode", "single"),
        hosts=tuple(Host(name=n, address=a) for n, a in launch.get("hosts", [])),
        tasks_per_node=int(launch.get("tasks_per_node") or 1),
        run_as_root=run_as_root,
    )


def queue_for(hostname: str) -> str:
    return f"node.{hostname}"


# --- Preview ------------------------------------------------------------------------------


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
        return len(self.active) * self.matrix.repetitions

    @property
    def excluded(self) -> int:
        return len(self.cells) - len(self.active)

    @property
    def errors(self) -> list[PlannedCell]:
        return [c for c in self.active if c.error]

    @property
    def data_bytes(self) -> int | None:
        known = [c.data_bytes for c in self.active if c.data_bytes is not None]
        return sum(known) * self.matrix.repetitions if known else None

    @property
    def estimate_s(self) -> float | None:
        known = [c.estimate_s for c in self.active if c.estimate_s is not None]
        if not known:
            return None
        return sum(known) * self.matrix.repetitions

    @property
    def estimate_complete(self) -> bool:
        return all(c.estimate_s is not None for c in self.active)


def _durations(keys: list[str], tool: str, testbeds: list[Testbed]) -> tuple[dict, dict]:
    """Mean duration of earlier succeeded runs, per cell key and per testbed (same tool)."""
    elapsed = ExpressionWrapper(F("finished_at") - F("started_at"), output_field=DurationField())
    done = Run.objects.filter(
        status=Run.Status.SUCCEEDED, started_at__isnull=False, finished_at__isnull=False, tool=tool
    )
    by_cell = {
        row["cell_key"]: row["d"].total_seconds()
        for row in done.filter(cell_key__in=keys).values("cell_key").annotate(d=Avg(elapsed))
        if row["d"] is not None
    }
    by_testbed = {
        row["testbed"]: row["d"].total_seconds()
        for row in done.filter(testbed__in=testbeds).values("testbed").annotate(d=Avg(elapsed))
        if row["d"] is not None
    }
    return by_cell, by_testbed


def plan(matrix: Matrix) -> Plan:
    """Every cell with its exact command line, data volume and estimated duration.
    MatrixError for a definition that cannot expand; per-cell parameter errors are kept on
    the cell so the page lists them all at once."""
    try:
        adapter = get_adapter(matrix.tool)
    except ParamError as exc:
        raise MatrixError("tool", exc.message) from None
    all_cells = cells(matrix)
    by_cell, by_testbed = _durations(
        [c.key for c in all_cells], matrix.tool, list(matrix.testbeds.all())
    )
    planned = []
    for cell in all_cells:
        item = PlannedCell(cell)
        planned.append(item)
        if cell.excluded_by:
            continue
        try:
            item.launch, item.node = launch_spec(matrix, cell)
            ctx = context_from_launch(item.launch, settings.RUN_DIR / "RUN")
            command = adapter.build(cell.tool_params, ctx)
        except (MatrixError, ParamError) as exc:
            item.error = str(exc)
            continue
        item.argv = command.argv
        item.data_bytes = command.data_bytes
        item.estimate_s = (
            by_cell.get(cell.key)
            or _tool_estimate(cell.tool_params)
            or by_testbed.get(cell.testbed.pk)
        )
    return Plan(matrix, planned)


def _tool_estimate(params: dict[str, Any]) -> float | None:
    """A time-based fio run lasts its runtime (plus ramp)."""
    if params.get("time_based") in (True, 1, "1", "true") and params.get("runtime"):
        try:
            return float(params["runtime"]) + float(params.get("ramp_time") or 0)
        except (TypeError, ValueError):
            return None
    return None


# --- Expansion and dispatch ---------------------------------------------------------------


def expand(matrix: Matrix) -> dict[str, int]:
    """Create the planned runs of every non-excluded cell × repetition that does not exist
    yet. Idempotent: a second call creates nothing. Raises MatrixError (nothing created)
    when any cell's parameters are invalid."""
    result = plan(matrix)
    if result.errors:
        first = result.errors[0]
        more = f" (and {len(result.errors) - 1} more cells)" if len(result.errors) > 1 else ""
        raise MatrixError("params", f"{first.cell.label}: {first.error}{more}")
    existing = set(Run.objects.filter(matrix=matrix).values_list("cell_key", "repetition"))
    new_runs = []
    for item in result.active:
        cell = item.cell
        for repetition in range(1, matrix.repetitions + 1):
            if (cell.key, repetition) in existing:
                continue
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
                    params=cell.params,
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


def dispatch(run_ids: list[int]) -> int:
    """Queue runs: each gets a fresh dispatch token and is sent to its launcher node's queue
    once the transaction commits (so the worker always finds the row)."""
    from runners.tasks import execute_run

    if not run_ids:
        return 0
    now = timezone.now()
    sends: list[tuple[int, str, str]] = []
    with transaction.atomic():
        runs = list(
            Run.objects.select_for_update()
            .filter(
                pk__in=run_ids,
                status__in=[
                    Run.Status.PLANNED,
                    Run.Status.QUEUED,
                    Run.Status.FAILED,
                    Run.Status.CANCELLED,
                ],
            )
            .only("pk", "queue")
        )
        for run in runs:
            run.status = Run.Status.QUEUED
            run.dispatch_token = uuid.uuid4()
            run.queued_at = run.updated = now
            run.cancel_requested = False
            sends.append((run.pk, str(run.dispatch_token), run.queue or "default"))
        # One UPDATE per batch, not per run: launching a 20,000-run matrix stays quick.
        Run.objects.bulk_update(
            runs,
            ["status", "dispatch_token", "queued_at", "cancel_requested", "updated"],
            batch_size=500,
        )

        def send() -> None:
            for pk, token, queue in sends:
                execute_run.apply_async(args=[pk, token], queue=queue)

        transaction.on_commit(send)
    return len(sends)


def launch(matrix: Matrix) -> dict[str, int]:
    """Expand, then queue every planned run."""
    counts = expand(matrix)
    planned = list(matrix.runs.filter(status=Run.Status.PLANNED).values_list("pk", flat=True))
    counts["queued"] = dispatch(planned)
    if matrix.launched_at is None:
        Matrix.objects.filter(pk=matrix.pk).update(launched_at=timezone.now())
    return counts


def rerun_failed(matrix: Matrix) -> int:
    """Queue again only the failed and cancelled runs (their old output moves to history)."""
    ids = list(
        matrix.runs.filter(status__in=[Run.Status.FAILED, Run.Status.CANCELLED]).values_list(
            "pk", flat=True
        )
    )
    return dispatch(ids)


def resume(matrix: Matrix) -> int:
    """After a restart of web, worker or broker: send planned and queued runs again. Stale
    messages still in the broker carry old tokens and do nothing."""
    ids = list(
        matrix.runs.filter(status__in=[Run.Status.PLANNED, Run.Status.QUEUED]).values_list(
            "pk", flat=True
        )
    )
    return dispatch(ids)


def cancel_runs(runs) -> dict[str, int]:
    """Cancel queued runs at once; ask running ones to stop (their worker kills the process
    group within a second or two)."""
    now = timezone.now()
    with transaction.atomic():
        queued = runs.filter(status__in=[Run.Status.PLANNED, Run.Status.QUEUED]).update(
            status=Run.Status.CANCELLED,
            finished_at=now,
            error="cancelled before it started",
            dispatch_token=None,
            updated=now,
        )
        running = runs.filter(status=Run.Status.RUNNING).update(cancel_requested=True, updated=now)
    return {"cancelled": queued, "stopping": running}


def progress(matrix: Matrix) -> dict[str, Any]:
    """Counts by status (one query) and the share done."""
    from django.db.models import Count

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


# The metric a tool's comparison opens on (a read-only run opens on its read metric).
DEFAULT_METRIC = {
    "fio": "write_bw",
    "dd": "write_bw",
    "ior": "write_bw",
    "mdtest": "file_create",
    "iozone": "write_bw",
    "qperf": "tcp_bw",
    "elbencho": "write_bw",
    "storagebench": "write_bw",
}


def compare_query(matrix: Matrix) -> str:
    """The comparison of this matrix's runs: x is its first numeric axis, the series its next
    axis (or the testbed or tuning set when several are swept)."""
    from urllib.parse import urlencode

    axes = [a["param"] for a in matrix.axes if ":" not in a["param"]]
    numeric = [
        a["param"]
        for a in matrix.axes
        if ":" not in a["param"]
        and ("range" in a or all(isinstance(v, int | float) for v in a.get("values", [])))
    ]
    x = numeric[0] if numeric else (axes[0] if axes else None)
    others = [a for a in axes if a != x]
    if others:
        series = f"param:{others[0]}"
    elif matrix.testbeds.count() > 1:
        series = "testbed"
    elif matrix.tuning_sets.count() > 1:
        series = "tuning"
    else:
        series = "tool"
    metric = DEFAULT_METRIC.get(matrix.tool, "write_bw")
    fixed = {str(v) for k, v in matrix.fixed_params.items() if k in ("rw", "direction")}
    if fixed & {"read", "randread"}:
        metric = "read_bw"
    query = {
        "matrix": str(matrix.uuid),
        "metric": metric,
        "series": series,
        "x": f"param:{x}" if x else "tool",
    }
    return urlencode(query)
