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

from django.db import connection
from django.db.backends.utils import CursorDebugWrapper, CursorWrapper

# psycopg's count of executions after which it prepares a statement by itself: never.
NEVER_BY_COUNT = 2**62


@functools.cache
def _classes() -> tuple[type, type]:
    """(the prepared cursor, its logging wrapper), PostgreSQL's (psycopg 3) only."""
    from django.db.backends.postgresql.base import CursorDebugWrapper as PgDebugWrapper
    from django.db.backends.postgresql.base import ServerBindingCursor

    class PreparedCursor(ServerBindingCursor):
        """A server-side binding cursor whose every statement is prepared."""

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


def _prepared_cursor():
    """A prepared cursor of the default connection (connected), with the time zone's loader
    Django's ``create_cursor`` would register on it."""
    from django.db.backends.postgresql.base import TIMESTAMPTZ_OID
    from django.db.backends.postgresql.psycopg_any import register_tzloader
    from psycopg.pq import Format

    session = connection.connection
    if session.prepare_threshold is None:
        # Django turns psycopg's prepared statements off (threshold None), and then psycopg
        # prepares none, even those executed with prepare=True. A threshold no statement
        # reaches prepares only those: Django's client-side cursors never prepare, and
        # psycopg still drops the session's statements after a ROLLBACK, DROP or ALTER.
        session.prepare_threshold = NEVER_BY_COUNT
    raw = _classes()[0](session)
    tzloader = session.adapters.get_loader(TIMESTAMPTZ_OID, Format.TEXT)
    if connection.timezone != tzloader.timezone:
        register_tzloader(connection.timezone, raw)
    return raw


@contextmanager
def cursor() -> Iterator:
    """A cursor of the default connection whose statements are prepared (PostgreSQL), or
    Django's own cursor (SQLite); used as ``connection.cursor()`` is."""
    if connection.vendor != "postgresql":
        with connection.cursor() as plain:
            yield plain
        return
    # Django's cursor() does the health check and connects when needed; its client-side
    # cursor is replaced by a prepared one, in the same kind of wrapper (logging or not).
    client = connection.cursor()
    logged = isinstance(client, CursorDebugWrapper)
    client.close()
    with connection.wrap_database_errors:
        raw = _prepared_cursor()
    wrapper = _classes()[1](raw, connection) if logged else CursorWrapper(raw, connection)
    with wrapper:
        yield wrapper
