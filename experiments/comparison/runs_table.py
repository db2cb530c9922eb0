"""The runs table: runs as rows, chosen parameters and results as columns, sorted and filtered
in the database and paginated with a cursor (issue 16 item 3).

Everything the table shows comes from its query string (``TableSpec.parse``), so a URL
reproduces the view and can be shared; the CSV and JSON exports read the same spec.

- ``cols=param:numjobs,metric:write_bw,…``: the columns (``param:NAME``, ``metric:NAME`` or a
  run field: ``tool``, ``testbed``, ``status``, ``created``, ``started``). Without ``cols``
  the table picks the parameters that vary and the commonest metrics of the filtered runs.
- ``sort=-metric:write_bw``: any column, ``-`` for descending; ties break on the run's id
  (for a parameter on its creation time, then id; for the testbed on the testbed, its
  creation time, then id). A parameter sorts its numbers (numerically), then its other
  values as text (strings, true/false, lists), then the runs without it.
- filters: ``tool``, ``testbed`` (uuid), ``matrix`` (uuid), ``status``, ``owner=mine``,
  ``published=yes|no``, ``p.NAME=VALUE`` (parameter equals, in any spelling of its kind:
  ``p.bs=4k``, ``p.bs=4096``, ``p.bs=4 KiB``), ``m.NAME=LO..HI`` (the run's primary value
  of that metric in the column's display unit; either end may be left out).
- ``units=binary``: GiB/s and GiB instead of GB/s and GB (DESIGN.md).
- ``after=CURSOR``: the page after the row the cursor names (keyset pagination).

Keyset pagination instead of page numbers: a page is ``WHERE (sort key, id) after the
cursor ORDER BY sort key, id LIMIT n+1``, so neither the page nor the "more" link counts the
filtered runs (at a million runs, ``count(*)`` alone costs more than the page), and a page
never repeats or skips a run when runs are added meanwhile. Missing values (a run without
that metric or parameter) sort last in both directions. Every sort reads an index in order
(experiments.models.params for parameters), so a page costs ~n index entries at any depth.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from types import SimpleNamespace
from typing import Any
from uuid import UUID

from django.core.exceptions import EmptyResultSet
from django.db import connection
from django.db.models import (
    BooleanField,
    DateTimeField,
    Exists,
    F,
    FloatField,
    Func,
    IntegerField,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    TextField,
    Value,
)
from django.db.models.expressions import RawSQL

from experiments.comparison.charts import display_unit, metric_label
from experiments.models import Metric, Run, RunParam
from experiments.models.params import NUMBER, TEXT, TEXT_PREFIX, typed
from experiments.models.runs import Tool
from experiments.shared import keyset
from runners import metrics as vocabulary
from runners import params as param_kinds

PAGE_SIZE = 50
# Up to this many filtered runs (the planner's estimate), a parameter sort sorts them rather
# than walk the parameter's index (``TableSpec._select_by_param``).
FEW = 5000
MAX_COLUMNS = 24
MAX_FILTERS = 20
# Default columns are chosen from the newest runs that pass the filters: enough to see which
# parameters vary and which metrics are common, few enough to stay a cheap query.
SAMPLE = 200
DEFAULT_PARAMS = 6
DEFAULT_METRICS = 4
NAME = re.compile(r"^[A-Za-z0-9_.\-]{1,64}$")

# Run fields that can be columns: key -> (header, ORM expression of the sort key).
FIELDS: dict[str, tuple[str, Any]] = {
    "tool": ("Tool", F("tool")),
    "testbed": ("Testbed", F("testbed__name")),
    "status": ("Status", F("status")),
    "created": ("Created", F("created")),
    "started": ("Started", F("started_at")),
}
DATETIME_FIELDS = {"created", "started"}


class TableError(ValueError):
    """A query string the table cannot show; the message says which parameter and why."""


@dataclass(frozen=True)
class Column:
    key: str  # "param:numjobs", "metric:write_bw", "created"
    kind: str  # "param", "metric", "field"
    name: str  # the parameter, metric or field name
    label: str  # header
    unit: str = ""  # display unit of a metric
    base_unit: str = ""  # a metric's base unit; a size or duration parameter's (B, s)
    divisor: float = 1.0

    def display(self, base: float | None) -> float | None:
        return None if base is None else base / self.divisor


def _metric_units(name: str, binary: bool) -> tuple[str, str, float]:
    """(base unit, display unit, divisor) of a metric: the vocabulary's base unit, or for a
    name outside it the unit its values are stored in (one unit per column)."""
    base = vocabulary.unit(name)
    if base is None:
        base = (
            Metric.objects.filter(name=name, primary=True).values_list("unit", flat=True).first()
            or ""
        )
    unit, divisor = display_unit(base, binary)
    return base, unit, divisor


def make_column(key: str, binary: bool = False) -> Column:
    kind, _, name = key.partition(":")
    if kind in ("param", "metric") and NAME.match(name):
        if kind == "param":
            # A size or a duration: its normal form's unit (bytes, seconds), for exports.
            unit = param_kinds.UNITS.get(param_kinds.kind(name) or "", "")
            return Column(key, "param", name, name, base_unit=unit)
        base, unit, divisor = _metric_units(name, binary)
        label = f"{metric_label(name)} ({unit})" if unit else metric_label(name)
        return Column(key, "metric", name, label, unit, base, divisor)
    if key in FIELDS:
        return Column(key, "field", key, FIELDS[key][0])
    raise TableError(f"cols: unknown column {key!r} (param:NAME, metric:NAME, {', '.join(FIELDS)})")


@dataclass
class TableSpec:
    columns: list[Column]
    sort: Column
    descending: bool
    binary: bool
    filters: dict[str, str]  # the filters as given, for the form and links
    params_eq: list[tuple[str, str]] = field(default_factory=list)
    metric_ranges: list[tuple[str, float | None, float | None]] = field(default_factory=list)
    after: tuple[Any, int] | None = None
    chosen: bool = False  # columns given by ``cols`` rather than picked by default
    light: bool = False  # rows as plain records instead of Run instances (exports)
    # The runs that pass the filters but the parameter filters, and those (``_newest``): a
    # view newest (or oldest) first reads the runs from a parameter filter's typed rows.
    base: QuerySet | None = None
    matches: list[ParamMatch] = field(default_factory=list)

    @classmethod
    def parse(cls, query, user) -> tuple[TableSpec, QuerySet]:
        """The spec of a query string and the filtered (unsorted) runs it shows; raises
        TableError naming the first bad parameter."""
        binary = query.get("units", "") == "binary"
        if query.get("units", "") not in ("", "binary", "decimal"):
            raise TableError("units: 'decimal' (GB/s, the default) or 'binary' (GiB/s)")
        runs, base, matches, filters, params_eq, ranges = _filtered(query, user, binary)
        cols = [c.strip() for c in query.get("cols", "").split(",") if c.strip()]
        if len(cols) > MAX_COLUMNS:
            raise TableError(f"cols: at most {MAX_COLUMNS} columns")
        if len(set(cols)) != len(cols):
            raise TableError("cols: a column is named twice")
        if cols:
            columns = [make_column(c, binary) for c in cols]
        else:
            newest = _newest(base, matches, SAMPLE)
            columns = _default_columns(runs if newest is None else newest, binary)
        sort_key = query.get("sort", "-created") or "-created"
        descending = sort_key.startswith("-")
        sort_key = sort_key.lstrip("-")
        sort = next((c for c in columns if c.key == sort_key), None) or make_column(
            sort_key, binary
        )
        spec = cls(
            columns=columns,
            sort=sort,
            descending=descending,
            binary=binary,
            filters=filters,
            params_eq=params_eq,
            metric_ranges=ranges,
            chosen=bool(cols),
            base=base,
            matches=matches,
        )
        if query.get("after"):
            spec.after = spec.decode_cursor(query["after"])
        return spec, runs

    # -- sorting and the cursor ------------------------------------------------------------

    def select(self, runs: QuerySet, n: int) -> list[Run]:
        """Up to ``n`` runs after the cursor, in order, each with its sort key as ``_sort``."""
        if self.sort.kind == "metric":
            return self._select_by_metric(runs, n)
        if self.sort.kind == "param":
            return self._select_by_param(runs, n)
        if self.sort.name == "testbed":
            return self._select_by_testbed(runs, n)
        if self.sort.name == "created" and self.base is not None:
            # ``runs`` are parse's: its base and parameter filters, read from typed rows.
            newest = _newest(self.base, self.matches, n, self.descending, self.after)
            if newest is not None:
                runs = newest
        runs = runs.annotate(_sort=FIELDS[self.sort.name][1])
        # Columns that are never null sort without NULLS LAST, so that an index on them
        # (created, id) serves the order; a missing start time sorts last.
        if self.sort.name == "started":
            key = (
                F("_sort").desc(nulls_last=True)
                if self.descending
                else F("_sort").asc(nulls_last=True)
            )
        else:
            key = F("_sort").desc() if self.descending else F("_sort").asc()
        runs = runs.order_by(key, F("id").desc() if self.descending else F("id").asc())
        if self.after is not None:
            value, last_id = self.after[:2]
            newer = "lt" if self.descending else "gt"
            if value is None:  # inside the trailing block of missing values: ids only
                runs = runs.filter(_sort__isnull=True, **{f"id__{newer}": last_id})
            else:
                runs = runs.filter(
                    Q(**{f"_sort__{newer}": value})
                    | Q(_sort=value, **{f"id__{newer}": last_id})
                    | Q(_sort__isnull=True)
                )
        return _fetch(runs, n, self.light)

    def _order(self, *names: str) -> list:
        return [F(name).desc() if self.descending else F(name).asc() for name in names]

    def _select_by_param(self, runs: QuerySet, n: int) -> list[Run]:
        """Sorted by a parameter, from its typed rows (experiments.models.params) in the order
        of their index (name, kind, num, text, created, run): first the runs whose value is a
        number, in numeric order; then those whose value is text (a string, true/false, a
        list); then the runs without it, by (created, id). Ties break on (created, id), in
        the sort's direction, so that the index alone gives the order; a page reads ~n index
        entries and n runs however deep it is."""
        name = self.sort.name
        op = "<" if self.descending else ">"
        # Where the cursor is: 0 among the numbers, 1 among the texts, 2 among the missing.
        start = 0
        if self.after is not None:
            value = self.after[0]
            start = 2 if value is None else 1 if isinstance(value, str) else 0
        # A filter that leaves few runs (one matrix, a tool): sort those, each one's value
        # read by its run (the rows' index on run), rather than walk the parameter's whole
        # index for the few that pass (the planner cannot tell how far that walk goes).
        few = bool(self.filters) and (keyset.estimate(runs) or FEW + 1) <= FEW
        # Filtered by the parameter sorted by (p.threads=16, sort -param:threads): only its
        # values' rows are read, from where the index holds them, and a phase none of them
        # is in is skipped (the missing: a run without it never equals a value). Walking
        # the parameter's index from its top value for the runs the filter passes read
        # 286,000 rows at a million runs (1.6-2.3 s).
        same = next((m for m in self.matches if m.name == name and m.rows), None)
        found: list = []
        for phase in (NUMBER, TEXT, None):
            index = 2 if phase is None else phase
            if index < start or len(found) >= n:
                continue
            values = [] if same is None else [r[1 + phase] for r in same.rows if r[0] == phase]
            if same is not None and not values:
                continue
            after = self.after if index == start else None
            if phase is None:
                part = runs.filter(_ParamMissing(name)).annotate(_sort=Value(None, FloatField()))
                if after is not None:
                    part = part.filter(
                        _Beyond(
                            ("created", "id"),
                            (after[2], after[1]),
                            op,
                            (DateTimeField(), IntegerField()),
                        )
                    )
                part = part.order_by(*self._order("created", "id"))
            elif few:
                mine = RunParam.objects.filter(run=OuterRef("pk"), name=name)
                part = runs.annotate(
                    _kind=Subquery(mine.values("kind")[:1]),
                    _num=Subquery(mine.values("num")[:1]),
                    _text=Subquery(mine.values("text")[:1]),
                    _at=F("created"),
                    _rid=F("id"),
                ).filter(_kind=phase)
                part = part.annotate(_sort=F("_num" if phase == NUMBER else "_text"))
                part = self._after_param(part, phase, after, op)
            else:
                # The other half of the value is a constant: the index's order is the
                # value's, then (created, run).
                other = {"typed_params__text": ""} if phase == NUMBER else {"typed_params__num": 0}
                column = "typed_params__num" if phase == NUMBER else "typed_params__text"
                if len(values) == 1:
                    other[column] = values[0]
                elif values:
                    other[f"{column}__in"] = values
                part = runs.filter(
                    typed_params__name=name, typed_params__kind=phase, **other
                ).annotate(
                    _num=F("typed_params__num"),
                    _text=F("typed_params__text"),
                    _at=F("typed_params__created"),
                    _rid=F("typed_params__run_id"),
                    _sort=F("typed_params__num" if phase == NUMBER else "typed_params__text"),
                )
                part = self._after_param(part, phase, after, op)
            found += _fetch(part, n - len(found), self.light)
        return found

    def _after_param(self, part: QuerySet, phase, after, op) -> QuerySet:
        """A parameter sort's runs of one phase (numbers or texts), annotated with _num,
        _text, _at and _rid, beyond the cursor's row (``after``: value, id, created) and in
        the sort's order."""
        if after is not None:
            value = after[0]
            key = (value, "") if phase == NUMBER else (0.0, value)
            part = part.filter(
                _Beyond(
                    ("_num", "_text", "_at", "_rid"),
                    (*key, after[2], after[1]),
                    op,
                    (FloatField(), TextField(), DateTimeField(), IntegerField()),
                )
            )
        return part.order_by(*self._order("_num", "_text", "_at", "_rid"))

    def _select_by_testbed(self, runs: QuerySet, n: int) -> list[Run]:
        """Sorted by the testbed's name, then the testbed (two may share a name), then
        (created, id), all in the sort's direction. On PostgreSQL the testbeds (a lab has
        tens) are walked in that order and each one's runs read from the index (testbed,
        created, id), at most n a testbed, through a LATERAL join: a page costs ~n index
        entries a testbed reached instead of a sort of every run by a joined name. SQLite
        sorts."""
        op = "<" if self.descending else ">"
        if connection.vendor != "postgresql":
            part = runs.annotate(_sort=F("testbed__name"))
            if self.after is not None:
                value, last_id, testbed_id, created = self.after
                part = part.filter(
                    _Beyond(
                        ("_sort", "testbed_id", "created", "id"),
                        (value, testbed_id, created, last_id),
                        op,
                        (TextField(), IntegerField(), DateTimeField(), IntegerField()),
                    )
                )
            part = part.order_by(*self._order("_sort", "testbed_id", "created", "id"))
            return _fetch(part, n, self.light)
        direction = "DESC" if self.descending else "ASC"
        run = Run._meta.db_table
        inner = runs.order_by(*self._order("created", "id"))
        # The testbeds walked: filtered by one, that one only (the others' runs would be
        # read to find none); after a cursor, from the cursor's testbed on.
        conditions, outer_params = ["TRUE"], []
        if "testbed" in self.filters:
            conditions.append("uuid = %s")
            outer_params.append(self.filters["testbed"])
        if self.after is None:
            inner = inner.extra(where=[f'"{run}"."testbed_id" = tb.id'])
        else:
            value, last_id, testbed_id, created = self.after
            conditions.append(f"(name, id) {op}= (%s, %s)")
            outer_params += [value, testbed_id]
            inner = inner.extra(
                where=[
                    f'"{run}"."testbed_id" = tb.id AND (tb.id <> %s OR '
                    f'("{run}"."created", "{run}"."id") {op} (%s, %s))'
                ],
                params=[testbed_id, created, last_id],
            )
        try:
            inner_sql, inner_params = inner.values("id", "created")[:n].query.sql_with_params()
        except EmptyResultSet:  # runs.none(): nothing visible
            return []
        outer_where = "WHERE " + " AND ".join(conditions)
        sql = (
            f"SELECT l.id, tb.name FROM (SELECT id, name FROM experiments_testbed {outer_where} "
            f"ORDER BY name {direction}, id {direction}) tb CROSS JOIN LATERAL ({inner_sql}) l "
            f"ORDER BY tb.name {direction}, tb.id {direction}, l.created {direction}, "
            f"l.id {direction} LIMIT %s"
        )
        with connection.cursor() as cursor:
            cursor.execute(sql, [*outer_params, *inner_params, n])
            order = [row[0] for row in cursor.fetchall()]
        if not order:
            return []
        got = {
            r.id: r
            for r in _fetch(
                Run.objects.filter(pk__in=order).annotate(_sort=F("testbed__name")),
                len(order),
                self.light,
            )
        }
        return [got[i] for i in order if i in got]

    def _select_by_metric(self, runs: QuerySet, n: int) -> list[Run]:
        """Sorted by a metric: first the runs with the metric, read from the Metric table in
        the order of its index (name, value, run) of primary values, so a page costs ~n
        index entries and n joined runs instead of a lookup for every run; then the runs
        without it, by id."""
        name = self.sort.name
        newer = "lt" if self.descending else "gt"
        found: list[Run] = []
        if self.after is None or self.after[0] is not None:
            order = [F("_sort").desc(), F("_rid").desc()]
            if not self.descending:
                order = [F("_sort").asc(), F("_rid").asc()]
            if not self.matches:
                found = _fetch(self._with_metric(runs).order_by(*order), n, self.light)
            else:
                # A parameter filter's JSON comparison too, though its typed row decides:
                # read from the run's own row, which the walk reads anyway, it spares the
                # runs the probe of their typed row.
                exact = runs.filter(*(m.exact for m in self.matches if m.rows and not m.ambiguous))
                edge = self._window_edge()
                found = None
                if edge is None or self._reaches(edge):
                    found = self._in_first_entries(
                        self._with_metric(exact).order_by(*order), n, edge is None
                    )
                if found is None:
                    # Runs alike in the filtered parameters are one configuration's: the
                    # filters hold for all of them, so they are read from ``base``.
                    ordered = self._with_metric(self.base).order_by(*order)
                    found = self._by_configurations(ordered, iter(self._configurations()), n)
        if len(found) < n:
            has = Metric.objects.filter(run=OuterRef("pk"), name=name, primary=True)
            without = runs.filter(~Exists(has)).annotate(_sort=Value(None, FloatField()))
            if self.after is not None and self.after[0] is None:
                without = without.filter(**{f"id__{newer}": self.after[1]})
            without = without.order_by("-id" if self.descending else "id")
            found += _fetch(without, n - len(found), self.light)
        return found

    def _after_value(self, rows: QuerySet, value: str, rid: str) -> QuerySet:
        """``rows`` after the cursor of a metric sort, by their fields ``value`` and ``rid``
        (the metric's value and the run's id)."""
        if self.after is None:
            return rows
        newer = "lt" if self.descending else "gt"
        last_value, last_id = self.after
        # The redundant bound ("value <= v") is what the index scan starts from.
        bound = "lte" if self.descending else "gte"
        return rows.filter(
            Q(**{f"{value}__{newer}": last_value})
            | Q(**{value: last_value, f"{rid}__{newer}": last_id}),
            **{f"{value}__{bound}": last_value},
        )

    def _with_metric(self, runs: QuerySet) -> QuerySet:
        """The runs with the sorted metric, its value as ``_sort``, after the cursor."""
        with_metric = runs.filter(metrics__name=self.sort.name, metrics__primary=True).annotate(
            _sort=F("metrics__value"), _rid=F("metrics__run_id")
        )
        return self._after_value(with_metric, "_sort", "_rid")

    def _first_entries(self) -> QuerySet:
        """The sorted metric's primary rows after the cursor, in the sort's order."""
        entries = Metric.objects.filter(name=self.sort.name, primary=True)
        order = ("-value", "-run_id") if self.descending else ("value", "run_id")
        return self._after_value(entries, "value", "run_id").order_by(*order)

    def _window_edge(self) -> float | None:
        """The value of the metric's FIRST_ENTRIES-th primary row after the cursor: the last
        the first-entries window holds; None when there are fewer (the window holds them
        all)."""
        edge = self._first_entries().values_list("value", flat=True)
        return next(iter(edge[FIRST_ENTRIES - 1 : FIRST_ENTRIES]), None)

    def _reaches(self, edge: float) -> bool:
        """Whether some configuration's bound reaches the window's last value; if none does,
        none of the filter's runs is among the metric's first entries (they sort after the
        edge), and looking for them there would read the window for nothing (30-50 ms at a
        million runs). Only the summaries whose bound reaches the edge are checked against
        the filters (a few ms), not all of them (``_configurations``: 30-40 ms), which a
        filter the window serves never reads."""
        bound = "max" if self.descending else "min"
        reaching = {f"{bound}__{'gte' if self.descending else 'lte'}": edge}
        return self._summaries().filter(**reaching).exists()

    def _in_first_entries(self, ordered: QuerySet, n: int, whole: bool) -> list | None:
        """The first ``n`` of ``ordered`` (runs with the metric, in the sort's order) when
        they are among the metric's first FIRST_ENTRIES primary values (after the cursor),
        the runs of every parameter filter the walk of the metric's index serves at once;
        else None: the filter's runs are further down (p.threads=1 sorted by write_bw when
        the best values are 64 threads'), read by configuration (``_by_configurations``).
        ``whole``: the window holds every primary row of the metric after the cursor."""
        first = self._first_entries().values("run_id")[:FIRST_ENTRIES]
        found = _fetch(ordered.filter(_rid__in=Subquery(first)), n, self.light)
        if len(found) >= n or whole:
            return found  # the page, or every run with the metric (fewer than the window)
        return None

    def _configurations(self) -> list[tuple[str, float]]:
        """The configurations whose runs a metric sort under parameter filters may show,
        best first: (key, bound) of each configuration summary of the sorted metric whose
        runs pass the filters that are the configuration's own (parameters, tool, testbed:
        a configuration's runs are alike in them), the bound its best value (the largest
        descending, the smallest ascending). Summaries hold every primary metric row of
        every run (experiments.results.summaries), in the transaction that stores it.

        One statement: the configurations that pass are far down the order of their bounds
        (threads=16 among 64 threads' better ones), and walking the summaries in that order a
        chunk at a time checked more of them than checking all at once (5,880 at a million
        runs: 30-40 ms)."""
        bound = "max" if self.descending else "min"
        order = F(bound).desc() if self.descending else F(bound).asc()
        summaries = self._summaries().order_by(order, "config_key")
        return list(summaries.values_list("config_key", bound))

    def _summaries(self) -> QuerySet:
        """The sorted metric's configuration summaries whose runs pass the filters that are
        the configuration's own (parameters, tool, testbed)."""
        from experiments.models import ConfigSummary

        alike = Q()
        for match in self.matches:
            alike &= _on_run(match.exact)
        if self.filters.get("tool"):
            alike &= Q(run__tool=self.filters["tool"])
        if self.filters.get("testbed"):
            alike &= Q(run__testbed__uuid=UUID(self.filters["testbed"]))
        return ConfigSummary.objects.filter(alike, name=self.sort.name)

    def _by_configurations(
        self, ordered: QuerySet, configurations: Iterator[tuple[str, float]], n: int
    ) -> list:
        """The first ``n`` of ``ordered`` (runs with the metric, in the sort's order) read
        configuration by configuration, best bound first, until the next configuration's
        bound cannot reach the ``n``-th run found (its runs sort after it). A filter whose
        runs are far down the metric's order (p.threads=1 sorted by write_bw, when the best
        values are 64 threads') no longer walks the metric's index through every better
        run: 5.2 s at a million runs before. A configuration's runs and their values come
        from two index-only reads (runs by configuration key, ``exp_metric_run_name``)."""
        best: list[tuple[float, int]] = []  # (value, run id) in the sort's order
        step = 1
        later = (lambda a, b: a < b) if self.descending else (lambda a, b: a > b)
        pending = next(configurations, None)
        while pending is not None:
            if len(best) >= n and later(pending[1], best[n - 1][0]):
                break
            keys = [pending[0]]
            pending = None
            for key, bound in configurations:
                if len(keys) >= step or (len(best) >= n and later(bound, best[n - 1][0])):
                    pending = (key, bound)
                    break
                keys.append(key)
            step = min(step * 2, CONFIGURATIONS_BATCH)
            # Every run of these configurations with its value, unordered: an order and a
            # limit here made PostgreSQL walk the metric's index again.
            values = ordered.filter(config_key__in=keys).order_by().values_list("_sort", "_rid")
            best += values
            best.sort(reverse=self.descending)
            del best[n:]
        return _fetch(ordered.filter(pk__in=[rid for _, rid in best]), n, self.light)

    def cursor(self, run) -> str:
        """The page after ``run``: its sort key and id, and for a parameter sort its creation
        time (ties break on it), for a testbed sort the testbed and the creation time."""
        key = [run._sort, run.id]
        if self.sort.kind == "param":
            key.append(run.created)
        elif self.sort.key == "testbed":
            key += [run.testbed_id, run.created]
        shown = [v.isoformat() if isinstance(v, datetime) else v for v in key]
        raw = json.dumps(shown, separators=(",", ":")).encode()
        return base64.urlsafe_b64encode(raw).decode().rstrip("=")

    def decode_cursor(self, text: str) -> tuple:
        bad = TableError("after: not a cursor of this view of the table (follow 'more')")
        try:
            raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
            key = json.loads(raw)
        except (ValueError, TypeError, binascii.Error):
            raise bad from None
        size = 3 if self.sort.kind == "param" else 4 if self.sort.key == "testbed" else 2
        if not isinstance(key, list) or len(key) != size:
            raise bad
        value, last_id, *extra = key
        if not _is_int(last_id):
            raise bad
        if self.sort.key == "testbed":
            if not isinstance(value, str) or not _is_int(extra[0]):
                raise bad
        if self.sort.kind == "param" or self.sort.key == "testbed":
            try:
                extra[-1] = datetime.fromisoformat(extra[-1])
            except (TypeError, ValueError):
                raise bad from None
        if value is None:
            return (value, last_id, *extra)
        if self.sort.key in DATETIME_FIELDS:
            try:
                value = datetime.fromisoformat(value)
            except (TypeError, ValueError):
                raise bad from None
        elif self.sort.kind == "metric" or (
            self.sort.kind == "param" and not isinstance(value, str)
        ):
            if not isinstance(value, (int, float)) or isinstance(value, bool):
                raise bad
            if not math.isfinite(value):
                raise bad
        elif not isinstance(value, str):
            raise bad
        return (value, last_id, *extra)

    # -- links ---------------------------------------------------------------------------

    def query(self, **changes) -> dict[str, str]:
        """The query string of this view with ``changes`` (a value of None drops a key);
        the cursor is dropped unless given."""
        q: dict[str, str] = dict(self.filters)
        if self.chosen:
            q["cols"] = ",".join(c.key for c in self.columns)
        q["sort"] = ("-" if self.descending else "") + self.sort.key
        if self.binary:
            q["units"] = "binary"
        q.update(changes)
        return {k: v for k, v in q.items() if v not in (None, "")}

    def sort_query(self, column: Column) -> dict[str, str]:
        """Sorting by a column: descending first (the best throughput on top), then toggles."""
        descending = not (self.sort.key == column.key and self.descending)
        # Columns stay as shown, chosen or default, so sorting never changes what is seen.
        return self.query(
            sort=("-" if descending else "") + column.key,
            cols=",".join(c.key for c in self.columns),
        )


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and -(2**63) <= value < 2**63


class _Beyond(Func):
    """``(a, b, c) > (x, y, z)`` (or ``<``): rows after a cursor in a keyset order, as one
    row comparison, which PostgreSQL's B-tree scans start from (an index condition) however
    many rows tie on the first key; SQLite compares row values too. ``fields``: the output
    field of each value."""

    output_field = BooleanField()

    def __init__(self, names, values, op: str, fields):
        super().__init__(
            *(F(name) for name in names),
            *(Value(v, output_field=f) for v, f in zip(values, fields, strict=True)),
        )
        self.op = op
        self.width = len(names)

    def as_sql(self, compiler, connection, **extra):
        parts, params = [], []
        for expression in self.get_source_expressions():
            sql, p = compiler.compile(expression)
            parts.append(sql)
            params.extend(p)
        left, right = ", ".join(parts[: self.width]), ", ".join(parts[self.width :])
        return f"({left}) {self.op} ({right})", params


class _ParamMissing(Func):
    """Whether a run has no typed row for parameter ``name`` (experiments.models.params): no
    such key, a JSON null, or ``params`` not an object; read from ``params`` itself, as the
    rows' index cannot say which runs are not in it."""

    output_field = BooleanField()

    def __init__(self, name: str):
        super().__init__(F("params"))
        self.name = name

    def as_sql(self, compiler, connection, **extra):
        column, params = compiler.compile(self.get_source_expressions()[0])
        if connection.vendor == "postgresql":
            return f"coalesce(jsonb_typeof({column} -> %s), 'null') = 'null'", [
                *params,
                self.name,
            ]
        return f"coalesce(json_type({column}, %s), 'null') = 'null'", [
            *params,
            f'$."{self.name}"',
        ]


def _filtered(query, user, binary: bool):
    """The runs that pass the filters of ``query``; those that pass all but the parameter
    filters and those filters (``_newest``); the filters as given."""
    runs = Run.objects.visible_to(user)
    filters: dict[str, str] = {}
    tool = query.get("tool", "")
    if tool:
        if tool not in Tool.values:
            raise TableError(f"tool: unknown tool {tool!r}")
        runs = runs.filter(tool=tool)
        filters["tool"] = tool
    status = query.get("status", "")
    if status:
        if status not in Run.Status.values:
            raise TableError(f"status: one of {', '.join(Run.Status.values)}")
        runs = runs.filter(status=status)
        filters["status"] = status
    for key in ("testbed", "matrix"):
        value = query.get(key, "")
        if not value:
            continue
        try:
            uuid = UUID(value)
        except ValueError:
            raise TableError(f"{key}: not a {key} id: {value!r}") from None
        runs = runs.filter(**{f"{key}__uuid": uuid})
        filters[key] = value
    owner = query.get("owner", "")
    if owner:
        if owner != "mine":
            raise TableError("owner: 'mine' or nothing")
        runs = runs.filter(owner=user if user.is_authenticated else None)
        filters["owner"] = owner
    published = query.get("published", "")
    if published:
        if published not in ("yes", "no"):
            raise TableError("published: 'yes' or 'no'")
        runs = runs.filter(published=published == "yes")
        filters["published"] = published
    params_eq: list[tuple[str, str]] = []
    matches: list[ParamMatch] = []
    ranges: list[tuple[str, float | None, float | None]] = []
    for key in sorted(query.keys()):
        if not key.startswith(("p.", "m.")):
            continue
        name = key[2:]
        value = query.get(key, "").strip()
        if not NAME.match(name):
            raise TableError(f"{key}: not a parameter or metric name")
        if not value:
            continue
        if len(params_eq) + len(ranges) >= MAX_FILTERS:
            raise TableError(f"at most {MAX_FILTERS} parameter and metric filters")
        filters[key] = value
        if key.startswith("p."):
            params_eq.append((name, value))
            matches.append(_param_equals(name, value))
        else:
            lo, hi = _range(key, value)
            ranges.append((name, lo, hi))
            _, _, divisor = _metric_units(name, binary)
            values = Metric.objects.filter(run=OuterRef("pk"), name=name, primary=True)
            if lo is not None:
                values = values.filter(value__gte=lo * divisor)
            if hi is not None:
                values = values.filter(value__lte=hi * divisor)
            runs = runs.filter(Exists(values))
    base = runs
    for match in matches:
        runs = runs.filter(match.q)
    return runs, base, matches, filters, params_eq, ranges


@dataclass(frozen=True)
class ParamMatch:
    """A ``p.NAME=VALUE`` filter: the JSON comparison that defines it (``exact``) and the
    typed rows (experiments.models.params) a matching run has one of (``rows``: (kind,
    num, text), distinct; empty when no candidate makes a row)."""

    name: str
    exact: Q
    rows: tuple[tuple[int, float, str], ...]
    # Whether a typed row can also stand for a value the comparison refuses, so that the
    # rows alone do not decide (see ``_rows_decide``).
    ambiguous: bool

    @property
    def q(self) -> Q:
        """The filter as a condition on each run: its typed row probed by the row's whole
        key (the run's creation and id are the run's: one index probe), and the comparison
        where the rows alone do not decide. (Where they do, the comparison is left out: the
        planner cannot estimate it, and took it for 1 % of the runs, which made it hash
        every run a filter passes rather than walk an index to the first page.)"""
        if not self.rows:
            return self.exact
        rows = Q()
        for kind, num, text in self.rows:
            rows |= Q(kind=kind, num=num, text=text)
        has = RunParam.objects.filter(
            rows, name=self.name, created=OuterRef("created"), run=OuterRef("pk")
        )
        return Q(Exists(has)) & self.exact if self.ambiguous else Q(Exists(has))


# Integers a double holds exactly: a number within them equals a JSON number as a double
# exactly when it does as a JSON number (beyond them two integers can share a double).
_EXACT_INTEGERS = 2**53


def _rows_decide(candidates: list) -> bool:
    """Whether the typed rows of ``candidates`` match exactly the JSON values the comparison
    matches, so that a page may read the rows alone. A text row stands for its string only
    when the text is shorter than the rows' prefix (a longer one is cut, and a number beyond
    a double's range is stored as its long digits), is not the JSON text of a list or an
    object, and is not "true"/"false" (a boolean's row) unless the boolean is a candidate
    too; a number row for its number when it is a double's (within ±2**53 and in range)."""
    flags = [c for c in candidates if isinstance(c, bool)]
    for c in candidates:
        found = typed(c)
        if found is None:
            continue
        kind, _, text = found
        if isinstance(c, bool):
            if text not in candidates:  # the string "true" has the same row
                return False
        elif kind == NUMBER:
            if abs(c) >= _EXACT_INTEGERS:
                return False
        elif not isinstance(c, str):  # a number stored as text (beyond a double's range)
            return False
        elif len(c) >= TEXT_PREFIX or c.startswith(("[", "{")):
            return False
        elif c in ("true", "false") and (c == "true") not in flags:
            return False
    return True


def _param_equals(name: str, value: str) -> ParamMatch:
    """``p.bs=4k`` matches the run's stored normal form (``runners.params``: ``4k``,
    ``4096`` and ``4 KiB`` are all 4096 bytes; ``yes``, ``true`` and ``1`` are true).
    Parameters without a kind match the number 4 and the text "4": they keep the type the
    tool's parser or the client gave them, and a URL cannot say which.

    The runs come from the parameter's typed rows (experiments.models.params: an index of
    (name, value, created, run)); the JSON comparison on ``params`` stays as the definition
    (the typed rows hold a long text's first characters only, and true and "true" alike)."""
    candidates: list = [value]
    if param_kinds.kind(name) is not None:
        try:
            candidates.append(param_kinds.parse(name, value))
        except ValueError:
            pass
    else:
        try:
            number = json.loads(value)
        except ValueError:
            number = None
        if isinstance(number, (int, float, bool)) and math.isfinite(number):  # 4, 4.5, true
            candidates.append(number)
    exact = Q()
    rows: list[tuple[int, float, str]] = []
    for candidate in candidates:
        exact |= Q(**{f"params__{name}": candidate})
        found = typed(candidate)
        if found is not None and found not in rows:  # "true" and true: one row
            rows.append(found)
    return ParamMatch(name, exact, tuple(rows), not _rows_decide(candidates))


def _newest(
    base: QuerySet,
    matches: list[ParamMatch],
    n: int,
    descending: bool = True,
    after: tuple | None = None,
) -> QuerySet | None:
    """The first ``n`` runs by (created, id) (newest first when ``descending``; after the
    cursor's (created, id)) of ``base`` filtered by ``matches``, as an unordered queryset of
    at most ``n`` × (the first filter's typed rows) runs to sort and cut; None when no
    filter has typed rows.

    Read from the first filter's typed rows: one range of its index (name, kind, num, text,
    created, run) per row it matches (the number 16 and the text "16"), each walked in
    (created, run) order from the cursor and joined to its runs (the other filters, and the
    JSON comparison where the rows alone do not decide) until ``n`` pass: ``n`` rows a
    range, at any depth. The ranges go in one ``UNION ALL`` of ordered, limited parts: a
    single condition matching either row made PostgreSQL read every row of the parameter,
    hash them and sort (110-240 ms at a million runs for ``p.threads=16``)."""
    driver = next((m for m in matches if m.rows), None)
    if driver is None:
        return None
    runs = base
    for m in matches:
        if m is not driver:
            runs = runs.filter(m.q)
    if driver.ambiguous:
        runs = runs.filter(driver.exact)
    op = "<" if descending else ">"
    order = [F(f).desc() if descending else F(f).asc() for f in ("_at", "_rid")]
    parts, params = [], []
    for i, (kind, num, text) in enumerate(driver.rows):
        part = runs.filter(
            typed_params__name=driver.name,
            typed_params__kind=kind,
            typed_params__num=num,
            typed_params__text=text,
        ).annotate(_at=F("typed_params__created"), _rid=F("typed_params__run_id"))
        if after is not None:
            fields = (DateTimeField(), IntegerField())
            part = part.filter(_Beyond(("_at", "_rid"), (after[0], after[1]), op, fields))
        try:
            sql, p = part.order_by(*order).values("id")[:n].query.sql_with_params()
        except EmptyResultSet:  # runs.none(): nothing visible
            return Run.objects.none()
        parts.append(f"SELECT id FROM ({sql}) part{i}")
        params += p
    return Run.objects.filter(pk__in=RawSQL(" UNION ALL ".join(parts), params))


def _range(key: str, text: str) -> tuple[float | None, float | None]:
    lo_text, sep, hi_text = text.partition("..")
    if not sep:
        raise TableError(f"{key}: a range LO..HI in the column's unit (1.5..3, 2.., ..10)")
    bounds = []
    for part in (lo_text.strip(), hi_text.strip()):
        if not part:
            bounds.append(None)
            continue
        try:
            number = float(part)
        except ValueError:
            raise TableError(f"{key}: {part!r} is not a number") from None
        if not math.isfinite(number):
            raise TableError(f"{key}: {part!r} is not a finite number")
        bounds.append(number)
    if bounds[0] is None and bounds[1] is None:
        raise TableError(f"{key}: give at least one end of the range")
    if bounds[0] is not None and bounds[1] is not None and bounds[0] > bounds[1]:
        raise TableError(f"{key}: the lower end is above the upper end")
    return bounds[0], bounds[1]


def _hashable(value: Any) -> Any:
    """A parameter value as a set member: (type, value) so that 1, 1.0 and true differ."""
    if value is None or isinstance(value, (str, int, float, bool)):
        return (type(value).__name__, value)
    return ("json", json.dumps(value, sort_keys=True))


def _default_columns(runs: QuerySet, binary: bool) -> list[Column]:
    """The parameters whose values differ among the newest filtered runs and their
    commonest primary metrics, then when they were created."""
    sample = list(runs.order_by("-created", "-id").values_list("id", "params")[:SAMPLE])
    seen: dict[str, set[str]] = {}
    counts: Counter[str] = Counter()
    for _, params in sample:
        for k, v in (params or {}).items():
            if NAME.match(str(k)):
                seen.setdefault(k, set()).add(_hashable(v))
                counts[k] += 1
    varying = sorted(
        (k for k, values in seen.items() if len(values) > 1 or counts[k] < len(sample)),
        key=lambda k: (-counts[k], k),
    )[:DEFAULT_PARAMS]
    common = (
        Metric.objects.filter(run_id__in=[i for i, _ in sample], primary=True)
        .values_list("name", flat=True)
        .order_by()
    )
    names = Counter(n for n in common if NAME.match(n))
    top = sorted(names, key=lambda n: (-names[n], n))[:DEFAULT_METRICS]
    return [
        *(make_column(f"param:{k}", binary) for k in sorted(varying)),
        *(make_column(f"metric:{n}", binary) for n in top),
        make_column("created", binary),
    ]


# -- rows ----------------------------------------------------------------------------------


def rows(spec: TableSpec, runs: list[Run]) -> list[dict]:
    """One dict per run: the run and its cells (column key -> base value or text)."""
    metric_names = [c.name for c in spec.columns if c.kind == "metric"]
    values: dict[tuple[int, str], float] = {}
    if metric_names and runs:
        for run_id, name, value in (
            Metric.objects.filter(
                run_id__in=[r.id for r in runs], name__in=metric_names, primary=True
            )
            .order_by()
            .values_list("run_id", "name", "value")
        ):
            values.setdefault((run_id, name), value)
    out = []
    for run in runs:
        cells = {}
        for col in spec.columns:
            if col.kind == "metric":
                cells[col.key] = values.get((run.id, col.name))
            elif col.kind == "param":
                cells[col.key] = (run.params or {}).get(col.name)
            elif col.name == "testbed":
                cells[col.key] = run.testbed.name
            elif col.name == "created":
                cells[col.key] = run.created
            elif col.name == "started":
                cells[col.key] = run.started_at
            else:
                cells[col.key] = getattr(run, col.name)
        out.append({"run": run, "cells": cells})
    return out


ROW_FIELDS = (
    "id",
    "uuid",
    "label",
    "tool",
    "status",
    "params",
    "created",
    "started_at",
    "testbed_id",
)


# The metric's first primary values a parameter filter's runs are looked for in before they
# are read by configuration (``TableSpec._in_first_entries``).
FIRST_ENTRIES = 2000
# The most configurations whose runs are read in one statement (``_by_configurations``).
CONFIGURATIONS_BATCH = 16


def _on_run(q: Q) -> Q:
    """``q`` (a condition on a run) as a condition on a row's ``run``."""
    out = Q()
    out.connector, out.negated = q.connector, q.negated
    out.children = [
        _on_run(child) if isinstance(child, Q) else (f"run__{child[0]}", child[1])
        for child in q.children
    ]
    return out


def _fetch(runs: QuerySet, n: int, light: bool) -> list:
    """The first ``n`` runs: Run instances for the page (links, names), or for an export
    plain records with the same attributes, which cost a third of the time to build."""
    if not light:
        return list(base_queryset(runs)[:n])
    out = []
    for values in runs.values(*ROW_FIELDS, "_sort", _testbed=F("testbed__name"))[:n]:
        record = SimpleNamespace(**values)
        record.testbed = SimpleNamespace(name=values["_testbed"])
        out.append(record)
    return out


def base_queryset(runs: QuerySet) -> QuerySet:
    """What a row needs, without the raw output and execution details (megabytes a run)."""
    return runs.select_related("testbed").only(
        "uuid", "label", "tool", "status", "params", "created", "started_at", "testbed__name"
    )


def fetch_page(spec: TableSpec, runs: QuerySet, size: int = PAGE_SIZE):
    """(rows of one page, cursor of the next page or None)."""
    page = spec.select(runs, size + 1)
    more = len(page) > size
    page = page[:size]
    return rows(spec, page), (spec.cursor(page[-1]) if more else None)


def iterate(spec: TableSpec, runs: QuerySet, chunk: int = 1000):
    """Every filtered run's row in the table's order, a page of ``chunk`` at a time (keyset,
    so a long export neither holds a transaction open nor skips runs)."""
    after = spec.after
    spec.light = True
    while True:
        spec.after = after
        page = spec.select(runs, chunk)
        yield from rows(spec, page)
        if len(page) < chunk:
            return
        after = spec.decode_cursor(spec.cursor(page[-1]))
