"""Matrices as YAML files, so experiment definitions can live in version control.

Example::

    name: fio write/read x numjobs
    tool: fio
    testbeds: [localhost]
    repetitions: 3
    params: {size: 64m, bs: 1m, direct: 0}
    axes:
      rw: [write, read]
      numjobs: [1, 2, 4, 8]            # or {range: {start: 1, stop: 1024, scale: pow2}}
    exclude: ["numjobs > clients * cores"]

Testbeds and tuning sets are named (or given by UUID); the rest mirrors the matrix form.
"""

from __future__ import annotations

from typing import Any

import yaml
from django.db import transaction
from django.db.models import Q

from experiments.matrices import MatrixError, normalise_axes
from experiments.models import LaunchMode, Matrix, Testbed, TuningSet
from experiments.models.runs import Tool
from experiments.utils import is_uuid

KEYS = {
    "name",
    "description",
    "tool",
    "launch_mode",
    "tasks_per_node",
    "testbeds",
    "tuning_sets",
    "repetitions",
    "drop_caches",
    "apply_tuning",
    "timeout_s",
    "params",
    "axes",
    "exclude",
}
MAX_YAML_BYTES = 1024 * 1024


def to_data(matrix: Matrix) -> dict[str, Any]:
    axes: dict[str, Any] = {}
    for axis in matrix.axes:
        axes[axis["param"]] = axis["values"] if "values" in axis else {"range": axis["range"]}
    return {
        "name": matrix.name,
        "description": matrix.description,
        "tool": str(matrix.tool),
        "launch_mode": str(matrix.launch_mode),
        "tasks_per_node": matrix.tasks_per_node,
        "testbeds": [t.name for t in matrix.testbeds.order_by("name")],
        "tuning_sets": [t.name for t in matrix.tuning_sets.order_by("name")],
        "repetitions": matrix.repetitions,
        "drop_caches": matrix.drop_caches,
        "apply_tuning": matrix.apply_tuning,
        "timeout_s": matrix.timeout_s,
        "params": dict(matrix.fixed_params),
        "axes": axes,
        "exclude": list(matrix.exclusions),
    }


def to_yaml(matrix: Matrix) -> str:
    return yaml.safe_dump(to_data(matrix), sort_keys=False, allow_unicode=True)


def _resolve(model, names: Any, user, field_name: str) -> list:
    if names in (None, ""):
        return []
    if isinstance(names, str):
        names = [names]
    if not isinstance(names, list):
        raise MatrixError(field_name, "must be a list of names")
    found = []
    for name in names:
        name = str(name)
        qs = model.objects.filter(uuid=name) if is_uuid(name) else model.objects.filter(name=name)
        # The user's own objects first, then published ones, then colleagues'.
        for scope in (Q(owner=user), Q(published=True), Q()):
            matches = list(qs.filter(scope)[:2])
            if matches:
                break
        if not matches:
            raise MatrixError(field_name, f"no {model._meta.verbose_name} named {name!r}")
        if len(matches) > 1:
            raise MatrixError(field_name, f"{name!r} names several; use the UUID")
        found.append(matches[0])
    return found


def parse_yaml(text: str) -> dict[str, Any]:
    if len(text.encode()) > MAX_YAML_BYTES:
        raise MatrixError("file", "larger than 1 MiB")
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark else ""
        raise MatrixError("file", f"not valid YAML{where}") from None
    if not isinstance(data, dict):
        raise MatrixError("file", "must be a YAML mapping (name:, tool:, axes: …)")
    unknown = set(data) - KEYS
    if unknown:
        raise MatrixError("file", f"unknown keys: {', '.join(sorted(map(str, unknown)))}")
    return data


def _int(data: dict, key: str, default: int, low: int, high: int) -> int:
    value = data.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise MatrixError(key, f"must be a whole number from {low} to {high}")
    return value


def _bool(data: dict, key: str, default: bool) -> bool:
    value = data.get(key, default)
    if not isinstance(value, bool):
        raise MatrixError(key, "must be true or false")
    return value


def from_data(data: dict[str, Any], user) -> Matrix:
    """Create a matrix (not yet expanded) from parsed YAML; MatrixError names the field."""
    name = str(data.get("name") or "").strip()
    if not name:
        raise MatrixError("name", "is required")
    tool = data.get("tool")
    if tool not in Tool.values or tool in (Tool.OTHER, Tool.IO500, Tool.PERFTEST):
        from runners.tools import ADAPTERS

        raise MatrixError("tool", f"must be one of {', '.join(sorted(ADAPTERS))}")
    mode = data.get("launch_mode", LaunchMode.SINGLE)
    if mode not in LaunchMode.values:
        raise MatrixError("launch_mode", f"must be one of {', '.join(LaunchMode.values)}")
    params = data.get("params") or {}
    if not isinstance(params, dict):
        raise MatrixError("params", "must be a mapping of parameter to value")
    raw_axes = data.get("axes") or {}
    if isinstance(raw_axes, dict):
        axes = []
        for param, spec in raw_axes.items():
            if isinstance(spec, dict) and "range" in spec:
                axes.append({"param": str(param), "range": spec["range"]})
            elif isinstance(spec, list):
                axes.append({"param": str(param), "values": spec})
            else:
                axes.append({"param": str(param), "values": [spec]})
    elif isinstance(raw_axes, list):
        axes = raw_axes
    else:
        raise MatrixError("axes", "must map parameter names to value lists")
    normalise_axes(axes)
    exclusions = data.get("exclude") or []
    if isinstance(exclusions, str):
        exclusions = [exclusions]
    if not isinstance(exclusions, list) or not all(isinstance(e, str) for e in exclusions):
        raise MatrixError("exclude", "must be a list of rules")
    testbeds = _resolve(Testbed, data.get("testbeds"), user, "testbeds")
    if not testbeds:
        raise MatrixError("testbeds", "name at least one testbed")
    tunings = _resolve(TuningSet, data.get("tuning_sets"), user, "tuning_sets")
    with transaction.atomic():
        matrix = Matrix.objects.create(
            owner=user,
            name=name[:160],
            description=str(data.get("description") or ""),
            tool=tool,
            launch_mode=mode,
            tasks_per_node=_int(data, "tasks_per_node", 1, 1, 1024),
            fixed_params=params,
            axes=axes,
            exclusions=exclusions,
            repetitions=_int(data, "repetitions", 3, 1, 100),
            drop_caches=_bool(data, "drop_caches", True),
            apply_tuning=_bool(data, "apply_tuning", False),
            timeout_s=_int(data, "timeout_s", 3600, 1, 7 * 24 * 3600),
        )
        matrix.testbeds.set(testbeds)
        matrix.tuning_sets.set(tunings)
    return matrix


def from_yaml(text: str, user) -> Matrix:
    return from_data(parse_yaml(text), user)
