"""From raw benchmark output to a stored run: the one path every run's metrics take.

Executed runs (``experiments.execution.execute``), imports in the browser and by ``manage.py
import_results`` (``experiments.results.importing``), bulk ingest and beeweb-push
(``experiments.results.ingest``) and ``manage.py reparse`` all go through here, so one output
stores the same metrics and parameters whichever way it came in:

- **Parse options.** A run is parsed with its tool (detected when it has none) and the
  options it was launched with: the adapter's for an executed run (dd's direction), the
  importer's ``op`` otherwise. ``record_launch`` keeps them in ``Run.launch["parse_options"]``
  so that a reparse parses the same way.
- **Parameters.** What the run was launched with (a matrix cell's parameters, ``tuning:``
  and ``target`` values included; a bulk item's ``params``), kept in
  ``Run.launch["params"]``, wins over what the output states; reparse re-derives only the
  latter. ``Run.params`` holds each value in its kind's normal form (``runners.params``:
  sizes in bytes, seconds, booleans), whatever the tool or the user spelled.
- **Metrics.** Replaced as a whole, in one transaction with the run's parsed fields, one
  primary per name (``mark_primary``). A failed parse stores its error, never part of a
  result.
- **Only data is primary.** A run that did not finish as measured (cancelled, failed, timed
  out: not ``Run.DATA``, as its status is written with its metrics) keeps every metric it
  measured, none of them primary: comparisons, summaries, the runs table, exports and API
  aggregates read primary rows only, so none of them counts it, without a join on the run's
  status. A status that changes later marks them again (``mark_data``, on
  ``experiments.models.runs.data_changed``).
- **Raw output first.** Callers store the raw text before it is parsed (or, in bulk, in the
  same rows), and a parser that fails or crashes records its error: nothing is lost, and
  ``reparse`` can retry after a parser fix.
- **Bulk storage.** ``insert`` writes many rows at once: COPY on PostgreSQL, batched
  ``bulk_create`` elsewhere.
- **One run per measurement.** An output holding several independent measurements (fio
  jobs in different stonewall groups, the runs of an IOR or mdtest log, the tests of an IOR
  script: ``runners.parsers.parse_parts``) is stored as one run per part (``store_parts``,
  and the bulk ingest's ``derive_parts``): each run holds the whole raw output and, in its
  parse options, the index of its part (``part_launch``), so a reparse derives the same
  part. A run that is one cell of a matrix measures one thing: an output of several parts
  stored for it (``parse_stored``: the executor's) is a parse error saying so.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from operator import attrgetter
from types import SimpleNamespace
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connection, connections, transaction
from django.db.models import QuerySet
from django.utils import timezone

from experiments.models import Metric, Run
from experiments.models.runs import (
    STEADY_DIRECTIONS,
    Tool,
    store_row,
    store_row_at_once,
    update_row,
)
from experiments.results import summaries
from experiments.shared import prepared
from experiments.shared.input_checks import json_problem
from runners.params import normalise
from runners.parsers import ParseError, ParseResult, describe_parts, parse, parse_parts

# The most raw output a run stores (the executor keeps the end of longer output).
MAX_OUTPUT_BYTES = 20 * 1024 * 1024
# Rows per INSERT where COPY is not available.
BATCH = {Run: 1000, Metric: 5000}

# Metric.extra keys that mark a detail (one job, one target, one table cell), never the run's
# headline value.
DETAIL_KEYS = {
    "job",
    "target",
    "per_process",
    "file_size",
    "record_size",
    "host",
    "service",
    "interval",
    "client",
}
PRIMARY_STAT_ORDER = ("value", "mean", "max")
# Fields of a run that parsing sets.
PARSED_FIELDS = ("tool", "tool_version", "command", "params", "parse_error")
# Run.launch key of a bulk-ingested run whose metrics the client gave: reparse leaves it alone.
METRICS_GIVEN = "metrics_given"


# --- What a run was launched with ----------------------------------------------------------


def parse_options(op: str | None = None) -> dict[str, Any]:
    """Parse options of an import: ``op`` (read/write) names the direction of output that
    does not state it (dd)."""
    return {"op": op} if op else {}


def record_launch(
    launch: dict[str, Any],
    params: dict[str, Any],
    options: dict[str, Any],
    *,
    metrics_given: bool = False,
) -> dict[str, Any]:
    """``launch`` with what a reparse needs: the parse options, and the parameters the run
    was launched with (parameters recorded already stay: a requeued run's ``params`` hold
    what its earlier attempt's output stated); ``metrics_given`` marks metrics that a client
    gave, which no parse replaces."""
    recorded = {**launch, "parse_options": dict(options), "params": launch.get("params", params)}
    if metrics_given:
        recorded[METRICS_GIVEN] = True
    return recorded


@dataclass(frozen=True)
class Launched:
    """What a run was launched with: parameters that win over the output's, parse options."""

    params: dict[str, Any]
    options: dict[str, Any]


def launched(run: Run) -> Launched:
    """What ``run`` was launched with (``record_launch``). Runs stored before launches
    recorded it: a run of a matrix keeps all of its parameters, as the executor's merge did
    then; an import keeps none (its parameters were all the output's), and is parsed in the
    direction its earlier parse found (``rw``: an import's ``op`` for dd)."""
    launch = run.launch or {}
    if "params" in launch:
        params = launch["params"]
    else:
        params = run.params if run.matrix_id else {}
    if "parse_options" in launch:
        options = launch["parse_options"] or {}
    else:
        rw = (run.params or {}).get("rw")
        options = parse_options(rw if rw in ("read", "write") else None)
    return Launched(dict(params or {}), dict(options))


# --- Parsing -------------------------------------------------------------------------------


def parse_output(
    text: str, tool: str | None = None, options: dict[str, Any] | None = None
) -> ParseResult:
    """The result ``text`` holds for a run; ParseError when it holds none that can be stored
    (topology output, a tool that is not a run's, values no column holds, a parser that
    failed). Pure: nothing is saved, so the browser previews with it."""
    try:
        result = parse(text, tool=tool or None, **(options or {}))
    except ParseError:
        raise
    except Exception as exc:  # a parser bug must not lose the raw text
        raise ParseError(f"the parser failed: {type(exc).__name__}: {exc}") from exc
    return _storable(result)


def parse_output_parts(
    text: str, tool: str | None = None, options: dict[str, Any] | None = None
) -> list[ParseResult]:
    """``parse_output`` of each independent measurement ``text`` holds
    (``runners.parsers.parse_parts``): one result for an output of one, or for a part
    asked for (``options["part"]``)."""
    options = options or {}
    if PART in options:
        return [parse_output(text, tool, options)]
    try:
        results = parse_parts(text, tool=tool or None, **options)
    except ParseError:
        raise
    except Exception as exc:  # a parser bug must not lose the raw text
        raise ParseError(f"the parser failed: {type(exc).__name__}: {exc}") from exc
    return [_storable(result) for result in results]


def _storable(result: ParseResult) -> ParseResult:
    """``result`` when a run can store it; ParseError saying why not otherwise."""
    if result.extra.get("topology") and not result.metrics:
        raise ParseError(
            "this is BeeGFS topology output (nodes/targets), not a benchmark "
            "result: paste it into a testbed instead"
        )
    if result.tool not in Tool.values:
        raise ParseError(f"results of {result.tool} cannot be stored as runs")
    problem = json_problem(result.params, max_depth=20, where="params") or next(
        (
            p
            for m in result.metrics
            if (p := json_problem(m.extra or {}, max_depth=20, where=f"{m.name}.extra"))
        ),
        None,
    )
    if problem:
        raise ParseError(f"the output holds values that cannot be stored: {problem}")
    return result


@dataclass
class Parsed:
    """What one output yields for its run: the parsed fields and metric rows, or the error;
    ``part``: which part of an output of several measurements (``runners.parsers``'
    ``extra["part"]``: index, count, kind, label), ``held`` what the output holds ("15
    independent jobs (bs 1k … 16M)")."""

    error: str = ""
    tool: str = ""
    tool_version: str = ""
    command: str = ""
    params: dict[str, Any] = field(default_factory=dict)
    metrics: list[SimpleNamespace] = field(default_factory=list)
    part: dict[str, Any] | None = None
    held: str = ""


# The parse option naming the part of its output a run is (runners.parsers.parse's ``part``).
PART = "part"


def derive(
    text: str,
    *,
    tool: str | None = None,
    options: dict[str, Any] | None = None,
    params: dict[str, Any] | None = None,
) -> Parsed:
    """Parse ``text`` and merge: the launched ``params`` win over the output's. The
    parameters are stored in their normal forms (``runners.params``: bytes, seconds,
    booleans), whichever spelling the launch or the output used."""
    try:
        result = parse_output(text, tool, options)
    except ParseError as exc:
        return Parsed(error=str(exc), params=normalise(dict(params or {})))
    return _parsed(result, params)


def _parsed(result: ParseResult, params: dict[str, Any] | None, held: str = "") -> Parsed:
    part = result.extra.get("part")
    return Parsed(
        tool=result.tool,
        tool_version=(result.tool_version or "")[:60],
        command=result.command or "",
        params=normalise({**result.params, **(params or {})}),
        metrics=metric_rows(m.to_dict() for m in result.metrics),
        part={k: part[k] for k in ("index", "count", "kind", "label")} | {"held": held}
        if part
        else None,
        held=held,
    )


def derive_parts(
    text: str,
    *,
    tool: str | None = None,
    options: dict[str, Any] | None = None,
    params: dict[str, Any] | None = None,
) -> list[Parsed]:
    """``derive`` of each independent measurement ``text`` holds, in the output's order:
    one ``Parsed`` (with ``part`` None) for an output of one, for a part asked for
    (``options["part"]``) and for a failed parse; the launched ``params`` win in each."""
    try:
        results = parse_output_parts(text, tool, options)
    except ParseError as exc:
        return [Parsed(error=str(exc), params=normalise(dict(params or {})))]
    held = describe_parts(results)
    return [_parsed(result, params, held) for result in results]


def part_launch(launch: dict[str, Any], part: dict[str, Any]) -> dict[str, Any]:
    """``launch`` (``record_launch``'s) of the run that stores ``part`` of its output: the
    part's index in its parse options (a reparse derives the same part), and the part
    (index, count, kind, label, and ``held``: what the whole output holds)."""
    options = {**(launch.get("parse_options") or {}), PART: part["index"]}
    return {**launch, "parse_options": options, PART: dict(part)}


def part_label(label: str, part: dict[str, Any]) -> str:
    """A part's run label: the output's label and the part's name."""
    name = part.get("label") or f"part {part['index'] + 1}"
    return (f"{label} [{name}]" if label else name)[:200]


def several_parts_error(parsed: Parsed) -> str:
    """Why a run cannot store an output of several measurements as its own."""
    return (
        f"the output holds {parsed.held}; one run measures one of them (a matrix cell's "
        "run runs one job group, one IOR test, one mdtest run): import the output to store "
        "each as a run of its own"
    )


def apply(run: Any, parsed: Parsed) -> None:
    """Set a run's parsed fields (a Run, or a row ``insert`` writes). The version the output
    states replaces the one the run had (its version command's, a client's); a command the
    run has (the executor's argv, a client's) stays."""
    run.parse_error = parsed.error
    run.params = parsed.params
    if parsed.error:
        return
    run.tool = parsed.tool
    run.tool_version = parsed.tool_version or run.tool_version
    run.command = run.command or parsed.command


def _derived(run: Run, tool: str | None) -> list[Parsed]:
    """``derive_parts`` of the raw output stored on ``run``, as it was launched."""
    launch = launched(run)
    return derive_parts(
        run.raw_output,
        tool=tool or (run.tool if run.tool != Tool.OTHER else None),
        options=launch.options,
        params=launch.params,
    )


def _parsed_fields(
    run: Run,
    tool: str | None,
    keep_on_error: bool,
    outcome: Callable[[Run], dict[str, Any]] | None,
    parsed: Parsed | None,
    more: dict[str, Any] | None,
) -> tuple[Parsed, dict[str, Any]]:
    """The parse of ``run``'s raw output (``parsed`` when given) and the fields ``_store``
    writes with its metrics, set on ``run``: its parsed fields (the parse error alone with
    ``keep_on_error``), ``more``, ``outcome(run)``'s and ``updated``."""
    if parsed is None:
        found = _derived(run, tool)
        parsed = found[0]
        if len(found) > 1:  # (a run of its own: the executor's)
            parsed = Parsed(
                error=several_parts_error(parsed), params=normalise(dict(launched(run).params))
            )
    if parsed.error and keep_on_error:
        run.parse_error = parsed.error
        fields: dict[str, Any] = {"parse_error": parsed.error}
    else:
        apply(run, parsed)
        fields = {name: getattr(run, name) for name in PARSED_FIELDS}
    fields.update(more or {})
    if outcome is not None:
        fields.update(outcome(run))
    fields["updated"] = timezone.now()
    return parsed, fields


def _store(
    run: Run,
    tool: str | None,
    *,
    keep_on_error: bool,
    outcome: Callable[[Run], dict[str, Any]] | None = None,
    parsed: Parsed | None = None,
    more: dict[str, Any] | None = None,
    attempt: int | None = None,
    release: bool = False,
) -> str | None | object:
    parsed, fields = _parsed_fields(run, tool, keep_on_error, outcome, parsed, more)
    # Inside a caller's transaction, no savepoint: nobody goes on after an error here.
    with transaction.atomic(savepoint=False):
        if parsed.error and keep_on_error:
            update_row(run.pk, fields)
        elif not _store_with_metrics(run, fields, parsed.metrics, attempt, release):
            if attempt is not None:
                return NOT_RUNNING
    for name, value in fields.items():  # as written (or as it would have been: deleted)
        setattr(run, name, value)
    return parsed.error or None


def _store_with_metrics(
    run: Run,
    fields: dict[str, Any],
    rows: list,
    attempt: int | None = None,
    release: bool = False,
) -> bool:
    """Write ``fields`` of ``run`` (its parsed fields applied to it) and replace its metrics
    by ``rows``, with the summaries of its configuration; nothing (False) when the run was
    deleted meanwhile, or with ``attempt`` no longer runs that attempt (``store_row``'s
    ``attempt`` and ``release``). The usual case, a run stored for the first time (no
    metric row yet: the executor's, an import's), costs one UPDATE that also sets its
    configuration key and says what it had (``store_row``), the rows' INSERT and the
    summaries' append; a run that had metrics (a reparse, a requeued attempt) has them
    replaced as ``replace_metrics`` does."""
    key = summaries.key_of(run)
    for row in rows:
        row.run_id = run.pk
    with transaction.atomic(savepoint=False), summaries.batch():
        stored = store_row(run.pk, fields, key, attempt=attempt, release=release)
        if stored is None:
            return False
        if stored.status not in Run.DATA:
            not_data(rows)
        if stored.metrics:
            _replace(run, rows, {True} if stored.primary else {False})
            return True
        insert(Metric, rows)
        if summaries.config_key(*stored.columns) != key:
            # The run in hand is older than its row (a configuration column changed since
            # it was read): the key from the row, as the summaries' own update would set it.
            summaries.append([run.pk])
        elif any(row.primary for row in rows):
            summaries.append_keyed([run.pk])
    return True


# The run's columns that its configuration key and its summaries' rows are computed from,
# besides those its outcome writes (``PARSED_FIELDS``, the status): ``parse_stored_at_once``
# stores only while they still hold what it computed them from.
_READ_UNCHANGED = (
    *(column for column in summaries.KEY_COLUMNS if column not in PARSED_FIELDS),
    "collapsed",
    "bottleneck",
    *(f"{op}_{kind}" for op in STEADY_DIRECTIONS for kind in ("steady", "whole")),
)


def parse_stored_at_once(run: Run, outcome: Callable[[Run], dict[str, Any]], attempt: int) -> bool:
    """``parse_stored(run, outcome=outcome, attempt=attempt, release=True)`` as one statement
    (PostgreSQL, outside any transaction: ``store_row_at_once``), for the executor's usual
    outcome: a run stored for the first time, its status, parsed fields, metric rows, its
    configuration's summaries (computed here, ``summaries.batch_rows``, as the bulk ingest
    does) and the release of its nodes, all or nothing, in one round trip instead of five.

    True when stored (the fields set on ``run``). False when nothing was written: the run
    deleted or taken from the attempt, a metric row already there, one of the columns the
    summaries were computed from changed meanwhile (``_READ_UNCHANGED``), or a value the
    Python sums decline; the caller then calls ``parse_stored``, which parses again and
    stores the outcome, or finds why not."""
    if connection.vendor != "postgresql" or connection.in_atomic_block:
        return False
    parsed, fields = _parsed_fields(run, None, False, outcome, None, None)
    status = fields.get("status")
    if status is None:
        return False
    rows = list(parsed.metrics)
    if status not in Run.DATA:
        not_data(rows)
    key = summaries.key_of(run)
    inserts = []
    if rows:
        inserts.append(_insert_after_update(rows))
    unchanged = {name: getattr(run, name) for name in _READ_UNCHANGED}
    primaries = [(row.name, row.value, row.extra) for row in rows if row.primary]
    if primaries:
        probe = SimpleNamespace(id=run.pk, config_key=key, **unchanged)
        summary_rows = summaries.batch_rows([probe], [primaries])
        if summary_rows is None:
            return False
        inserts.append(
            summaries.upsert_rows_statement(summary_rows, "EXISTS (SELECT 1 FROM updated)")
        )
    if not store_row_at_once(run.pk, fields, key, attempt, unchanged, inserts):
        return False
    for name, value in fields.items():
        setattr(run, name, value)
    return True


def _insert_after_update(rows: list) -> tuple[str, list]:
    """The INSERT of a run's metric ``rows`` in ``store_row_at_once``'s WITH: for the run the
    CTE ``updated`` returns, nothing without it. Values prepared by their fields as
    ``_insert_few`` prepares them (``_after_update_plan``)."""
    head, one, tail, fields = _after_update_plan(connection.vendor)
    db = connections[DEFAULT_DB_ALIAS]  # (not the thread-local proxy, for each value)
    params = [f.get_db_prep_save(getattr(row, f.attname), db) for row in rows for f in fields]
    return f"{head} {', '.join([one] * len(rows))}{tail}", params


@functools.cache
def _after_update_plan(vendor: str) -> tuple[str, str, str, list]:
    """``_insert_after_update``'s statement up to its VALUES rows, one row's placeholders,
    what follows the rows, and the metric fields whose values fill them, worked out once per
    process (the executor stores
    every run's metrics so). Each value is cast to its column's type without a length (a
    longer value is refused by the column's own assignment, as an INSERT's would be)."""
    every = [f for f in Metric._meta.concrete_fields if not f.primary_key]
    fields = [f for f in every if f.attname != "run_id"]
    quote = connection.ops.quote_name
    selected = ", ".join(
        "updated.id" if f.attname == "run_id" else f"_m.{quote(f.column)}" for f in every
    )
    one = "(" + ", ".join(f"%s::{f.db_type(connection).split('(')[0]}" for f in fields) + ")"
    head = (
        f"INSERT INTO {quote(Metric._meta.db_table)} "
        f"({', '.join(quote(f.column) for f in every)}) SELECT {selected} FROM updated, "
        "(VALUES"
    )
    tail = f") _m ({', '.join(quote(f.column) for f in fields)})"
    return head, one, tail, fields


# What ``parse_stored`` returns when given an ``attempt`` the run no longer runs: nothing
# was stored.
NOT_RUNNING = object()


def parse_stored(
    run: Run,
    tool: str | None = None,
    outcome: Callable[[Run], dict[str, Any]] | None = None,
    attempt: int | None = None,
    release: bool = False,
) -> str | None | object:
    """Parse the raw output just stored on ``run`` (saved before this is called, so a parse
    never loses it) with ``tool``, else the run's own or the detected one, and store what it
    yields, replacing whatever an earlier output yielded (an earlier attempt's); the parse
    error, or None. ``outcome(run)``, called once the parsed fields are set on ``run``, gives
    more fields to write with them (the executor's status and error) in the same UPDATE.

    The executor's outcome: with ``attempt``, stored only while the run is running that
    attempt (its row locked by the UPDATE until the caller's transaction ends); else
    nothing is written and this returns NOT_RUNNING. ``release``: the attempt's node leases
    go in the same transaction (``experiments.models.runs.store_row``)."""
    return _store(run, tool, keep_on_error=False, outcome=outcome, attempt=attempt, release=release)


def store_parts(run: Run, tool: str | None = None) -> list[Run]:
    """Parse the raw output just stored on ``run`` (an import: saved before this is called)
    and store what it yields; the runs stored, ``run`` first. An output of several
    independent measurements makes ``run`` its first part's run and a new run of each other
    part (a copy of ``run`` but for its label, launch and parsed fields: the same raw
    output, testbed, tuning set, owner, status), all in one transaction."""
    found = _derived(run, tool)
    if len(found) == 1:
        _store(run, tool, keep_on_error=False, parsed=found[0])
        return [run]
    return _store_split(run, tool, found)


def _store_split(run: Run, tool: str | None, found: list[Parsed]) -> list[Run]:
    launch, label = dict(run.launch or {}), run.label
    runs = [run]
    with transaction.atomic():
        for parsed in found[1:]:
            runs.append(
                _copy_of(run, part_launch(launch, parsed.part), part_label(label, parsed.part))
            )
        for each, parsed in zip(runs, found, strict=True):
            each.launch = part_launch(launch, parsed.part)
            each.label = part_label(label, parsed.part)
            _store(
                each,
                tool,
                keep_on_error=False,
                parsed=parsed,
                more={"launch": each.launch, "label": each.label},
            )
    return runs


# The fields a run of another part of the same output copies (``store_parts``).
COPIED = (
    "testbed_id",
    "tuning_set_id",
    "target_id",
    "owner_id",
    "tool",
    "tool_version",
    "status",
    "command",
    "argv",
    "raw_output",
    "exit_code",
    "started_at",
    "finished_at",
    "notes",
)


def _copy_of(run: Run, launch: dict[str, Any], label: str) -> Run:
    copy = Run(**{name: getattr(run, name) for name in COPIED}, launch=launch, label=label)
    if run.client_key:
        copy.client_key = part_key(run.client_key, launch[PART]["index"])
    copy.save()
    return copy


def part_key(key: str, index: int) -> str:
    """The client key of the run of part ``index`` (from 0) of an ingested output keyed
    ``key``: the key itself for the first part, ``key#part<n>`` (n from 1) for the others,
    within the column's 200 characters (a long key shortened with its hash)."""
    if index == 0:
        return key
    suffix = f"#part{index + 1}"
    if len(key) + len(suffix) > 200:
        key = key[: 200 - len(suffix) - 17] + "~" + hashlib.sha256(key.encode()).hexdigest()[:16]
    return key + suffix


def reparse(run: Run) -> str | None:
    """Re-derive ``run``'s metrics and stated parameters from its stored raw output (after a
    parser fix), parsed as it was launched; the parse error, or None. A failure records its
    error and keeps what the output yielded before. A run that stored a whole output of
    several independent measurements (imported before they were split) is split as an
    import is (``store_parts``); one of a matrix cell records why it cannot be."""
    found = _derived(run, None)
    if len(found) == 1:
        return _store(run, None, keep_on_error=True, parsed=found[0])
    if not run.matrix_id:
        _store_split(run, None, found)
        return None
    error = several_parts_error(found[0])
    return _store(run, None, keep_on_error=True, parsed=Parsed(error=error))


def reparsable(runs: QuerySet) -> QuerySet:
    """The runs of ``runs`` whose metrics come from their raw output: not published, not
    running (their output is still growing), metrics not given explicitly."""
    return (
        runs.exclude(raw_output="")
        .filter(published=False)
        .exclude(status__in=[Run.Status.QUEUED, Run.Status.RUNNING])
        .exclude(launch__has_key=METRICS_GIVEN)
    )


# --- Metrics -------------------------------------------------------------------------------


def mark_primary(metrics: list) -> list:
    """Set ``primary`` on one metric per name: iteration None, no detail keys, and the first
    of stat value / mean / max that exists."""
    best: dict[str, Any] = {}
    for metric in metrics:
        metric.primary = False
        if metric.iteration is not None or DETAIL_KEYS & set(metric.extra or {}):
            continue
        if metric.stat not in PRIMARY_STAT_ORDER:
            continue
        current = best.get(metric.name)
        rank = PRIMARY_STAT_ORDER.index(metric.stat)
        if current is None or rank < PRIMARY_STAT_ORDER.index(current.stat):
            best[metric.name] = metric
    for metric in best.values():
        metric.primary = True
    return metrics


def metric_rows(metrics: Iterable[dict[str, Any]], run_id: int | None = None) -> list:
    """Rows for ``insert`` from dicts shaped like ``runners.parsers.Metric.to_dict()``'s
    (stat, iteration, extra and source_ref optional), primary marked."""
    return mark_primary(
        [
            SimpleNamespace(
                id=None,
                run_id=run_id,
                name=m["name"],
                value=m["value"],
                unit=m["unit"],
                stat=m.get("stat", "value"),
                iteration=m.get("iteration"),
                primary=False,
                extra=m.get("extra") or {},
                source_ref=m.get("source_ref", ""),
            )
            for m in metrics
        ]
    )


def replace_metrics(run: Run, metrics: Iterable[dict[str, Any]] | list[SimpleNamespace]) -> list:
    """Replace all of ``run``'s metrics by ``metrics`` (``metric_rows`` or dicts) in one
    transaction, with the summaries of the run's configuration; the rows stored. A run that
    had no headline metric (the executor's, import's and push's first store) is appended to
    its configuration's summaries; one that had (a reparse) has them recomputed."""
    rows = list(metrics)
    if rows and isinstance(rows[0], dict):
        rows = metric_rows(rows)
    for row in rows:
        row.run_id = run.pk
    with transaction.atomic(), summaries.batch():
        had = set(
            Metric.objects.filter(run_id=run.pk)
            .order_by()
            .values_list("primary", flat=True)
            .distinct()
        )
        status = Run.objects.filter(pk=run.pk).values_list("status", flat=True).first()
        if status not in Run.DATA:
            not_data(rows)
        _replace(run, rows, had)
    return rows


def not_data(rows: list) -> list:
    """``rows`` (``metric_rows``) of a run that is not data (``Run.DATA``): none primary."""
    for row in rows:
        row.primary = False
    return rows


def mark_data(run_ids: Iterable[int]) -> None:
    """Mark the headline metrics of ``run_ids`` again after their status changed: those of a
    run that is data by ``mark_primary``, none of another's; the summaries of the runs whose
    flags changed are refreshed (the Metric queryset's update), in the caller's transaction.
    One query per hundred runs to read the flags, one per change."""
    run_ids = list(run_ids)
    promote: list[int] = []
    demote: list[int] = []
    for start in range(0, len(run_ids), 500):
        chunk = run_ids[start : start + 500]
        data = set(
            Run.objects.filter(pk__in=chunk, status__in=Run.DATA).values_list("pk", flat=True)
        )
        rows: dict[int, list] = {}
        for row in (
            Metric.objects.filter(run_id__in=chunk)
            .order_by("run_id", "id")
            .values("id", "run_id", "name", "stat", "iteration", "extra", "primary")
        ):
            rows.setdefault(row["run_id"], []).append(SimpleNamespace(**row))
        for run_id, metrics in rows.items():
            was = [m.primary for m in metrics]
            if run_id in data:
                mark_primary(metrics)
            else:
                not_data(metrics)
            for metric, before in zip(metrics, was, strict=True):
                if metric.primary != before:
                    (promote if metric.primary else demote).append(metric.id)
    with transaction.atomic(), summaries.batch():
        if demote:
            Metric.objects.filter(pk__in=demote).update(primary=False)
        if promote:
            Metric.objects.filter(pk__in=promote).update(primary=True)


def on_data_changed(sender, run_ids, **kwargs) -> None:
    mark_data(run_ids)


def _replace(run: Run, rows: list, had: set[bool]) -> None:
    """``replace_metrics``' work inside its batch, ``had`` the primary flags of the run's
    metric rows before."""
    if had:
        Metric.objects.filter(run_id=run.pk).delete()
    insert(Metric, rows)
    if True in had:
        summaries.refresh(run_ids=[run.pk])
    elif any(row.primary for row in rows):
        summaries.append([run.pk])


def next_ids(cursor: Any, table: str, n: int) -> list[int]:
    """``n`` ids drawn from the sequence of ``table``'s id column (PostgreSQL), in one
    statement. The sequence is looked up once (OFFSET 0 keeps the subquery apart): with
    ``nextval(pg_get_serial_sequence(…))`` it was looked up and cast to regclass for every
    row, ~5x the backend's CPU of the statement (500 ids: 3.2 -> 0.7 ms on a loaded machine;
    bench/RESULTS.md)."""
    cursor.execute(
        "SELECT nextval(_s.seq) FROM (SELECT pg_get_serial_sequence(%s, 'id')::regclass "
        "AS seq OFFSET 0) _s CROSS JOIN generate_series(1, %s)",
        [table, n],
    )
    return [pk for (pk,) in cursor.fetchall()]


def insert(model, rows: list) -> None:
    """Insert rows (objects with one attribute per column) and set their ``id``.
    PostgreSQL: ids drawn from the table's sequence in one query, then COPY (several times
    faster than INSERT … VALUES for thousands of rows, on both sides). Elsewhere:
    ``bulk_create`` in batches, of a plain queryset: like COPY, it leaves the configuration
    summaries to the caller (``replace_metrics``, the bulk ingest's ``summaries.add``), which
    appends new runs; the Metric queryset's own refresh would count them twice."""
    if not rows:
        return
    table = model._meta.db_table
    fields = [f for f in model._meta.concrete_fields if not f.primary_key]
    if connection.vendor != "postgresql":
        instances = [model(**{f.attname: getattr(row, f.attname) for f in fields}) for row in rows]
        QuerySet(model).bulk_create(instances, batch_size=BATCH.get(model, 1000))
        for row, instance in zip(rows, instances, strict=True):
            row.id = instance.pk
        return
    columns, values_of, json_at = _copy_plan(model)
    if len(rows) <= FEW_ROWS:
        _insert_few(model, rows, values_of, json_at)
        return
    dumps = json.dumps
    # wrap_database_errors: a unique violation inside COPY is Django's IntegrityError.
    with connection.cursor() as cursor, connection.wrap_database_errors:
        ids = next_ids(cursor, table, len(rows))
        with cursor.cursor.copy(f"COPY {columns} FROM STDIN") as copy:
            write = copy.write_row
            for pk, row in zip(ids, rows, strict=True):
                row.id = pk
                values = [pk, *values_of(row)]
                for i in json_at:
                    value = values[i]
                    # Most JSON columns of a new row hold their empty default.
                    if not value and type(value) in (dict, list):
                        values[i] = "{}" if type(value) is dict else "[]"
                    else:
                        values[i] = dumps(value)
                write(values)


# Up to this many rows (an executed run's metrics) are one INSERT … RETURNING id: one
# statement instead of the sequence's and COPY's two.
FEW_ROWS = 50


def _insert_few(model, rows: list, values_of: Any, json_at: list[int]) -> None:
    """``insert`` of a few rows on PostgreSQL: one multi-row INSERT returning the ids in the
    rows' order; values as COPY takes them (``_copy_plan``), JSON prepared by its field as
    the ORM prepares it."""
    fields = [f for f in model._meta.concrete_fields if not f.primary_key]
    quote = connection.ops.quote_name
    json_fields = [(n - 1, fields[n - 1]) for n in json_at]
    params: list[Any] = []
    for row in rows:
        values = list(values_of(row))
        for n, json_field in json_fields:
            values[n] = json_field.get_db_prep_save(values[n], connection)
        params.extend(values)
    one = "(" + ", ".join(["%s"] * len(fields)) + ")"
    with prepared.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {quote(model._meta.db_table)} "
            f"({', '.join(quote(f.column) for f in fields)}) "
            f"VALUES {', '.join([one] * len(rows))} RETURNING {quote('id')}",
            params,
        )
        for row, (pk,) in zip(rows, cursor.fetchall(), strict=True):
            row.id = pk


_COPY_PLANS: dict[Any, tuple] = {}


def _copy_plan(model) -> tuple[str, Any, list[int]]:
    """What ``insert`` needs of a model, worked out once: the COPY target (table and
    columns, id first), a getter of a row's values in that order (one C call per row instead
    of a Python one per column: a run has 54), and where the JSON columns are."""
    plan = _COPY_PLANS.get(model)
    if plan is None:
        fields = [f for f in model._meta.concrete_fields if not f.primary_key]
        quote = connection.ops.quote_name
        columns = ", ".join(quote(c) for c in ["id", *(f.column for f in fields)])
        plan = (
            f"{quote(model._meta.db_table)} ({columns})",
            attrgetter(*(f.attname for f in fields)),
            [n + 1 for n, f in enumerate(fields) if f.get_internal_type() == "JSONField"],
        )
        _COPY_PLANS[model] = plan
    return plan
