"""Configuration summaries (experiments.models.ConfigSummary), kept in step with the runs.

A comparison over every run reads one row per configuration and metric instead of every
metric row (issue 17). The rows are never stale: whatever changes a run's headline metrics
or the run fields a summary reads (its configuration, data source, stored verdict) updates
them in the same transaction, in one of two ways:

- **append** (``append``, ``add``): runs that are new to the summaries (just stored with
  their first headline metrics: the executor's parse, import, push, the bulk ingest). The
  batch's rows are aggregated per metric and configuration and merged into the stored rows
  by one INSERT … ON CONFLICT DO UPDATE per few hundred runs: counts and sums added, ``m2``
  by the parallel-variance merge (Chan et al.), extremes, the lowest run. The cost is the
  batch's, whatever the configuration's history. The exact median cannot be merged: a
  merged row's median becomes NULL, *pending* (a new row's is exact: its values are the
  batch's), until ``settle`` (the janitor, ``rebuild_summaries --settle``) or the next
  recomputation fills it; a reader meanwhile computes a shown configuration's median from
  its values (experiments.comparison.computation). The bulk ingest's batches (``add``
  with the values it wrote, PostgreSQL) are aggregated in Python (``batch_rows``, the twin
  of the SQL ``_select``) and merged the same way, without reading the rows back.
- **refresh** (``refresh``): anything else (a reparse or replacement of existing metrics, a
  metric edit, a verdict, parameter or configuration change, a delete) recomputes the
  touched configurations' rows from their runs in a few set-based statements (DELETE, then
  INSERT … SELECT … GROUP BY), medians exact.

The callers:

- ``experiments.results.store`` (the executor's and an import's parse, reparse,
  ``replace_metrics`` for load_published): an append when the run had no headline
  metric before, else a refresh; a parse's first store sets the run's key with its parsed
  fields (``experiments.models.runs.store_row``) and appends with ``append_keyed``; the
  bulk ingest (``add``, one statement per batch);
- ``RunQuerySet.update`` and its one-run form in plain SQL (``update_row``: the executor's
  writes and the verdict's), ``Run.save``, the ``Metric`` queryset's
  delete/update/bulk_create and ``Metric.save``/``delete`` (so a verdict refresh, a test or
  a shell edit keeps them);
- deletes of runs, whatever deletes them (a matrix, its owner, load_published's re-load),
  through Django's delete signals: the configurations are read before the rows go and
  recomputed after; a target's delete, which clears its runs' target, likewise.

``rebuild`` recomputes everything (``manage.py rebuild_summaries``), ``differences`` proves
the stored rows equal a recomputation (``--check``; a pending median is accepted, a stored
one must be exact).

Concurrent appends to one configuration (several workers, the ingest's client threads)
serialise on its row: the upsert locks it, rows in (name, key) order so that batches lock
in one order and never deadlock. A recomputation that meets a row created by another
transaction after its DELETE (a concurrent recomputation or first append of the same
configuration) waits for it and recomputes that configuration again (``_recompute``).

A run's configuration is ``Run.config_key`` (``config_key`` below), written by this module
only: when a run's configuration changes, the key still stored names the configuration it
leaves, whose row is recomputed too.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from operator import attrgetter
from typing import Any

import orjson
from django.db import connection, transaction
from django.db.models import Case, F, IntegerField, Value, When
from django.db.models.signals import post_delete, pre_delete

from experiments.models.runs import (
    SUMMARY_COLUMNS,
    SUMMARY_FIELDS,
    SUMMARY_KEY_COLUMNS,
    summaries_stale,
)
from experiments.shared import prepared
from experiments.shared.bottleneck import KINDS

# The run columns a summary reads (defined beside the model, whose updates refresh them).
KEY_COLUMNS = SUMMARY_KEY_COLUMNS
RUN_COLUMNS = SUMMARY_COLUMNS
FIELDS = SUMMARY_FIELDS

# Keys per statement (SQLite's and psycopg's parameter limits are far above).
CHUNK = 500

# Columns of experiments_configsummary the recomputation fills, in its SELECT's order.
COLUMNS = (
    "name",
    "config_key",
    "run_id",
    "n",
    "total",
    "m2",
    "min",
    "max",
    "median",
    "approx_n",
    "pub_n",
    *(f"bn_{kind}" for kind in KINDS),
    "collapsed_n",
    "steady_n",
    "steady_sum",
    "whole_n",
    "whole_sum",
)


def _plain(value: Any) -> Any:
    """A parameter value as the key sees it: 4.0 is 4 (PostgreSQL's jsonb holds them equal,
    and a float that round-trips through jsonb may come back as an integer)."""
    if isinstance(value, float) and value.is_integer() and math.isfinite(value):
        return int(value)
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def source_of(published: bool, source: str) -> str:
    """The data source a run pools by (experiments.models.runs.source_expression)."""
    from experiments.models.runs import OWN_RUNS

    return (source or "published") if published else OWN_RUNS


def config_key(
    tool: str,
    testbed_id: int,
    target_id: int | None,
    tuning_set_id: int | None,
    params: Any,
    published: bool,
    source: str,
) -> str:
    """The identity of a run's configuration: tool, every parameter, testbed, target, tuning
    set and data source (DESIGN.md, "Alike runs"), hashed to 32 hex digits."""
    return key_of_source(
        tool, testbed_id, target_id, tuning_set_id, params, source_of(published, source)
    )


def key_of_source(
    tool: str,
    testbed_id: int,
    target_id: int | None,
    tuning_set_id: int | None,
    params: Any,
    data_source: str,
) -> str:
    """``config_key`` with the data source already resolved (``source_of``; the comparison's
    ``source_expression``): the comparison names a point's configuration with it."""
    if isinstance(params, str):
        try:
            params = json.loads(params)
        except ValueError:
            pass
    text = json.dumps(
        [tool, testbed_id, target_id, tuning_set_id, _plain(params), data_source],
        sort_keys=True,
        separators=(",", ":"),
        default=str,
    )
    return hashlib.blake2b(text.encode(), digest_size=16).hexdigest()


def key_of(run: Any) -> str:
    """``config_key`` of a run (a Run, or a row the bulk ingest inserts)."""
    return config_key(*(getattr(run, column) for column in KEY_COLUMNS))


# --- Deferred refreshes --------------------------------------------------------------------


class _Pending(threading.local):
    def __init__(self) -> None:
        self.depth = 0
        self.runs: set[int] = set()  # refresh: their configurations recomputed
        self.keys: set[str] = set()  # refresh
        self.appends: set[int] = set()  # append: merged into their configurations

    def clear(self) -> None:
        self.runs.clear()
        self.keys.clear()
        self.appends.clear()


_pending = _Pending()


@contextmanager
def batch() -> Iterator[None]:
    """Collect the refreshes asked for inside the block and run them once at its end (call it
    inside the transaction that makes the changes)."""
    _pending.depth += 1
    try:
        yield
    except BaseException:
        _pending.depth -= 1
        if not _pending.depth:
            _pending.clear()
        raise
    _pending.depth -= 1
    if not _pending.depth:
        _flush()


def _flush() -> None:
    runs, keys, appends = set(_pending.runs), set(_pending.keys), set(_pending.appends)
    _pending.clear()
    if runs or keys or appends:
        _update(runs, keys, appends)


def refresh(run_ids: Iterable[int] = (), keys: Iterable[str] = ()) -> None:
    """Recompute the summaries of the configurations of ``run_ids`` (as stored and as they
    are now: a run whose configuration changed leaves one and joins another) and of ``keys``,
    from their runs; inside ``batch()``, at the batch's end."""
    if _pending.depth:
        _pending.runs.update(run_ids)
        _pending.keys.update(keys)
        return
    run_ids, keys = set(run_ids), set(keys)
    if run_ids or keys:
        _update(run_ids, keys, set())


def append(run_ids: Iterable[int]) -> None:
    """Merge runs that are new to the summaries into their configurations' rows: runs whose
    headline (primary) metrics were just stored and that had none before (in no summary
    yet). Their configuration keys are brought up to date first. Inside ``batch()``, at the
    batch's end, where a run also refreshed in the batch is left to the recomputation."""
    if _pending.depth:
        _pending.appends.update(run_ids)
        return
    run_ids = set(run_ids)
    if run_ids:
        _update(set(), set(), run_ids)


def append_keyed(run_ids: Iterable[int]) -> None:
    """``append`` of runs whose stored configuration key is known to be up to date (written
    by the caller in this transaction: ``experiments.results.store`` sets it with the run's parsed
    fields): merged at once, even inside ``batch()``, without reading the keys back. A
    recomputation of the same configuration later in the batch starts from its runs, so it
    supersedes the merge; the caller must not also ``append`` these runs."""
    run_ids = set(run_ids)
    if run_ids:
        with transaction.atomic(savepoint=False):
            _append(run_ids)


def add(runs: Iterable[Any], primaries: Iterable[list[tuple]] | None = None) -> None:
    """Summaries of runs just stored with their metrics, each with its ``config_key`` set
    before it was inserted (``key_of``; the bulk ingest): merged into their configurations'
    rows (``append``), one INSERT … ON CONFLICT per few hundred runs.

    ``primaries`` (the bulk ingest's): per run of ``runs``, in order, its primary metrics as
    stored, ``(name, value, extra)``. On PostgreSQL the batch's rows are then aggregated here
    from those values (``batch_rows``, the twin of ``_select``) and upserted as plain rows
    (``_upsert_rows``: the same merge, the same row order), instead of read back by the
    upsert's SELECT: 13.5 -> 6 ms of PostgreSQL per 500 runs for ~3 ms of Python
    (bench/RESULTS.md). A batch ``batch_rows`` declines (a value it cannot sum as
    PostgreSQL does) is appended by ``_append``; so is every batch on SQLite."""
    runs = list(runs)
    ids = {run.id for run in runs}
    if _pending.depth:
        _pending.appends.update(ids)
    elif ids:
        # No savepoint (two round trips): an error fails the caller's transaction anyway.
        with transaction.atomic(savepoint=False):
            rows = None
            if primaries is not None and connection.vendor == "postgresql":
                rows = batch_rows(runs, primaries)
            if rows is None:
                _append(ids)
            elif rows:
                _upsert_rows(rows)


# The largest magnitude of a value (metric or steadiness) ``batch_rows`` aggregates: a sum
# or square beyond ~1e308 is an error in PostgreSQL ("value out of range: overflow") and an
# infinity in Python; with values within ±1e150 neither happens for any batch, so a batch
# holding one beyond (or a NaN, an infinity) is left to the SQL, which then does what it
# always did.
_SAFE = 1e150


def _flag(value: Any) -> int:
    """1 where a boolean column stores true (the ingest's COPY writes ``t`` for a true
    value, NULL for None): ``_select``'s CASE WHEN <column> = true THEN 1 ELSE 0."""
    return 1 if value else 0


def batch_rows(runs: list[Any], primaries: Iterable[list[tuple]]) -> list[dict] | None:
    """The summary rows (dicts of ``COLUMNS``) of a batch of runs from the values stored, the
    Python twin of ``_select`` for those runs alone (change one, change the other;
    tests/experiments/test_summaries_append.py compares them): per (metric name, run's
    ``config_key``) of the primary metrics (``primaries``: per run, ``(name, value, extra)``)
    of runs with a key: the lowest run id, count, sum, sum of squared deviations from the
    mean (sum / count), min, max, the median (the middle value, or the mean of the two
    middle ones), approximate values (``extra["approx"]`` is JSON true), published runs,
    runs per bottleneck kind (``KINDS``), collapsed runs, and per steadiness column (the
    run's ``<direction>_steady`` / ``_whole`` for a metric named ``<direction>_…``,
    ``STEADY_DIRECTIONS``) the count of non-NULL values and their sum (NULL for none).
    Sums are added in the batch's order, not PostgreSQL's: equal to ``_close``'s tolerance.
    None (the caller goes through SQL) when a value is not within ±``_SAFE``.

    (Per metric only its value and run are collected; the runs' columns are counted per
    group by C-level maps, and only those that some run of the batch sets.)"""
    from experiments.models.runs import STEADY_DIRECTIONS

    # Per configuration key, per metric name: values, runs, approximate values.
    by_key: dict[str, dict[str, tuple[list, list, list]]] = {}
    members = []
    for run, metrics in zip(runs, primaries, strict=True):
        key = run.config_key
        if not key or not metrics:
            continue
        members.append(run)
        groups = by_key.get(key)
        if groups is None:
            groups = by_key[key] = {}
        for name, value, extra in metrics:
            group = groups.get(name)
            if group is None:
                group = groups[name] = ([], [], [0])
            group[0].append(value)
            group[1].append(run)
            if extra and isinstance(extra, dict) and extra.get("approx") is True:
                group[2][0] += 1
    # The run columns counted (0/1 per run, ``_flag``; bottleneck kinds), those set.
    counted = {
        column: lambda runs, get=attrgetter(field): sum(map(_flag, map(get, runs)))
        for column, field in (("pub_n", "published"), ("collapsed_n", "collapsed"))
        if any(map(_flag, map(attrgetter(field), members)))
    }
    if any(run.bottleneck in KINDS for run in members):
        for kind in KINDS:
            counted[f"bn_{kind}"] = lambda runs, kind=kind: sum(
                1 for run in runs if run.bottleneck == kind
            )
    directions = []  # (prefix, steady column, whole column) of directions some run has
    for op in STEADY_DIRECTIONS:
        columns = (f"{op}_steady", f"{op}_whole")
        numbers = [x for c in columns for x in map(attrgetter(c), members) if x is not None]
        if any(not -_SAFE <= float(x) <= _SAFE for x in numbers):  # (False for NaN)
            return None
        if numbers:
            directions.append((f"{op}_", *columns))
    zeros = dict.fromkeys(COLUMNS, 0)
    rows = []
    for key, groups in by_key.items():
        for name, (values, group_runs, approx) in groups.items():
            n = len(values)
            values = list(map(float, values))
            total = sum(values)
            values.sort()
            if total != total or values[0] < -_SAFE or values[-1] > _SAFE:  # NaN, or too large
                return None
            mean = total / n
            half = n // 2
            row = zeros.copy()
            row.update(
                name=name,
                config_key=key,
                run_id=min(run.id for run in group_runs),
                n=n,
                total=total,
                m2=sum([(v - mean) * (v - mean) for v in values]),
                min=values[0],
                max=values[-1],
                median=values[half] if n % 2 else (values[half - 1] + values[half]) / 2,
                approx_n=approx[0],
                steady_sum=None,
                whole_sum=None,
            )
            for column, count in counted.items():
                row[column] = count(group_runs)
            for prefix, *columns in directions:
                if name.startswith(prefix):
                    for column, field in zip(("steady", "whole"), columns, strict=True):
                        numbers = [
                            float(x) for x in map(attrgetter(field), group_runs) if x is not None
                        ]
                        row[f"{column}_n"] = len(numbers)
                        row[f"{column}_sum"] = sum(numbers) if numbers else None
                    break
            rows.append(row)
    return rows


def _chunks(items: Iterable) -> Iterator[list]:
    items = list(items)
    for start in range(0, len(items), CHUNK):
        yield items[start : start + CHUNK]


def _update(run_ids: set[int], keys: set[str], appends: set[int]) -> None:
    """Bring the configuration keys of ``run_ids`` and ``appends`` up to date; recompute the
    configurations of ``keys`` and of ``run_ids`` (the one each run leaves and the one it
    joins); merge ``appends`` into theirs, but for those of configurations recomputed
    (the recomputation counts them already)."""
    from experiments.models import Run

    # No savepoint: an error fails the caller's transaction anyway (nothing half-stored).
    with transaction.atomic(savepoint=False):
        moved: dict[str, list[int]] = {}
        joined: dict[int, str] = {}
        for chunk in _chunks(sorted(run_ids | appends)):
            for row in Run.objects.filter(pk__in=chunk).values("pk", "config_key", *KEY_COLUMNS):
                new = config_key(*(row[c] for c in KEY_COLUMNS))
                if row["pk"] in run_ids:
                    keys.update((row["config_key"], new))
                else:
                    joined[row["pk"]] = new
                if new != row["config_key"]:
                    moved.setdefault(new, []).append(row["pk"])
        for key, ids in moved.items():
            for chunk in _chunks(ids):
                Run.objects.filter(pk__in=chunk).update(config_key=key)
        keys.discard("")
        _recompute(keys)
        _append({pk for pk, key in joined.items() if key not in keys})


# Rounds of a recomputation that met rows another transaction created meanwhile; each
# round waits for those transactions, so a second round's snapshot already holds them.
_RECOMPUTE_ROUNDS = 5


def _recompute(keys: set[str]) -> None:
    """Recompute the rows of ``keys`` from their runs: DELETE, then INSERT … SELECT.

    On PostgreSQL another transaction may create one of these rows between the DELETE and
    the INSERT (its own recomputation or an append of a configuration's first runs, which
    the DELETE could not see): the INSERT then waits for it and, once it has committed,
    meets its row. Such rows are taken (``ON CONFLICT DO UPDATE`` of nothing, which tells
    them apart: ``xmax`` is not 0) and recomputed again in a new statement, whose snapshot
    holds the other transaction's runs; a plain INSERT failed on a unique violation."""
    from experiments.models import ConfigSummary, Metric

    for chunk in _chunks(sorted(keys)):
        todo = chunk
        for _ in range(_RECOMPUTE_ROUNDS):
            ConfigSummary.objects.filter(config_key__in=todo)._raw_delete(ConfigSummary.objects.db)
            todo = _insert(Metric.objects.filter(run__config_key__in=todo), upsert=True)
            if not todo:
                break
        else:
            raise RuntimeError(
                f"summaries: {len(todo)} configurations kept changing under their "
                f"recomputation ({_RECOMPUTE_ROUNDS} rounds)"
            )


def _select(metrics) -> tuple[str, tuple]:
    """SELECT of the summary rows of ``metrics`` (a Metric queryset; primary rows of runs
    with a configuration key), in ``COLUMNS`` order. The median is the mean of the one or
    two middle values, ``m2`` the sum of squared deviations from the group's mean, both by
    window functions (the same SQL on PostgreSQL and SQLite)."""
    from experiments.models.runs import _steady

    one, zero = Value(1), Value(0)
    inner = (
        metrics.filter(primary=True)
        .exclude(run__config_key="")
        .values(
            "name",
            _k=F("run__config_key"),
            _r=F("run_id"),
            _v=F("value"),
            _pub=Case(
                When(run__published=True, then=one), default=zero, output_field=IntegerField()
            ),
            _apx=Case(
                When(extra__approx=True, then=one), default=zero, output_field=IntegerField()
            ),
            _bn=F("run__bottleneck"),
            _col=Case(
                When(run__collapsed=True, then=one), default=zero, output_field=IntegerField()
            ),
            _st=_steady("steady"),
            _wh=_steady("whole"),
        )
        .order_by()
    )
    sql, params = inner.query.sql_with_params()
    name = connection.ops.quote_name("name")
    part = f"PARTITION BY {name}, _k"
    aggregates = [
        name,
        "_k",
        "MIN(_r)",
        "COUNT(*)",
        "SUM(_v)",
        "SUM((_v - _a) * (_v - _a))",
        "MIN(_v)",
        "MAX(_v)",
        "AVG(CASE WHEN _rn >= _c / 2.0 AND _rn <= _c / 2.0 + 1 THEN _v END)",
        "SUM(_apx)",
        "SUM(_pub)",
        *(f"SUM(CASE WHEN _bn = '{kind}' THEN 1 ELSE 0 END)" for kind in KINDS),
        "SUM(_col)",
        "COUNT(_st)",
        "SUM(_st)",
        "COUNT(_wh)",
        "SUM(_wh)",
    ]
    select = (
        f"SELECT {', '.join(aggregates)} FROM (SELECT _g.*, AVG(_v) OVER ({part}) AS _a, "
        f"ROW_NUMBER() OVER ({part} ORDER BY _v) AS _rn, COUNT(*) OVER ({part}) AS _c "
        f"FROM ({sql}) _g) _w GROUP BY {name}, _k"
    )
    return select, params


def _insert(metrics, upsert: bool = False) -> list[str]:
    """Insert the summary rows of ``metrics``. With ``upsert`` on PostgreSQL, a row that
    exists already (another transaction's, committed since this one's DELETE) is left as it
    is, locked; the keys of such rows are returned, to be recomputed again."""
    from experiments.models import ConfigSummary

    qn = connection.ops.quote_name
    select, params = _select(metrics)
    table = qn(ConfigSummary._meta.db_table)
    columns = ", ".join(qn(c) for c in COLUMNS)
    sql = f"INSERT INTO {table} ({columns}) {select}"
    if not (upsert and connection.vendor == "postgresql"):
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
        return []
    n = qn("n")
    sql += (
        f" ON CONFLICT ({qn('name')}, {qn('config_key')}) DO UPDATE SET {n} = {table}.{n}"
        f" RETURNING {qn('config_key')}, xmax::text <> '0'"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return sorted({key for key, taken in cursor.fetchall() if taken})


# Columns an append adds up (counts and sums; ``n`` and ``total`` too).
_ADDED = (
    "n",
    "total",
    "approx_n",
    "pub_n",
    *(f"bn_{kind}" for kind in KINDS),
    "collapsed_n",
    "steady_n",
    "whole_n",
)


def _merge_sql(table: str) -> str:
    """The DO UPDATE SET list merging a batch's row (EXCLUDED) into the stored one."""
    qn = connection.ops.quote_name
    pg = connection.vendor == "postgresql"
    least, greatest = ("LEAST", "GREATEST") if pg else ("MIN", "MAX")  # SQLite: scalar MIN/MAX

    def old(column: str) -> str:
        return f"{table}.{qn(column)}"

    def new(column: str) -> str:
        return f"EXCLUDED.{qn(column)}"

    # Chan et al.: m2 = m2_a + m2_b + delta² · n_a · n_b / (n_a + n_b), delta the difference
    # of the means (floats: total is a float column, so no integer division below).
    delta = f"({new('total')} / {new('n')} - {old('total')} / {old('n')})"
    sets = [f"{qn(c)} = {old(c)} + {new(c)}" for c in _ADDED]
    sets += [
        f"{qn('m2')} = {old('m2')} + {new('m2')} + {delta} * {delta} * {old('n')} * {new('n')}"
        f" / ({old('n')} + {new('n')})",
        f"{qn('min')} = {least}({old('min')}, {new('min')})",
        f"{qn('max')} = {greatest}({old('max')}, {new('max')})",
        f"{qn('run_id')} = {least}({old('run_id')}, {new('run_id')})",
        # Pending: the merged values' median needs the values (settle).
        f"{qn('median')} = NULL",
        *(
            f"{qn(c)} = COALESCE({old(c)} + {new(c)}, {old(c)}, {new(c)})"
            for c in ("steady_sum", "whole_sum")
        ),
    ]
    return ", ".join(sets)


@functools.lru_cache(maxsize=16)
def _append_sql(vendor: str, size: int) -> tuple[str, tuple, tuple[int, ...]]:
    """The upsert of ``_append`` for ``size`` runs: SQL, parameters, and the positions of
    the run ids among the parameters (compiled once per size: building ``_select``'s query
    costs ~3 ms of CPU, more than the statement for one run). The ids are compiled as
    sentinels -1…-size (no other parameter is negative) and found by value.

    On PostgreSQL the ids are one array parameter, given twice: to the metric rows and to
    the runs they join (``_append`` passes the list at both positions). With the list on the
    metric side alone the planner may hash-join the batch's metrics to a scan of every run
    (34 of the statement's 75 ms at 100,000 runs, bench/RESULTS.md)."""
    from experiments.models import ConfigSummary, Metric, Run

    qn = connection.ops.quote_name
    table = qn(ConfigSummary._meta.db_table)
    columns = ", ".join(qn(c) for c in COLUMNS)
    sentinels = list(range(-1, -size - 1, -1))
    select, params = _select(Metric.objects.filter(run_id__in=sentinels))
    params = list(params)
    if vendor == "postgresql":
        metric_run = f"{qn(Metric._meta.db_table)}.{qn('run_id')}"
        listed = f"{metric_run} IN ({', '.join(['%s'] * size)})"
        start = params.index(-1)
        if select.count(listed) != 1 or params[start : start + size] != sentinels:
            raise AssertionError("summaries: the run ids' IN list was not found")
        run_id = f"{qn(Run._meta.db_table)}.{qn('id')}"
        select = select.replace(listed, f"{metric_run} = ANY(%s) AND {run_id} = ANY(%s)")
        params[start : start + size] = [-1, -2]
        sentinels = [-1, -2]
    # "WHERE true": SQLite would read ON CONFLICT's ON as a join's without it.
    sql = (
        f"INSERT INTO {table} ({columns}) SELECT * FROM ({select}) _b WHERE true "
        f"ORDER BY 1, 2 ON CONFLICT ({qn('name')}, {qn('config_key')}) "
        f"DO UPDATE SET {_merge_sql(table)}"
    )
    where = {value: i for i, value in enumerate(params) if type(value) is int and value < 0}
    if sorted(where) != sorted(sentinels):
        raise AssertionError("summaries: the run ids' parameters were not found")
    return sql, tuple(params), tuple(where[value] for value in sentinels)


@functools.lru_cache(maxsize=8)
def _upsert_rows_sql(vendor: str, condition: str = "true") -> str:
    """``_upsert_rows``'s statement (PostgreSQL): the rows as one JSON array of objects,
    read as rows of the summary table (``json_populate_recordset``: each value converted
    to its column's type, a number from its shortest text, so exactly), sorted by (name,
    key) in the database's collation (the order every append locks rows in), merged as
    ``_append`` merges (``_merge_sql``). (Arrays per column cost ~2.4 ms of Python to
    quote for 200 rows, the JSON text ~0.1 ms.) ``condition``: SQL that must hold for
    anything to be upserted (``upsert_rows_statement``)."""
    from experiments.models import ConfigSummary

    qn = connection.ops.quote_name
    table = qn(ConfigSummary._meta.db_table)
    columns = ", ".join(qn(c) for c in COLUMNS)
    return (
        f"INSERT INTO {table} ({columns}) SELECT {columns} "
        f"FROM json_populate_recordset(NULL::{table}, %s::json) _b WHERE {condition} "
        f"ORDER BY {qn('name')}, {qn('config_key')} "
        f"ON CONFLICT ({qn('name')}, {qn('config_key')}) DO UPDATE SET {_merge_sql(table)}"
    )


def upsert_rows_statement(rows: list[dict], condition: str) -> tuple[str, list]:
    """``_upsert_rows`` of ``rows`` (``batch_rows``) as a statement and its parameters, for a
    caller's WITH (PostgreSQL): nothing is upserted unless ``condition`` (SQL) holds."""
    return _upsert_rows_sql(connection.vendor, condition), [orjson.dumps(rows).decode()]


def _upsert_rows(rows: list[dict]) -> None:
    """Insert or merge summary rows computed in Python (``batch_rows``), in one statement."""
    with connection.cursor() as cursor:
        cursor.execute(*upsert_rows_statement(rows, "true"))


def _append(run_ids: set[int]) -> None:
    """Merge the primary metrics of ``run_ids`` (runs in no summary yet, their keys stored)
    into their configurations' rows: the batch's rows per metric and configuration (what
    ``_select`` gives for them alone: a new row is exact, median included), inserted, or
    merged into the stored row. Rows in (name, key) order: concurrent batches lock the rows
    they share in one order."""
    arrays = connection.vendor == "postgresql"
    for chunk in _chunks(sorted(run_ids)):
        sql, template, positions = _append_sql(connection.vendor, len(chunk))
        params = list(template)
        if arrays:
            for position in positions:
                params[position] = chunk
        else:
            for position, pk in zip(positions, chunk, strict=True):
                params[position] = pk
        with prepared.cursor() as cursor:
            cursor.execute(sql, params)


# --- Pending medians -----------------------------------------------------------------------


def _median_select(keys: list[str], names: list[str]) -> tuple[str, tuple]:
    """SELECT name, config_key, count, median of the configurations ``keys`` (metrics
    ``names``): only their values are read (the run index by key)."""
    from experiments.models import Metric

    inner = (
        Metric.objects.filter(primary=True, run__config_key__in=keys, name__in=names)
        .values("name", _k=F("run__config_key"), _v=F("value"))
        .order_by()
    )
    sql, params = inner.query.sql_with_params()
    name = connection.ops.quote_name("name")
    part = f"PARTITION BY {name}, _k"
    select = (
        f"SELECT {name}, _k, COUNT(*) AS _n, "
        "AVG(CASE WHEN _rn >= _c / 2.0 AND _rn <= _c / 2.0 + 1 THEN _v END) AS _m "
        f"FROM (SELECT _g.*, ROW_NUMBER() OVER ({part} ORDER BY _v) AS _rn, "
        f"COUNT(*) OVER ({part}) AS _c FROM ({sql}) _g) _w GROUP BY {name}, _k"
    )
    return select, params


# Pending medians one janitor sweep fills at most: rows, and values read.
SETTLE_ROWS = 2000
SETTLE_VALUES = 100_000


def settle(limit: int | None = None, values: int | None = None) -> int:
    """Fill pending medians exactly from their configurations' values: at most ``limit``
    rows, and (but for the first) no more rows once ``values`` values are read (None: all
    pending); the rows filled. One UPDATE … FROM per chunk of configurations, each reading
    only those configurations' values. A row whose run count changed meanwhile (an append
    committed since the values were read) is left pending."""
    from experiments.models import ConfigSummary

    pending = (
        ConfigSummary.objects.filter(median__isnull=True)
        .order_by("config_key", "name")
        .values_list("config_key", "name", "n")
    )
    chosen: dict[str, set[str]] = {}
    read = 0
    for key, name, n in pending[:limit] if limit else pending.iterator(5000):
        if values is not None and chosen and read + n > values:
            break
        chosen.setdefault(key, set()).add(name)
        read += n
    qn = connection.ops.quote_name
    table = qn(ConfigSummary._meta.db_table)
    filled = 0
    with transaction.atomic():
        for chunk in _chunks(sorted(chosen)):
            names = sorted(set().union(*(chosen[k] for k in chunk)))
            select, params = _median_select(chunk, names)
            sql = (
                f"UPDATE {table} SET {qn('median')} = _s._m FROM ({select}) _s "
                f"WHERE {table}.{qn('name')} = _s.{qn('name')} "
                f"AND {table}.{qn('config_key')} = _s._k AND {table}.{qn('n')} = _s._n "
                f"AND {table}.{qn('median')} IS NULL"
            )
            with connection.cursor() as cursor:
                cursor.execute(sql, params)
                filled += cursor.rowcount
    return filled


# --- Deletes -------------------------------------------------------------------------------


def _run_deleting(sender, instance, **kwargs) -> None:
    """Before a run's row goes (alone, or with its matrix or owner): its configuration."""
    if instance.config_key:
        _pending.keys.add(instance.config_key)


def _deleted(sender, instance, **kwargs) -> None:
    """After the delete's rows went (Django deletes every row of a model, then signals each):
    the configurations collected are recomputed, in the delete's transaction."""
    if not _pending.depth:
        _flush()


def _target_deleting(sender, instance, **kwargs) -> None:
    """A target's delete clears its runs' target: their configuration changes."""
    from experiments.models import Run

    _pending.runs.update(Run.objects.filter(target=instance).values_list("pk", flat=True))


def _stale(sender, run_ids, **kwargs) -> None:
    refresh(run_ids=run_ids)


def connect() -> None:
    """Connect the models' refresh signal and the delete signals (experiments.apps)."""
    from experiments.models import Run, Target

    summaries_stale.connect(_stale, sender=Run, dispatch_uid="summaries-stale")
    pre_delete.connect(_run_deleting, sender=Run, dispatch_uid="summaries-run-pre")
    post_delete.connect(_deleted, sender=Run, dispatch_uid="summaries-run-post")
    pre_delete.connect(_target_deleting, sender=Target, dispatch_uid="summaries-target-pre")
    post_delete.connect(_deleted, sender=Target, dispatch_uid="summaries-target-post")


# --- Rebuild and check ---------------------------------------------------------------------


def _stored_keys() -> Iterator[tuple[int, str, str]]:
    """(run id, stored key, computed key) of every run."""
    from experiments.models import Run

    rows = Run.objects.order_by().values_list("pk", "config_key", *KEY_COLUMNS)
    for pk, stored, *columns in rows.iterator(chunk_size=5000):
        yield pk, stored, config_key(*columns)


def rebuild() -> int:
    """Recompute every run's configuration key and every summary row; the rows stored."""
    from experiments.models import ConfigSummary, Metric, Run

    with transaction.atomic():
        moved: dict[str, list[int]] = {}
        for pk, stored, key in _stored_keys():
            if stored != key:
                moved.setdefault(key, []).append(pk)
        for key, ids in moved.items():
            for chunk in _chunks(ids):
                Run.objects.filter(pk__in=chunk).update(config_key=key)
        ConfigSummary.objects.all()._raw_delete(ConfigSummary.objects.db)
        _insert(Metric.objects.all())
        return ConfigSummary.objects.count()


def rebuild_in_migration(connection: Any) -> int | None:
    """``rebuild`` from a migration, unless the summary table still lacks a column this module
    writes (a later migration adds it, and rebuilds then): the module is today's, the table
    the migration's. None when skipped."""
    from experiments.models import ConfigSummary

    table = ConfigSummary._meta.db_table
    with connection.cursor() as cursor:
        have = {c.name for c in connection.introspection.get_table_description(cursor, table)}
    if any(f.column not in have for f in ConfigSummary._meta.concrete_fields):
        return None
    return rebuild()


def _close(a: Any, b: Any) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        if a is None or b is None:
            return a is b
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9 * max(1.0, abs(a), abs(b)))
    return a == b


def differences(limit: int = 20) -> list[str]:
    """How the stored keys and summary rows differ from a recomputation from the runs (at
    most ``limit`` lines; empty when they match). Sums may differ in their last digits (the
    order of additions): values are compared to 9 significant digits."""
    from experiments.models import ConfigSummary, Metric

    out: list[str] = []
    for pk, stored, key in _stored_keys():
        if stored and stored != key:
            out.append(f"run {pk}: configuration key {stored}, computed {key}")
    unkeyed = Metric.objects.filter(primary=True, run__config_key="").values_list("run_id")
    for (pk,) in unkeyed.distinct().order_by("run_id")[: limit or None]:
        out.append(f"run {pk}: has metrics but no configuration key (not summarised)")
    select, params = _select(Metric.objects.all())
    with connection.cursor() as cursor:
        cursor.execute(select, params)
        expected = {(r[0], r[1]): r for r in cursor.fetchall()}
    stored_rows = {
        (r[0], r[1]): r for r in ConfigSummary.objects.values_list(*COLUMNS).iterator(5000)
    }
    for pair in sorted(set(expected) | set(stored_rows)):
        want, have = expected.get(pair), stored_rows.get(pair)
        if want is None:
            out.append(f"{pair[0]} of configuration {pair[1]}: stored, but no runs")
        elif have is None:
            out.append(f"{pair[0]} of configuration {pair[1]}: missing")
        else:
            wrong = [
                f"{col} {h!r} (runs: {w!r})"
                for col, w, h in zip(COLUMNS, want, have, strict=True)
                if not _close(w, h) and not (col == "median" and h is None)  # pending
            ]
            if wrong:
                out.append(f"{pair[0]} of configuration {pair[1]}: " + ", ".join(wrong))
    return out[:limit] if limit else out
