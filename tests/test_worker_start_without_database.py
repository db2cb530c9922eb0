"""A worker that starts while its database is out of reach (PostgreSQL restarting, or its node
cut off) keeps running and records itself once the database is back (beeweb/celery.py,
``Heartbeat``). It used to die at once, "Unrecoverable error: OperationalError": the chaos soak
(tests/soak) found a node worker restarted just before its link was cut gone for good. On a
PostgreSQL server of the test's own, which it stops and starts."""

from __future__ import annotations

import pytest

from tests.labs import Stack, wait_for
from tests.labs.servers import Postgres, unavailable

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(bool(unavailable()), reason=f"own PostgreSQL: {unavailable()}"),
]

NAME = "nodb@test"


@pytest.fixture
def own_postgres():
    server = Postgres().start()
    try:
        yield server
    finally:
        server.close()


def test_a_worker_started_without_its_database_waits_for_it(own_postgres, tmp_path):
    stack = Stack(tmp_path, database_url=own_postgres.url)
    try:
        own_postgres.stop("fast")
        worker = stack.worker("default", NAME)
        assert wait_for(lambda: " ready." in stack.worker_log(NAME), 120), stack.worker_log(NAME)
        log = stack.worker_log(NAME)
        assert f"worker {NAME} could not record its heartbeat" in log, log[-3000:]
        assert worker.poll() is None, log[-3000:]
        # Back: the next heartbeat (every 30 s) records it, as it starts.
        own_postgres.restart()  # (stopped: restart starts it)
        query = f"SELECT started_at IS NOT NULL FROM experiments_worker WHERE name = '{NAME}'"
        assert wait_for(lambda: stack.sql(query) == [(True,)], 120, interval=1), stack.worker_log(
            NAME
        )[-3000:]
        assert worker.poll() is None
    finally:
        stack.close()
