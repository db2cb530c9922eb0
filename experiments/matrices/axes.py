"""A matrix's axes: the grammar of an axis (a list of values or a range), the bounds on axes,
values and names, the count of cells, and MatrixError, the error of every module here that
refuses a definition."""

from __future__ import annotations

import json
import math
from typing import Any

from django.conf import settings

from experiments.shared.input_checks import CONTROL_CHARS
from runners.launch import NODES as NODES
from runners.launch import SLURM_NODES as SLURM_NODES
from runners.launch import TARGET
from runners.launch import TASKS_PER_NODE as TASKS_PER_NODE
from runners.launch import TUNING_PREFIX as TUNING_PREFIX
from runners.tools.base import MAX_TEXT

# Launch parameters a matrix takes as fixed parameters or axes (runners.launch):
# - SLURM_NODES: nodes a Slurm-mode run asks for (salloc --nodes), default 1;
# - NODES: how many of the testbed's client nodes an MPI or multi-host run uses (the first N
#   by hostname), default all of them;
# - TASKS_PER_NODE: MPI ranks per node, default the matrix's tasks per node.
TARGET_AXIS = TARGET
RANGE_SCALES = ("pow2", "linear")
MAX_AXIS_VALUES = 1000
MAX_AXES = 16
MAX_VALUE_LENGTH = MAX_TEXT  # a text value of a parameter or an axis, as the adapters take
MAX_NAME_LENGTH = 128  # a parameter or axis name


class MatrixError(ValueError):
    """A matrix definition that cannot be expanded; the message names the field."""

    def __init__(self, field_name: str, message: str):
        super().__init__(f"{field_name}: {message}")
        self.field = field_name
        self.message = message


def axis_values(axis: dict[str, Any]) -> list[Any]:
    """The values of one axis: an explicit list, or a range ``{"start", "stop", "scale",
    "step"}`` (``pow2``: start, 2·start, … ≤ stop; ``linear``: start, start+step, … ≤ stop)."""
    name = str(axis.get("param") or "")
    label = f"axis {name or '?'}"
    if "values" in axis:
        values = axis["values"]
        if not isinstance(values, list) or not values:
            raise MatrixError(label, "values must be a non-empty list")
        if len(values) > MAX_AXIS_VALUES:
            raise MatrixError(label, f"more than {MAX_AXIS_VALUES} values")
        for value in values:
            check_scalar(value, label)
        if len(values) != len({json.dumps(v) for v in values}):
            raise MatrixError(label, "values repeat")
        return list(values)
    spec = axis.get("range")
    if not isinstance(spec, dict):
        raise MatrixError(label, "give either values: [...] or range: {start, stop, scale}")
    try:
        start, stop, step = spec["start"], spec["stop"], spec.get("step", 1)
    except KeyError:
        raise MatrixError(label, "range needs integer start and stop") from None
    if not all(type(n) is int and abs(n) <= 2**63 for n in (start, stop, step)):
        raise MatrixError(label, "range needs integer start and stop (and step) below 2**63")
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


def check_scalar(value: Any, label: str) -> None:
    """A parameter or axis value: text (bounded, no control characters), a finite number or
    a boolean."""
    if isinstance(value, str):
        if len(value) > MAX_VALUE_LENGTH:
            raise MatrixError(label, f"a value is longer than {MAX_VALUE_LENGTH} characters")
        if CONTROL_CHARS.search(value):
            raise MatrixError(label, "control characters (newline, NUL, ...) are not allowed")
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise MatrixError(label, f"value {value!r} is not a finite number")
    elif isinstance(value, int):
        if abs(value) > 2**63:
            raise MatrixError(label, "a number is beyond ±2**63")
    elif not isinstance(value, bool):
        raise MatrixError(label, f"value {value!r} is not a number or a word")


def check_cell_count(count: int) -> None:
    """A matrix has at most BEEWEB_MATRIX_MAX_RUNS cells (before exclusion rules), so its
    preview stays quick."""
    if count > settings.MATRIX_MAX_RUNS:
        raise MatrixError(
            "axes",
            f"{count} cells (axis values × testbeds × tuning sets) exceed the limit of "
            f"{settings.MATRIX_MAX_RUNS} (BEEWEB_MATRIX_MAX_RUNS)",
        )


def normalise_axes(axes: Any) -> list[dict[str, Any]]:
    """Check the axes' shape and names; the same list with each axis's name validated."""
    if not isinstance(axes, list):
        raise MatrixError("axes", "must be a list of {param, values|range}")
    if len(axes) > MAX_AXES:
        raise MatrixError("axes", f"more than {MAX_AXES} axes")
    seen: set[str] = set()
    for axis in axes:
        if not isinstance(axis, dict) or not isinstance(axis.get("param"), str):
            raise MatrixError("axes", "each axis needs a param name")
        name = axis["param"].strip()
        if len(name) > MAX_NAME_LENGTH:
            raise MatrixError("axes", f"an axis name is longer than {MAX_NAME_LENGTH} characters")
        if not name or name in seen:
            raise MatrixError("axes", f"axis {name!r} is empty or repeated")
        seen.add(name)
        axis_values(axis)
    return axes
