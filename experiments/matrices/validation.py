"""One validation path for a matrix definition.

The matrix page's form (experiments/matrices/forms.py), the API's serializer
(experiments/api/serializers.py) and YAML files (experiments/matrices/files.py: the import page
and ``manage.py launch_matrix``) each turn their input into the same plain mapping of model
field names and call :func:`validate_matrix`. So a definition gets the same verdict and the
same messages whichever way it comes in; each caller only maps field names to its own (form
fields, API fields, YAML keys).

What is checked: the tool is known and can run in the launch mode (Slurm mode: every testbed
has a Slurm partition, and only MPI tools take more than one ``slurm_nodes``); every fixed
parameter and every axis value passes the tool adapter's ``Param.clean``; tuning and target
axes are well formed; axes, cells and runs stay within their bounds (BEEWEB_MATRIX_MAX_RUNS);
exclusion rules parse and use known names within the evaluator's bounds; repetitions (an
adaptive matrix's minimum, maximum and target coefficient of variation), the run order and its
seed, tasks per node and timeout are in range; texts are bounded and free of control
characters. Then every cell's command is built as the preview builds it
(``preview.cell_problems``), so a matrix whose cells the tool refuses is not saved. Every
problem is reported at once, not the first.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from django.conf import settings

from experiments.matrices.axes import (
    MAX_AXIS_VALUES,
    MAX_NAME_LENGTH,
    NODES,
    SLURM_NODES,
    TARGET_AXIS,
    TASKS_PER_NODE,
    TUNING_PREFIX,
    MatrixError,
    axis_values,
    check_cell_count,
    check_scalar,
    normalise_axes,
)
from experiments.matrices.launching import slurm_refusal, too_many_nodes
from experiments.matrices.preview import cell_problems
from experiments.matrices.rules import MAX_RULES, Rule, check_rule_budget, compile_rule, rule_names
from experiments.models import LaunchMode, Matrix, RunOrder, Testbed
from experiments.models.matrices import MAX_ORDER_SEED
from experiments.shared.input_checks import CONTROL_CHARS, CONTROL_CHARS_BUT_LINES
from experiments.shared.tuning_keys import SCOPE_NAMES
from runners import slurm
from runners.tools import ADAPTERS
from runners.tools.base import ParamError, clean_int

MAX_NAME = 160  # Matrix.name
MAX_DESCRIPTION = 10_000
MAX_PARAMS = 100
MAX_TASKS_PER_NODE = 1024
MAX_REPETITIONS = 100
MAX_TIMEOUT_S = 7 * 24 * 3600
MAX_BAD_VALUES = 5  # refused values of one axis listed one by one
# Launch parameters that count something: their bounds.
COUNTS = {
    SLURM_NODES: (1, slurm.MAX_NODES),
    NODES: (1, slurm.MAX_NODES),
    TASKS_PER_NODE: (1, MAX_TASKS_PER_NODE),
}

DEFAULTS: dict[str, Any] = {
    "name": "",
    "description": "",
    "tool": None,
    "launch_mode": LaunchMode.SINGLE,
    "tasks_per_node": 1,
    "fixed_params": {},
    "axes": [],
    "exclusions": [],
    "testbeds": [],
    "tuning_sets": [],
    "repetitions": 3,
    "max_repetitions": None,
    "target_cv": None,
    "order": RunOrder.CELLS,
    "order_seed": None,
    "drop_caches": True,
    "apply_tuning": False,
    "timeout_s": 3600,
}
FIELDS = tuple(DEFAULTS)

_TUNING_KEY_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}\Z")


class MatrixInvalid(MatrixError):
    """A matrix definition with errors; ``errors`` maps each field to its messages."""

    def __init__(self, errors: dict[str, list[str]]):
        self.errors = errors
        field_name, messages = next(iter(errors.items()))
        super().__init__(field_name, messages[0])

    def __str__(self) -> str:
        return "; ".join(f"{f}: {m}" for f, messages in self.errors.items() for m in messages)

    def renamed(self, names: Mapping[str, str]) -> dict[str, list[str]]:
        """The errors with fields renamed for a caller (form fields, YAML keys)."""
        out: dict[str, list[str]] = {}
        for field_name, messages in self.errors.items():
            out.setdefault(names.get(field_name, field_name), []).extend(messages)
        return out


class _Errors(dict):
    def add(self, field_name: str, message: str) -> None:
        self.setdefault(field_name, []).append(message)


def validate_matrix(data: Mapping[str, Any], *, build_cells: bool = True) -> dict[str, Any]:
    """The cleaned definition (model field names; missing fields take their defaults), or
    MatrixInvalid listing every problem by field. ``testbeds`` and ``tuning_sets`` are
    sequences of already resolved objects. ``build_cells=False`` skips building the cells'
    commands (the caller already knows of problems that would make them misleading)."""
    data = {**DEFAULTS, **{k: v for k, v in data.items() if k in DEFAULTS}}
    errors = _Errors()
    clean: dict[str, Any] = {}

    clean["name"] = _text(data["name"], "name", MAX_NAME, errors, required=True)
    clean["description"] = _text(
        data["description"] or "", "description", MAX_DESCRIPTION, errors, lines=True
    )

    tool = data["tool"]
    adapter = ADAPTERS.get(tool) if isinstance(tool, str) else None
    if adapter is None:
        errors.add("tool", f"must be one of {', '.join(sorted(ADAPTERS))}")
    clean["tool"] = tool

    mode = data["launch_mode"]
    if mode not in LaunchMode.values:
        errors.add("launch_mode", f"must be one of {', '.join(LaunchMode.values)}")
    elif mode == LaunchMode.SLURM:
        if adapter is not None and slurm.inner_mode(adapter.modes) is None:
            modes = ", ".join(adapter.modes)
            errors.add("launch_mode", f"{tool} cannot run in Slurm mode (modes: {modes})")
    elif adapter is not None and mode not in adapter.modes:
        modes = ", ".join(adapter.modes)
        errors.add("launch_mode", f"{tool} cannot run in {mode} mode (modes: {modes})")
    clean["launch_mode"] = mode

    clean["tasks_per_node"] = _int(data, "tasks_per_node", 1, MAX_TASKS_PER_NODE, errors)
    clean["repetitions"] = _int(data, "repetitions", 1, MAX_REPETITIONS, errors)
    _repetitions(data, clean, errors)
    clean["order"] = data["order"]
    if clean["order"] not in RunOrder.values:
        errors.add("order", f"must be one of {', '.join(RunOrder.values)}")
    clean["order_seed"] = data["order_seed"]
    if clean["order_seed"] is not None:
        _int(data, "order_seed", 0, MAX_ORDER_SEED, errors)
    clean["timeout_s"] = _int(data, "timeout_s", 1, MAX_TIMEOUT_S, errors)
    for key in ("drop_caches", "apply_tuning"):
        if not isinstance(data[key], bool):
            errors.add(key, "must be true or false")
        clean[key] = data[key]

    params = data["fixed_params"]
    if params is None:
        params = {}
    if not isinstance(params, dict):
        errors.add("fixed_params", "must be a mapping of parameter to value")
        params = {}
    elif len(params) > MAX_PARAMS:
        errors.add("fixed_params", f"more than {MAX_PARAMS} parameters")
    else:
        for key, value in params.items():
            message = _check_name(tool, adapter, key) or _check_value(adapter, key, value)
            if message:
                errors.add("fixed_params", message)
    clean["fixed_params"] = params

    axes = data["axes"] if data["axes"] is not None else []
    sizes: list[int] = []
    try:
        axes = normalise_axes(axes)
    except MatrixError as exc:
        errors.add("axes", exc.message if exc.field == "axes" else str(exc))
        axes = [a for a in axes if isinstance(a, dict)] if isinstance(axes, list) else []
    else:
        for axis in axes:
            name = axis["param"].strip()
            axis["param"] = name
            values = axis_values(axis)
            sizes.append(len(values))
            message = _check_name(tool, adapter, name)
            if message:
                errors.add("axes", message)
                continue
            bad = [m for m in (_check_value(adapter, name, v) for v in values) if m]
            for message in bad[:MAX_BAD_VALUES]:
                errors.add("axes", message)
            if len(bad) > MAX_BAD_VALUES:
                errors.add("axes", f"{name}: and {len(bad) - MAX_BAD_VALUES} more values refused")
    clean["axes"] = axes

    if adapter is not None:
        given = set(params) | {a.get("param") for a in axes}
        for name, param in adapter.params.items():
            if param.required and param.default is None and name not in given:
                errors.add("fixed_params", f"{name}: is required (fix it or sweep it as an axis)")

    testbeds = list(data["testbeds"] or [])
    tunings = list(data["tuning_sets"] or [])
    if not testbeds:
        errors.add("testbeds", "choose at least one testbed")
    _check_slurm(clean, adapter, params, axes, testbeds, errors)
    _check_nodes_and_tasks(clean, adapter, params, axes, testbeds, errors)
    clean["testbeds"], clean["tuning_sets"] = testbeds, tunings

    rules = data["exclusions"] if data["exclusions"] is not None else []
    compiled: list[Rule] = []
    if isinstance(rules, str):
        rules = [rules]
    if not isinstance(rules, list) or not all(isinstance(r, str) for r in rules):
        errors.add("exclusions", "must be a list of rules (text)")
        rules = []
    rules = [r.strip() for r in rules if r.strip()]
    if len(rules) > MAX_RULES:
        errors.add("exclusions", f"more than {MAX_RULES} rules")
        rules = []
    names = rule_names(params, axes)
    for rule in rules:
        try:
            compiled.append(compile_rule(rule, names))
        except MatrixError as exc:
            errors.add("exclusions", exc.message)
    try:
        check_rule_budget(compiled)
    except MatrixError as exc:
        errors.add("exclusions", exc.message)
    clean["exclusions"] = rules

    if sizes and "axes" not in errors:
        cells = max(1, len(testbeds)) * max(1, len(tunings)) * math.prod(sizes)
        try:
            check_cell_count(cells)
        except MatrixError as exc:
            errors.add("axes", exc.message)
        else:
            repetitions = clean["max_repetitions"] or clean["repetitions"]
            repetitions = repetitions if isinstance(repetitions, int) else 1
            runs = cells * repetitions
            # With rules the exact count needs the testbeds' facts: the preview checks it.
            if not rules and runs > settings.MATRIX_MAX_RUNS:
                errors.add(
                    "axes",
                    f"{runs} runs exceed the limit of {settings.MATRIX_MAX_RUNS} "
                    "(BEEWEB_MATRIX_MAX_RUNS)",
                )

    if build_cells and not errors and adapter is not None:
        # Each cell's command as plan() builds it: the tool adapter's checks across
        # parameters (bs larger than size, time_based without runtime) and target names
        # refuse the matrix now, not in the preview after it was saved.
        draft = Matrix(**{k: v for k, v in clean.items() if k not in ("testbeds", "tuning_sets")})
        for field_name, messages in cell_problems(draft, testbeds, tunings).items():
            for message in messages:
                errors.add(field_name, message)

    if errors:
        raise MatrixInvalid(dict(errors))
    return clean


def _check_slurm(clean, adapter, params, axes, testbeds, errors: _Errors) -> None:
    """Slurm mode needs a partition on every testbed; ``slurm_nodes`` belongs to Slurm mode
    only, and more than one node (or task per node) to the MPI tools, whose ranks srun
    places over the allocation: a single-process tool runs as one task and cannot combine
    the outputs of several nodes."""
    values = _values_of(SLURM_NODES, params, axes)
    if clean["launch_mode"] != LaunchMode.SLURM:
        if values:
            errors.add("axes", f"{SLURM_NODES}: applies to the Slurm launch mode only")
        return
    for testbed in testbeds:
        # Only testbeds that were found: a name or id that matched none is reported as such.
        if isinstance(testbed, Testbed) and not testbed.slurm_partition:
            errors.add("launch_mode", slurm_refusal(testbed))
    if adapter is None or slurm.inner_mode(adapter.modes) is None:
        return
    if slurm.inner_mode(adapter.modes) != "mpi":
        if any(v != 1 for v in values):
            errors.add(
                "axes",
                f"{SLURM_NODES}: {adapter.tool} runs as one process in Slurm mode: one node "
                "only (MPI tools such as ior and mdtest span several)",
            )
        if clean["tasks_per_node"] != 1:
            errors.add(
                "tasks_per_node",
                f"{adapter.tool} runs as one process in Slurm mode: leave it at 1",
            )


def _values_of(name: str, params: Mapping[str, Any], axes: list[dict[str, Any]]) -> list[Any]:
    """The values a matrix gives parameter ``name``: its fixed value and its axis's values."""
    values = [params[name]] if name in params else []
    for axis in axes:
        if axis.get("param") == name:
            try:
                values += axis_values(axis)
            except MatrixError:
                pass  # reported with the axes
    return values


def _check_nodes_and_tasks(clean, adapter, params, axes, testbeds, errors: _Errors) -> None:
    """``nodes`` (the first N client nodes) belongs to the modes with client hosts (MPI and
    multi-host) and is at most each testbed's client count; ``tasks_per_node`` as a
    parameter or axis to MPI mode and to Slurm mode with an MPI tool, and not together with
    the matrix's own tasks per node."""
    mode = clean["launch_mode"]
    nodes = []
    for value in _values_of(NODES, params, axes):
        try:
            nodes.append(clean_int(value, NODES, 1, slurm.MAX_NODES))
        except ParamError:
            pass  # reported with the values
    if _values_of(NODES, params, axes):
        if mode == LaunchMode.SLURM:
            errors.add(
                "axes",
                f"{NODES}: in Slurm mode Slurm allocates the nodes: give {SLURM_NODES} instead",
            )
        elif mode not in (LaunchMode.MPI, LaunchMode.MULTIHOST):
            errors.add("axes", f"{NODES}: applies to the MPI and multi-host launch modes only")
        elif nodes:
            for testbed in testbeds:
                if not isinstance(testbed, Testbed) or testbed.pk is None:
                    continue
                clients = testbed.members.filter(client=True).count()
                if max(nodes) > clients:
                    errors.add("axes", too_many_nodes(testbed, max(nodes), clients))
    if _values_of(TASKS_PER_NODE, params, axes):
        inner = slurm.inner_mode(adapter.modes) if adapter is not None else None
        if not (mode == LaunchMode.MPI or mode == LaunchMode.SLURM and inner == "mpi"):
            errors.add(
                "axes",
                f"{TASKS_PER_NODE}: applies to MPI tools in the MPI or Slurm launch mode only",
            )
        elif clean["tasks_per_node"] != 1:
            errors.add(
                "tasks_per_node",
                f"given as a parameter too: leave it at 1 when {TASKS_PER_NODE} is a fixed "
                "parameter or an axis",
            )


def _repetitions(data: Mapping[str, Any], clean: dict[str, Any], errors: _Errors) -> None:
    """Adaptive repetitions: a maximum and a target CV (%), given together; ``repetitions``
    is then the minimum, at least 2 (a coefficient of variation needs two values)."""
    maximum, target = data["max_repetitions"], data["target_cv"]
    clean["max_repetitions"], clean["target_cv"] = maximum, target
    if maximum is None and target is None:
        return
    if maximum is None or target is None:
        missing = "max_repetitions" if maximum is None else "target_cv"
        errors.add(
            missing,
            "adaptive repetitions need both a maximum and a target coefficient of variation",
        )
        return
    minimum = clean["repetitions"]
    known = isinstance(minimum, int) and not isinstance(minimum, bool)
    # "from 3 to 100": the maximum is at least the minimum.
    _int(data, "max_repetitions", max(2, minimum) if known else 2, MAX_REPETITIONS, errors)
    if known and minimum < 2:
        errors.add(
            "repetitions",
            "adaptive repetitions start from at least 2 (a coefficient of variation needs "
            "two values)",
        )
    if (
        isinstance(target, bool)
        or not isinstance(target, int | float)
        or not math.isfinite(target)
        or not 0 < target < 100
    ):
        errors.add("target_cv", "must be a percentage above 0 and below 100")
    else:
        clean["target_cv"] = float(target)


def _text(
    value: Any, field_name: str, limit: int, errors: _Errors, *, required=False, lines=False
) -> str:
    if not isinstance(value, str):
        errors.add(field_name, "must be text")
        return ""
    text = value.strip()
    if required and not text:
        errors.add(field_name, "is required")
    if len(text) > limit:
        errors.add(field_name, f"is longer than {limit} characters")
    if (CONTROL_CHARS_BUT_LINES if lines else CONTROL_CHARS).search(text):
        errors.add(field_name, "control characters (NUL, ...) are not allowed")
    return text


def _int(data: Mapping[str, Any], key: str, low: int, high: int, errors: _Errors) -> int:
    value = data[key]
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        errors.add(key, f"must be a whole number from {low} to {high}")
    return value


def _check_name(tool: Any, adapter, name: Any) -> str:
    """'' when ``name`` may be a parameter or axis of ``tool``, else the message."""
    if not isinstance(name, str) or not name.strip():
        return "parameter names must be text"
    if len(name) > MAX_NAME_LENGTH:
        return f"a parameter name is longer than {MAX_NAME_LENGTH} characters"
    if name in (TARGET_AXIS, SLURM_NODES, NODES, TASKS_PER_NODE):
        return ""
    if name.startswith(TUNING_PREFIX):
        scope, _, key = name[len(TUNING_PREFIX) :].partition(".")
        if scope not in SCOPE_NAMES or not _TUNING_KEY_RE.match(key):
            return (
                f"{name!r}: a tuning axis is tuning:<scope>.<key> with scope one of "
                f"{', '.join(SCOPE_NAMES)}"
            )
        return ""
    if adapter is None:
        return ""  # the tool's own error says it
    if name not in adapter.params:
        known = ", ".join(sorted(adapter.params))
        return f"{tool} has no parameter {name!r} (known: {known})"
    return ""


def _check_value(adapter, name: str, value: Any) -> str:
    """'' when ``value`` is valid for parameter (or axis) ``name``, else the message. A list
    is a value only of a list parameter (qperf's ``tests: [tcp_bw, tcp_lat]``)."""
    param = adapter.params.get(name) if adapter is not None else None
    try:
        if isinstance(value, list) and param is not None and param.kind == "list":
            if len(value) > MAX_AXIS_VALUES:
                return f"{name}: more than {MAX_AXIS_VALUES} items"
            for item in value:
                check_scalar(item, name)
        else:
            check_scalar(value, name)
    except MatrixError as exc:
        return str(exc)
    if name == TARGET_AXIS or name.startswith(TUNING_PREFIX):
        return ""
    if name in COUNTS:
        low, high = COUNTS[name]
        try:
            clean_int(value, name, low, high)
        except ParamError as exc:
            return str(exc)
        return ""
    if param is None:
        return ""
    try:
        param.clean(value)
    except ParamError as exc:
        return str(exc)
    return ""
