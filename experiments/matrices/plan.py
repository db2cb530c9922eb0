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
import math
import operator
import random
import secrets
from dataclasses import dataclass, field, replace
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Avg, DurationField, ExpressionWrapper, F, Prefetch, Q
from django.utils import timezone

from experiments.execution.dispatch import dispatch
from experiments.models import (
    LaunchMode,
    Matrix,
    Node,
    Run,
    RunOrder,
    Target,
    Testbed,
    TestbedNode,
    TuningSet,
)
from experiments.models.matrices import MAX_ORDER_SEED
from experiments.models.runs import runs_ended
from experiments.shared.input_checks import CONTROL_CHARS
from experiments.shared.validators import work_path_problem
from runners import registry, slurm
from runners.launch import LaunchSpec, queue_for
from runners.tools import get_adapter
from runners.tools.base import MAX_TEXT, Host, ParamError

TUNING_PREFIX = "tuning:"
TARGET_AXIS = "target"
# Nodes a Slurm-mode run asks for (salloc --nodes): a fixed parameter or an axis, default 1.
SLURM_NODES = "slurm_nodes"
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


# --- Exclusion rules ----------------------------------------------------------------------

# Bounds that keep a rule cheap: it is parsed once, and evaluated once per cell on every
# preview. Numbers stay within ±2**64 (exponents within ±64), so no operation costs more
# than a few machine words, and `9 ** 9 ** 9` is an error instead of minutes of CPU.
MAX_RULES = 20
MAX_RULE_LENGTH = 500
MAX_RULE_NODES = 64
MAX_RULE_NODES_TOTAL = 256
MAX_RULE_MAGNITUDE = 2**64
MAX_RULE_EXPONENT = 64
MAX_RULE_STRING = 200

_BINARY_SYMBOLS = {
    ast.Add: "+",
    ast.Sub: "-",
    ast.Mult: "*",
    ast.Div: "/",
    ast.FloorDiv: "//",
    ast.Mod: "%",
    ast.Pow: "**",
}
_COMPARE = {
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.In: lambda a, b: operator.contains(b, a),
    ast.NotIn: lambda a, b: not operator.contains(b, a),
}
_ALLOWED_NODES = (
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
    ast.Tuple,
    ast.List,
    *_BINARY_SYMBOLS,
    *_COMPARE,
)
# Facts of the testbed an exclusion rule may use besides the cell's parameters.
FACT_NAMES = {
    "clients": "client nodes of the testbed",
    "servers": "storage server nodes",
    "nodes": "nodes of the testbed",
    "targets": "storage targets (counting each row's count)",
    "cores": "physical cores per client node",
    "client_memory_gib": "memory per client node (GiB)",
}


class _Unknown(Exception):
    """A name without a value (an unknown fact): the rule does not hold."""


class RuleTooLarge(ArithmeticError):
    """A number in a rule leaves ±2**64 (or an exponent ±64)."""


def _identifier(name: str) -> str:
    return name.replace(".", "_").replace("-", "_").replace(":", "_")


def rule_names(params, axes) -> set[str]:
    """Names an exclusion rule may use: the testbed facts, the fixed parameters and the
    axes (dots, dashes and colons read as underscores: ``tuning:os.vm.dirty_ratio`` is
    ``tuning_os_vm_dirty_ratio``)."""
    return (
        set(FACT_NAMES)
        | {_identifier(k) for k in params if isinstance(k, str)}
        | {
            _identifier(a["param"])
            for a in axes
            if isinstance(a, dict) and isinstance(a.get("param"), str)
        }
    )


def _number(value: Any) -> int | float:
    """An operand of arithmetic: a number within the bounds (booleans count as 0 and 1)."""
    if not isinstance(value, int | float):
        raise TypeError("arithmetic needs numbers")
    if not -MAX_RULE_MAGNITUDE <= value <= MAX_RULE_MAGNITUDE:  # NaN fails both, as wanted
        raise RuleTooLarge(f"{_show_number(value)} is beyond ±2**64")
    return value


def _show_number(value: Any) -> str:
    if isinstance(value, int) and abs(value) >= 10**20:
        return f"a number of {value.bit_length()} bits"
    return repr(value)


def _power(base: Any, exponent: Any) -> int | float:
    base, exponent = _number(base), _number(exponent)
    if abs(exponent) > MAX_RULE_EXPONENT:
        raise RuleTooLarge(f"exponent {exponent!r} is beyond ±{MAX_RULE_EXPONENT}")
    if isinstance(base, int) and isinstance(exponent, int) and exponent > 0 and abs(base) > 1:
        # |base| ** exponent >= 2 ** ((bits - 1) * exponent): refuse before computing it.
        if (abs(base).bit_length() - 1) * exponent > 64:
            raise RuleTooLarge(f"{base} ** {exponent} is beyond ±2**64")
    result = base**exponent
    if isinstance(result, complex):
        raise TypeError("a negative number to a fractional power")
    return _number(result)


_ARITHMETIC = {
    ast.Add: lambda a, b: _number(_number(a) + _number(b)),
    ast.Sub: lambda a, b: _number(_number(a) - _number(b)),
    ast.Mult: lambda a, b: _number(_number(a) * _number(b)),
    ast.Div: lambda a, b: _number(_number(a) / _number(b)),
    ast.FloorDiv: lambda a, b: _number(_number(a) // _number(b)),
    ast.Mod: lambda a, b: _number(_number(a) % _number(b)),
    ast.Pow: _power,
}


def _compile_node(node: ast.AST):
    """A closure computing ``node`` from the cell's values (checked by compile_rule)."""
    if isinstance(node, ast.Constant):
        value = node.value
        return lambda values: value
    if isinstance(node, ast.Name):
        name = node.id

        def lookup(values):
            value = values.get(name)
            if value is None:
                raise _Unknown
            return value

        return lookup
    if isinstance(node, ast.Tuple | ast.List):
        items = [_compile_node(item) for item in node.elts]
        return lambda values: [item(values) for item in items]
    if isinstance(node, ast.BoolOp):
        parts = [_compile_node(v) for v in node.values]
        if isinstance(node.op, ast.And):
            return lambda values: all(part(values) for part in parts)
        return lambda values: any(part(values) for part in parts)
    if isinstance(node, ast.UnaryOp):
        operand = _compile_node(node.operand)
        if isinstance(node.op, ast.Not):
            return lambda values: not operand(values)
        return lambda values: _number(-_number(operand(values)))
    if isinstance(node, ast.BinOp):
        op = _ARITHMETIC[type(node.op)]
        left, right = _compile_node(node.left), _compile_node(node.right)
        return lambda values: op(left(values), right(values))
    if isinstance(node, ast.Compare):
        first = _compile_node(node.left)
        steps = [
            (_COMPARE[type(op)], _compile_node(c))
            for op, c in zip(node.ops, node.comparators, strict=True)
        ]

        def compare(values):
            left = first(values)
            for op, comparator in steps:
                right = comparator(values)
                if not op(left, right):
                    return False
                left = right
            return True

        return compare
    raise _Unknown  # pragma: no cover - compile_rule allows nothing else


@dataclass
class Rule:
    """A compiled exclusion rule. Calling it on a cell's values tells whether the rule holds;
    results are remembered per combination of the names it uses, so a 20,000-cell preview
    evaluates each distinct combination once."""

    text: str
    tree: ast.Expression
    names: tuple[str, ...]
    nodes: int
    _fn: Any = field(repr=False, default=None)
    _memo: dict = field(repr=False, default_factory=dict)

    def __call__(self, values: dict[str, Any]) -> bool:
        key = tuple(values.get(name) for name in self.names)
        try:
            return self._memo[key]
        except KeyError:
            pass
        except TypeError:  # an unhashable value (a list parameter): no memo
            return self._evaluate(values)
        result = self._memo[key] = self._evaluate(values)
        return result

    def _evaluate(self, values: dict[str, Any]) -> bool:
        try:
            return bool(self._fn(values))
        except (_Unknown, TypeError, ValueError, ArithmeticError, RecursionError):
            return False


def _rule_error(rule: str, message: str) -> MatrixError:
    shown = rule if len(rule) <= 80 else rule[:77] + "..."
    return MatrixError("exclusions", f"{shown!r}: {message}")


def compile_rule(rule: str, names: set[str]) -> Rule:
    """Parse an exclusion rule; only arithmetic, comparisons, and/or/not, numbers, strings
    and the given names, within the bounds above. Never evaluated by Python's ``eval``;
    parts without names are computed here, so ``9 ** 9 ** 9 > 1`` is refused at once."""
    if not isinstance(rule, str):
        raise MatrixError("exclusions", "each rule must be text")
    text = rule.strip()
    if len(text) > MAX_RULE_LENGTH:
        raise _rule_error(text, f"longer than {MAX_RULE_LENGTH} characters")
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in text):
        raise _rule_error(text, "control characters are not allowed")
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError as exc:
        raise _rule_error(text, f"not an expression ({exc.msg})") from None
    except (ValueError, RecursionError, MemoryError):
        raise _rule_error(text, "not an expression") from None
    nodes = list(ast.walk(tree))
    if len(nodes) > MAX_RULE_NODES:
        raise _rule_error(text, f"more than {MAX_RULE_NODES} parts; split it into several rules")
    used: list[str] = []
    for node in nodes:
        if not isinstance(node, _ALLOWED_NODES):
            raise _rule_error(text, f"{type(node).__name__} is not allowed")
        if isinstance(node, ast.Name):
            if node.id not in names:
                known = ", ".join(sorted(names))
                raise _rule_error(text, f"unknown name {node.id!r} (known: {known})")
            if node.id not in used:
                used.append(node.id)
        if isinstance(node, ast.Constant):
            value = node.value
            if isinstance(value, bool) or not isinstance(value, int | float | str):
                raise _rule_error(text, f"constant {value!r}")
            if isinstance(value, str) and len(value) > MAX_RULE_STRING:
                raise _rule_error(text, f"a text longer than {MAX_RULE_STRING} characters")
            if not isinstance(value, str):
                try:
                    _number(value)
                except RuleTooLarge as exc:
                    raise _rule_error(text, str(exc)) from None
    # Parts without names are the same for every cell: compute them now, so a rule that
    # can only fail (too large, 1 / 0, text times a number) is refused with its reason.
    for node in nodes:
        if (
            isinstance(node, ast.BinOp)
            and isinstance(node.op, ast.Pow)
            and isinstance(node.right, ast.Constant)
            and isinstance(node.right.value, int | float)
            and abs(node.right.value) > MAX_RULE_EXPONENT
        ):
            part = ast.get_source_segment(text, node) or "a power"
            raise _rule_error(
                text, f"{part}: exponent {node.right.value!r} is beyond ±{MAX_RULE_EXPONENT}"
            )
        if isinstance(node, ast.BinOp | ast.UnaryOp) and not any(
            isinstance(n, ast.Name) for n in ast.walk(node)
        ):
            part = ast.get_source_segment(text, node) or "a part"
            try:
                _compile_node(node)({})
            except RuleTooLarge as exc:
                raise _rule_error(text, f"{part}: {exc}") from None
            except ZeroDivisionError:
                raise _rule_error(text, f"{part}: division by zero") from None
            except (TypeError, ValueError, ArithmeticError) as exc:
                raise _rule_error(text, f"{part}: {exc}") from None
    return Rule(text, tree, tuple(used), len(nodes), _compile_node(tree.body))


def compile_rules(rules: Any, names: set[str]) -> list[Rule]:
    """Every rule compiled (empty ones dropped), within the count and total size bounds."""
    if not isinstance(rules, list):
        raise MatrixError("exclusions", "must be a list of rules")
    if len(rules) > MAX_RULES:
        raise MatrixError("exclusions", f"more than {MAX_RULES} rules")
    compiled = [
        compile_rule(rule, names) for rule in rules if not isinstance(rule, str) or rule.strip()
    ]
    check_rule_budget(compiled)
    return compiled


def check_rule_budget(rules: list[Rule]) -> None:
    total = sum(rule.nodes for rule in rules)
    if total > MAX_RULE_NODES_TOTAL:
        raise MatrixError(
            "exclusions",
            f"the rules have {total} parts together, more than {MAX_RULE_NODES_TOTAL}",
        )


def evaluate_rule(rule: Rule, values: dict[str, Any]) -> bool:
    """True when the rule holds for these values; a rule over an unknown fact (None),
    mismatched types or a number beyond the bounds is false, so it never hides a cell by
    accident."""
    return rule(values)


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
            if not k.startswith(TUNING_PREFIX) and k not in (TARGET_AXIS, SLURM_NODES)
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
                values = {**facts, **{_identifier(k): v for k, v in params.items()}}
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
    """The directory the run works in: the target's mount point, else the testbed's benchmark
    directory. Checked again here: rows stored before the check existed may hold any path."""
    if target is not None and target.path:
        problem = work_path_problem(target.path)
        if problem:
            raise MatrixError("testbeds", f"target {target} of {testbed.name!r}: {problem}")
        return target.path
    if testbed.benchmark_dir:
        problem = work_path_problem(testbed.benchmark_dir)
        if problem:
            raise MatrixError(
                "testbeds", f"benchmark directory of testbed {testbed.name!r}: {problem}"
            )
        return testbed.benchmark_dir
    raise MatrixError(
        "testbeds",
        f"testbed {testbed.name!r} has no benchmark directory "
        "(set it on the testbed, or sweep over targets with a "
        "mount point)",
    )


def node_problem(testbed: Testbed, node: Node) -> str | None:
    """Why a run of ``testbed`` may not use ``node`` (as launcher, client or target node), or
    None. The node must be the testbed owner's or shared by its owner. Workers listen on
    ``node.<hostname>``, so a node of the same hostname or address that another user
    registered earlier and does not share decides too (no aliasing a colleague's machine)."""
    if node.published:
        return f"node {node.hostname} is published study data: no worker runs there"
    if node.owner_id is None:
        return f"node {node.hostname} has no owner any more: staff must give it one"
    if node.owner_id != testbed.owner_id and not node.shared:
        return (
            f"node {node.hostname} belongs to {node.owner.username} and is not shared "
            f"with the owner of testbed {testbed.name!r}"
        )
    names = {node.hostname.lower()} | ({node.address.lower()} if node.address else set())
    same = Q()
    for name in names:
        same |= Q(hostname__iexact=name) | Q(address__iexact=name)
    earlier = (
        Node.objects.filter(same, pk__lt=node.pk, published=False, shared=False)
        .exclude(owner__isnull=True)
        .exclude(owner_id=testbed.owner_id)
        .select_related("owner")
        .order_by("pk")
        .first()
    )
    if earlier is not None:
        return (
            f"node {node.hostname} is the machine {earlier.owner.username} registered first "
            f"(as {earlier.hostname}) and does not share"
        )
    return None


def check_nodes(matrix: Matrix, runs=None) -> None:
    """MatrixError naming the first node a run of ``matrix`` would use but may not: the
    launcher, the clients and the targets' nodes of each testbed, and the launcher nodes
    stored on ``runs`` (those about to be sent again)."""
    pairs: dict[tuple[int, int], tuple[Testbed, Node]] = {}
    testbeds = matrix.testbeds.select_related("owner").prefetch_related(
        Prefetch(
            "members",
            queryset=TestbedNode.objects.select_related("node__owner").order_by(
                "node__hostname", "pk"
            ),
        ),
        Prefetch("targets", queryset=Target.objects.select_related("node__owner")),
    )
    for testbed in testbeds:
        for target in [None, *testbed.targets.all()]:
            launcher, clients = launcher_and_hosts(testbed, target)
            for node in [launcher, *clients]:
                if node is not None:
                    pairs.setdefault((testbed.pk, node.pk), (testbed, node))
    if runs is not None:
        used = set(runs.filter(node__isnull=False).values_list("testbed_id", "node_id").distinct())
        missing = used - set(pairs)
        if missing:
            testbed_by_pk = Testbed.objects.select_related("owner").in_bulk({t for t, _ in missing})
            node_by_pk = Node.objects.select_related("owner").in_bulk({n for _, n in missing})
            for t, n in sorted(missing):
                pairs[(t, n)] = (testbed_by_pk[t], node_by_pk[n])
    for testbed, node in pairs.values():
        problem = node_problem(testbed, node)
        if problem:
            raise MatrixError("testbeds", problem)


def launch_refused(matrix: Matrix, user) -> str | None:
    """Why ``user`` may not launch (or re-run, or resume) ``matrix``, or None: they must
    operate every testbed it names (published testbeds take no runs)."""
    for testbed in matrix.testbeds.select_related("owner").order_by("name", "pk"):
        problem = testbed.runs_refused(user)
        if problem:
            return problem
    return None


def slurm_refusal(testbed: Testbed) -> str:
    return (
        f"testbed {testbed.name!r} has no Slurm partition: set one on the testbed, or "
        "choose another launch mode"
    )


def launch_spec(matrix: Matrix, cell: Cell) -> tuple[dict[str, Any], Node]:
    """What the worker needs besides the parameters (``runners.launch.LaunchSpec``, stored
    on the run as ``launch``), and the launcher node."""
    launcher, clients = launcher_and_hosts(cell.testbed, cell.target)
    if launcher is None:
        raise MatrixError("testbeds", f"testbed {cell.testbed.name!r} has no nodes")
    slurm_mode = matrix.launch_mode == LaunchMode.SLURM
    if slurm_mode and not cell.testbed.slurm_partition:
        raise MatrixError("launch_mode", slurm_refusal(cell.testbed))
    spec = LaunchSpec(
        workdir=workdir_for(cell.testbed, cell.target),
        launcher=launcher.hostname,
        mode=matrix.launch_mode,
        # Slurm chooses the clients when the job starts (the run records them then).
        hosts=() if slurm_mode else tuple(map(_host, clients)),
        partition=cell.testbed.slurm_partition if slurm_mode else "",
        account=cell.testbed.slurm_account if slurm_mode else "",
        nodes=int(cell.params.get(SLURM_NODES, 1)) if slurm_mode else 1,
        tasks_per_node=matrix.tasks_per_node,
        timeout_s=matrix.timeout_s,
        drop_caches=matrix.drop_caches,
        apply_tuning=matrix.apply_tuning,
        tuning={
            k[len(TUNING_PREFIX) :]: v
            for k, v in cell.params.items()
            if k.startswith(TUNING_PREFIX)
        },
    )
    return spec.to_json(), launcher


# Stands for a run's own directory (experiments.execution.nodepolicy.run_dir_name) in the preview.
PREVIEW_RUN_DIR = "beeweb-run-UUID-N"
PREVIEW_JOB = "1"  # stands for the Slurm job id in a preview; shown as <job>


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
            command = preview_command(adapter, item.launch, cell.tool_params)
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
        nodes = int(cell.params.get(SLURM_NODES, 1)) if slurm_mode else 0
        where_key = (cell.testbed.pk, cell.target.pk if cell.target else None, nodes)
        ctx = contexts.get(where_key)
        if ctx is None:
            launcher, clients = launcher_and_hosts(cell.testbed, cell.target)
            try:
                workdir = workdir_for(cell.testbed, cell.target)
            except MatrixError:
                workdir = CHECK_WORKDIR
            mode, hosts = matrix.launch_mode, tuple(map(_host, clients))
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
                tasks_per_node=matrix.tasks_per_node,
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


# --- Expansion and dispatch ---------------------------------------------------------------


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


def expand(matrix: Matrix) -> dict[str, int]:
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


def launch(matrix: Matrix) -> dict[str, int]:
    """Expand, then queue every planned run."""
    check_nodes(matrix)
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
    check_nodes(matrix, matrix.runs.filter(status__in=[Run.Status.FAILED, Run.Status.CANCELLED]))
    return dispatch(ids)


def resume(matrix: Matrix) -> int:
    """After a restart of web, worker or broker: send planned and queued runs again. Stale
    messages still in the broker carry old tokens and do nothing."""
    ids = list(
        matrix.runs.filter(status__in=[Run.Status.PLANNED, Run.Status.QUEUED]).values_list(
            "pk", flat=True
        )
    )
    check_nodes(matrix, matrix.runs.filter(status__in=[Run.Status.PLANNED, Run.Status.QUEUED]))
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
    query = [
        ("matrix", str(matrix.uuid)),
        *(("metric", m) for m in compare_metrics(matrix)),
        ("series", series),
        ("x", f"param:{x}" if x else "tool"),
    ]
    return urlencode(query)


def compare_metrics(matrix: Matrix) -> list[str]:
    """The headline metrics the matrix's runs produced, in the tool's order, of the unit of
    the first: a fio matrix sweeping rw over write and read measured write_bw in some runs and
    read_bw in others, and its comparison shows both (not write_bw alone), but not the IOPS
    and latencies each run also reports. Before any run has a result: the tool's default
    metric, or its read metric when the matrix only reads."""
    from experiments.comparison.spec import MAX_METRICS
    from experiments.models import Metric

    produced = dict(
        Metric.objects.filter(run__matrix=matrix, primary=True)
        .values_list("name", "unit")
        .distinct()
        .order_by()
    )
    spec = registry.BY_NAME.get(matrix.tool)
    ordered = [m for m in (spec.metrics if spec else ()) if m in produced]
    ordered += sorted(m for m in produced if m not in ordered)
    if ordered:
        unit = produced[ordered[0]]
        return [m for m in ordered if produced[m] == unit][:MAX_METRICS]
    # What the definition will measure: the directions its fixed parameters and axes name
    # (a read-only matrix opens on its read metric, a write/read sweep on both).
    directions = {str(v) for k, v in matrix.fixed_params.items() if k in DIRECTION_PARAMS}
    for axis in matrix.axes:
        if axis.get("param") in DIRECTION_PARAMS:
            try:
                directions.update(str(v) for v in axis_values(axis))
            except MatrixError:
                continue
    metrics = [
        name
        for name, words in (("write_bw", WRITE_DIRECTIONS), ("read_bw", READ_DIRECTIONS))
        if directions & words
    ]
    return metrics or [registry.default_metric(matrix.tool)]


DIRECTION_PARAMS = ("rw", "direction")
WRITE_DIRECTIONS = {"write", "randwrite", "rw", "readwrite", "randrw", "trimwrite"}
READ_DIRECTIONS = {"read", "randread", "rw", "readwrite", "randrw"}
