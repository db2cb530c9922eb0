"""Matrices as YAML files, so experiment definitions can live in version control.

Example::

    name: fio write/read x numjobs
    tool: fio
    testbeds: [localhost]
    repetitions: 3                     # or {min: 3, max: 10, cv: 3}: adaptive (see below)
    order: interleaved                 # cells (default), interleaved or random (order_seed: 42)
    params: {size: 64m, bs: 1m, direct: 0}
    axes:
      rw: [write, read]
      numjobs: [1, 2, 4, 8]            # or {range: {start: 1, stop: 1024, scale: pow2}}
    exclude: ["numjobs > clients * cores"]

Testbeds and tuning sets are named (or given by UUID); the rest mirrors the matrix form.
``repetitions: {min: 3, max: 10, cv: 3}`` asks for at least 3 and at most 10 runs per cell,
until the coefficient of variation of the cell's primary metric is at most 3% (the same as
the keys ``repetitions: 3``, ``max_repetitions: 10``, ``target_cv: 3``).
"""

from __future__ import annotations

import math
from typing import Any

import yaml
from django.db import transaction
from django.db.models import Q
from yaml.composer import Composer
from yaml.constructor import SafeConstructor
from yaml.resolver import Resolver

from experiments.matrices.axes import MatrixError
from experiments.matrices.validation import FIELDS, MatrixInvalid, validate_matrix
from experiments.models import Matrix, Testbed, TuningSet
from experiments.shared.input_checks import CONTROL_CHARS_BUT_LINES
from experiments.shared.utils import is_uuid

# YAML keys of the fields whose names differ from the model's.
YAML_FIELDS = {"fixed_params": "params", "exclusions": "exclude"}
# A matrix file's keys: the definition's fields as YAML names them.
KEYS = {YAML_FIELDS.get(name, name) for name in FIELDS}


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
        "repetitions": (
            {"min": matrix.repetitions, "max": matrix.max_repetitions, "cv": matrix.target_cv}
            if matrix.adaptive
            else matrix.repetitions
        ),
        "order": str(matrix.order),
        **({"order_seed": matrix.order_seed} if matrix.order_seed is not None else {}),
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
    if len(names) > MAX_NAMED:
        raise MatrixError(field_name, f"more than {MAX_NAMED} names")
    found = []
    for name in names:
        if isinstance(name, bool) or not isinstance(name, str | int):
            raise MatrixError(field_name, f"{name!r} is not a name")
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


# --- Reading YAML within bounds -----------------------------------------------------------
# A matrix file is small and plain. Anything else is refused before it costs memory, CPU or
# database space: aliases beyond a few ("billion laughs": a 1 KB file expanding into
# gigabytes), oversized files, scalars, collections and nesting, control characters (a NUL
# cannot be stored by PostgreSQL), keys that are not text, values JSON cannot hold.
MAX_YAML_BYTES = 256 * 1024
MAX_YAML_ALIASES = 50
MAX_YAML_NODES = 50_000  # after expanding aliases
MAX_YAML_CHARS = 1024 * 1024  # characters of all scalars, after expanding aliases
MAX_YAML_DEPTH = 12
MAX_YAML_SCALAR = 10_000  # characters (a description)
MAX_YAML_ITEMS = 1000  # entries of one list or mapping
MAX_NAMED = 100  # testbeds or tuning sets one file names


def too_large(size: int) -> str | None:
    """Why a YAML file of ``size`` bytes is refused, or None."""
    if size > MAX_YAML_BYTES:
        return f"larger than {MAX_YAML_BYTES // 1024} KiB"
    return None


class YamlLimit(yaml.YAMLError):
    """A bound of the matrix YAML reader was exceeded; the message says which."""


class _Bounds:
    """Counts while composing, before anything is constructed: alias uses, nodes and scalar
    characters with aliases expanded, nesting depth, and the size of each scalar and
    collection (mixed into a loader ahead of PyYAML's Composer)."""

    def _start_counting(self) -> None:
        self._aliases = 0
        self._depth = 0
        self._expanded: dict[int, tuple[int, int]] = {}  # id(node) -> (nodes, characters)

    def _size(self, node: yaml.Node) -> tuple[int, int]:
        return self._expanded.get(id(node), (1, 0))

    def compose_node(self, parent, index):
        if self.check_event(yaml.AliasEvent):
            self._aliases += 1
            if self._aliases > MAX_YAML_ALIASES:
                mark = self.peek_event().start_mark
                raise YamlLimit(
                    f"more than {MAX_YAML_ALIASES} aliases (*name) at line {mark.line + 1}"
                )
            return super().compose_node(parent, index)
        self._depth += 1
        if self._depth > MAX_YAML_DEPTH:
            mark = self.peek_event().start_mark
            raise YamlLimit(f"nested deeper than {MAX_YAML_DEPTH} levels at line {mark.line + 1}")
        try:
            node = super().compose_node(parent, index)
        finally:
            self._depth -= 1
        line = node.start_mark.line + 1
        if isinstance(node, yaml.ScalarNode):
            if len(node.value) > MAX_YAML_SCALAR:
                raise YamlLimit(f"a value longer than {MAX_YAML_SCALAR} characters at line {line}")
            size = (1, len(node.value))
        else:
            if len(node.value) > MAX_YAML_ITEMS:
                raise YamlLimit(
                    f"more than {MAX_YAML_ITEMS} entries in one list or mapping at line {line}"
                )
            children = (
                [child for pair in node.value for child in pair]
                if isinstance(node, yaml.MappingNode)
                else node.value
            )
            nodes, chars = 1, 0
            for child in children:
                child_nodes, child_chars = self._size(child)
                nodes, chars = nodes + child_nodes, chars + child_chars
            size = (nodes, chars)
        if size[0] > MAX_YAML_NODES:
            raise YamlLimit(f"expands to more than {MAX_YAML_NODES} values (line {line})")
        if size[1] > MAX_YAML_CHARS:
            raise YamlLimit(
                f"expands to more than {MAX_YAML_CHARS // 1024} KiB of text (line {line})"
            )
        self._expanded[id(node)] = size
        return node


# Timestamps stay text (JSON has no dates).
_RESOLVERS = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


class _BoundedLoader(_Bounds, yaml.SafeLoader):
    """PyYAML's pure-Python SafeLoader within the bounds."""

    yaml_implicit_resolvers = _RESOLVERS

    def __init__(self, stream: str):
        super().__init__(stream)
        self._start_counting()


if yaml.__with_libyaml__:
    from yaml._yaml import CParser

    class _BoundedCLoader(CParser, _Bounds, Composer, SafeConstructor, Resolver):
        """libyaml's parser (several times faster) for the events, PyYAML's Composer (so the
        bounds apply while composing) and SafeConstructor for the rest."""

        yaml_implicit_resolvers = _RESOLVERS
        # CParser composes in C, where nothing is counted: compose in Python instead.
        check_node = Composer.check_node
        get_node = Composer.get_node
        get_single_node = Composer.get_single_node

        def __init__(self, stream: str):
            CParser.__init__(self, stream)
            SafeConstructor.__init__(self)
            Resolver.__init__(self)
            Composer.__init__(self)
            self._start_counting()

    _Loader: type = _BoundedCLoader
else:  # pragma: no cover - PyYAML without libyaml
    _Loader = _BoundedLoader


def _check_data(value: Any, where: str = "") -> None:
    """Only what JSON and the database hold: text without control characters, finite
    numbers within 64 bits, booleans, null, lists, and mappings with text keys."""
    at = f" in {where}" if where else ""
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise MatrixError("file", f"key {key!r}{at} is not text (quote it)")
            _check_data(key, where)
            _check_data(item, f"{where}.{key}" if where else key)
    elif isinstance(value, list):
        for item in value:
            _check_data(item, where)
    elif isinstance(value, str):
        bad = CONTROL_CHARS_BUT_LINES.search(value)
        if bad:
            what = "a NUL character" if bad.group() == "\x00" else "a control character"
            raise MatrixError("file", f"{what}{at} (U+{ord(bad.group()):04X}) is not allowed")
    elif isinstance(value, bool) or value is None:
        pass
    elif isinstance(value, int):
        if not -(2**63) <= value < 2**63:
            raise MatrixError("file", f"a number{at} does not fit in 64 bits")
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise MatrixError("file", f"{value!r}{at} is not a finite number")
    else:
        raise MatrixError("file", f"a value{at} of type {type(value).__name__} is not allowed")


def parse_yaml(text: str | bytes) -> dict[str, Any]:
    """A matrix file's mapping, read within the bounds above; MatrixError("file", ...)."""
    if isinstance(text, bytes):
        problem = too_large(len(text))
        if problem:
            raise MatrixError("file", problem)
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError:
            raise MatrixError("file", "not UTF-8 text") from None
    problem = too_large(len(text.encode("utf-8", "surrogatepass")))
    if problem:
        raise MatrixError("file", problem)
    bad = CONTROL_CHARS_BUT_LINES.search(text)
    if bad:
        line = text.count("\n", 0, bad.start()) + 1
        what = "a NUL byte" if bad.group() == "\x00" else "a control character"
        raise MatrixError("file", f"{what} (U+{ord(bad.group()):04X}) at line {line}")
    loader = _Loader(text)
    try:
        data = loader.get_single_data()
    except YamlLimit as exc:
        raise MatrixError("file", str(exc)) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark else ""
        problem = getattr(exc, "problem", None)
        context = getattr(exc, "context", None)
        opened = getattr(exc, "context_mark", None)
        why = f": {problem}" if problem else ""
        if context and opened:
            why += f" ({context} at line {opened.line + 1})"
        raise MatrixError("file", f"not valid YAML{where}{why}") from None
    except (ValueError, RecursionError, MemoryError):
        raise MatrixError("file", "not valid YAML (a value out of range)") from None
    finally:
        loader.dispose()
    if not isinstance(data, dict):
        raise MatrixError("file", "must be a YAML mapping (name:, tool:, axes: …)")
    _check_data(data)
    unknown = set(data) - KEYS
    if unknown:
        raise MatrixError("file", f"unknown keys: {', '.join(sorted(map(str, unknown)))}")
    return data


def _axes(raw: Any) -> Any:
    """``{param: [values] | {range: {...}} | value}`` as the model's list of axes (a list
    is taken as it is)."""
    if not isinstance(raw, dict):
        return raw
    axes = []
    for param, spec in raw.items():
        if isinstance(spec, dict) and "range" in spec:
            axes.append({"param": param, "range": spec["range"]})
        elif isinstance(spec, list):
            axes.append({"param": param, "values": spec})
        else:
            axes.append({"param": param, "values": [spec]})
    return axes


ADAPTIVE_KEYS = {"min": "repetitions", "max": "max_repetitions", "cv": "target_cv"}


def _adaptive(definition: dict[str, Any]) -> None:
    """``repetitions: {min, max, cv}`` as the fields repetitions, max_repetitions and
    target_cv (in place); MatrixError for another mapping."""
    spec = definition.get("repetitions")
    if not isinstance(spec, dict):
        return
    unknown = set(spec) - set(ADAPTIVE_KEYS)
    if unknown or "max_repetitions" in definition or "target_cv" in definition:
        raise MatrixError(
            "repetitions",
            "a number, or {min: 3, max: 10, cv: 3} (at least 3, at most 10 runs per cell, "
            "until the coefficient of variation is at most 3%); not both it and "
            "max_repetitions/target_cv",
        )
    for key, field_name in ADAPTIVE_KEYS.items():
        definition[field_name] = spec.get(key, 3 if key == "min" else None)


def from_data(data: dict[str, Any], user) -> Matrix:
    """Create a matrix (not yet expanded) from parsed YAML. The definition goes through
    matrix_validation.validate_matrix, as the page's and the API's do; MatrixInvalid names
    every field (by its YAML key) with its problems."""
    definition = {
        key: data[key] for key in data if key in KEYS and key not in ("params", "exclude")
    }
    for key in ("name", "description"):
        if isinstance(definition.get(key), int | float) and not isinstance(definition[key], bool):
            definition[key] = str(definition[key])  # "name: 2024" is text
    if "description" in definition and definition["description"] is None:
        definition["description"] = ""
    definition["fixed_params"] = data.get("params") or {}
    definition["axes"] = _axes(data.get("axes") or [])
    definition["exclusions"] = data.get("exclude") or []
    errors: dict[str, list[str]] = {}
    try:
        _adaptive(definition)
    except MatrixError as exc:
        errors["repetitions"] = [exc.message]
        definition["repetitions"] = 3
    for model, key in ((Testbed, "testbeds"), (TuningSet, "tuning_sets")):
        try:
            definition[key] = _resolve(model, data.get(key), user, key)
        except MatrixError as exc:
            errors[key] = [exc.message]
            definition[key] = []
    if "testbeds" not in errors:
        for testbed in definition["testbeds"]:
            problem = testbed.runs_refused(user)
            if problem:
                errors.setdefault("testbeds", []).append(problem)
    try:
        clean = validate_matrix(definition)
    except MatrixInvalid as exc:
        for key, messages in exc.errors.items():
            if key not in errors:  # "choose at least one testbed" after a resolve error
                errors[key] = messages
    if errors:
        raise MatrixInvalid(MatrixInvalid(errors).renamed(YAML_FIELDS))
    with transaction.atomic():
        matrix = Matrix.objects.create(
            owner=user,
            name=clean["name"],
            description=clean["description"],
            tool=clean["tool"],
            launch_mode=clean["launch_mode"],
            tasks_per_node=clean["tasks_per_node"],
            fixed_params=clean["fixed_params"],
            axes=clean["axes"],
            exclusions=clean["exclusions"],
            repetitions=clean["repetitions"],
            max_repetitions=clean["max_repetitions"],
            target_cv=clean["target_cv"],
            order=clean["order"],
            order_seed=clean["order_seed"],
            drop_caches=clean["drop_caches"],
            apply_tuning=clean["apply_tuning"],
            timeout_s=clean["timeout_s"],
        )
        matrix.testbeds.set(clean["testbeds"])
        matrix.tuning_sets.set(clean["tuning_sets"])
    return matrix


def from_yaml(text: str, user) -> Matrix:
    return from_data(parse_yaml(text), user)
