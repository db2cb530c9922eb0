"""Keyset pagination and totals that do not count every row (issue 17).

A page of a long list is ``WHERE (sort key, id) beyond the cursor ORDER BY sort key, id
LIMIT n + 1`` instead of ``OFFSET``: the 20,000th page costs what the first does (an index
range scan of n + 1 entries), and a page neither repeats nor skips a row when rows are added
or removed meanwhile, which an offset does as soon as a newer row shifts the list. Ties of
the sort key (a bulk request stores its 500 runs with one ``created``) are broken by the id,
which is unique, so the order is total.

The run list page (/runs/) and the API lists of runs and metrics page this way; the runs
table (``experiments.comparison.runs_table``) applies the same idea to any column it sorts by.

Totals: counting a million runs is a scan of the whole table (~100 ms here), more than the
page itself. ``total`` counts exactly only up to a small bound and otherwise gives
PostgreSQL's planner estimate (EXPLAIN, no scan), which the page shows as "about N".
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import connection
from django.db.models import Q, QuerySet

# Up to this many rows a total is exact (counting them costs an index scan of that many
# entries, well under a millisecond); beyond it the planner's estimate stands in.
EXACT_BELOW = 1000


class BadCursor(ValueError):
    """A cursor this list did not issue (edited, or from another list)."""


@dataclass(frozen=True)
class Key:
    """A list's order: fields compared as a tuple, all descending or all ascending; the last
    must be unique (the id)."""

    fields: tuple[str, ...]
    descending: bool

    @classmethod
    def of(cls, ordering: Sequence[str]) -> Key:
        """From a Django ordering such as ``("-created", "-id")``."""
        directions = {name.startswith("-") for name in ordering}
        if len(directions) != 1:
            raise ValueError(f"keyset ordering must be all ascending or all descending: {ordering}")
        return cls(tuple(name.lstrip("-") for name in ordering), directions.pop())

    def order_by(self, reverse: bool = False) -> list[str]:
        sign = "-" if self.descending != reverse else ""
        return [sign + name for name in self.fields]

    def values(self, obj: Any) -> tuple:
        return tuple(getattr(obj, name) for name in self.fields)

    def beyond(self, values: tuple, reverse: bool = False) -> Q:
        """Rows after ``values`` in this order (before them with ``reverse``): the tuple
        comparison spelled out, with the redundant bound ``first <= v`` (or ``>=``) that an
        index range scan starts from."""
        lookup = "lt" if self.descending != reverse else "gt"
        condition = Q()
        for n in range(len(self.fields)):
            equal = {name: values[i] for i, name in enumerate(self.fields[:n])}
            condition |= Q(**equal, **{f"{self.fields[n]}__{lookup}": values[n]})
        if len(self.fields) > 1:
            condition &= Q(**{f"{self.fields[0]}__{lookup}e": values[0]})
        return condition

    def encode(self, values: tuple, reverse: bool = False) -> str:
        """An opaque, URL-safe cursor: the row's key values and the direction."""
        shown = [v.isoformat() if isinstance(v, datetime) else v for v in values]
        raw = json.dumps([shown, reverse], separators=(",", ":")).encode()
        return base64.urlsafe_b64encode(raw).decode().rstrip("=")

    def decode(self, text: str, model) -> tuple[tuple, bool]:
        """(key values, reverse) of a cursor ``encode`` made for this key and ``model``."""
        try:
            raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
            shown, reverse = json.loads(raw)
        except (ValueError, TypeError, binascii.Error, UnicodeDecodeError):
            raise BadCursor("not a cursor of this list") from None
        if not isinstance(shown, list) or len(shown) != len(self.fields):
            raise BadCursor("not a cursor of this list")
        if not isinstance(reverse, bool):
            raise BadCursor("not a cursor of this list")
        values = []
        for name, value in zip(self.fields, shown, strict=True):
            field = model._meta.get_field(name)
            kind = field.get_internal_type()
            if kind == "DateTimeField":
                try:
                    value = datetime.fromisoformat(value)
                except (TypeError, ValueError):
                    raise BadCursor("not a cursor of this list") from None
            elif kind in ("AutoField", "BigAutoField", "IntegerField", "BigIntegerField"):
                if not isinstance(value, int) or isinstance(value, bool):
                    raise BadCursor("not a cursor of this list")
                if not -(2**63) <= value < 2**63:
                    raise BadCursor("not a cursor of this list")
            else:
                raise ValueError(f"keyset pagination on {kind} is not supported")
            values.append(value)
        return tuple(values), reverse


@dataclass
class Page:
    """One page of a keyset-paginated list: its rows in the list's order and the cursors of
    the pages on either side (None at either end, as far as this page can tell)."""

    rows: list
    next: str | None
    previous: str | None


def page(queryset: QuerySet, key: Key, size: int, cursor: str | None = None) -> Page:
    """The page of ``queryset`` (in ``key``'s order) that ``cursor`` names, or the first.

    A cursor names the row a page starts after: the last row of the page before (going on)
    or the first row of the page after (going back, ``reverse``). Going back reads the list
    backwards from there and turns the rows round. Raises BadCursor for a cursor not made
    here."""
    values, reverse = (None, False)
    if cursor:
        values, reverse = key.decode(cursor, queryset.model)
    rows = queryset.order_by(*key.order_by(reverse))
    if values is not None:
        rows = rows.filter(key.beyond(values, reverse))
    found = list(rows[: size + 1])
    more = len(found) > size
    found = found[:size]
    if reverse:
        if not found:  # nothing newer any more (deleted meanwhile): the list's start
            return page(queryset, key, size)
        found.reverse()
        # Going back from a page: the page after exists (it is where we came from).
        following = key.encode(key.values(found[-1]))
        preceding = key.encode(key.values(found[0]), reverse=True) if more else None
        return Page(found, following, preceding)
    following = key.encode(key.values(found[-1])) if more else None
    preceding = None
    if values is not None:
        preceding = (
            key.encode(key.values(found[0]), reverse=True)
            if found
            else key.encode(values, reverse=True)
        )
    return Page(found, following, preceding)


@dataclass(frozen=True)
class Total:
    """How many rows a list holds: ``n`` exactly, or about ``n`` (``exact`` False)."""

    n: int
    exact: bool

    @property
    def rounded(self) -> int:
        """An estimate to two significant digits (998,732 -> 1,000,000): its precision."""
        if self.exact or self.n < 100:
            return self.n
        return round(self.n, 2 - len(str(self.n)))


def total(queryset: QuerySet, key: Key | None = None) -> Total:
    """The number of rows of ``queryset`` without counting more than EXACT_BELOW of them:
    an exact count bounded to EXACT_BELOW + 1 rows (one query, whatever the list's length),
    and beyond that PostgreSQL's planner estimate (never less than what was counted).
    ``key``: the list's order, so that the bounded count reads the index the page reads
    (without an order the planner may pick a sequential scan that, when the matching rows
    lie late in the table, reads a good part of it before it has its 1,001).
    SQLite keeps no row estimates: there the count goes on (SQLite databases are a single
    user's, far from a million runs)."""
    plain = queryset.values("pk").order_by(*(key.order_by() if key else ()))
    counted = plain[: EXACT_BELOW + 1].count()
    if counted <= EXACT_BELOW:
        return Total(counted, True)
    if connection.vendor != "postgresql":
        return Total(plain.count(), True)
    return Total(max(counted, estimate(plain) or 0), False)


def estimate(queryset: QuerySet) -> int | None:
    """PostgreSQL's planner estimate of the rows of ``queryset`` (EXPLAIN, no scan); None
    elsewhere (SQLite has no row estimates)."""
    if connection.vendor != "postgresql":
        return None
    sql, params = queryset.values("pk").order_by().query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN (FORMAT JSON) {sql}", params)
        plan = cursor.fetchone()[0]
    if isinstance(plan, str):
        plan = json.loads(plan)
    return int(plan[0]["Plan"]["Plan Rows"])
