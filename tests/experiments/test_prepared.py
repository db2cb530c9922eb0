"""experiments.shared.prepared: the executor's plain statements, prepared once per PostgreSQL
session (issue 30); Django's own cursor on SQLite."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.db import DatabaseError, IntegrityError, connection, transaction
from django.test.utils import CaptureQueriesContext

from experiments.shared import prepared


def _prepared_statements() -> dict[str, tuple[int, int]]:
    """This session's prepared statements: {text: (generic plans, custom plans)}."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements")
        return {text: (generic, custom) for text, generic, custom in cursor.fetchall()}


@pytest.mark.django_db
def test_a_statement_is_prepared_once_and_reused():
    """On PostgreSQL the statement is prepared at its first execution and executed by name
    after (one prepared statement, planned once per execution at most); the values come
    back as Django's cursor returns them. SQLite: the same answers."""
    users = {name: get_user_model().objects.create(username=name).pk for name in ["u1", "u2"]}
    sql = 'SELECT username, id FROM "auth_user" WHERE username = %s'
    for name in ["u1", "u2", "u1", "u2", "u1", "u2", "u1"]:
        with prepared.cursor() as cursor:
            cursor.execute(sql, [name])
            assert cursor.fetchone() == (name, users[name])
    if connection.vendor != "postgresql":
        return
    mine = {text: plans for text, plans in _prepared_statements().items() if "auth_user" in text}
    assert list(mine) == ['SELECT username, id FROM "auth_user" WHERE username = $1']
    assert sum(mine[next(iter(mine))]) == 7


@pytest.mark.django_db
def test_statements_are_logged_with_their_values():
    """CaptureQueriesContext (and connection.queries) show the statement with its values in
    place, as for Django's own cursors, not $n."""
    user = get_user_model().objects.create(username="u1")
    with CaptureQueriesContext(connection) as queries, prepared.cursor() as cursor:
        cursor.execute('SELECT id FROM "auth_user" WHERE username = %s', ["u1"])
        assert cursor.fetchone() == (user.pk,)
    (query,) = queries.captured_queries
    assert query["sql"] == "SELECT id FROM \"auth_user\" WHERE username = 'u1'"


@pytest.mark.django_db
def test_errors_are_djangos():
    """A failing statement raises Django's exception (what the executor catches), and the
    transaction it failed in is rolled back as usual."""
    user = get_user_model().objects.create(username="u1")
    with pytest.raises(IntegrityError), transaction.atomic(), prepared.cursor() as cursor:
        cursor.execute('UPDATE "auth_user" SET id = %s WHERE id = %s', [None, user.pk])
    with pytest.raises(DatabaseError), transaction.atomic(), prepared.cursor() as cursor:
        cursor.execute('SELECT nope FROM "auth_user" WHERE username = %s', ["u1"])
    with prepared.cursor() as cursor:  # the session goes on, its statements too
        cursor.execute('SELECT count(*) FROM "auth_user" WHERE username = %s', ["u1"])
        assert cursor.fetchone() == (1,)


@pytest.mark.django_db
def test_djangos_own_cursors_prepare_nothing():
    """Only the statements run through prepared.cursor() are prepared: the ORM's and
    Django's cursors bind on the client as before, however often they run."""
    if connection.vendor != "postgresql":
        pytest.skip("SQLite prepares nothing of the kind")
    with prepared.cursor() as cursor:
        cursor.execute('SELECT count(*) FROM "auth_user" WHERE username = %s', ["x"])
    for _ in range(10):
        get_user_model().objects.filter(username="x").exists()
        with connection.cursor() as cursor:
            cursor.execute('SELECT id FROM "auth_user" WHERE username = %s', ["x"])
    assert [text for text in _prepared_statements() if "auth_user" in text] == [
        'SELECT count(*) FROM "auth_user" WHERE username = $1'
    ]


@pytest.mark.django_db
def test_a_blocks_cursor_is_kept_for_the_next_and_nested_blocks_get_their_own():
    """PostgreSQL: one block's prepared cursor serves the session's next block (no new
    cursor per statement); a block inside another gets a cursor of its own (the outer one's
    rows stay readable); a new session starts with new cursors. SQLite: the same answers."""
    users = {name: get_user_model().objects.create(username=name).pk for name in ["u1", "u2"]}
    sql = 'SELECT id FROM "auth_user" WHERE username = %s'
    raws = []
    for name in ["u1", "u2"]:
        with prepared.cursor() as cursor:
            cursor.execute(sql, [name])
            assert cursor.fetchone() == (users[name],)
            raws.append(cursor.cursor)
    with prepared.cursor() as outer:
        outer.execute('SELECT id FROM "auth_user" ORDER BY id')
        with prepared.cursor() as inner:
            inner.execute(sql, ["u2"])
            assert inner.fetchone() == (users["u2"],)
            nested = inner.cursor is not outer.cursor
        assert outer.fetchall() == [(users["u1"],), (users["u2"],)]
    assert nested
    if connection.vendor != "postgresql":
        return
    assert raws[0] is raws[1]


@pytest.mark.django_db(transaction=True)
def test_a_new_session_gets_new_cursors():
    """A cursor kept for a session that is gone is not used again: the reconnected session
    prepares its own statements on a cursor of its own."""
    sql = 'SELECT count(*) FROM "auth_user" WHERE username = %s'
    with prepared.cursor() as cursor:
        cursor.execute(sql, ["x"])
        before = cursor.cursor
    connection.close()
    with prepared.cursor() as cursor:
        cursor.execute(sql, ["x"])
        assert cursor.fetchone() == (0,)
        assert cursor.cursor is not before


@pytest.mark.django_db
def test_a_long_statement_is_converted_once():
    """PostgreSQL: the conversion of a statement's %s placeholders to $n is kept for texts
    psycopg keeps none of (over 4 KiB, or over 50 parameters: the executor's outcome), so a
    statement repeated with other values is converted once; its answers are right."""
    if connection.vendor != "postgresql":
        pytest.skip("psycopg's conversion is PostgreSQL's")
    conversions = prepared._classes()[0]._query_cls.conversions
    padding = " ".join(f"%s::int AS c{n}," for n in range(60))
    sql = f"SELECT {padding} 1 AS last -- {'x' * 4200}"
    before = conversions.cache_info()
    for value in range(3):
        with prepared.cursor() as cursor:
            cursor.execute(sql, [value] * 60)
            assert cursor.fetchone()[:2] == (value, value)
    after = conversions.cache_info()
    assert (after.misses - before.misses, after.hits - before.hits) == (1, 2)
