"""Exclusion rules: a small expression language over a cell's parameters and its testbed's
facts (``FACT_NAMES``), compiled once and evaluated once per distinct combination of the names
a rule uses. Never Python's ``eval``: only arithmetic, comparisons, and/or/not, numbers, text
and known names, within bounds that keep a rule cheap."""

from __future__ import annotations

import ast
import operator
from dataclasses import dataclass, field
from typing import Any

from experiments.matrices.axes import MatrixError
from experiments.models import Testbed

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


def rule_identifier(name: str) -> str:
    """A parameter or axis name as a rule spells it (dots, dashes and colons as underscores)."""
    return name.replace(".", "_").replace("-", "_").replace(":", "_")


def rule_names(params, axes) -> set[str]:
    """Names an exclusion rule may use: the testbed facts, the fixed parameters and the
    axes (dots, dashes and colons read as underscores: ``tuning:os.vm.dirty_ratio`` is
    ``tuning_os_vm_dirty_ratio``)."""
    return (
        set(FACT_NAMES)
        | {rule_identifier(k) for k in params if isinstance(k, str)}
        | {
            rule_identifier(a["param"])
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
