"""Shared test labs: what the end-to-end, network-namespace, Slurm and browser tests build and
watch, as real functions (their pytest fixtures are in the conftest.py files).

- ``stack.py``: ``Stack``, an isolated beeweb installation (own database, broker, data
  directory) with real ``manage.py`` and Celery worker processes; ``wait_for``.
- ``inside.py``: what a test does inside a stack's Django (``stack.call("inventory", spec)``):
  inventory from data, launch matrices as their users, cancel, resume, fetch a page.
- ``netns.py``: N nodes as network namespaces on this machine; ``slurm.py``: a throw-away
  Slurm cluster; ``browser.py``: Debian's Chromium under Playwright.
- Here: the inventories the tests share (``two_users_sharing_a_server``), launching,
  ``wait_for_workers`` and ``runs`` (every run of a stack, read straight from its database).
"""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime

from tests.labs.stack import LONG_FIO, ROOT, Stack, wait_for, worker_argv

__all__ = [
    "LONG_FIO",
    "ROOT",
    "Stack",
    "blocked_on",
    "tool_starts",
    "cancel",
    "finished",
    "launch",
    "metrics",
    "run_page",
    "runs",
    "two_users_sharing_a_server",
    "wait_for",
    "wait_for_workers",
    "worker_argv",
]

DONE = ("succeeded", "failed", "cancelled")


def two_users_sharing_a_server(
    bench: str,
    launchers: tuple[str, str] = ("hold-a", "hold-b"),
    server: str = "hold-s",
    addresses: dict[str, str] | None = None,
) -> dict:
    """alice's testbed tb-alice (launched from ``launchers[0]``) and bob's tb-bob (from
    ``launchers[1]``) both use alice's shared node ``server`` as their storage and metadata
    server; both benchmark in ``bench``. ``addresses`` by hostname, when the nodes have them."""
    addresses = addresses or {}

    def node(owner: str, hostname: str, shared: bool = False) -> dict:
        return {"owner": owner, "address": addresses.get(hostname, ""), "shared": shared}

    return {
        "users": {"alice": "x", "bob": "x"},
        "nodes": {
            server: node("alice", server, shared=True),
            launchers[0]: node("alice", launchers[0]),
            launchers[1]: node("bob", launchers[1]),
        },
        "testbeds": [
            {
                "name": f"tb-{owner}",
                "owner": owner,
                "benchmark_dir": bench,
                "members": {launcher: ["client"], server: ["storage", "metadata"]},
            }
            for owner, launcher in zip(("alice", "bob"), launchers, strict=True)
        ],
    }


def wait_for_workers(stack: Stack, *names: str, agents: bool = False, timeout: float = 90):
    """Wait until every named worker (``host@host``) has registered with the stack's
    database (and, with ``agents``, its node agent has run); else fail with the tail of their
    logs."""
    query = "SELECT name FROM experiments_worker" + (
        " WHERE agent_seen IS NOT NULL" if agents else ""
    )
    up = wait_for(lambda: set(names) <= {row[0] for row in stack.sql(query)}, timeout)
    assert up, "\n".join(f"{name}:\n{stack.worker_log(name)[-3000:]}" for name in names)


def launch(stack: Stack, *specs: tuple[str, str]) -> list[int]:
    """Make and launch each ``(username, matrix YAML)``; the matrices' primary keys."""
    made = stack.call("launch", [list(spec) for spec in specs])
    assert len(made) == len(specs)
    return made


def cancel(stack: Stack, matrix: int | None = None) -> dict:
    """Cancel the runs of ``matrix`` (every run when None) as the Cancel button does."""
    return stack.call("cancel", matrix)


def run_page(stack: Stack, username: str, run_uuid: str) -> tuple[int, str]:
    """The run's page as ``username`` sees it: status code and HTML."""
    status, html = stack.call("page", username, f"/runs/{run_uuid}/")
    return status, html


def metrics(stack: Stack, run: int) -> list[dict]:
    """Every metric row of a run (name, value, unit, stat, iteration, primary, extra)."""
    return stack.call("metrics", run)


RUN_COLUMNS = (
    "id uuid matrix_id status error worker queue attempts exit_code repetition cell_key "
    "params argv launch effective_config nodes_held waiting_for raw_output "
    "slurm_job_id slurm_state slurm_reason slurm_nodes queued_at started_at finished_at"
).split()
_JSON = {"params", "argv", "launch", "effective_config", "nodes_held", "slurm_nodes"}
_TIMES = {"queued_at", "started_at", "finished_at"}


def runs(stack: Stack, matrix: int | str | None = None) -> list[dict]:
    """Every run of the stack (of ``matrix``, by primary key or name), oldest first, read
    straight from its database, PostgreSQL or SQLite alike: its columns (``pk`` for ``id``;
    JSON decoded, times as aware datetimes, ``uuid`` as text), ``owner`` (username),
    ``matrix`` (name), ``target`` (name) and ``metrics`` (its primary metrics by name)."""
    columns = ", ".join(f"r.{c}" for c in RUN_COLUMNS)
    rows = stack.sql(
        f"SELECT {columns}, u.username, m.name, t.name FROM experiments_run r "
        "LEFT JOIN auth_user u ON u.id = r.owner_id "
        "LEFT JOIN experiments_matrix m ON m.id = r.matrix_id "
        "LEFT JOIN experiments_target t ON t.id = r.target_id ORDER BY r.id"
    )
    primary: dict[int, dict] = {}
    for run, name, value in stack.sql(
        'SELECT run_id, name, value FROM experiments_metric WHERE "primary" ORDER BY id'
    ):
        primary.setdefault(run, {})[name] = value
    found = []
    for row in rows:
        run = dict(zip([*RUN_COLUMNS, "owner", "matrix", "target"], row, strict=True))
        for key in _JSON:
            if isinstance(run[key], str):  # SQLite keeps JSON as text
                run[key] = json.loads(run[key])
        for key in _TIMES:
            if isinstance(run[key], str):  # SQLite: UTC without an offset
                run[key] = datetime.fromisoformat(run[key]).replace(tzinfo=UTC)
        run["uuid"] = str(uuid.UUID(str(run["uuid"])))
        run["pk"] = run.pop("id")
        run["metrics"] = primary.get(run["pk"], {})
        if matrix is None or matrix in (run["matrix_id"], run["matrix"]):
            found.append(run)
    return found


def finished(stack: Stack, matrix: int | str | None = None) -> bool:
    """Whether every run (of ``matrix``) has ended."""
    return all(run["status"] in DONE for run in runs(stack, matrix))


def blocked_on(stack: Stack, table: str) -> bool:
    """Whether a session of the stack's (PostgreSQL) database waits for a lock in a statement
    on ``table``: a worker's store blocked by a lock the test holds."""
    rows = stack.sql(
        "SELECT query FROM pg_stat_activity WHERE datname = current_database() "
        "AND wait_event_type = 'Lock'"
    )
    return any(table in query for (query,) in rows)


def tool_starts(stack: Stack, workers: list[str], run: int) -> dict[int, int]:
    """How many times the tool of each attempt of ``run`` started, by the named workers' logs
    (the executor logs ``run N attempt A: started output.log``)."""
    counts: dict[int, int] = {}
    marker = f"run {run} attempt "
    for name in workers:
        for line in stack.worker_log(name).splitlines():
            if marker in line and ": started output.log" in line:
                attempt = int(line.split(marker, 1)[1].split(":", 1)[0])
                counts[attempt] = counts.get(attempt, 0) + 1
    return counts
