"""Statements that PostgreSQL parses and plans once per session: the executor's few plain
statements, which every run repeats with other values (issue 30).

Django's psycopg cursors bind parameters on the client (the values are quoted into the
statement's text), so the server parses, analyses and plans each statement again for every
run: for a run's ~20 single-row statements that was most of its PostgreSQL backend's CPU.
``cursor()`` gives a Django cursor (errors wrapped as Django's, statements logged where
Django logs them: ``CaptureQueriesContext``, ``connection.queries``) whose statements are
bound on the server and prepared on their first execution in the session (psycopg keeps
the session's prepared statements, the least recently used dropped past its
``prepared_max``; a new session starts afresh). Elsewhere (SQLite) it is Django's own
cursor.

A statement run through it must let PostgreSQL infer every parameter's type from its
place (a column compared or assigned, or an explicit cast): a bare ``%s`` in a SELECT list
or a CASE's result has no type to infer. Django turns off psycopg's automatic prepared
statements for the sake of connection poolers in transaction mode (PgBouncer before 1.21);
beeweb connects to PostgreSQL directly.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from contextlib import contextmanager

from django.db import DEFAULT_DB_ALIAS, connections
from django.db.backends.utils import CursorWrapper

# psycopg's count of executions after which it prepares a statement by itself: never.
NEVER_BY_COUNT = 2**62


@functools.cache
def _classes() -> tuple[type, type]:
    """(the prepared cursor, its logging wrapper), PostgreSQL's (psycopg 3) only."""
    from django.db.backends.postgresql.base import CursorDebugWrapper as PgDebugWrapper
    from django.db.backends.postgresql.base import ServerBindingCursor

    class PreparedCursor(ServerBindingCursor):
        """A server-side binding cursor whose every statement is prepared."""

        _query_cls = _converted_query_class()

        def execute(self, query, params=None, *, prepare=None, binary=None):
            return super().execute(query, params, prepare=True, binary=binary)

    class PreparedDebugWrapper(PgDebugWrapper):
        """Django's logging wrapper, logging each statement with its values in place (as
        Django's client-side cursors show it), not the prepared statement's $n text."""

        def debug_sql(self, sql=None, params=None, use_last_executed_query=False, many=False):
            if use_last_executed_query and not many:
                sql = self.db.ops.compose_sql(sql, params) if params else sql
                use_last_executed_query = False
            return super().debug_sql(sql, params, use_last_executed_query, many)

    return PreparedCursor, PreparedDebugWrapper


# Statement texts whose conversion to PostgreSQL's $n form is kept (per text and encoding).
CONVERSIONS_KEPT = 256


def _converted_query_class() -> type:
    """psycopg's query class, keeping the conversion of every statement text (its %s
    placeholders to $n) for the next execution. psycopg keeps only those shorter than 4 KiB
    with at most 50 parameters, as an ORM's are many and vary; the statements of these
    cursors are few and repeat with every run, and the executor's outcome is longer than
    that: converting it again cost ~0.2 ms of CPU per run (bench/dispatch.py --profile).
    psycopg's own class where its internals are not as expected."""
    from psycopg import _queries

    base = _queries.PostgresQuery
    convert = getattr(_queries, "_query2pg_nocache", None)
    if convert is None or not hasattr(base, "dump"):
        return base
    kept = functools.lru_cache(maxsize=CONVERSIONS_KEPT)(convert)

    class KeptQuery(base):
        conversions = kept  # (its cache_info() for the tests)

        def convert(self, query, vars):
            if vars is None or not isinstance(query, (str, bytes)):
                return super().convert(query, vars)
            query = self._ensure_bytes(query)
            self.query, self._want_formats, self._order, self._parts = kept(
                query, self._tx.encoding
            )
            self.dump(vars)

    return KeptQuery


def _prepared_cursor(db):
    """A prepared cursor of ``db`` (connected), with the time zone's loader Django's
    ``create_cursor`` would register on it."""
    from django.db.backends.postgresql.base import TIMESTAMPTZ_OID
    from django.db.backends.postgresql.psycopg_any import register_tzloader
    from psycopg.pq import Format

    session = db.connection
    if session.prepare_threshold is None:
        # Django turns psycopg's prepared statements off (threshold None), and then psycopg
        # prepares none, even those executed with prepare=True. A threshold no statement
        # reaches prepares only those: Django's client-side cursors never prepare, and
        # psycopg still drops the session's statements after a ROLLBACK, DROP or ALTER.
        session.prepare_threshold = NEVER_BY_COUNT
    raw = _classes()[0](session)
    tzloader = session.adapters.get_loader(TIMESTAMPTZ_OID, Format.TEXT)
    if db.timezone != tzloader.timezone:
        register_tzloader(db.timezone, raw)
    return raw


class _Kept:
    """The prepared cursors of one session that no block uses at the moment, kept for the
    next block (a new psycopg cursor, its adapters and Django's cursor checks cost more
    Python than the statement it runs): one per nesting level in use."""

    __slots__ = ("session", "timezone", "free")

    def __init__(self, session, timezone) -> None:
        self.session, self.timezone, self.free = session, timezone, []


@contextmanager
def cursor() -> Iterator:
    """A cursor of the default connection whose statements are prepared (PostgreSQL), or
    Django's own cursor (SQLite); used as ``connection.cursor()`` is.

    PostgreSQL: what Django's ``cursor()`` does first (the health check, connecting when
    needed, the thread check), then a prepared cursor of the session in the kind of wrapper
    Django would give (logging or not). The cursor is kept for the session's next block
    (``_Kept``) instead of closed: a block nested in another gets a cursor of its own; a
    new session (reconnected) or a changed time zone starts with new cursors."""
    db = connections[DEFAULT_DB_ALIAS]
    if db.vendor != "postgresql":
        with db.cursor() as plain:
            yield plain
        return
    db.close_if_health_check_failed()
    db.ensure_connection()
    db.validate_thread_sharing()
    session = db.connection
    timezone = db.timezone
    kept = db.__dict__.get("_beeweb_prepared")
    if kept is None or kept.session is not session or kept.timezone != timezone:
        kept = db.__dict__["_beeweb_prepared"] = _Kept(session, timezone)
    if kept.free:
        raw = kept.free.pop()
    else:
        with db.wrap_database_errors:
            raw = _prepared_cursor(db)
    wrapper = _classes()[1](raw, db) if db.queries_logged else CursorWrapper(raw, db)
    try:
        yield wrapper
    finally:
        if raw.closed or session.closed:
            pass
        else:
            kept.free.append(raw)
