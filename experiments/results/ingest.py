"""Bulk ingest of completed runs: many runs with their metrics and parameters per request.

Each item is a run that already happened somewhere (a site without a worker, another lab's
archive, a push from a cluster node). It names its testbed (UUID or name), optionally its
tuning set, and carries either raw tool output (stored as given, then parsed by
``experiments.results.store`` as imports and executions are) or explicit metrics in DESIGN.md's
vocabulary (validated against ``METRIC_UNITS``), or both (explicit metrics win; the raw text
is kept).

Idempotency: an item's ``key`` becomes the run's ``client_key``, unique per owner. Sending
the same key again returns the existing run and creates nothing, so a client may retry a
whole batch after a timeout.

Speed: validation is plain Python (no serializer per item), references are resolved with one
query per kind, runs and metrics are written in bulk, all in one transaction per request: no
query per item. On PostgreSQL the rows go in as COPY text built here (``_CopyText``: each
run's row from a template of its columns' defaults, each metric's as one line; the run ids
drawn from the sequence in one query, the metric ids by the column's identity default);
elsewhere through ``experiments.results.store.insert`` (``bulk_create`` in large batches). A
batch's configuration keys are computed once per distinct configuration (``_KeyMemo``).
"""

from __future__ import annotations

import gc
import json
import math
import os
import re
import threading
import uuid as uuidlib
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from itertools import compress, repeat
from operator import attrgetter, is_, itemgetter
from types import SimpleNamespace
from typing import Any

import orjson
from django.db import IntegrityError, connection, transaction
from django.db.models import Q
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from experiments.models import Metric, Run, Testbed, TuningSet
from experiments.models.runs import Tool
from experiments.results import summaries, telemetry
from experiments.results.importing import not_text_problem
from experiments.results.store import (
    DETAIL_KEYS,
    MAX_OUTPUT_BYTES,
    METRICS_GIVEN,
    PRIMARY_STAT_ORDER,
    apply,
    derive_parts,
    insert,
    metric_rows,
    next_ids,
    not_data,
    parse_options,
    part_key,
    part_label,
    part_launch,
    record_launch,
)
from experiments.shared.input_checks import INT_MAX, clean_text, json_problem, text_problem
from runners.params import KINDS, normalise
from runners.parsers.base import METRIC_UNITS, STATS


def _limit(name: str, default: int) -> int:
    value = os.environ.get(name, "").strip()
    return int(value) if value else default


# What one request may hold: chosen so that the slowest request the server accepts ends in
# under 10 s, far within a web server's timeout (gunicorn's is 30 s). Parsing the raw output
# is most of the time (0.3 to 1 MiB/s depending on the tool), so bytes bound it; items bound
# the per-run work of tiny outputs. Measured with bench/ingest_limits.py (real tool outputs
# from ../shared/samples parsed on the server, PostgreSQL, 2 shared cores): up to 2 MiB took
# 1 to 4 s, 2.4 MiB of the slowest mix 7 s, 50,000 explicit metrics 2 s; 40 MiB (1,000 fio
# outputs) took 36 s. bench/RESULTS.md has the figures; clients split larger uploads
# (beeweb-push does).
MAX_ITEMS = _limit("BEEWEB_BULK_MAX_ITEMS", 500)
MAX_REQUEST_BYTES = _limit("BEEWEB_BULK_MAX_BYTES", 2 * 1024 * 1024)
MAX_METRICS = _limit("BEEWEB_BULK_MAX_METRICS", 50_000)  # explicit metrics, all items
MAX_METRICS_PER_RUN = 10000
ITEM_FIELDS = {
    "key",
    "testbed",
    "tuning_set",
    "tool",
    "op",
    "label",
    "notes",
    "params",
    "raw_output",
    "metrics",
    "tool_version",
    "command",
    "exit_code",
    "started_at",
    "finished_at",
    "status",
    "telemetry",
}
METRIC_FIELDS = {"name", "value", "unit", "stat", "iteration", "extra", "source_ref"}
STATUSES = {Run.Status.IMPORTED, Run.Status.SUCCEEDED, Run.Status.FAILED}
DATA = Run.DATA  # the statuses whose metrics are data (a failed run's are stored, not primary)
TOOLS = frozenset(Tool.values)  # (Tool.values is rebuilt on every access)


_gc_lock = threading.Lock()
_gc_pauses = [0, False]  # requests inside ``gc_paused``; whether the collector was enabled


@contextmanager
def gc_paused() -> Iterator[None]:
    """The cyclic garbage collector paused while a bulk request is parsed and stored. Such a
    request allocates ~100,000 containers (the parsed items, their checked copies, the rows),
    none in a reference cycle, all freed by their reference counts when it ends: the
    collections those allocations triggered found nothing to free, yet one in seven
    requests set off a full collection over every object of the process. (6.7 ms of CPU per
    request of 500 runs, a quarter of it; bench/RESULTS.md.) Cycles made meanwhile are
    collected once it is enabled again. Threads: paused while any request is inside."""
    with _gc_lock:
        if _gc_pauses[0] == 0:
            _gc_pauses[1] = gc.isenabled()
            gc.disable()
        _gc_pauses[0] += 1
    try:
        yield
    finally:
        with _gc_lock:
            _gc_pauses[0] -= 1
            if _gc_pauses[0] == 0 and _gc_pauses[1]:
                gc.enable()


class IngestError(ValueError):
    """The request as a whole is unusable (not a list, too many items); ``status`` is the
    HTTP status to answer with."""

    status = 400


class TooLarge(IngestError):
    """More in one request than the limits allow: split it."""

    status = 413


@dataclass
class Item:
    index: int
    data: dict[str, Any]
    errors: dict[str, str] = field(default_factory=dict)
    run: Any = None
    # Explicit metrics: tuples (``_metrics``); parsed ones: rows (``metric_rows``).
    metrics: list = field(default_factory=list)
    outcome: str = ""
    # An output of several independent measurements: the item of each part's run, this
    # one first (``_ingest``); for an existing key, (uuid, label) of each. ``held``: what
    # the output holds ("15 independent jobs (bs 1k … 16M)").
    parts: list = field(default_factory=list)
    held: str = ""
    # Whether the item's own checks (``_validate``'s fast paths) looked at every value it
    # holds, as the parser's walk would have (see ``ingest``'s ``check``).
    covered: bool = True


def _has_nul(value: Any) -> bool:
    """True when a JSON value holds what no column stores (see ``_unstorable``): NUL
    characters, lone surrogates, non-finite or 64-bit-overflowing numbers, nesting deeper
    than 20 levels."""
    return _unstorable(value, "$") is not None


def _unstorable(value: Any, where: str) -> str | None:
    """What in a JSON value no database column holds (NUL characters, lone surrogates,
    non-finite numbers, 64-bit overflow, nesting deeper than 20), or None."""
    return json_problem(value, max_depth=20, where=where)


def _text(item: Item, name: str, limit: int) -> str:
    value = item.data.get(name)
    if value is None:
        return ""
    if not isinstance(value, str):
        item.errors[name] = "must be a string"
        return ""
    problem = text_problem(value)
    if problem:
        item.errors[name] = problem
        return ""
    if len(value) > limit:
        item.errors[name] = f"at most {limit} characters"
        return ""
    return value


def _when(item: Item, name: str) -> datetime | None:
    value = item.data.get(name)
    if value in (None, ""):
        return None
    parsed = None
    if isinstance(value, str) and clean_text(value):
        try:
            parsed = parse_datetime(value)
        except ValueError:
            parsed = None
    if parsed is None:
        item.errors[name] = "must be an ISO 8601 date and time"
        return None
    if timezone.is_naive(parsed):
        parsed = timezone.make_aware(parsed, timezone.utc)
    return parsed


# The magnitude from which a float orjson read may be an integer of the body's text (orjson
# reads an integer beyond 64 bits as a float; experiments.api.parsers): the fast checks
# below leave such numbers to the slower ones, which accept or refuse them as before, and
# the item is then not ``covered``.
_FLOAT_BOUND = 2.0**63


def _flat_normalised(params: dict) -> dict | None:
    """``normalise(params)`` when ``params`` is flat (text keys; text, finite numbers below
    2**63 in magnitude, 64-bit integers, booleans, nulls as values) and its text holds
    neither NUL nor a lone surrogate: what ``_unstorable`` finds nothing in, with one search
    over all its text (nearly all parameters; None sends the others to ``_unstorable``).
    The same pass finds whether every value is in its normal form already, by
    ``runners.params.normalise``'s test (a value of a name without a kind; a non-negative
    integer of a kind but bool; a boolean of bool): then they are copied as they are. (A
    pass for each took 1.6 us per run of 10 parameters, this 1.3 us.)"""
    texts = []
    kinds = KINDS
    normal = True
    for name, value in params.items():
        kind = type(value)
        if kind is str:
            texts.append(value)
            if name in kinds:
                normal = False
        elif kind is int:
            if not -INT_MAX - 1 <= value <= INT_MAX:
                return None
            if name in kinds and (value < 0 or kinds[name] == "bool"):
                normal = False
        elif kind is float:
            if not -_FLOAT_BOUND < value < _FLOAT_BOUND:  # NaN, an infinity, or large
                return None
            if name in kinds:
                normal = False
        elif kind is bool:
            if name in kinds and kinds[name] != "bool":
                normal = False
        elif value is None:
            if name in kinds:
                normal = False
        else:
            return None
    try:
        texts.extend(params)
        if not clean_text("".join(texts)):
            return None
    except TypeError:  # a key that is not text
        return None
    return dict(params) if normal else normalise(params)


RANKS = {stat: rank for rank, stat in enumerate(PRIMARY_STAT_ORDER)}


# The fields of a plain metric (``_plain_metrics``), and the base unit of every name and
# statistic pair of the vocabulary.
PLAIN_FIELDS = frozenset({"name", "value", "unit", "stat"})
UNIT_OF = {(name, stat): unit for name, unit in METRIC_UNITS.items() for stat in STATS}


def _plain_metrics(raw: list) -> list[tuple] | None:
    """``_metrics`` of a list whose every metric is plain (nearly all): an object of name,
    value, optionally unit and statistic, all valid, the value a finite number below 2**63
    in magnitude; None when one is not, for ``_metrics`` to check one by one (and word the
    error). A few dictionary reads per metric instead of ``_metrics``' ~20 (a bulk request
    holds thousands)."""
    out = []
    append = out.append
    unit_of = UNIT_OF
    plain = PLAIN_FIELDS
    try:
        for m in raw:
            if type(m) is not dict or not plain.issuperset(m):
                return None
            # KeyError: no name, no value, or not the vocabulary's; TypeError: unhashable.
            # (Subscripts: cheaper than method calls, thousands of times per request.)
            stat = m["stat"] if "stat" in m else "value"
            name = m["name"]
            unit = unit_of[name, stat]
            value = m["value"]
            if type(value) is not float:
                if type(value) is not int:  # (bool is not int here)
                    return None
                value = float(value)
            if not -_FLOAT_BOUND < value < _FLOAT_BOUND:  # NaN, an infinity, or large
                return None
            if "unit" in m and m["unit"] != unit:
                return None
            append((name, value, unit, stat, None, {}, ""))
    except (KeyError, TypeError, OverflowError):
        return None
    return out


def _metrics(item: Item, raw: Any) -> list[tuple]:
    """The explicit metrics of an item, checked, as tuples ``(name, value, unit, stat,
    iteration, extra, source_ref)``; on the first bad one, its error and an empty list."""
    if not isinstance(raw, list):
        item.errors["metrics"] = "must be a list"
        return []
    if len(raw) > MAX_METRICS_PER_RUN:
        item.errors["metrics"] = f"at most {MAX_METRICS_PER_RUN} metrics per run"
        return []
    plain = _plain_metrics(raw)
    if plain is not None:
        return plain
    item.covered = False
    out = []
    append = out.append
    units = METRIC_UNITS
    for n, m in enumerate(raw):
        if not isinstance(m, dict):
            item.errors[f"metrics[{n}]"] = "must be an object"
            return []
        if not METRIC_FIELDS.issuperset(m):
            unknown = set(m) - METRIC_FIELDS
            item.errors[f"metrics[{n}]"] = f"unknown fields: {', '.join(sorted(map(str, unknown)))}"
            return []
        name = m.get("name")
        base = units.get(name) if type(name) is str else None
        if base is None:
            if not isinstance(name, str) or name not in units:
                item.errors[f"metrics[{n}]"] = (
                    f"unknown metric name {name!r} (see DESIGN.md's vocabulary)"
                )
                return []
            base = units[name]
        value = m.get("value")
        if type(value) is not float:
            if isinstance(value, bool) or not isinstance(value, int | float):
                item.errors[f"metrics[{n}]"] = f"{name}: value must be a number"
                return []
            try:
                value = float(value)
            except OverflowError:  # an integer beyond any float
                value = math.inf
        if value - value != 0.0 or abs(value) > 1e300:  # NaN, an infinity, or near it
            item.errors[f"metrics[{n}]"] = f"{name}: value must be a finite number"
            return []
        unit = m.get("unit", base)
        if unit != base:
            item.errors[f"metrics[{n}]"] = (
                f"{name}: unit must be {base!r} (base units), got {unit!r}"
            )
            return []
        stat = m.get("stat", "value")
        if type(stat) is not str or stat not in STATS:
            item.errors[f"metrics[{n}]"] = f"{name}: unknown statistic {stat!r}"
            return []
        iteration = m.get("iteration")
        if iteration is not None and (
            isinstance(iteration, bool)
            or not isinstance(iteration, int)
            or not 0 <= iteration <= 2_147_483_647
        ):
            item.errors[f"metrics[{n}]"] = (
                f"{name}: iteration must be a non-negative integer or null"
            )
            return []
        extra = m.get("extra") or {}
        if extra:
            if not isinstance(extra, dict):
                item.errors[f"metrics[{n}]"] = f"{name}: extra must be an object"
                return []
            problem = _unstorable(extra, "extra")
            if problem:
                item.errors[f"metrics[{n}]"] = f"{name}: {problem}"
                return []
        source_ref = m.get("source_ref", "")
        if source_ref != "" and (
            not isinstance(source_ref, str) or len(source_ref) > 200 or not clean_text(source_ref)
        ):
            item.errors[f"metrics[{n}]"] = (
                f"{name}: source_ref must be a string of at most 200 chars"
            )
            return []
        append((name, value, unit, stat, iteration, extra, source_ref))
    return out


def primary_flags(metrics: list[tuple]) -> list[bool]:
    """Which of an item's metric tuples (``_metrics``) are primary: what
    ``experiments.results.store.mark_primary`` marks (one per name: iteration null, no detail key
    in extra, the first of stat value / mean / max that exists)."""
    if len({m[0] for m in metrics}) == len(metrics):
        for m in metrics:
            if m[4] is not None or m[5]:
                break
        else:  # (nearly always) each name once, none with an iteration or extra
            return [m[3] in RANKS for m in metrics]
    best: dict[str, tuple[int, int]] = {}
    for i, (name, _, _, stat, iteration, extra, _) in enumerate(metrics):
        if iteration is not None or (extra and not DETAIL_KEYS.isdisjoint(extra)):
            continue
        rank = RANKS.get(stat)
        if rank is None:
            continue
        current = best.get(name)
        if current is None or rank < current[0]:
            best[name] = (rank, i)
    flags = [False] * len(metrics)
    for _, i in best.values():
        flags[i] = True
    return flags


# The text fields of an item and their limits, in the order they are checked.
TEXT_LIMITS = (
    ("key", 200),
    ("testbed", 160),
    ("tuning_set", 160),
    ("tool", 16),
    ("op", 40),
    ("label", 200),
    ("notes", 100_000),
    ("raw_output", MAX_OUTPUT_BYTES),
    ("tool_version", 60),
    ("command", 100_000),
    ("status", 10),
)
TEXT_LIMIT = dict(TEXT_LIMITS)
_NO_TEXTS = dict.fromkeys(TEXT_LIMIT, "")


def _validate(item: Item) -> dict[str, Any]:
    """Check one item's shape; returns the cleaned values (errors go to ``item.errors``)."""
    data = item.data
    errors = item.errors
    if not ITEM_FIELDS.issuperset(data):
        unknown = set(data) - ITEM_FIELDS
        errors["item"] = f"unknown fields: {', '.join(sorted(map(str, unknown)))}"
    # The text fields: each absent one empty, each given one checked (what _text does,
    # inline): most are absent, so only the given ones are looked at, their texts searched
    # for NUL and lone surrogates as one. On a problem, every field through _text, in their
    # order, for the errors to come in it.
    clean: dict[str, Any] = _NO_TEXTS.copy()
    get = data.get
    texts: list[str] | None = []
    for name in TEXT_LIMIT.keys() & data.keys():
        value = data[name]
        if type(value) is str and len(value) <= TEXT_LIMIT[name]:
            clean[name] = value
            texts.append(value)
        elif value is not None and value != "":
            texts = None
            break
    if texts is None or not clean_text("".join(texts)):
        for field_name, limit in TEXT_LIMITS:
            clean[field_name] = _text(item, field_name, limit)
    clean["key"] = clean["key"] or None
    status = clean["status"] = clean["status"] or Run.Status.IMPORTED
    clean["started_at"] = _when(item, "started_at") if get("started_at") is not None else None
    clean["finished_at"] = _when(item, "finished_at") if get("finished_at") is not None else None
    raw_output = clean["raw_output"]
    problem = not_text_problem(raw_output) if raw_output else None
    if problem:
        errors["raw_output"] = f"{problem}; nothing was stored"
        raw_output = clean["raw_output"] = ""
    if not clean["testbed"] and "testbed" not in errors:
        errors["testbed"] = "required: a testbed UUID or name"
    tool = clean["tool"]
    if tool and tool not in TOOLS:
        errors["tool"] = f"unknown tool {tool!r}"
    if status not in STATUSES:
        errors["status"] = f"one of {', '.join(sorted(STATUSES))}"
    params = get("params", {})
    if params is None:
        params = {}
    if not isinstance(params, dict):
        errors["params"] = "must be an object"
        params = {}
    # Stored in the normal forms (runners.params: "4k" -> 4096, "true" -> True).
    normalised = _flat_normalised(params)
    if normalised is None:
        item.covered = False
        problem = _unstorable(params, "params")
        if problem:
            errors["params"] = problem
            params = {}
        normalised = normalise(params)
    clean["params"] = normalised
    exit_code = get("exit_code")
    if exit_code is not None and (
        isinstance(exit_code, bool)
        or not isinstance(exit_code, int)
        or not -2_147_483_648 <= exit_code <= 2_147_483_647
    ):
        errors["exit_code"] = "must be an integer"
        exit_code = None
    clean["exit_code"] = exit_code
    metrics = get("metrics")
    metrics = clean["metrics"] = _metrics(item, metrics) if metrics is not None else None
    if metrics is None and not raw_output.strip() and "raw_output" not in errors:
        errors["item"] = "give raw_output (parsed on the server) or metrics"
    if metrics is not None and not tool:
        errors.setdefault("tool", "required with explicit metrics")
    clean["telemetry"] = None
    if get("telemetry") is not None:
        item.covered = False
        try:
            clean["telemetry"] = telemetry.validate(data["telemetry"])
        except telemetry.TelemetryInvalid as exc:
            errors["telemetry"] = f"{exc}; nothing was stored"
    return clean


def _resolve(model, refs: set[str], user, field_name: str) -> dict[str, Any]:
    """UUID or name -> object, with one query; a name several objects share resolves to the
    user's own when exactly one of them is the user's."""
    if not refs:
        return {}
    uuids, names = set(), set()
    for ref in refs:
        try:
            uuids.add(uuidlib.UUID(ref))
        except ValueError:
            names.add(ref)
    found: dict[str, Any] = {}
    by_name: dict[str, list] = {}
    # Only the lookups that have references, unordered: what is found does not depend on
    # the order (0.75 -> 0.53 ms of Python for a testbed and a tuning set by name).
    lookup = Q(uuid__in=uuids) if uuids else Q()
    if names:
        lookup |= Q(**{f"{field_name}__in": names})
    for obj in model.objects.filter(lookup).order_by():
        if obj.uuid in uuids:
            found[str(obj.uuid)] = obj
            for ref in refs:
                if ref.lower() == str(obj.uuid):
                    found[ref] = obj
        name = getattr(obj, field_name)
        if name in names:
            by_name.setdefault(name, []).append(obj)
    for name, objs in by_name.items():
        if len(objs) > 1:
            mine = [o for o in objs if o.owner_id == user.pk]
            objs = mine if len(mine) == 1 else objs
        found[name] = objs[0] if len(objs) == 1 else None  # None: ambiguous
    return found


def _store(new: list[tuple[Item, dict[str, Any]]]) -> None:
    """Write the valid items of a request in one transaction: every run with all of its
    metrics and telemetry, or (on any database error) none of them.

    Runs first (their ids drawn before they are written), then every metric of the batch in
    one COPY (or bulk_create), then telemetry. What is derived from a batch's runs and
    metrics as a whole belongs at the end of this block, inside the transaction, with the
    batch's run ids."""
    runs = [item.run for item, _ in new]
    with transaction.atomic():
        primaries = (_copy if connection.vendor == "postgresql" else _bulk_create)(new)
        # The batch's configuration summaries, before the telemetry below refreshes single
        # runs' verdicts: on PostgreSQL aggregated from the primary metrics' values held here.
        summaries.add(runs, primaries)
        # Telemetry (validated above) in the same transaction: a run is stored with all of
        # its documents or not at all. Its verdict is computed once all are in.
        carried = {item.run.id: clean["telemetry"] for item, clean in new if clean["telemetry"]}
        if carried:  # (most batches carry none: no queryset built for nothing)
            for run in Run.objects.filter(pk__in=carried).select_related("node"):
                telemetry.store(run, carried[run.pk])


def _bulk_create(new: list[tuple[Item, dict[str, Any]]]) -> None:
    """Other databases: the runs and metrics through ``experiments.results.store.insert``
    (bulk_create), explicit metrics as ``metric_rows`` makes them."""
    insert(Run, [item.run for item, _ in new])
    metrics: list[SimpleNamespace] = []
    for item, _ in new:
        run_id = item.run.id
        rows = item.metrics
        if rows and type(rows[0]) is tuple:  # explicit metrics, as _metrics checked them
            rows = metric_rows(_metric_dicts(rows))
        if item.run.status not in Run.DATA:  # a failed run's metrics are not data
            not_data(rows)
        for metric in rows:
            metric.run_id = run_id
        metrics.extend(rows)
    insert(Metric, metrics)


def _metric_dicts(rows: list[tuple]) -> list[dict[str, Any]]:
    names = ("name", "value", "unit", "stat", "iteration", "extra", "source_ref")
    return [dict(zip(names, row, strict=True)) for row in rows]


# --- COPY text (PostgreSQL) ------------------------------------------------------------------

# COPY's text format: backslash, tab, newline and carriage return are escaped; NUL cannot
# occur (validated), nor can a lone surrogate.
_COPY_SPECIAL = re.compile(r"[\\\t\n\r]")
_COPY_ESCAPES = str.maketrans({"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"})
NULL = "\\N"


def _escaped(text: str) -> str:
    # (A printable text holds no tab, newline or carriage return: two C calls, where the
    # regex's search cost a call into the regex engine for each of thousands of texts.)
    if text.isprintable() and "\\" not in text:
        return text
    return text.translate(_COPY_ESCAPES) if _COPY_SPECIAL.search(text) else text


def _escaped_json(text: str) -> str:
    """``_escaped`` of a JSON text: json and orjson write no raw control character (they
    escape them), so only backslashes need doubling."""
    return text.replace("\\", "\\\\") if "\\" in text else text


def _json_text(value: Any) -> str:
    # jsonb reads what json.dumps writes (as the ORM's adapter does); most JSON columns of a
    # new run hold their empty default.
    if not value and type(value) in (dict, list):
        return "{}" if type(value) is dict else "[]"
    return _escaped_json(json.dumps(value))


def _checked_json_text(value: Any) -> str:
    """``_json_text`` of a value known to hold only what JSON can (checked with
    ``json_problem``: finite numbers, 64-bit integers, text keys), by orjson. (orjson writes
    NaN as null where json.dumps writes what jsonb refuses: unchecked values, such as the
    parameters a parser found, go through ``_json_text``.)"""
    if not value and type(value) in (dict, list):
        return "{}" if type(value) is dict else "[]"
    try:
        return _escaped_json(orjson.dumps(value).decode())
    except TypeError:  # e.g. a key that is not a string
        return _escaped_json(json.dumps(value))


def _bool_text(value: Any) -> str:
    return "t" if value else "f"


def _int_text(value: Any) -> str:
    return str(int(value))


def _float_text(value: Any) -> str:
    return repr(float(value))


def _datetime_text(value: datetime) -> str:
    return value.isoformat()


# Formatters that write equal values (1, 1.0, True) as one text: a column of equal values
# is formatted once. (Not a float's: 0 and -0.0 are equal, their texts are not.)
_EQUAL_TEXTS = frozenset({_bool_text, _int_text})


def _column_texts(values: tuple, fmt: Callable[[Any], str]) -> str | list | tuple:
    """The COPY texts of one column of rows (``values``, one per row; ``fmt`` the column's
    formatter, None is NULL): one text when every row holds the same value, else a text per
    row. Nearly every column of a request's runs holds one value in every row (the owner,
    the testbed, the time, the tool); the others are formatted by C-level maps where their
    types allow: the texts of a text column are looked at as one (escaped only when that
    finds something to escape), ids and UUIDs mapped through ``str``."""
    first = values[0]
    if all(map(is_, values, repeat(first))) or (
        (type(first) is str or fmt in _EQUAL_TEXTS) and values.count(first) == len(values)
    ):
        return NULL if first is None else fmt(first)
    if None not in values:
        if fmt is _escaped:
            try:
                joined = "".join(values)
            except TypeError:  # (not a text: the formatter refuses it below)
                joined = "\\"
            if joined.isprintable() and "\\" not in joined:
                return values
        elif fmt is str:
            return list(map(str, values))
        elif fmt is _int_text:
            return list(map(str, map(int, values)))
        elif fmt is _checked_json_text:
            try:
                texts = list(map(bytes.decode, map(orjson.dumps, values)))
            except TypeError:  # (one orjson refuses: each as _checked_json_text writes it)
                pass
            else:
                return texts if "\\" not in "".join(texts) else list(map(_escaped_json, texts))
    # Each row's, the text of a value the row before held reused.
    texts = []
    append = texts.append
    last = text = None
    for value in values:
        if value is None:
            append(NULL)
        elif value is last:
            append(text)
        else:
            last, text = value, fmt(value)
            append(text)
    return texts


def _formatter(field) -> Any:
    """The COPY text of a value of ``field`` (None is NULL, handled by the caller)."""
    kind = field.get_internal_type()
    if kind in ("CharField", "TextField"):
        return _escaped
    if kind == "JSONField":
        return _json_text
    if kind == "BooleanField":
        return _bool_text
    if kind in (
        "BigAutoField",
        "AutoField",
        "ForeignKey",
        "IntegerField",
        "BigIntegerField",
        "SmallIntegerField",
        "PositiveIntegerField",
        "PositiveSmallIntegerField",
        "PositiveBigIntegerField",
    ):
        return _int_text
    if kind == "FloatField":
        return _float_text
    if kind == "DateTimeField":
        return _datetime_text
    if kind == "UUIDField":
        return str
    # A column type this writer does not know: say so (tests/api/test_ingest_copy.py writes
    # every column) rather than guess its text form.
    raise NotImplementedError(f"COPY text of a {kind} ({field.model.__name__}.{field.name})")


class _CopyText:
    """How the run rows of a bulk request become COPY text: the columns (id first), each
    column's formatter; a row is a template of every column's default text with the values
    the row holds itself (``_run``). Built once per process."""

    def __init__(self) -> None:
        fields = [f for f in Run._meta.concrete_fields if not f.primary_key]
        quote = connection.ops.quote_name
        self.target = (
            f"{quote(Run._meta.db_table)} "
            f"({', '.join(quote(c) for c in ['id', *(f.column for f in fields)])})"
        )
        self.position = {"id": 0, **{f.attname: n + 1 for n, f in enumerate(fields)}}
        self.formats = [str, *(_formatter(f) for f in fields)]
        self.checked_formats = [
            _checked_json_text if fmt is _json_text else fmt for fmt in self.formats
        ]
        self.fields = fields
        metric = Metric._meta
        self.metrics = (
            f"{quote(metric.db_table)} ("
            + ", ".join(
                quote(metric.get_field(name).column)
                for name in (
                    "run",
                    "value",
                    "name",
                    "unit",
                    "stat",
                    "iteration",
                    "primary",
                    "extra",
                    "source_ref",
                )
            )
            + ")"
        )

    def lines(self, rows: list, checked: list[bool]) -> list[str]:
        """The COPY lines of a request's run rows (instances of its ``_row_type``), column by
        column (``_column_texts``): the rows that hold the same columns in the same order
        (nearly always all of them) are formatted together, each column's texts at once.
        ``checked``: per row, whether its JSON values hold only what JSON can
        (``_checked_json_text``). (A row at a time, a Python step per value of each row, took
        3.3 us per run; this 1.5 us.)"""
        groups: dict[tuple, list[int]] = {}
        for index, (row, flag) in enumerate(zip(rows, checked, strict=True)):
            groups.setdefault((flag, *row.__dict__), []).append(index)
        out: list[str] = [""] * len(rows)
        row_type = type(rows[0])
        position = self.position
        params_at = position["params"]
        launch_at = position["launch"]
        for (flag, *names), indices in groups.items():
            formats = self.checked_formats if flag else self.formats
            # Each column's default text, the row's own values' in their place.
            columns: list[Any] = [
                NULL,
                *(
                    NULL if (value := getattr(row_type, f.attname)) is None else fmt(value)
                    for f, fmt in zip(self.fields, formats[1:], strict=True)
                ),
            ]
            fields = [rows[i].__dict__ for i in indices]
            launches = None
            for name, values in zip(
                names, zip(*map(dict.values, fields), strict=True), strict=True
            ):
                at = position.get(name)
                if at == launch_at:
                    launches = values  # once every other column is written
                elif at is not None:
                    columns[at] = _column_texts(values, formats[at])
            if launches is not None:
                params = columns[params_at]
                columns[launch_at] = _launch_texts(
                    launches,
                    [row.get("params") for row in fields],
                    repeat(params) if isinstance(params, str) else params,
                    formats[launch_at],
                )
            # Neighbouring columns of one text each are one piece of every line.
            pieces: list[Any] = []
            for column in columns:
                if isinstance(column, str) and pieces and isinstance(pieces[-1], str):
                    pieces[-1] = f"{pieces[-1]}\t{column}"
                else:
                    pieces.append(column)
            count = len(indices)
            texts = zip(
                *(repeat(p, count) if isinstance(p, str) else p for p in pieces), strict=True
            )
            for index, line in zip(indices, map("\t".join, texts), strict=True):
                out[index] = line
        return out


# A bulk-ingested run's ``launch`` as ``record_launch`` builds it: no parse options, the
# parameters of the run, metrics given or not (its keys in this order).
_LAUNCH_KEYS = ("parse_options", "params", METRICS_GIVEN)
_LAUNCH_KEYS_PARSED = ("parse_options", "params")


def _launch_texts(
    launches: tuple, params: list, params_texts: Iterable[str], json_format: Any
) -> list[str]:
    """The COPY texts of run rows' ``launch`` (``json_format`` of each, NULL for None), from
    the texts of their parameters columns already written (``params_texts``; ``params``:
    each row's own parameters, None if it holds none) where a launch is what
    ``record_launch`` makes of no parse options and these very parameters: the parameters
    are serialised once, not twice. (json.dumps and orjson write the same text for the
    same dict but for separators: the launch's are put as the writer puts them.)"""
    if json_format is _checked_json_text:  # orjson's separators
        comma, colon = ",", ":"
    elif json_format is _json_text:  # json.dumps'
        comma, colon = ", ", ": "
    else:
        return [NULL if launch is None else json_format(launch) for launch in launches]
    head = f'{{"parse_options"{colon}{{}}{comma}"params"{colon}'
    given = f'{comma}"{METRICS_GIVEN}"{colon}true}}'
    texts = []
    append = texts.append
    for launch, own, params_text in zip(launches, params, params_texts, strict=False):
        if launch is None:
            append(NULL)
            continue
        if (
            type(launch) is dict
            and type(own) is dict
            and launch.get("params") is own
            and not launch.get("parse_options", True)
            and type(launch["parse_options"]) is dict
        ):
            keys = tuple(launch)
            if keys == _LAUNCH_KEYS and launch[METRICS_GIVEN] is True:
                append(f"{head}{params_text}{given}")
                continue
            if keys == _LAUNCH_KEYS_PARSED:
                append(f"{head}{params_text}}}")
                continue
        append(json_format(launch))
    return texts


_COPY_TEXT: list[_CopyText] = []


def _copy_text() -> _CopyText:
    if not _COPY_TEXT:
        _COPY_TEXT.append(_CopyText())
    return _COPY_TEXT[0]


def _float_texts(values: list[float]) -> list[str]:
    """The COPY texts of finite floats (checked: ``_metrics``), in one orjson call: the
    shortest text that reads back as the same float, as ``repr`` writes it but for the
    form of exponents (``1e16``, not ``1e+16``; PostgreSQL reads either). (``repr`` took
    1.3 ms for the 3,500 values of a request of 500 runs, this 0.1 ms.)"""
    if not values:
        return []
    return orjson.dumps(values).decode().removeprefix("[").removesuffix("]").split(",")


# A metric tuple's (``_metrics``) name, value and extra: what ``summaries.add`` reads.
_NAME_VALUE_EXTRA = itemgetter(0, 1, 5)


# COPY's texts of a primary flag.
_FLAG_TEXTS = {True: "t", False: "f"}


def _metric_lines(heads: list[str], rows: list[tuple], flags: list[bool]) -> list[str]:
    """COPY lines (columns: run, value, name, unit, stat, iteration, primary, extra,
    source_ref) of explicit metrics (``_metrics``' tuples) of one or more runs: per tuple its
    run's id (``heads``, as text) and its ``primary_flags`` flag. Names, units and statistics
    are the vocabulary's (nothing to escape). When no metric has an iteration, extra or
    source_ref (nearly always), the lines are joined column by column in C; else each is
    written in turn. (Per run, a Python step per metric: 0.9 ms for 500 runs of 7 metrics,
    this 0.7 ms.)"""
    if not rows:
        return []
    count = len(rows)
    names, values, units, stats, iterations, extras, sources = zip(*rows, strict=True)
    texts = _float_texts(list(values))
    if iterations.count(None) == count and not any(extras) and not any(sources):
        return list(
            map(
                "\t".join,
                zip(
                    heads,
                    texts,
                    names,
                    units,
                    stats,
                    repeat(NULL, count),
                    map(_FLAG_TEXTS.__getitem__, flags),
                    repeat("{}", count),
                    repeat("", count),
                    strict=True,
                ),
            )
        )
    return [
        f"{head}\t{value}\t{name}\t{unit}\t{stat}"
        f"\t{NULL if iteration is None else iteration}\t{'t' if primary else 'f'}"
        f"\t{_checked_json_text(extra) if extra else '{}'}"
        f"\t{_escaped(source_ref) if source_ref else ''}"
        for head, value, (name, _, unit, stat, iteration, extra, source_ref), primary in zip(
            heads, texts, rows, flags, strict=True
        )
    ]


def _row_lines(run_id: int, rows: list) -> list[str]:
    """COPY lines of a run's parsed metric rows (``metric_rows``), as ``_metric_lines``."""
    return [
        f"{run_id}\t{float(m.value)!r}\t{_escaped(m.name)}\t{_escaped(m.unit)}"
        f"\t{_escaped(m.stat)}\t{NULL if m.iteration is None else int(m.iteration)}"
        f"\t{'t' if m.primary else 'f'}\t{_json_text(m.extra or {})}"
        f"\t{_escaped(m.source_ref or '')}"
        for m in rows
    ]


def _copy(new: list[tuple[Item, dict[str, Any]]]) -> list[list[tuple]]:
    """PostgreSQL: the batch's runs and metrics in two COPYs (text built here); the run ids
    drawn from the table's sequence in one query first, the metrics' by the identity
    default. Inside the caller's transaction. Returns per run its primary metrics as
    written, ``(name, value, extra)`` (``summaries.add``)."""
    if not new:
        return []
    plan = _copy_text()
    # wrap_database_errors: a unique violation inside COPY is Django's IntegrityError.
    with connection.cursor() as cursor, connection.wrap_database_errors:
        ids = next_ids(cursor, Run._meta.db_table, len(new))
        metrics = []
        primaries: list[list[tuple]] = []
        for pk, (item, _) in zip(ids, new, strict=True):
            item.run.id = pk
        # Items with explicit metrics: every JSON value of their rows was checked (params,
        # extra, the launch built of them); parsed ones hold the parser's parameters.
        lines = plan.lines(
            [item.run for item, _ in new], [clean["metrics"] is not None for _, clean in new]
        )
        # The explicit metrics of the runs since the last one with parsed metrics: their
        # runs' ids, tuples and flags, written at once (``_metric_lines``) in their place.
        heads: list[str] = []
        tuples: list[tuple] = []
        flags: list[bool] = []
        for pk, (item, _) in zip(ids, new, strict=True):
            rows = item.metrics
            if not rows:
                primaries.append([])
            elif type(rows[0]) is tuple:
                # A failed run's metrics are stored, none primary: they are not data.
                run_flags = primary_flags(rows) if item.run.status in DATA else [False] * len(rows)
                heads.extend(repeat(str(pk), len(rows)))
                tuples.extend(rows)
                flags.extend(run_flags)
                primaries.append(list(map(_NAME_VALUE_EXTRA, compress(rows, run_flags))))
            else:
                metrics.extend(_metric_lines(heads, tuples, flags))
                heads, tuples, flags = [], [], []
                if item.run.status not in DATA:
                    not_data(rows)
                metrics.extend(_row_lines(pk, rows))
                primaries.append([(m.name, m.value, m.extra) for m in rows if m.primary])
        metrics.extend(_metric_lines(heads, tuples, flags))
        # One COPY per table, in the order of their foreign keys (a table written per run,
        # such as another of the run's rows, is one more pair here, its lines made above).
        for target, table_lines in ((plan.target, lines), (plan.metrics, metrics)):
            if table_lines:
                with cursor.cursor.copy(f"COPY {target} FROM STDIN") as copy:
                    copy.write("\n".join(table_lines) + "\n")
    return primaries


# --- Rows --------------------------------------------------------------------------------------


def _row_type() -> type:
    """The class of the run rows of one request: every column's default (as of now) as a
    class attribute, so that a row holds only the values given it (``_run``). (Plain rows,
    not model instances: building 45-field instances was a third of ingest time.) The
    defaults are shared by the request's rows: rows are given new values, never changed in
    place."""
    defaults = {f.attname: f.get_default() for f in Run._meta.concrete_fields}
    return type("RunRow", (), defaults)


def _run(defaults: type, values: dict[str, Any]) -> Any:
    """A run row to insert: ``values`` (its own, a new dict: ``id`` None first, its fresh
    ``uuid``, the text of one, ``_uuid4_texts``) as its fields; every other column's default
    (``defaults``, the class of ``_row_type``). (The dict becomes the row's: keyword
    arguments copied into it cost 1.4 us per row, this 0.6.)"""
    row = defaults.__new__(defaults)
    row.__dict__ = values
    return row


# The variant digit of a version 4 UUID of a random hex digit: its two high bits 10.
_UUID4_VARIANT = {digit: "89ab"[int(digit, 16) & 3] for digit in "0123456789abcdef"}


def _uuid4_texts(n: int) -> list[str]:
    """The texts of ``n`` UUIDs as ``str(uuid.uuid4())`` writes them (``os.urandom``'s
    bytes, version 4 and the RFC 4122 variant set), from one ``os.urandom`` call. A run
    row holds the text, which its COPY line and the answer need, not a UUID object: 500
    ``str(uuid4())`` took 0.57 ms to make and as much again to write twice, these 0.2 ms;
    the ORM path (``insert``) takes a UUID's text as the UUID."""
    digits = os.urandom(16 * n).hex()
    variant = _UUID4_VARIANT
    return [
        f"{digits[i : i + 8]}-{digits[i + 8 : i + 12]}-4{digits[i + 13 : i + 16]}"
        f"-{variant[digits[i + 16]]}{digits[i + 17 : i + 20]}-{digits[i + 20 : i + 32]}"
        for i in range(0, 32 * n, 32)
    ]


class _KeyMemo:
    """``summaries.key_of`` of a request's runs, computed once per distinct configuration:
    a run whose key columns hold equal values of the same types as an earlier run's (the
    parameters compared item by item, with their types: 1, 1.0 and true differ) gets its
    key. Runs with nested parameters are keyed each."""

    def __init__(self) -> None:
        self.keys: dict[tuple, str] = {}
        # The key columns but the parameters: a value, or a tuple of values.
        self.columns = attrgetter(*(c for c in summaries.KEY_COLUMNS if c != "params"))

    def __call__(self, run: Any) -> str:
        params = run.params
        try:
            # One flat tuple: the columns, the names, the values, their types. (Tuples of
            # the items and of the types: 1.0 -> 0.85 us per run.)
            values = params.values()
            memo = (self.columns(run), *params, *values, *map(type, values))
            key = self.keys.get(memo)
        except (TypeError, AttributeError):  # unhashable: nested parameters
            return summaries.key_of(run)
        if key is None:
            key = self.keys[memo] = summaries.key_of(run)
        return key


def ingest(items: Any, user, check: Callable[[], None] | None = None) -> list[dict[str, Any]]:
    """Create the runs of ``items`` for ``user``; one result per item, in order:
    ``{"index", "status": "created"|"existing"|"invalid", "uuid", "errors", "parse_error"}``.
    Invalid items are reported and skipped; the others are stored.

    ``check``: ``items`` is a body parsed but not checked yet for values no column stores
    (``experiments.api.parsers.BulkJSONParser``), and ``check`` raises when it holds one
    (the parser's refusal). It is called before anything else is refused or stored unless
    every item is ``covered``: its own checks looked at each of its values."""
    if not isinstance(items, list):
        if check is not None:
            check()
        raise IngestError("expected a JSON array of runs (or JSON lines)")
    if len(items) > MAX_ITEMS:
        if check is not None:
            check()
        raise TooLarge(f"at most {MAX_ITEMS} runs per request (got {len(items)}): split the upload")
    metrics = sum(
        len(item["metrics"])
        for item in items
        if isinstance(item, dict) and isinstance(item.get("metrics"), list)
    )
    if metrics > MAX_METRICS:
        if check is not None:
            check()
        raise TooLarge(
            f"at most {MAX_METRICS} explicit metrics per request (got {metrics}): split the upload"
        )
    try:
        return _ingest(items, user, check)
    except IntegrityError:
        # A concurrent request created one of these keys first: the second pass finds it.
        return _ingest(items, user, None)


def _existing(user, keys: set[str]) -> dict[str, uuidlib.UUID]:
    """The user's runs that have one of ``keys``: key -> uuid, in one query. (On PostgreSQL
    with the keys as one array parameter: Django's ``__in`` of 500 values cost 5 ms of
    Python to build and bind, the array 1.7 ms.)"""
    if not keys:
        return {}
    if connection.vendor != "postgresql":
        runs = Run.objects.filter(owner=user, client_key__in=keys)
        return dict(runs.values_list("client_key", "uuid"))
    # One index lookup per key, whatever the statistics say: with ``client_key = ANY(%s)``
    # the planner, told by statistics gathered before the user's keyed runs existed that no
    # run has a key, scanned every keyed run of the user and filtered (19 ms for 20,000 of
    # them, growing with each request; 0.6 ms this way). OFFSET 0 keeps the lateral
    # subquery a parameterised index scan on (owner, client_key). The keys are one JSON
    # text (orjson's, in C), not a text[] (psycopg quotes each element in Python: 0.5 ms).
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT _k.key, _r.uuid FROM json_array_elements_text(%s::json) AS _k(key) "
            f"CROSS JOIN LATERAL (SELECT uuid FROM {connection.ops.quote_name(Run._meta.db_table)} "
            "WHERE owner_id = %s AND client_key = _k.key OFFSET 0) _r",
            [orjson.dumps(list(keys)).decode(), user.pk],
        )
        return dict(cursor.fetchall())


def _resolved(item: Item, field: str, clean: dict, known: dict, lookup) -> int | None:
    """The id ``clean[field]`` (a reference) names, looked up once per request and
    reference (``known``); its error goes to the item."""
    ref = clean[field]
    found = known.get(ref)
    if found is None:
        found = known[ref] = lookup(ref)
    pk, error = found
    if error:
        item.errors[field] = error
    return pk


def _ingest(raw_items: list, user, check: Callable[[], None] | None) -> list[dict[str, Any]]:
    items: list[Item] = []
    cleaned: list[dict[str, Any]] = []
    # What the items name, each looked up once below, gathered as they are checked (one
    # pass, not four); whether each item's own checks looked at all of it.
    testbed_names: set[str] = set()
    tuning_names: set[str] = set()
    keys: set[str] = set()
    covered = True
    for index, raw in enumerate(raw_items):
        if not isinstance(raw, dict):
            item = Item(index, {})
            item.errors["item"] = "must be an object"
            items.append(item)
            cleaned.append({})
            covered = False
            continue
        item = Item(index, raw)
        clean = _validate(item)
        items.append(item)
        cleaned.append(clean)
        if covered and (item.errors or not item.covered):
            covered = False
        if clean["testbed"]:
            testbed_names.add(clean["testbed"])
        if clean["tuning_set"]:
            tuning_names.add(clean["tuning_set"])
        if clean["key"]:
            keys.add(clean["key"])
    if check is not None and not covered:
        check()  # (a body the parser would refuse is refused before anything is stored)

    testbeds = _resolve(Testbed, testbed_names, user, "name")
    tunings = _resolve(TuningSet, tuning_names, user, "name")
    existing = _existing(user, keys)

    refusals: dict[int, str | None] = {}

    def testbed_of(ref: str) -> tuple[int | None, str | None]:
        testbed = testbeds.get(ref, False)
        if testbed is False:
            return None, f"no testbed {ref!r}"
        if testbed is None:
            return None, f"several testbeds are named {ref!r}: use its UUID"
        # Published testbeds take no runs; others only from their operators.
        if testbed.pk not in refusals:
            refusals[testbed.pk] = testbed.runs_refused(user)
        return testbed.pk, refusals[testbed.pk] or None

    def tuning_of(ref: str) -> tuple[int | None, str | None]:
        if not ref:
            return None, None
        tuning = tunings.get(ref, False)
        if tuning is False:
            return None, f"no tuning set {ref!r}"
        if tuning is None:
            return None, f"several tuning sets are named {ref!r}: use its UUID"
        return tuning.pk, None

    # Each reference's id or error, found once (a batch names one testbed 500 times).
    testbed_refs: dict[str, tuple[int | None, str | None]] = {}
    tuning_refs: dict[str, tuple[int | None, str | None]] = {}
    user_id = user.pk
    now = timezone.now()
    defaults = _row_type()
    key_of = _KeyMemo()
    seen_keys: dict[str, Item] = {}
    new: list[tuple[Item, dict[str, Any]]] = []
    uuids = _uuid4_texts(len(items))  # (one per new run at most)
    other = Tool.OTHER
    for item, clean in zip(items, cleaned, strict=True):
        if item.errors:
            item.outcome = "invalid"
            continue
        testbed_id = _resolved(item, "testbed", clean, testbed_refs, testbed_of)
        tuning_id = _resolved(item, "tuning_set", clean, tuning_refs, tuning_of)
        if item.errors:
            item.outcome = "invalid"
            continue
        key = clean["key"]
        if key and key in existing:
            item.outcome = "existing"
            item.run = SimpleNamespace(uuid=existing[key], parse_error="")
            continue
        if key and key in seen_keys:
            item.outcome = "existing"
            item.run = seen_keys[key].run
            item.parts, item.held = seen_keys[key].parts, seen_keys[key].held
            continue
        options = parse_options(clean["op"])
        found = None
        if clean["metrics"] is None:
            found = derive_parts(
                clean["raw_output"],
                tool=clean["tool"] or None,
                options=options,
                params=clean["params"],
            )
            if len(found) > 1 and clean["telemetry"]:
                item.errors["telemetry"] = (
                    f"telemetry belongs to one run; this output holds {found[0].held}: "
                    "nothing was stored"
                )
                item.outcome = "invalid"
                continue
        item.run = _run(
            defaults,
            {
                "id": None,
                "uuid": uuids.pop(),
                "owner_id": user_id,
                "testbed_id": testbed_id,
                "tuning_set_id": tuning_id,
                "tool": clean["tool"] or other,
                "tool_version": clean["tool_version"],
                "label": clean["label"],
                "notes": clean["notes"],
                "status": clean["status"],
                "command": clean["command"],
                "params": clean["params"],
                "raw_output": clean["raw_output"],
                "exit_code": clean["exit_code"],
                "started_at": clean["started_at"],
                "finished_at": clean["finished_at"],
                "client_key": key,
                "created": now,
                "updated": now,
                "launch": record_launch(
                    {},
                    clean["params"],
                    options,
                    metrics_given=clean["metrics"] is not None,
                ),
            },
        )
        item.outcome = "created"
        if key:
            seen_keys[key] = item
        if found is None:
            item.metrics = clean["metrics"]  # tuples: written as they are (see _store)
        else:
            parsed = found[0]
            apply(item.run, parsed)
            item.metrics = parsed.metrics
            if len(found) > 1:
                _split(item, found, defaults)
        item.run.config_key = key_of(item.run)
        new.append((item, clean))
        for part in item.parts[1:]:
            part.run.config_key = key_of(part.run)
            new.append((part, clean))

    _store(new)
    _existing_parts(user, [item for item in items if item.outcome == "existing"])

    results = []
    for item in items:
        entry: dict[str, Any] = {"index": item.index, "status": item.outcome}
        if item.run is not None:
            entry["uuid"] = str(item.run.uuid)
        if item.outcome == "created":
            entry["metrics"] = len(item.metrics)
            if item.run.parse_error:
                entry["parse_error"] = item.run.parse_error
        if item.parts:
            entry["held"] = item.held
            entry["parts"] = [_part_entry(part) for part in item.parts]
        if item.errors:
            entry["errors"] = item.errors
        results.append(entry)
    return results


def _split(item: Item, found: list, defaults: type) -> None:
    """An item whose raw output holds several independent measurements (``found``, one
    ``Parsed`` each): its run becomes the first part's, and a run of each other part is
    made (``item.parts``): the same row but for its label, launch (the part's index in its
    parse options: a reparse derives the same part), client key (``part_key``) and parsed
    fields. Each holds the whole raw output."""
    run = item.run
    launch, label, key = run.launch, run.label, run.client_key
    fields = dict(run.__dict__)
    for name in ("id", "uuid", "launch", "label", "client_key"):
        fields.pop(name, None)
    parts = [item]
    uuids = _uuid4_texts(len(found) - 1)
    for parsed, uuid in zip(found[1:], uuids, strict=True):
        part = Item(item.index, item.data)
        part.run = _run(
            defaults,
            {
                "id": None,
                "uuid": uuid,
                **fields,
                "launch": part_launch(launch, parsed.part),
                "label": part_label(label, parsed.part),
                "client_key": part_key(key, parsed.part["index"]) if key else None,
            },
        )
        apply(part.run, parsed)
        part.metrics = parsed.metrics
        part.outcome = "created"
        parts.append(part)
    run.launch = part_launch(launch, found[0].part)
    run.label = part_label(label, found[0].part)
    item.parts, item.held = parts, found[0].held


def _part_entry(part: Any) -> dict[str, Any]:
    """One part's run in the answer: its uuid and label, its metrics when created."""
    if isinstance(part, Item):
        entry = {
            "uuid": str(part.run.uuid),
            "label": part.run.launch["part"]["label"],
            "metrics": len(part.metrics),
        }
        if part.run.parse_error:
            entry["parse_error"] = part.run.parse_error
        return entry
    uuid, label = part
    return {"uuid": str(uuid), "label": label}


def _existing_parts(user, items: list[Item]) -> None:
    """The runs of every part of the existing runs of ``items`` that were the first part of
    an output of several (a retry of such an item): ``item.parts``, (uuid, label) each, in
    two queries for all of them."""
    wanted = {str(item.run.uuid): item for item in items if not item.parts}
    if not wanted:
        return
    firsts = Run.objects.filter(owner=user, uuid__in=list(wanted)).filter(launch__has_key="part")
    keys: dict[str, tuple[Item, int]] = {}
    for uuid, key, launch in firsts.values_list("uuid", "client_key", "launch"):
        item = wanted[str(uuid)]
        count = launch["part"]["count"]
        item.parts = [None] * count
        item.parts[0] = (uuid, launch["part"]["label"])
        item.held = launch["part"].get("held", "")
        for index in range(1, count):
            keys[part_key(key, index)] = (item, index)
    if not keys:
        return
    for uuid, key, launch in Run.objects.filter(owner=user, client_key__in=list(keys)).values_list(
        "uuid", "client_key", "launch"
    ):
        item, index = keys[key]
        item.parts[index] = (uuid, (launch.get("part") or {}).get("label", ""))
    for item in items:
        item.parts = [part for part in item.parts if part is not None]
