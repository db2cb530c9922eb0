"""Bulk ingest of completed runs: many runs with their metrics and parameters per request.

Each item is a run that already happened somewhere (a site without a worker, another lab's
archive, a push from a cluster node). It names its testbed (UUID or name), optionally its
tuning set, and carries either raw tool output (stored as given, then parsed by
``experiments.results`` as imports and executions are) or explicit metrics in DESIGN.md's
vocabulary (validated against ``METRIC_UNITS``), or both (explicit metrics win; the raw text
is kept).

Idempotency: an item's ``key`` becomes the run's ``client_key``, unique per owner. Sending
the same key again returns the existing run and creates nothing, so a client may retry a
whole batch after a timeout.

Speed: validation is plain Python (no serializer per item), references are resolved with one
query per kind, runs and metrics are written in bulk (``experiments.results.insert``:
PostgreSQL's COPY, else ``bulk_create`` in large batches), all in one transaction per
request: no query per item.
"""

from __future__ import annotations

import math
import os
import uuid as uuidlib
from dataclasses import dataclass, field
from datetime import datetime
from types import SimpleNamespace
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from experiments import summaries, telemetry
from experiments.importing import not_text_problem
from experiments.input_checks import clean_text, json_problem, text_problem
from experiments.models import Metric, Run, Testbed, TuningSet
from experiments.models.runs import Tool
from experiments.results import (
    MAX_OUTPUT_BYTES,
    apply,
    derive,
    insert,
    metric_rows,
    parse_options,
    record_launch,
)
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
TOOLS = frozenset(Tool.values)  # (Tool.values is rebuilt on every access)


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
    run: SimpleNamespace | None = None
    metrics: list[SimpleNamespace] = field(default_factory=list)
    outcome: str = ""


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


def _metrics(item: Item, raw: Any) -> list[dict[str, Any]]:
    if not isinstance(raw, list):
        item.errors["metrics"] = "must be a list"
        return []
    if len(raw) > MAX_METRICS_PER_RUN:
        item.errors["metrics"] = f"at most {MAX_METRICS_PER_RUN} metrics per run"
        return []
    out = []
    for n, m in enumerate(raw):
        where = f"metrics[{n}]"
        if not isinstance(m, dict):
            item.errors[where] = "must be an object"
            return []
        if not METRIC_FIELDS.issuperset(m):
            unknown = set(m) - METRIC_FIELDS
            item.errors[where] = f"unknown fields: {', '.join(sorted(map(str, unknown)))}"
            return []
        name = m.get("name")
        if not isinstance(name, str) or name not in METRIC_UNITS:
            item.errors[where] = f"unknown metric name {name!r} (see DESIGN.md's vocabulary)"
            return []
        value = m.get("value")
        if isinstance(value, bool) or not isinstance(value, int | float):
            item.errors[where] = f"{name}: value must be a number"
            return []
        try:
            value = float(value)
        except OverflowError:  # an integer beyond any float
            value = math.inf
        if not math.isfinite(value) or abs(value) > 1e300:
            item.errors[where] = f"{name}: value must be a finite number"
            return []
        unit = m.get("unit", METRIC_UNITS[name])
        if unit != METRIC_UNITS[name]:
            item.errors[where] = (
                f"{name}: unit must be {METRIC_UNITS[name]!r} (base units), got {unit!r}"
            )
            return []
        stat = m.get("stat", "value")
        if stat not in STATS:
            item.errors[where] = f"{name}: unknown statistic {stat!r}"
            return []
        iteration = m.get("iteration")
        if iteration is not None and (
            isinstance(iteration, bool)
            or not isinstance(iteration, int)
            or not 0 <= iteration <= 2_147_483_647
        ):
            item.errors[where] = f"{name}: iteration must be a non-negative integer or null"
            return []
        extra = m.get("extra") or {}
        if not isinstance(extra, dict):
            item.errors[where] = f"{name}: extra must be an object"
            return []
        problem = _unstorable(extra, "extra") if extra else None
        if problem:
            item.errors[where] = f"{name}: {problem}"
            return []
        source_ref = m.get("source_ref", "")
        if not isinstance(source_ref, str) or len(source_ref) > 200 or not clean_text(source_ref):
            item.errors[where] = f"{name}: source_ref must be a string of at most 200 chars"
            return []
        out.append(
            {
                "name": name,
                "value": value,
                "unit": unit,
                "stat": stat,
                "iteration": iteration,
                "extra": extra,
                "source_ref": source_ref,
            }
        )
    return out


def _validate(item: Item) -> dict[str, Any]:
    """Check one item's shape; returns the cleaned values (errors go to ``item.errors``)."""
    data = item.data
    if not ITEM_FIELDS.issuperset(data):
        unknown = set(data) - ITEM_FIELDS
        item.errors["item"] = f"unknown fields: {', '.join(sorted(map(str, unknown)))}"
    clean: dict[str, Any] = {
        "key": _text(item, "key", 200) or None,
        "testbed": _text(item, "testbed", 160),
        "tuning_set": _text(item, "tuning_set", 160),
        "tool": _text(item, "tool", 16),
        "op": _text(item, "op", 40),
        "label": _text(item, "label", 200),
        "notes": _text(item, "notes", 100_000),
        "raw_output": _text(item, "raw_output", MAX_OUTPUT_BYTES),
        "tool_version": _text(item, "tool_version", 60),
        "command": _text(item, "command", 100_000),
        "status": _text(item, "status", 10) or Run.Status.IMPORTED,
        "started_at": _when(item, "started_at"),
        "finished_at": _when(item, "finished_at"),
    }
    problem = not_text_problem(clean["raw_output"]) if clean["raw_output"] else None
    if problem:
        item.errors["raw_output"] = f"{problem}; nothing was stored"
        clean["raw_output"] = ""
    if not clean["testbed"] and "testbed" not in item.errors:
        item.errors["testbed"] = "required: a testbed UUID or name"
    if clean["tool"] and clean["tool"] not in TOOLS:
        item.errors["tool"] = f"unknown tool {clean['tool']!r}"
    if clean["status"] not in STATUSES:
        item.errors["status"] = f"one of {', '.join(sorted(STATUSES))}"
    params = data.get("params", {})
    if params is None:
        params = {}
    if not isinstance(params, dict):
        item.errors["params"] = "must be an object"
        params = {}
    problem = _unstorable(params, "params")
    if problem:
        item.errors["params"] = problem
        params = {}
    clean["params"] = params
    exit_code = data.get("exit_code")
    if exit_code is not None and (
        isinstance(exit_code, bool)
        or not isinstance(exit_code, int)
        or not -2_147_483_648 <= exit_code <= 2_147_483_647
    ):
        item.errors["exit_code"] = "must be an integer"
        exit_code = None
    clean["exit_code"] = exit_code
    metrics = data.get("metrics")
    clean["metrics"] = _metrics(item, metrics) if metrics is not None else None
    if (
        clean["metrics"] is None
        and not clean["raw_output"].strip()
        and "raw_output" not in item.errors
    ):
        item.errors["item"] = "give raw_output (parsed on the server) or metrics"
    if clean["metrics"] is not None and not clean["tool"]:
        item.errors.setdefault("tool", "required with explicit metrics")
    clean["telemetry"] = None
    if data.get("telemetry") is not None:
        try:
            clean["telemetry"] = telemetry.validate(data["telemetry"])
        except telemetry.TelemetryInvalid as exc:
            item.errors["telemetry"] = f"{exc}; nothing was stored"
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
    for obj in model.objects.filter(Q(uuid__in=uuids) | Q(**{f"{field_name}__in": names})):
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

    Runs first (their ids come back from ``insert``), then every metric of the batch in one
    COPY, then telemetry. What is derived from a batch's runs and metrics as a whole belongs
    at the end of this block, inside the transaction, with the batch's run ids."""
    with transaction.atomic():
        insert(Run, [item.run for item, _ in new])
        metrics: list[SimpleNamespace] = []
        for item, _ in new:
            run_id = item.run.id
            for metric in item.metrics:
                metric.run_id = run_id
            metrics.extend(item.metrics)
        insert(Metric, metrics)
        # The batch's configuration summaries (set-based), before the telemetry below
        # refreshes single runs' verdicts.
        summaries.add([item.run for item, _ in new])
        # Telemetry (validated above) in the same transaction: a run is stored with all of
        # its documents or not at all. Its verdict is computed once all are in.
        carried = {item.run.id: clean["telemetry"] for item, clean in new if clean["telemetry"]}
        for run in Run.objects.filter(pk__in=carried).select_related("node"):
            telemetry.store(run, carried[run.pk])


def _run(defaults: dict[str, Any], **values: Any) -> SimpleNamespace:
    """A run row to insert: every column's default, a fresh UUID, then ``values``. (Plain
    rows, not model instances: building 45-field instances was a third of ingest time.)"""
    return SimpleNamespace(**{**defaults, "id": None, "uuid": uuidlib.uuid4(), **values})


def ingest(items: Any, user) -> list[dict[str, Any]]:
    """Create the runs of ``items`` for ``user``; one result per item, in order:
    ``{"index", "status": "created"|"existing"|"invalid", "uuid", "errors", "parse_error"}``.
    Invalid items are reported and skipped; the others are stored."""
    if not isinstance(items, list):
        raise IngestError("expected a JSON array of runs (or JSON lines)")
    if len(items) > MAX_ITEMS:
        raise TooLarge(f"at most {MAX_ITEMS} runs per request (got {len(items)}): split the upload")
    metrics = sum(
        len(item["metrics"])
        for item in items
        if isinstance(item, dict) and isinstance(item.get("metrics"), list)
    )
    if metrics > MAX_METRICS:
        raise TooLarge(
            f"at most {MAX_METRICS} explicit metrics per request (got {metrics}): split the upload"
        )
    try:
        return _ingest(items, user)
    except IntegrityError:
        # A concurrent request created one of these keys first: the second pass finds it.
        return _ingest(items, user)


def _ingest(raw_items: list, user) -> list[dict[str, Any]]:
    items = [Item(i, d if isinstance(d, dict) else {}) for i, d in enumerate(raw_items)]
    cleaned: list[dict[str, Any]] = []
    for item, raw in zip(items, raw_items, strict=True):
        if not isinstance(raw, dict):
            item.errors["item"] = "must be an object"
            cleaned.append({})
            continue
        cleaned.append(_validate(item))

    testbeds = _resolve(Testbed, {c["testbed"] for c in cleaned if c.get("testbed")}, user, "name")
    tunings = _resolve(
        TuningSet, {c["tuning_set"] for c in cleaned if c.get("tuning_set")}, user, "name"
    )
    keys = {c["key"] for c in cleaned if c.get("key")}
    existing = (
        dict(Run.objects.filter(owner=user, client_key__in=keys).values_list("client_key", "uuid"))
        if keys
        else {}
    )

    now = timezone.now()
    defaults = {f.attname: f.get_default() for f in Run._meta.concrete_fields}
    seen_keys: dict[str, Item] = {}
    refusals: dict[int, str | None] = {}
    new: list[tuple[Item, dict[str, Any]]] = []
    for item, clean in zip(items, cleaned, strict=True):
        if item.errors:
            item.outcome = "invalid"
            continue
        testbed = testbeds.get(clean["testbed"], False)
        if testbed is False:
            item.errors["testbed"] = f"no testbed {clean['testbed']!r}"
        elif testbed is None:
            item.errors["testbed"] = (
                f"several testbeds are named {clean['testbed']!r}: use its UUID"
            )
        else:
            # Published testbeds take no runs; others only from their operators.
            if testbed.pk not in refusals:
                refusals[testbed.pk] = testbed.runs_refused(user)
            if refusals[testbed.pk]:
                item.errors["testbed"] = refusals[testbed.pk]
        tuning = None
        if clean["tuning_set"]:
            tuning = tunings.get(clean["tuning_set"], False)
            if tuning is False:
                item.errors["tuning_set"] = f"no tuning set {clean['tuning_set']!r}"
            elif tuning is None:
                item.errors["tuning_set"] = (
                    f"several tuning sets are named {clean['tuning_set']!r}: use its UUID"
                )
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
            continue
        item.run = _run(
            defaults,
            owner_id=user.pk,
            testbed_id=testbed.pk,
            tuning_set_id=tuning.pk if tuning else None,
            tool=clean["tool"] or Tool.OTHER,
            tool_version=clean["tool_version"],
            label=clean["label"],
            notes=clean["notes"],
            status=clean["status"],
            command=clean["command"],
            params=clean["params"],
            raw_output=clean["raw_output"],
            exit_code=clean["exit_code"],
            started_at=clean["started_at"],
            finished_at=clean["finished_at"],
            client_key=key,
            created=now,
            updated=now,
            launch=record_launch(
                {},
                clean["params"],
                parse_options(clean["op"]),
                metrics_given=clean["metrics"] is not None,
            ),
        )
        item.outcome = "created"
        if key:
            seen_keys[key] = item
        if clean["metrics"] is not None:
            item.metrics = metric_rows(clean["metrics"])
        else:
            parsed = derive(
                clean["raw_output"],
                tool=clean["tool"] or None,
                options=item.run.launch["parse_options"],
                params=clean["params"],
            )
            apply(item.run, parsed)
            item.metrics = parsed.metrics
        item.run.config_key = summaries.key_of(item.run)
        new.append((item, clean))

    _store(new)

    results = []
    for item in items:
        entry: dict[str, Any] = {"index": item.index, "status": item.outcome}
        if item.run is not None:
            entry["uuid"] = str(item.run.uuid)
        if item.outcome == "created":
            entry["metrics"] = len(item.metrics)
            if item.run.parse_error:
                entry["parse_error"] = item.run.parse_error
        if item.errors:
            entry["errors"] = item.errors
        results.append(entry)
    return results
