"""The worker's database session across tasks (experiments.execution.tasks.fresh_connections)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from django.db import connection

from beeweb.celery import app
from experiments.execution.tasks import fresh_connections

WORKER_TASK = SimpleNamespace(request=SimpleNamespace(is_eager=False))
# The worker's case: a server it keeps sessions with. SQLite's in-memory test database lives
# and dies with its one connection.
server_only = pytest.mark.skipif(
    connection.vendor != "postgresql", reason="sessions with a database server"
)


def test_celerys_fixup_leaves_the_session_open_between_tasks():
    """Without CELERY_DB_REUSE_MAX, Celery's Django fix-up closes every connection before
    and after each task: a new PostgreSQL session per run."""
    assert app.conf.get("CELERY_DB_REUSE_MAX") >= 100


@server_only
@pytest.mark.django_db(transaction=True)
def test_a_task_reuses_a_healthy_session_and_replaces_a_broken_one(monkeypatch):
    monkeypatch.setitem(connection.settings_dict, "CONN_MAX_AGE", 60)
    connection.close()
    connection.ensure_connection()
    session = connection.connection
    fresh_connections(task=WORKER_TASK)
    connection.ensure_connection()
    assert connection.connection is session, "a healthy session is reused"
    session.close()  # the server went away, say
    connection.errors_occurred = True
    fresh_connections(task=WORKER_TASK)
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
        assert cursor.fetchone() == (1,)
    assert connection.connection is not session, "a broken session is replaced"


@server_only
@pytest.mark.django_db(transaction=True)
def test_a_session_older_than_conn_max_age_is_closed_before_a_task(monkeypatch):
    monkeypatch.setitem(connection.settings_dict, "CONN_MAX_AGE", 0)
    connection.close()
    connection.ensure_connection()
    session = connection.connection
    fresh_connections(task=WORKER_TASK)
    connection.ensure_connection()
    assert connection.connection is not session


@pytest.mark.django_db
def test_an_eager_task_leaves_the_callers_connection_alone():
    """Inside a request or a test's transaction (an eager task) nothing is closed."""
    connection.ensure_connection()
    session = connection.connection
    fresh_connections(task=SimpleNamespace(request=SimpleNamespace(is_eager=True)))
    fresh_connections(task=WORKER_TASK)  # in an atomic block: left alone too
    assert connection.connection is session
